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
        assert f"pid {server.process.pid}" in instances["detail"], instances
        assert instances["detail"].startswith("1 pincer process(es) live")


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

