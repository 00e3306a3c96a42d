"""Issue 22 item 9: an install killed at any step of its commit leaves the disk as before or as after.

A real ``Hub.install`` runs in a child process that ``os._exit``-s after its Nth journaled
change (``PINCER_TEST_HUB_CRASH_AFTER``, the journal's test seam), for every N until the install
finishes; the next lifecycle step's replay (``Hub.recover``) must then leave the home equal to
the home before the install or to a home where the same install finished. Before the journal,
a kill between the rename into the store and the lock write left a version folder nothing
pointed to, an active link the lock did not name, or a ``.hub-staging-*`` folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pincer.hub.journal import CRASH_AFTER_ENV, CRASH_EXIT_CODE, JOURNAL_FILE
from pincer.hub.publish import build_artifact
from pincer.hub.remote import RemoteSource
from pincer.hub.signing import generate_key
from tests.hub.conftest import make_hub, route_server, serve_version, write_skill

CHILD_TIMEOUT_S = 120.0
_NONCE = re.compile(r"(@[0-9a-f]{12})-[0-9a-f]{6}")
_NONCE_BYTES = re.compile(_NONCE.pattern.encode())

CHILD = """
import sys
from pathlib import Path
from pincer.hub.catalog import Catalog
from pincer.hub.installer import Hub, InstallOptions
from pincer.hub.remote import RemoteSource
home, url, spec, force = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "force"
Hub(home, catalog=Catalog([RemoteSource("evil", url)])).install(spec, InstallOptions(force=force))
"""


def _install_in_child(home: Path, url: str, spec: str, *, force: bool, crash_after: int | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    if crash_after is not None:
        env[CRASH_AFTER_ENV] = str(crash_after)
    argv = [sys.executable, "-c", CHILD, str(home), url, spec, "force" if force else "-"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)


def _view(home: Path) -> dict[str, str]:
    """Everything under ``home`` (kind, mode, content), with what differs between two runs of the
    same install taken out: the random suffix of a version folder and the install time."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(home):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = _NONCE.sub(r"\1-N", full.relative_to(home).as_posix())
            mode = oct(full.lstat().st_mode & 0o777)
            if full.is_symlink():
                found[rel] = "link " + _NONCE.sub(r"\1-N", os.readlink(full))
            elif full.is_dir():
                found[rel] = f"dir {mode}"
            else:
                data = full.read_bytes()
                if name == "meta.json":
                    meta = json.loads(data)
                    meta.pop("installed_at", None)
                    data = json.dumps(meta, sort_keys=True).encode()
                data = _NONCE_BYTES.sub(rb"\1-N", data)
                found[rel] = f"file {mode} {hashlib.sha256(data).hexdigest()}"
    return found


def _skill_update(tmp: Path, routes: object, url: str) -> tuple[Path, str, bool]:
    """skills/good@1.0.0 installed; the source now serves 2.0.0 (a new folder, a link swap,
    state.json, the lock, the 1.0.0 folder kept as the one to roll back to)."""
    key = generate_key()
    home = tmp / "home"
    serve_version(routes, build_artifact(write_skill(tmp / "v1", "good")), key=key)  # type: ignore[arg-type]
    make_hub(home, [RemoteSource("evil", url)], trust={"alice": key.public}).install("skills/good")
    v2 = build_artifact(write_skill(tmp / "v2", "good", version="2.0.0", body="Review it twice.\n"))
    serve_version(routes, v2, key=key, extra_versions=["1.0.0"])  # type: ignore[arg-type]
    return home, "skills/good@2.0.0", False


def _forced_over_a_folder(tmp: Path, routes: object, url: str) -> tuple[Path, str, bool]:
    """--force over a skill folder the hub did not install: it is put aside, then deleted."""
    key = generate_key()
    home = tmp / "home"
    make_hub(home, [], trust={"alice": key.public})
    write_skill(home / "skills", "good", body="My own notes.\n")
    serve_version(routes, build_artifact(write_skill(tmp / "v1", "good")), key=key)  # type: ignore[arg-type]
    return home, "skills/good@1.0.0", True


def _mcp_server(tmp: Path, routes: object, url: str) -> tuple[Path, str, bool]:
    """An MCP server entry: mcp/servers.json (and its folder) written where there was none."""
    key = generate_key()
    home = tmp / "home"
    make_hub(home, [], trust={"alice": key.public})
    entry = tmp / "time-server.json"
    entry.write_text(json.dumps({"name": "time-server", "kind": "mcp_server", "command": "mcp-server-time", "description": "the time"}))
    serve_version(routes, build_artifact(entry, name="time-server", version="1.0.0"), key=key)  # type: ignore[arg-type]
    return home, "mcp-servers/time-server@1.0.0", False


SCENES = {"skill update": _skill_update, "forced over a folder": _forced_over_a_folder, "mcp server": _mcp_server}


@pytest.mark.parametrize("scene", list(SCENES))
def test_an_install_killed_at_every_step_is_replayed_to_before_or_after(tmp_path: Path, scene: str) -> None:
    with route_server() as (url, routes):
        home, spec, force = SCENES[scene](tmp_path, routes, url)
        before = _view(home)
        finished = tmp_path / "finished"
        shutil.copytree(home, finished, symlinks=True)
        done = _install_in_child(finished, url, spec, force=force, crash_after=None)
        assert done.returncode == 0, done.stderr
        after = _view(finished)
        assert after != before
        seen = []
        for step in range(200):
            trial = tmp_path / f"killed-after-{step}"
            shutil.copytree(home, trial, symlinks=True)
            done = _install_in_child(trial, url, spec, force=force, crash_after=step)
            if done.returncode == 0:
                break  # past its last change: the install finished
            assert done.returncode == CRASH_EXIT_CODE, done.stderr
            assert step == 0 or (trial / JOURNAL_FILE).is_file(), f"killed after change {step}: no journal"
            outcome = make_hub(trial, [RemoteSource("evil", url)]).recover()
            assert not (trial / JOURNAL_FILE).exists()
            view = _view(trial)
            assert view in (before, after), (step, outcome, sorted(set(view.items()) ^ set(before.items()))[:6])
            seen.append("after" if view == after else "before")
        assert len(seen) >= 5, seen  # killed at every change, and there are several
        assert seen[0] == "before" and seen[-1] == "after", seen  # the last kill is after the commit


def test_the_next_install_replays_a_dead_install_first(tmp_path: Path) -> None:
    """No explicit recover(): the next lifecycle step replays the journal under the home's lock."""
    with route_server() as (url, routes):
        home, spec, force = _skill_update(tmp_path, routes, url)
        before = _view(home)
        done = _install_in_child(home, url, spec, force=force, crash_after=4)
        assert done.returncode == CRASH_EXIT_CODE, done.stderr
        assert (home / JOURNAL_FILE).is_file()
        hub = make_hub(home, [RemoteSource("evil", url)])
        assert [e.version for e in hub.lock().entries] == ["1.0.0"]
        hub.pin("skills/good")  # any lifecycle step
        assert not (home / JOURNAL_FILE).exists()
        assert [(e.version, e.pinned) for e in hub.lock().entries] == [("1.0.0", True)]
        hub.pin("skills/good", pinned=False)
        assert _view(home) == before
