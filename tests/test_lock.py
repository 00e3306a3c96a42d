"""The two locks (tools/lock.py): requirements-run.lock (what `make run` installs: pincer[all]) and
requirements.lock (what `make setup`/`make test` install: pincer[dev]) pin everything pyproject.toml
asks for, agree with each other, and keep the test tools out of the runtime lock."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
RUN_LOCK, DEV_LOCK = ROOT / "requirements-run.lock", ROOT / "requirements.lock"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _pins(lock: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in lock.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{lock.name}: {line!r} is not NAME==VERSION"
            pins[canonicalize_name(name)] = version
    return pins


def _wanted(*extras: str) -> list[Requirement]:
    """The requirements of pincer with ``extras``, self-references (pincer[a,b]) followed."""
    found: list[Requirement] = [Requirement(r) for r in PROJECT["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in PROJECT["optional-dependencies"][extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == "pincer":
                todo.extend(req.extras)
            else:
                found.append(req)
    return found


def _unpinned(lock: Path, *extras: str) -> list[str]:
    pins = _pins(lock)
    problems = []
    for req in _wanted(*extras):
        if req.marker is not None and not req.marker.evaluate({"sys_platform": "linux", "extra": ""}):
            continue
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} (lock: {pinned})")
    return problems


def test_the_runtime_lock_pins_every_dependency_and_every_extra_of_all_within_its_range() -> None:
    problems = _unpinned(RUN_LOCK, "all")
    assert not problems, f"run `make lock` after installing them: {problems}"


def test_the_development_lock_pins_every_dependency_and_dev_extra_within_its_range() -> None:
    problems = _unpinned(DEV_LOCK, "dev")
    assert not problems, f"run `make lock` after installing them: {problems}"


def test_the_runtime_lock_is_part_of_the_development_lock_at_the_same_versions() -> None:
    """`make test` installs both (one venv): a version the two disagree on would make pip fail."""
    run, dev = _pins(RUN_LOCK), _pins(DEV_LOCK)
    differ = {name: (version, dev.get(name)) for name, version in run.items() if dev.get(name) != version}
    assert not differ, f"run `make lock`: {differ}"


def test_the_runtime_lock_has_no_test_tool() -> None:
    """Failed before (one lock): `make run` installed pytest, mypy, schemathesis, componentize-py,
    fastmcp, pydantic-ai and google-api-python-client (111 MB)."""
    run = _pins(RUN_LOCK)
    dev_only = ("pytest", "mypy", "ruff", "schemathesis", "componentize-py", "fastmcp", "pydantic-ai-slim",
                "google-api-python-client", "hypothesis", "mkdocs-material")
    assert not [name for name in dev_only if name in run]


def test_the_locks_are_what_this_venv_has_installed() -> None:
    """After a merge or an upgrade, `make lock` writes both again; this says when it was not run."""
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "lock.py"), "--check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
