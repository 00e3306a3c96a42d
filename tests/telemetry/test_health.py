"""Health through a real ``pincer serve``: ``/healthz`` (alive) and ``/readyz`` (the store answers at
this pincer's schema, Redis when configured, the audit writer keeps up), both without a token, and
neither saying anything secret: not when the store is unreachable (PostgreSQL stopped), not when
its schema is another one, not when Redis is gone."""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.backends import private_postgres, redis_server
from tests.gateway.conftest import PINCER_BIN, pincer_serve
from tests.telemetry.prometheus import free_port

CLI_TIMEOUT_S = 120.0
READY_WAIT_S = 30.0
POLL_S = 0.2


def _get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, trust_env=False, timeout=10.0, **kwargs)


def _wait_ready(url: str, status: int) -> httpx.Response:
    """``/readyz`` once it answers ``status`` (the store's pool may take a moment to notice)."""
    deadline = time.monotonic() + READY_WAIT_S
    while (answer := _get(f"{url}/readyz")).status_code != status:
        assert time.monotonic() < deadline, f"/readyz still {answer.status_code} {answer.text} after {READY_WAIT_S} s"
        time.sleep(POLL_S)
    return answer


def _cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(PINCER_BIN), *args], input=stdin, capture_output=True, text=True,
        env={**os.environ, "PINCER_HOME": str(home)}, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


def test_healthz_and_readyz_answer_without_a_token_and_readyz_fails_on_another_schema(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with pincer_serve(home) as server:
        url = server.info["url"]
        health = _get(f"{url}/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok" and health.json()["version"]
        ready = _get(f"{url}/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json() == {"status": "ready", "checks": {"store": "ok", "audit": "ok"}}
        # The DNS-rebinding rule holds for the probes too (docs/operations.md: send Host: localhost).
        assert _get(f"{url}/readyz", headers={"Host": "evil.example"}).status_code == 421
        assert _get(f"{url}/readyz", headers={"Host": "localhost"}).status_code == 200

        # A newer pincer migrated the database under this one: not ready, and it says why in one word.
        database = home / "pincer.db"
        with sqlite3.connect(database) as conn:
            known = conn.execute("PRAGMA user_version").fetchone()[0]
            conn.execute(f"PRAGMA user_version = {known + 1}")
        behind = _get(f"{url}/readyz")
        assert behind.status_code == 503
        assert behind.json() == {"status": "not_ready", "checks": {"store": "schema_mismatch", "audit": "ok"}}
        assert str(home) not in behind.text
        assert _get(f"{url}/healthz").status_code == 200  # alive all the same
        with sqlite3.connect(database) as conn:
            conn.execute(f"PRAGMA user_version = {known}")
        assert _get(f"{url}/readyz").status_code == 200


def test_readyz_fails_while_postgresql_is_stopped_and_says_nothing_secret(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    password = f"pw-{secrets.token_hex(12)}"
    with private_postgres() as cluster:
        database = cluster.server.new_database()  # trust authentication: the password is sent, not needed
        (home / "config.toml").write_text(f'[store]\nurl = "{database}"\npassword_secret = "pg_password"\n')
        _cli(home, "secrets", "set", "pg_password", stdin=password)
        _cli(home, "db", "upgrade", "--json")
        with pincer_serve(home) as server:
            url = server.info["url"]
            ready = _get(f"{url}/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["store"] == "ok"

            cluster.stop()
            down = _wait_ready(url, 503)
            assert down.json() == {"status": "not_ready", "checks": {"store": "unreachable", "audit": "ok"}}
            for secret in (password, database, str(cluster.port), database.rsplit("/", 1)[1], cluster.server.user):
                assert secret not in down.text, f"/readyz says {secret!r}"
            assert _get(f"{url}/healthz").status_code == 200  # the process itself is alive

            cluster.start()
            assert _wait_ready(url, 200).json()["checks"]["store"] == "ok"
        assert password not in "".join(server.stderr_lines.queue)


def test_readyz_checks_redis_when_the_cache_names_one(tmp_path: Path) -> None:
    for name, url, expected, status in (
        ("up", redis_server().url(), "ok", 200),
        ("gone", f"redis://127.0.0.1:{free_port()}/0", "unreachable", 503),
    ):
        home = tmp_path / name
        home.mkdir()
        (home / "config.toml").write_text(f'[cache]\nurl = "{url}"\n')
        with pincer_serve(home) as server:
            ready = _get(f"{server.info['url']}/readyz")
            assert (ready.status_code, ready.json()["checks"]) == (status, {"store": "ok", "audit": "ok", "cache": expected})
            assert url not in ready.text and url.rsplit(":", 1)[1] not in ready.text
