"""What the tests of docs/acts.md share: reading a home's audit records as they are stored, and
who the CLI is on this machine.

The records are read straight from the database file (read-only), so that reading them writes
nothing and counts exactly what the act under test wrote."""

from __future__ import annotations

import os
import pwd
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx

__all__ = ["CLI_ACTOR", "audit_rows", "rows_after", "last_id", "only_act", "notes_server", "answered_over_rest"]

# Who the CLI is: the name of the user the process runs as (by uid, never by $USER).
CLI_ACTOR = f"cli:{pwd.getpwuid(os.geteuid()).pw_name}"

_COLUMNS = ("id", "session", "caller", "tool", "kind", "decision", "reason", "outcome", "error_code", "args",
            "effects", "approval_id", "person", "approved_by")  # fmt: skip


def audit_rows(home: Path) -> list[dict[str, Any]]:
    """Every audit record of ``home``'s SQLite database, oldest first ([] before it exists)."""
    path = home / "pincer.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(f"SELECT {', '.join(_COLUMNS)} FROM audit ORDER BY id").fetchall()
    finally:
        conn.close()
    return [dict(zip(_COLUMNS, row, strict=True)) for row in rows]


def rows_after(home: Path, last_id: int) -> list[dict[str, Any]]:
    return [row for row in audit_rows(home) if row["id"] > last_id]


def last_id(home: Path) -> int:
    rows = audit_rows(home)
    return rows[-1]["id"] if rows else 0


def only_act(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The one record an act wrote; fails naming what was written when it is not exactly one."""
    acts = [row for row in rows if row["kind"] != "call"]
    assert len(acts) == 1, f"expected exactly one audit record of the act, found {len(acts)}: {acts}"
    return acts[0]


def notes_server(tmp: Path, description: str = "Lists the notes") -> tuple[list[str], Path]:
    """``pincer mcp add NAME`` arguments for a real stdio MCP server offering one tool, and the
    file its offer is read from (``_offer`` it again to change the definition)."""
    from tests.gateway.ui.test_dashboard_mcp import SERVER, _offer

    script, offered = tmp / "notes_server.py", tmp / "tools.json"
    script.write_text(SERVER)
    _offer(offered, description)
    return ["--command", sys.executable, "--arg", "-u", "--arg", str(script), "--arg", str(offered)], offered


async def answered_over_rest(
    call: Callable[[], Awaitable[Any]], rest: httpx.AsyncClient, *, approvals: str = "/approvals",
    decision: str = "allow_once", wait_s: float = 90.0,
) -> tuple[Any, dict[str, Any]]:
    """Run ``call`` (a tool call that asks), wait (at most ``wait_s``) for its approval to be
    listed at ``approvals`` over ``rest``, answer it with ``decision``; the call's result and the
    approval as it was listed."""
    results: list[Any] = []

    async def run() -> None:
        results.append(await call())

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(wait_s):
            while not (pending := (await rest.get(approvals)).json()["approvals"]):
                await anyio.sleep(0.05)
        (approval,) = pending
        answered = await rest.post(f"{approvals}/{approval['id']}", json={"decision": decision})
        assert answered.status_code == 200, answered.text
    return results[0], approval
