"""Every example and test case of the A2UI specification gets the verdict the specification
gives it (issue 36), and the renderer pincer ships is the one the pinned packages build.

Where the data comes from (none of it is copied into this repository):

- the v0.9 examples of the basic and minimal catalogs, and the schemas pincer ships: the
  ``@a2ui/web_core`` package ``make setup`` installs (``canvas-renderer/package-lock.json``);
- the v0.9 test cases (``specification/v0_9/test/cases``), the v0.8 examples and v0.8's minimal
  catalog ship in no package: only the specification's repository has them, and nothing from
  it may be committed here. ``tools/a2ui_spec_check.py --spec DIR`` gives each its verdict by
  hand against a checkout of that repository (docs/canvas.md); the cases that matter most are
  written as pincer's own tests in test_a2ui_catalogs.py (an invalid URL refused, the minimal
  catalog's ``capitalize``, an unknown catalog refused by name).

Each case runs the way the specification's own runner (``run_tests.py``, ajv with formats) runs
it: a ``server_to_client.json`` case is one message of a surface on the basic catalog; a
``client_to_server.json`` case is a message a person's action sends back.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pincer.canvas.a2ui import parse_messages
from pincer.canvas.catalogs import CatalogSet
from pincer.core.errors import A2uiInvalid

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "canvas-renderer" / "package-lock.json"
NODE_MODULES = ROOT / ".cache" / f"npm-a2ui-{hashlib.sha256(LOCK.read_bytes()).hexdigest()[:12]}" / "node_modules"
BUILD_TIMEOUT_S = 120


def _web_core() -> Path:
    package = NODE_MODULES / "@a2ui" / "web_core"
    if not (package / "package.json").is_file():
        pytest.fail(f"@a2ui/web_core is not installed at {package}: run `make setup` (its a2ui-renderer step installs it)")
    return package


def _verdict(messages: Any, catalogs: CatalogSet | None = None, prior: Any = None) -> str | None:
    """None when pincer accepts the batch, else why not."""
    try:
        parse_messages(messages, catalogs=catalogs, prior=prior)
    except A2uiInvalid as exc:
        return exc.message
    return None


def _messages(path: Path) -> list[Any]:
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return list(loaded["messages"] if isinstance(loaded, dict) else loaded)


def test_every_v09_example_the_published_package_ships_is_accepted() -> None:
    files = sorted((_web_core() / "src" / "v0_9" / "schemas" / "catalogs").glob("*/examples/*.json"))
    assert len(files) >= 40, files  # basic's 37 and minimal's 7 in 0.11.0
    refused = {f"{f.parent.parent.name}/{f.name}": why for f in files if (why := _verdict(_messages(f))) is not None}
    assert refused == {}


SHIPPED = {
    "v0_8/server_to_client.json": "src/v0_8/schemas/server_to_client.json",
    "v0_8/server_to_client_with_standard_catalog.json": "src/v0_8/schemas/server_to_client_with_standard_catalog.json",
    "v0_8/client_to_server.json": "src/v0_8/schemas/client_to_server.json",
    "v0_9/server_to_client.json": "src/v0_9/schemas/server_to_client.json",
    "v0_9/common_types.json": "src/v0_9/schemas/common_types.json",
    "v0_9/client_to_server.json": "src/v0_9/schemas/client_to_server.json",
    "v0_9/basic_catalog.json": "src/v0_9/schemas/catalogs/basic/catalog.json",
    "v0_9/minimal_catalog.json": "src/v0_9/schemas/catalogs/minimal/catalog.json",
}


def test_the_shipped_schemas_are_the_pinned_packages_files() -> None:
    shipped = ROOT / "src" / "pincer" / "canvas" / "schemas"
    package = _web_core()
    assert json.loads((package / "package.json").read_text())["version"] == "0.11.0"
    differ = [ours for ours, theirs in SHIPPED.items() if (shipped / ours).read_bytes() != (package / theirs).read_bytes()]
    assert differ == []
    assert sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*.json")) == sorted(SHIPPED)


def test_the_shipped_renderer_is_what_the_pinned_packages_build(tmp_path: Path) -> None:
    """Rebuilt from the packages the lock pins, the renderer is the same, byte for byte: the
    script in the wheel is the A2UI project's code and pincer's glue, nothing else."""
    shipped = ROOT / "src" / "pincer" / "canvas" / "assets" / "a2ui-renderer.js"
    _web_core()
    out = tmp_path / "a2ui-renderer.js"
    built = subprocess.run(
        ["node", str(ROOT / "canvas-renderer" / "build.mjs"), str(NODE_MODULES), str(out)],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=ROOT,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    assert out.read_bytes() == shipped.read_bytes(), "the shipped renderer is stale: run `make a2ui-renderer`"
    lock = json.loads(LOCK.read_text())["packages"]
    assert lock["node_modules/@a2ui/lit"]["version"] == "0.11.0" and lock["node_modules/@a2ui/web_core"]["version"] == "0.11.0"
