"""requirements.lock (what `make setup` installs) pins everything pyproject.toml asks for."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version
    return pins


def test_the_lock_pins_every_dependency_and_dev_extra_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins()
    wanted = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    problems = []
    for req in wanted:
        if req.marker is not None and not req.marker.evaluate({"sys_platform": "linux", "extra": ""}):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} (lock: {pinned})")
    assert not problems, f"run `make lock` after installing them: {problems}"
