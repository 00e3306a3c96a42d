"""Issue 34, item 5: links in a shared (PostgreSQL) home that each look inside but lead out.

How it broke: a link row was checked lexically, on its own (``normpath(dirname(path) +
target)`` in a shared root). A chain of links, each of which looks inside, resolves physically
outside: ``skills/l2 -> .`` is the ``skills`` folder, so ``skills/l3 -> l2/..`` is PINCER_HOME
itself, and ``skills/leak -> l3/secret.key`` was materialised as a link to the secret store's key
(``skills/l4 -> l3/..`` climbed above the home). A link already on the disk was not part of the
check either, nor a loop of links, and a refused row was forgotten once logged: neither
``pincer doctor`` nor a gateway started later named it.

Every test here runs on the real PostgreSQL of tests/backends.py, the rows written as someone with
write access to the database writes them (bytes and a matching sha256), and checks the home the
way the kernel sees it: ``os.path.realpath`` of every link under the shared roots.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from pincer.store.home_share import SHARED_ROOTS, HomeSync
from tests.backends import postgres_server
from tests.gateway.conftest import pincer_serve
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio

KEY_TEXT = base64.b64encode(b"secret-store-key, never to leave").decode() + "\n"  # 32 bytes
AUDIT_TEXT = base64.b64encode(b"the audit key, not to leave here").decode() + "\n"
CLI_TIMEOUT_S = 180.0
PINCER_BIN = Path(sys.executable).with_name("pincer")


def _machine(tmp_path: Path, name: str) -> Path:
    """A PINCER_HOME with the two keys a link must never reach."""
    home = tmp_path / name
    home.mkdir()
    for file, text in (("secret.key", KEY_TEXT), ("audit.key", AUDIT_TEXT)):
        (home / file).write_text(text)
        (home / file).chmod(0o600)
    return home


def _write_rows(url: str, rows: list[tuple[str, str, bytes]]) -> None:
    """(path, kind, data) rows under one new counter value, as a database writer would."""
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        (version,) = conn.execute(
            "UPDATE home_files_version SET version = version + 1 WHERE one = 1 RETURNING version"
        ).fetchone()  # type: ignore[misc]
        for path, kind, data in rows:
            conn.execute(
                "INSERT INTO home_files (path, kind, data, sha256, mode, version, written_by, written_at) "
                "VALUES (%s, %s, %s, %s, 384, %s, 'db-writer', 0) ON CONFLICT (path) DO UPDATE SET kind = EXCLUDED.kind, "
                "data = EXCLUDED.data, sha256 = EXCLUDED.sha256, version = EXCLUDED.version",
                (path, kind, data, hashlib.sha256(data).hexdigest(), version),
            )


def _link(path: str, target: str) -> tuple[str, str, bytes]:
    return (path, "link", target.encode())


def _outside(home: Path) -> list[str]:
    """Every link under the home whose target (as the kernel resolves it) is not in a shared
    root, or that is a loop; 'path -> where'."""
    real_home = os.path.realpath(home)
    roots = [os.path.join(real_home, root) for root in SHARED_ROOTS]
    found = []
    for dirpath, dirnames, filenames in os.walk(home):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                continue
            try:
                where = os.path.realpath(path, strict=True)
            except FileNotFoundError:  # a dangling link: where the kernel would look for it
                where = os.path.realpath(path)
            except OSError as exc:  # ELOOP: a loop
                found.append(f"{os.path.relpath(path, home)} -> {exc.strerror}")
                continue
            if not any(where == root or where.startswith(root + os.sep) for root in roots):
                found.append(f"{os.path.relpath(path, home)} -> {where}")
    return found


def _refused_paths(messages: tuple[str, ...]) -> set[str]:
    return {m.split("the shared copy of ", 1)[1].split(" (version", 1)[0] for m in messages}


@pytest.fixture
async def postgres(tmp_path: Path) -> Backend:
    made = Backend("postgres", tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


async def test_a_chain_of_links_that_each_look_inside_is_refused(postgres: Backend, tmp_path: Path) -> None:
    """Each row passed the old lexical check; together ``skills/leak`` was the secret store's key
    (``cat skills/leak`` on the home printed it) and ``skills/audit`` the audit key."""
    _write_rows(postgres.url, [
        ("skills/notes/SKILL.md", "file", b"---\nname: notes\ndescription: notes\n---\n"),
        _link("skills/l2", "."),
        _link("skills/l3", "l2/.."),
        _link("skills/l4", "l3/.."),
        _link("skills/leak", "l3/secret.key"),
        _link("skills/audit", "l4/b/audit.key"),
        _link("installed/skills/notes", "../../skills/notes"),  # a link that climbs and comes back in: fine
    ])  # fmt: skip
    b = _machine(tmp_path, "b")
    report = HomeSync(b, postgres.home_files()).sync()

    assert _outside(b) == []
    assert not os.path.lexists(b / "skills" / "leak") and not os.path.lexists(b / "skills" / "audit")
    assert _refused_paths(report.refused) == {"skills/l3", "skills/l4", "skills/leak", "skills/audit"}, report.refused
    (l3,) = [m for m in report.refused if "skills/l3 " in m]
    assert "'l2/..'" in l3 and "PINCER_HOME" in l3, l3
    (leak,) = [m for m in report.refused if "skills/leak " in m]
    assert "'l3/secret.key'" in leak and "leads to secret.key, outside" in leak, leak
    # What is fine stays fine: the folder link, the hub-style link that climbs back in.
    assert os.readlink(b / "skills" / "l2") == "."
    assert (b / "installed" / "skills" / "notes" / "SKILL.md").read_text().startswith("---")


async def test_a_link_already_on_the_disk_is_part_of_the_chain(postgres: Backend, tmp_path: Path) -> None:
    """A row that is inside on its own but leads out through a link the home already has, and a
    row that turns a link another link goes through into one that makes that other link lead out."""
    b = _machine(tmp_path, "b")
    on_b = HomeSync(b, postgres.home_files())
    _write_rows(postgres.url, [
        ("skills/deep/er/SKILL.md", "file", b"---\nname: er\ndescription: er\n---\n"),
        _link("skills/p", "deep/er"),
        _link("skills/q", "p/../../skills/notes"),  # lexically skills/notes; physically skills/skills/notes
    ])  # fmt: skip
    assert on_b.sync().refused == ()
    assert os.path.realpath(b / "skills" / "q") == os.path.realpath(b / "skills" / "skills" / "notes")

    (b / "skills" / "mine").symlink_to(".")  # this home's own link: the skills folder
    _write_rows(postgres.url, [
        _link("skills/p", "."),  # alone: the skills folder; but q through it: PINCER_HOME/../skills/notes
        _link("skills/leak", "mine/../secret.key"),  # lexically skills/secret.key
    ])  # fmt: skip
    report = on_b.sync()
    assert _outside(b) == []
    assert _refused_paths(report.refused) == {"skills/p", "skills/leak"}, report.refused
    (p,) = [m for m in report.refused if "skills/p " in m]
    assert "skills/q" in p, p  # says which link it would have turned outwards
    assert os.readlink(b / "skills" / "p") == "deep/er"  # the home keeps what it had


async def test_a_loop_of_links_is_refused(postgres: Backend, tmp_path: Path) -> None:
    """Links that lead to each other (or to themselves) lead nowhere; they were materialised."""
    _write_rows(postgres.url, [
        _link("skills/loop1", "loop2"),
        _link("skills/loop2", "loop1"),
        _link("skills/self", "self"),
        _link("skills/long", "loop1/x"),
    ])  # fmt: skip
    b = _machine(tmp_path, "b")
    report = HomeSync(b, postgres.home_files()).sync()
    assert _refused_paths(report.refused) == {"skills/loop1", "skills/loop2", "skills/self", "skills/long"}, report.refused
    assert all("loop" in m for m in report.refused), report.refused
    assert not [p for p in (b / "skills").glob("*") if p.is_symlink()]


def test_refused_links_are_named_in_the_gateways_log_and_by_doctor(tmp_path: Path) -> None:
    """docs/scale-out.md: a refused row is named in the gateway's log; and ``pincer doctor``, run
    any time later on that machine, names it too (the sync that met it has long passed)."""
    url = postgres_server().new_database()
    b = _machine(tmp_path, "b")
    (b / "config.toml").write_text(f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}, "PINCER_HOME": str(b)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(PINCER_BIN), *args], capture_output=True, text=True, env=env,
                              timeout=CLI_TIMEOUT_S, check=False)  # fmt: skip

    done = cli("db", "upgrade", "--json")
    assert done.returncode == 0, done.stderr
    with pincer_serve(b) as gateway:
        _write_rows(url, [_link("skills/l2", "."), _link("skills/l3", "l2/.."), _link("skills/leak", "l3/secret.key")])
        line = gateway.wait_for_log("skills/leak")
        assert "refused" in line and "l3/secret.key" in line, line
    assert not os.path.lexists(b / "skills" / "leak")

    doctor = cli("doctor", "--json")
    assert doctor.stdout.startswith("{"), doctor.stderr
    checks = json.loads(doctor.stdout)["checks"]
    (shared,) = [c for c in checks if c["name"] == "shared home"]
    assert shared["status"] == "warn", shared
    assert "skills/leak" in shared["detail"] and "skills/l3" in shared["detail"], shared
    assert "pincer db status" in shared["hint"], shared

    # A link that leads out already on the disk (materialised by a pincer before this check): fail.
    (b / "skills" / "old").symlink_to("l2/../secret.key")
    doctor = cli("doctor", "--json")
    assert doctor.stdout.startswith("{"), doctor.stderr
    assert doctor.returncode == 1, doctor.stdout
    (shared,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "shared home"]
    assert shared["status"] == "fail" and "skills/old" in shared["detail"] and "secret.key" in shared["detail"], shared
    assert "rm PATH" in shared["hint"], shared
