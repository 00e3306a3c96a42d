"""Issue 34 item 7 and the approval ids: an approval outlived its caller on another gateway, and
its id was 32 bits.

- Two ``pincer serve`` on one PostgreSQL home: a call waits on B for a person; B is SIGKILLed.
  Answering the approval on A said 200 ``allow_once`` although the call would never run (B was
  dead, but not yet reaped by its parent: its pid still answered ``kill(pid, 0)`` and its
  ``/proc`` start time still matched, so the owner rule took it for alive). Now the answer
  on every path (REST, CLI, dashboard) says the caller is gone and the request is expired.
- Approval ids were ``secrets.token_hex(4)``: 32 bits, guessable by enumeration, and colliding
  among a few ten thousand requests (the birthday bound). They are 128 bits now, and the whole
  id is the only lookup key: no prefix of it finds the request.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.core.errors import UsageError
from pincer.gateway.tokens import load_or_create_token
from pincer.store import ApprovalStore
from pincer.store.owners import is_process_alive, process_token
from pincer.store.sql import open_postgres, open_sqlite
from tests.backends import postgres_server
from tests.gateway.scale_out_support import Gateway, cli, gateways, upgrade, wait_for
from tests.gateway.ui.conftest import csrf_of, sign_in

CALL_TIMEOUT_S = 60.0
APPROVAL_ID_HEX_CHARS = 32  # 128 bits


def _asks(gateway: Gateway, token: str, name: str, outcome: list[str]) -> threading.Thread:
    """A call on ``gateway`` that waits for a person (write_file asks by default)."""

    def call() -> None:
        try:
            answer = httpx.post(
                f"{gateway.url}/api/v1/tools/write_file/call", json={"args": {"path": name, "content": "x"}},
                headers={"Authorization": f"Bearer {token}"}, timeout=CALL_TIMEOUT_S * 2,
            )  # fmt: skip
            outcome.append(answer.text)
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)  # the gateway died under the call

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def shared_home(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    home = tmp_path / "home"
    home.mkdir()
    url = postgres_server().new_database()
    (home / "config.toml").write_text(
        f'[store]\nurl = "{url}"\n\n[approvals]\ntimeout_s = 3600\n\n[triggers]\nenabled = false\n'
    )
    upgrade(home)
    yield home, load_or_create_token(home)


def test_a_dead_callers_approval_says_so_on_the_other_gateway_on_every_path(shared_home: tuple[Path, str]) -> None:
    """Failed on main: REST answered 200 {"status": "allow_once"} for the approval of a call whose
    gateway had been SIGKILLed (and not yet reaped)."""
    home, token = shared_home
    headers = {"Authorization": f"Bearer {token}"}
    with gateways([home, home]) as (a, b):
        outcomes: list[str] = []
        callers = [_asks(b, token, f"asked-{i}.txt", outcomes) for i in range(3)]

        def pending() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = httpx.get(f"{a.url}/api/v1/approvals", headers=headers).json()["approvals"]
            return found if len(found) == len(callers) else []

        waiting = wait_for("B's three approvals, listed on A", pending, alive=[a, b])
        assert not outcomes, outcomes
        b.process.send_signal(signal.SIGKILL)
        _wait_dead_unreaped(b.pid)
        rest_id, cli_id, ui_id = (approval["id"] for approval in waiting)

        answered = httpx.post(f"{a.url}/api/v1/approvals/{rest_id}", json={"decision": "allow_once"}, headers=headers)
        assert answered.status_code == 410, answered.text
        error = answered.json()["error"]
        assert error["code"] == "approval_gone" and "the call that asked is gone" in error["message"], error

        by_cli = cli(home, "approvals", "approve", cli_id, "--json")
        assert by_cli.returncode != 0 and "the call that asked is gone" in by_cli.stdout + by_cli.stderr, by_cli

        with httpx.Client(base_url=a.url, trust_env=False) as http:
            sign_in(http, token)
            page = http.get("/ui/approvals").text
            shown = http.post(f"/ui/approvals/{ui_id}", data={"csrf_token": csrf_of(page), "decision": "allow_once"})
            assert shown.status_code == 409 and "the call that asked is gone" in shown.text, shown.text

        for approval_id in (rest_id, cli_id, ui_id):
            seen = httpx.get(f"{a.url}/api/v1/approvals/{approval_id}", headers=headers).json()
            assert seen["status"] == "expired" and seen["answered_by"] is None, seen
        b.process.wait(timeout=CALL_TIMEOUT_S)
        for caller in callers:
            caller.join(CALL_TIMEOUT_S)
        assert outcomes and all(not outcome.startswith("{") for outcome in outcomes), outcomes  # none ran


def _wait_dead_unreaped(pid: int) -> None:
    """Block until the child ``pid`` has exited, leaving it unreaped (a zombie: its parent, this
    test, has not collected it yet, as a supervisor busy elsewhere would not have)."""
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


def test_a_zombie_process_is_not_alive() -> None:
    """Failed on main: ``is_process_alive`` said True for a child that had exited and was not yet
    reaped (``kill(pid, 0)`` succeeds on a zombie, its start time in /proc is unchanged)."""
    child = subprocess.Popen(["/bin/sleep", "60"])
    try:
        token = process_token(child.pid)
        assert is_process_alive(token)
        os.kill(child.pid, signal.SIGKILL)
        _wait_dead_unreaped(child.pid)
        assert Path(f"/proc/{child.pid}").exists()  # still there: a zombie
        assert not is_process_alive(token)
    finally:
        child.kill()
        child.wait(timeout=CALL_TIMEOUT_S)


async def _requests(store: Any, count: int) -> list[str]:
    return [
        (await store.create(session="main", tool="write_file", args={}, effects=(), hosts=(), reason="asks",
                            timeout_s=60)).id
        for _ in range(count)
    ]  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_approval_ids_carry_128_bits_and_only_the_whole_id_finds_one(kind: str, tmp_path: Path) -> None:
    """Failed on main: ids were 8 hex characters (32 bits)."""
    if kind == "sqlite":
        db = await open_sqlite(tmp_path)
    else:
        from pincer.store.sql.migrate import upgrade_postgres

        url = postgres_server().new_database()
        upgrade_postgres(url)
        db = await open_postgres(url, size=2)
    store = ApprovalStore(db)
    try:
        ids = await _requests(store, 200)
        assert len(set(ids)) == len(ids)
        for approval_id in ids:
            assert len(approval_id) == APPROVAL_ID_HEX_CHARS and int(approval_id, 16) >= 0, approval_id
        # 200 ids of 128 random bits: every bit position takes both values (a short or fixed id fails).
        bits = [int(approval_id, 16) for approval_id in ids]
        assert all(any(b >> i & 1 for b in bits) and not all(b >> i & 1 for b in bits) for i in range(128))
        for prefix in (ids[0][:8], ids[0][:16], ids[0][:-1]):
            with pytest.raises(UsageError, match="no approval request"):
                await store.get(prefix)
        assert (await store.get(ids[0])).id == ids[0]
    finally:
        await db.aclose()


@pytest.mark.anyio
async def test_no_path_answers_an_approval_by_a_prefix_of_its_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """REST, the dashboard and the CLI look an approval up by its whole id only."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[triggers]\nenabled = false\n")
    token = load_or_create_token(home)
    db = await open_sqlite(home)
    try:
        (approval_id,) = await _requests(ApprovalStore(db), 1)
    finally:
        await db.aclose()
    prefix = approval_id[:8]
    by_cli = cli(home, "approvals", "approve", prefix, "--json")
    assert by_cli.returncode != 0 and "no approval request" in by_cli.stdout + by_cli.stderr, by_cli
    with gateways([home]) as (gateway,), httpx.Client(base_url=gateway.url, trust_env=False) as http:
        headers = {"Authorization": f"Bearer {token}"}
        assert http.get(f"/api/v1/approvals/{prefix}", headers=headers).status_code == 404
        refused = http.post(f"/api/v1/approvals/{prefix}", json={"decision": "deny"}, headers=headers)
        assert refused.status_code == 404, refused.text
        sign_in(http, token)
        page = http.get("/ui/approvals").text
        shown = http.post(f"/ui/approvals/{prefix}", data={"csrf_token": csrf_of(page), "decision": "deny"})
        assert shown.status_code == 404
    assert json.loads(cli(home, "approvals", "show", approval_id, "--json").stdout)["status"] == "pending"
