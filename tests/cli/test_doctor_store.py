"""``pincer doctor`` checks the store config.toml names, and this home's gateway (issue 35).

Before: on a PostgreSQL home, doctor checked (and failed on) the unused pincer.db beside it, said
nothing of the schema, the gateways on the store or the Redis of ``[cache] url``; and it reported
whichever pincer answered on ``[gateway] port`` as this home's gateway. Real PostgreSQL and Redis
(tests/backends.py), real ``pincer serve`` and the real CLI.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.backends import postgres_server, redis_server
from tests.cli.pending import wait_for_pending
from tests.gateway.conftest import pincer_serve

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def _doctor(home: Path) -> tuple[int, list[dict[str, Any]]]:
    done = _pincer(home, "doctor", "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)["checks"]


def _named(checks: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [c for c in checks if c["name"] == name]


def _pg_home(home: Path, *, store: str, cache: str | None = None) -> None:
    home.mkdir()
    text = f'[store]\nurl = "{store}"\n\n[gateway]\nport = {_free_port()}\n'
    if cache is not None:
        text += f'\n[cache]\nurl = "{cache}"\n'
    (home / "config.toml").write_text(text)


def test_a_postgresql_home_is_checked_on_postgresql_and_redis_never_on_its_sqlite_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _pg_home(home, store=postgres_server().new_database(), cache=redis_server().url(db=2))
    assert _pincer(home, "db", "upgrade").returncode == 0
    for text in ("a", "b"):
        call = _pincer(home, "tools", "call", "echo", "--args", json.dumps({"text": text}))
        assert call.returncode == 0, call.stderr
    # What lies in pincer.db beside a PostgreSQL store is nobody's: a broken one changes nothing.
    for leftover in home.glob("pincer.db*"):
        leftover.unlink()
    garbage = b"SQLite format 3\x00" + b"\xff" * 4096
    (home / "pincer.db").write_bytes(garbage)
    _code, checks = _doctor(home)
    assert not [c for c in checks if c["status"] == "fail" and c["name"] != "sandbox"], checks
    assert (home / "pincer.db").read_bytes() == garbage  # not opened (SQLite would have touched it)
    assert not list(home.glob("pincer.db-*"))
    assert not [c for c in checks if "pincer.db" in c["detail"]], checks
    (database,) = _named(checks, "database")
    assert database["status"] == "ok" and "PostgreSQL postgresql://" in database["detail"] and "at schema" in database["detail"]
    (chain,) = _named(checks, "audit chain")
    assert chain["detail"] == "intact over 2 records (in the PostgreSQL store)"
    (redis,) = _named(checks, "redis")
    # ok, or warn when this busy machine took longer than REDIS_SLOW_MS: the time is never asserted
    assert redis["status"] in ("ok", "warn") and "answers PING in" in redis["detail"] and " ms" in redis["detail"]
    (instances,) = _named(checks, "instances")
    assert instances["detail"].startswith("no pincer process is live"), instances

    # A gateway on the store is named with its pid while it beats.
    with pincer_serve(home) as server:
        _code, checks = _doctor(home)
        (instances,) = _named(checks, "instances")
        assert instances["detail"].startswith(f"this home's gateway: {socket.gethostname()}/pid {server.process.pid} at "), instances


def test_a_store_at_another_schema_and_unreachable_servers_fail_with_their_fix(tmp_path: Path) -> None:
    never_upgraded = tmp_path / "fresh"
    _pg_home(never_upgraded, store=postgres_server().new_database())
    code, checks = _doctor(never_upgraded)
    (database,) = _named(checks, "database")
    assert code == 1 and database["status"] == "fail" and "(never upgraded)" in database["detail"]
    assert database["hint"] == "`pincer db upgrade`"
    assert not _named(checks, "audit chain")  # nothing to verify on a store that cannot serve

    closed = _free_port()
    gone = tmp_path / "gone"
    _pg_home(gone, store=f"postgresql://pincer:hunter2@127.0.0.1:{closed}/pincer", cache=f"redis://:hunter2@127.0.0.1:{closed}/0")
    code, checks = _doctor(gone)
    (database,) = _named(checks, "database")
    (redis,) = _named(checks, "redis")
    assert code == 1 and database["status"] == "fail" and "cannot reach the PostgreSQL store" in database["detail"]
    assert "[store] url" in database["hint"]
    assert redis["status"] == "fail" and "does not answer" in redis["detail"] and "[cache] url" in redis["hint"]
    assert "hunter2" not in json.dumps(checks)
    assert not (gone / "pincer.db").exists()


def test_the_gateway_reported_is_this_homes(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    with pincer_serve(theirs) as server:
        port = server.info["port"]
        (ours / "config.toml").write_text(f"[gateway]\nport = {port}\n")
        (theirs / "config.toml").write_text(f"[gateway]\nport = {port}\n")
        _code, checks = _doctor(theirs)
        (gateway,) = _named(checks, "gateway")
        assert gateway["status"] == "ok" and f":{port}/healthz" in gateway["detail"]
        # Another home on the same port: that gateway is not this one (with or without a token file).
        code, checks = _doctor(ours)
        (gateway,) = _named(checks, "gateway")
        assert code == 1 and gateway["status"] == "fail" and "another home's" in gateway["detail"], gateway
        assert "[gateway] port" in gateway["hint"]
        (ours / "gateway.token").write_text("t" * 43 + "\n")
        (ours / "gateway.token").chmod(0o600)
        (gateway,) = _named(_doctor(ours)[1], "gateway")
        assert gateway["status"] == "fail" and "another home's" in gateway["detail"], gateway



def test_doctor_tells_this_homes_gateway_from_other_gateways_and_from_commands_on_one_store(tmp_path: Path) -> None:
    """Before: every process beating on the store was one list, "3 pincer process(es) live on the
    store (gateways and running commands)": this home's gateway, another home's and a waiting
    `pincer tools call` looked alike."""
    store = postgres_server().new_database()
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _pg_home(ours, store=store)
    _pg_home(theirs, store=store)
    for home in (ours, theirs):
        with (home / "config.toml").open("a") as fh:
            fh.write("\n[approvals]\ntimeout_s = 300\n")
    assert _pincer(ours, "db", "upgrade").returncode == 0
    assert _pincer(ours, "audit", "verify").returncode == 0  # makes the audit key the homes share
    (theirs / "audit.key").write_bytes((ours / "audit.key").read_bytes())
    (theirs / "audit.key").chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(ours)}
    with pincer_serve(ours) as mine, pincer_serve(theirs) as other:
        # A command that opens the store and stays: a call waiting for its approval.
        waiting = subprocess.Popen(
            [*PINCER, "tools", "call", "write_file", "--args", '{"path": "a.txt", "content": "x"}', "--json"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            (pending,) = wait_for_pending(ours, waiting, lambda h: _pincer(h, "approvals", "list", "--json"))
            host = socket.gethostname()
            for home, this, that in ((ours, mine, other), (theirs, other, mine)):
                _code, checks = _doctor(home)
                (instances,) = _named(checks, "instances")
                detail = instances["detail"]
                assert detail.count("; ") == 2, detail
                this_gateway, other_gateways, commands = detail.split("; ")
                assert this_gateway == f"this home's gateway: {host}/pid {this.process.pid} at {this.info['url']}", detail
                assert other_gateways == (f"1 other gateway(s) on the store: {host}/pid {that.process.pid} at "
                                          f"{that.info['url']} (home {that.home.resolve()})"), detail  # fmt: skip
                assert commands == f"1 pincer command(s) running, not gateways: {host}/pid {waiting.pid}", detail
            assert _pincer(ours, "approvals", "deny", pending["id"]).returncode == 0
            waiting.communicate(timeout=CLI_TIMEOUT_S)  # denied: it ends, and marks its row stopped
        finally:
            waiting.kill()
            waiting.communicate(timeout=CLI_TIMEOUT_S)
    # Stopped, they are gone at once (their rows are marked stopped).
    _code, checks = _doctor(ours)
    (instances,) = _named(checks, "instances")
    assert instances["detail"].startswith("no pincer process is live"), instances
