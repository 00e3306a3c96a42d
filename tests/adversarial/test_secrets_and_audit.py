"""Hardening items 18-20: percent-encoded leaks, a keyless audit chain, unauthenticated floods.

Each test here failed on main before the fix its docstring names.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pincer.core.values import CallRequest
from pincer.safety.scanner import LeakScanner
from pincer.service import Pincer
from tests.funcruntime import FuncRuntime
from tests.gateway.conftest import live_gateway

KEY = b"k" * 32
CLI_TIMEOUT_S = 60
SECRET = "tr0ub4dor-Horse-8-battery"


def _percent(text: str, case: str) -> str:
    """Every byte of ``text`` as an escape, hex digits in ``case`` (upper | lower | mixed)."""
    escapes = [f"%{byte:02X}" for byte in text.encode()]
    if case == "lower":
        escapes = [e.lower() for e in escapes]
    elif case == "mixed":
        escapes = [e.lower() if i % 2 else e for i, e in enumerate(escapes)]
    return "".join(escapes)


# -- 18: the leak scanner and fully percent-encoded values --------------------------------------


@pytest.mark.parametrize("case", ["upper", "lower", "mixed"])
def test_a_fully_percent_encoded_secret_is_redacted(case: str) -> None:
    """Failed on main before percent-decoding: ``%73%6B%2D...`` (every character escaped, as
    ``encodeURIComponent`` never does but an attacker may) passed the scanner in any case."""
    encoded = _percent(SECRET, case)
    text = f"GET /collect?q={encoded}&n=1 HTTP/1.1"
    output, count = LeakScanner([SECRET]).scan_text(text)
    assert count == 1
    assert output == "GET /collect?q=[REDACTED:secret_url]&n=1 HTTP/1.1"


def test_a_partly_encoded_secret_with_plus_for_space_is_redacted() -> None:
    """Failed on main before percent-decoding: a value with some characters escaped (here the
    letters, in mixed case) and its spaces written as ``+`` was not one of the known forms."""
    secret = "correct horse battery staple"
    encoded = "%63orrect+h%6Frse+%62attery+staple"
    output, count = LeakScanner([secret]).scan_text(f"form: pw={encoded}; done")
    assert (output, count) == ("form: pw=[REDACTED:secret_url]; done", 1)


def test_a_percent_encoded_credential_shape_is_redacted() -> None:
    """Failed on main before percent-decoding: shapes (a GitHub token here) were matched only on
    the raw text, so escaping the underscore hid a token no store holds."""
    token = "ghp_" + "a1B2" * 9
    encoded = token.replace("_", "%5f")
    output, count = LeakScanner([]).scan_text(f"url=https://x.example/?t={encoded}")
    assert count == 1 and "a1B2a1B2" not in output and "[REDACTED:github_token]" in output


# -- 19: the audit chain without a key ------------------------------------------------------------


def _plain_chain_hash(record_id: int, values: tuple[Any, ...], prev_hash: str) -> str:
    """main's ``_chain_hash``, written out again: all an attacker needs to re-chain a plain log."""
    payload = json.dumps([record_id, prev_hash, *values], separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def _rechain_after_edit(db: Path, record_id: int, reason: str) -> None:
    """Edit one record, then recompute every hash from it on and move the head: a perfect forgery
    of a plain SHA-256 chain."""
    conn = sqlite3.connect(db)
    columns = [row[1] for row in conn.execute("PRAGMA table_info(audit)")]
    fields = columns[1:-2]  # between id and (prev_hash, hash)
    conn.execute("UPDATE audit SET reason = ? WHERE id = ?", (reason, record_id))
    prev = conn.execute("SELECT hash FROM audit WHERE id = ?", (record_id - 1,)).fetchone()
    prev_hash = prev[0] if prev else "0" * 64
    rows = conn.execute(f"SELECT id, {', '.join(fields)} FROM audit WHERE id >= ? ORDER BY id", (record_id,))
    for row in rows.fetchall():
        digest = _plain_chain_hash(row[0], tuple(row[1:]), prev_hash)
        conn.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", (prev_hash, digest, row[0]))
        prev_hash = digest
    conn.execute("UPDATE audit_head SET last_hash = ? WHERE one = 1", (prev_hash,))
    conn.commit()
    conn.close()


async def _calls(home: Path, count: int) -> None:
    async with Pincer.open(home, secret_key=KEY, builtins=False, scripts=False, wasm=False) as pincer:
        await pincer.add_runtime(_echo_runtime())
        for i in range(count):
            assert (await pincer.call(CallRequest(tool="echo", args={"text": f"call {i}"}))).ok


def _echo_runtime() -> FuncRuntime:
    runtime = FuncRuntime()

    async def echo(args: Any, host: Any) -> Any:
        return args.get("text", "")

    runtime.add("echo", echo)
    return runtime


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "pincer.cli", *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )


@pytest.mark.anyio
async def test_an_edited_record_with_a_recomputed_plain_chain_is_detected(tmp_path: Path) -> None:
    """Failed on main before the keyed chain: an attacker with write access to pincer.db edited
    record 3, recomputed every later hash with the public ``_chain_hash`` recipe and moved the
    head, and ``pincer audit verify`` said the chain was intact."""
    await _calls(tmp_path, 5)
    _rechain_after_edit(tmp_path / "pincer.db", 3, "nothing happened here")
    result = _cli(tmp_path, "audit", "verify", "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["ok"] is False and report["record_id"] == 3


@pytest.mark.anyio
@pytest.mark.parametrize("damage", ["deleted", "emptied", "truncated"])
async def test_a_deleted_or_truncated_database_fails_against_a_checkpoint(tmp_path: Path, damage: str) -> None:
    """Failed on main before checkpoints: a deleted database verified as "intact: 0 records", and
    a tail cut together with the head row left no trace at all."""
    await _calls(tmp_path, 4)
    checkpoint = tmp_path / "head.json"
    made = _cli(tmp_path, "audit", "checkpoint", "-o", str(checkpoint), "--json")
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["checkpoint"]["records"] == 4
    assert _cli(tmp_path, "audit", "verify", "--checkpoint", str(checkpoint)).returncode == 0
    db = tmp_path / "pincer.db"
    if damage == "deleted":
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    else:
        conn = sqlite3.connect(db)
        keep = 0 if damage == "emptied" else 2
        last = conn.execute("SELECT hash FROM audit WHERE id = ?", (keep,)).fetchone()
        conn.execute("DELETE FROM audit WHERE id > ?", (keep,))
        conn.execute("UPDATE audit_head SET last_id = ?, last_hash = ?", (keep, last[0] if last else "0" * 64))
        conn.commit()
        conn.close()
        assert _cli(tmp_path, "audit", "verify").returncode == 1  # the head's MAC no longer matches
    result = _cli(tmp_path, "audit", "verify", "--checkpoint", str(checkpoint), "--json")
    report = json.loads(result.stdout)
    assert result.returncode == 1 and report["ok"] is False
    assert "checkpoint" in report["error"]["message"]
    assert not db.exists() if damage == "deleted" else True  # verifying never creates a database


# -- 20: unauthenticated requests and the audit log ----------------------------------------------

FLOOD = 20


@pytest.mark.anyio
async def test_unauthenticated_posts_from_a_foreign_origin_add_no_audit_records(
    pincer_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Failed on main before refusals were counted instead of chained: every POST to
    ``/api/v1/tools/X/call`` without a token and from a foreign Origin (what any web page can
    send) appended a hash-chained audit record: 20 requests, 20 records."""
    async with live_gateway(pincer_home) as live:
        before = len(await live.pincer.audit.records())
        with caplog.at_level(logging.WARNING, logger="pincer.gateway"):
            async with live.http(headers={"Origin": "http://evil.example"}) as http:
                for i in range(FLOOD):
                    response = await http.post("/api/v1/tools/say/call", json={"args": {"text": f"{i}"}})
                    assert response.status_code == 403
                    assert response.json()["error"]["code"] == "foreign_origin"
                async with live.http(headers=live.headers) as main:
                    metrics = (await main.get("/api/v1/metrics")).json()
        assert len(await live.pincer.audit.records()) == before
        assert await live.pincer.audit.verify() == before
    refused = metrics["gateway"]["refused_unauthenticated"]
    assert refused["total"] == FLOOD and refused["by_code"] == {"foreign_origin": FLOOD}
    # Logged, but not once per request: one line per address, then a count of the rest.
    lines = [r for r in caplog.records if "refused" in r.getMessage() and r.levelno == logging.WARNING]
    assert 1 <= len(lines) < FLOOD
    assert "127.0.0.1" in lines[0].getMessage() and "foreign_origin" in lines[0].getMessage()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ({"Authorization": "Bearer wrong-token"}, 401, "unauthorized"),
        ({}, 401, "unauthorized"),
        ({"Host": "evil.example"}, 421, "foreign_host"),
        ({"Origin": "http://evil.example"}, 403, "foreign_origin"),
    ],
)
async def test_the_front_door_still_refuses_and_records_nothing(
    pincer_home: Path, headers: dict[str, str], status: int, code: str
) -> None:
    """The rules that held on main still hold (wrong token 401, foreign Host 421, foreign Origin
    403), over REST and MCP, and none of these unauthenticated refusals is an audit record."""
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "say", "arguments": {"text": "x"}}}
    mcp_headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}
    async with live_gateway(pincer_home) as live:
        async with live.http(headers=headers) as http:
            rest = await http.post("/api/v1/tools/say/call", json={"args": {"text": "x"}})
            mcp = await http.post("/mcp", json=rpc, headers=mcp_headers)
        assert rest.status_code == status and rest.json()["error"]["code"] == code
        assert mcp.status_code == status and mcp.json()["error"]["data"]["code"] == code
        assert await live.pincer.audit.records() == []
