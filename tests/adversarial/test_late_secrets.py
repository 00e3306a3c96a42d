"""A value stored as a secret only after a call recorded it: every view of stored history masks it.

The call chain scans a call's output before it records the call, so an argument that becomes a
secret later (``pincer secrets set NAME X`` after a call with ``X``) sits in the stored audit record
and approval request as it was. The dashboard masked it at display; the CLI and REST views printed
it whole. Redaction is at display only: the stored rows and the audit chain's MACs are untouched.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.cli.test_cli import CLI_TIMEOUT_S, PINCER
from tests.gateway.conftest import SECRET_KEY, live_gateway

# Matches no secret pattern: only the secret store makes it a secret.
LATE = "plain-words-that-became-a-secret-7f3a9c"
MARKER = "[REDACTED:"
APPROVAL_TIMEOUT_CONFIG = "[approvals]\ntimeout_s = 0.5\n"


def pincer(home: Path, *args: str, stdin: str | None = None, key: bytes | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    if key is not None:
        env["PINCER_SECRET_KEY"] = key.hex()
    return subprocess.run(
        [*PINCER, *args], input=stdin, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )


def _ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    return result


def _stored_args(home: Path) -> list[str]:
    conn = sqlite3.connect(home / "pincer.db")
    try:
        return [row[0] for row in conn.execute("SELECT args FROM audit ORDER BY id")]
    finally:
        conn.close()


def test_cli_audit_list_masks_a_secret_stored_after_the_call(tmp_path: Path) -> None:
    """Before the fix `pincer audit list --json` printed the record's args with LATE whole."""
    _ok(pincer(tmp_path, "tools", "call", "echo", "--args", json.dumps({"text": LATE})))
    _ok(pincer(tmp_path, "secrets", "set", "late_token", stdin=LATE + "\n"))

    listed = _ok(pincer(tmp_path, "audit", "list", "--json"))
    human = _ok(pincer(tmp_path, "audit", "list"))
    assert LATE not in listed.stdout + listed.stderr and LATE not in human.stdout + human.stderr
    records = json.loads(listed.stdout)
    assert [r["args"] for r in records if r["tool"] == "echo"] == [{"text": "[REDACTED:secret]"}]

    verified = _ok(pincer(tmp_path, "audit", "verify", "--json"))
    assert json.loads(verified.stdout)["ok"] is True
    assert any(LATE in args for args in _stored_args(tmp_path))  # stored as recorded, masked only when shown


@pytest.mark.anyio
async def test_rest_and_cli_mask_a_late_secret_in_audit_and_approvals(pincer_home: Path) -> None:
    """Before the fix `GET /api/v1/audit`, `GET /api/v1/approvals[/{id}]` and `pincer approvals
    list/show` printed LATE (an argument of a recorded call and of an expired approval request)."""
    async with live_gateway(pincer_home, config=APPROVAL_TIMEOUT_CONFIG) as live:
        async with live.http(headers=live.headers) as http:
            said = await http.post("/api/v1/tools/say/call", json={"args": {"text": LATE}})
            asked = await http.post("/api/v1/tools/write_note/call", json={"args": {"text": LATE}})
            assert said.status_code == 200 and asked.status_code == 408
            live.pincer.secrets.set("late_token", LATE)
            audit = await http.get("/api/v1/audit")
            approvals = await http.get("/api/v1/approvals", params={"status": "all"})
            approval_id = approvals.json()["approvals"][0]["id"]
            one = await http.get(f"/api/v1/approvals/{approval_id}")
            verified = await http.get("/api/v1/audit/verify")
    for response in (audit, approvals, one):
        assert response.status_code == 200
        assert LATE not in response.text and MARKER in response.text
    assert verified.json()["ok"] is True

    listed = _ok(pincer(pincer_home, "approvals", "list", "--all", "--json", key=SECRET_KEY))
    shown = _ok(pincer(pincer_home, "approvals", "show", approval_id, "--json", key=SECRET_KEY))
    human = _ok(pincer(pincer_home, "approvals", "show", approval_id, key=SECRET_KEY))
    for result in (listed, shown, human):
        assert LATE not in result.stdout + result.stderr
    assert json.loads(shown.stdout)["args"] == {"text": "[REDACTED:secret]"}
    assert _ok(pincer(pincer_home, "audit", "verify", "--json", key=SECRET_KEY)).returncode == 0
    assert any(LATE in args for args in _stored_args(pincer_home))


@pytest.mark.anyio
async def test_run_transcripts_and_events_mask_a_late_secret(tmp_path: Path) -> None:
    """Before the fix `GET /api/v1/runs/{id}`, its events, `GET /api/v1/runs` and `pincer runs
    show/list` printed LATE (the run's message, its tool call's arguments, the model's text)."""
    from pincer.demo.model_server import ScriptedCall, Turn, serve_models
    from tests.gateway.test_runs import RUN_TIMEOUT_S, _config, _events

    home = tmp_path / "home"
    script = [Turn(text=f"Saying {LATE}. ", calls=(ScriptedCall(name="say", arguments={"text": LATE}),)), Turn(text="Said.")]
    with serve_models(script) as server:
        async with live_gateway(home, config=_config(server)) as live:
            async with live.http(headers=live.headers) as http:
                started = await http.post("/api/v1/runs", json={"message": f"say {LATE}"})
                assert started.status_code == 202, started.text
                run_id = started.json()["run_id"]
                with anyio.fail_after(RUN_TIMEOUT_S):
                    assert (await _events(live, run_id))[-1]["status"] == "done"
                live.pincer.secrets.set("late_token", LATE)
                got = await http.get(f"/api/v1/runs/{run_id}")
                listed = await http.get("/api/v1/runs")
                with anyio.fail_after(RUN_TIMEOUT_S):
                    replayed = await _events(live, run_id)
    assert got.status_code == 200 and LATE not in got.text and MARKER in got.text
    assert listed.status_code == 200 and LATE not in listed.text
    assert replayed and LATE not in json.dumps(replayed) and MARKER in json.dumps(replayed)

    shown = _ok(pincer(home, "runs", "show", run_id, "--json", key=SECRET_KEY))
    human = _ok(pincer(home, "runs", "show", run_id, key=SECRET_KEY))
    rows = _ok(pincer(home, "runs", "list", "--json", key=SECRET_KEY))
    for result in (shown, human, rows):
        assert LATE not in result.stdout + result.stderr
    assert MARKER in shown.stdout


def test_cron_and_trigger_lists_mask_a_late_secret(tmp_path: Path) -> None:
    """Before the fix `pincer cron list`, `pincer cron pause` and `pincer triggers list` printed
    LATE, the message of a job stored before LATE became a secret."""
    _ok(pincer(tmp_path, "cron", "add", "ping", "--every", "30m", "--message", f"check {LATE}"))
    _ok(pincer(tmp_path, "secrets", "set", "late_token", stdin=LATE + "\n"))

    listed = _ok(pincer(tmp_path, "cron", "list", "--json"))
    human = _ok(pincer(tmp_path, "cron", "list"))
    paused = _ok(pincer(tmp_path, "cron", "pause", "ping", "--json"))
    triggers = _ok(pincer(tmp_path, "triggers", "list", "--json"))
    for result in (listed, human, paused, triggers):
        assert LATE not in result.stdout + result.stderr
    assert json.loads(listed.stdout)["jobs"][0]["message"] == "check [REDACTED:secret]"
    assert MARKER in triggers.stdout


@pytest.mark.anyio
async def test_a_replayed_webhook_answer_masks_a_late_secret(pincer_home: Path) -> None:
    """Before the fix a delivery sent again got the first delivery's stored answer with LATE whole
    (the pull request title its refused parameter mapping quoted)."""
    from tests.triggers.conftest import live_gateway as hooks_gateway
    from tests.triggers.test_webhooks import CONFIG, PR_OPENED, SECRETS, _github

    config = CONFIG.replace('params = { pr_url = "{{ payload.pull_request.html_url }}" }',
                            'params = { focus = "{{ payload.pull_request.title }}" }')  # fmt: skip
    body = json.dumps({**PR_OPENED, "pull_request": {**PR_OPENED["pull_request"], "title": LATE}}).encode()
    async with hooks_gateway(pincer_home, config=config, secrets=SECRETS) as live, live.http() as http:
        first = await http.post("/hooks/gh", content=body, headers=_github(body, delivery="d-late"))
        assert first.status_code == 422 and LATE in first.text  # the sender's own text, before it was a secret
        live.pincer.secrets.set("late_token", LATE)
        again = await http.post("/hooks/gh", content=body, headers=_github(body, delivery="d-late"))
    assert again.status_code == 200 and again.json()["original_status"] == 422
    assert LATE not in again.text and MARKER in again.text


@pytest.mark.anyio
async def test_a_fresh_webhook_answer_masks_a_stored_secret_and_keeps_the_run_ids_it_made(pincer_home: Path) -> None:
    """A fresh answer's run and firing ids are left out of the leak scan (they are random hex pincer
    just made); everything else in it is still masked: here the sender's own delivery id, which
    holds a value stored as a secret before the delivery came."""
    import re

    from tests.triggers.conftest import live_gateway as hooks_gateway
    from tests.triggers.test_webhooks import CONFIG, SECRETS, _standard

    body = json.dumps({"type": "invoice.paid", "data": {"customer": "ACME"}}).encode()
    async with hooks_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        live.pincer.secrets.set("late_token", LATE)
        answer = await http.post("/hooks/std", content=body, headers=_standard(body, msg_id=f"msg_{LATE}"))
        await live.pincer.triggers.settle()
        data = answer.json()
        assert answer.status_code == 202 and LATE not in answer.text and data["delivery"].startswith("msg_" + MARKER)
        (run,) = data["runs"]
        assert data["run_id"] == run["run_id"] and re.fullmatch(r"run-[0-9a-f]{32}", run["run_id"])
        assert re.fullmatch(r"fire-[0-9a-f]{32}", run["firing_id"])
        firing = await live.pincer.triggers.store.firing(run["firing_id"])
        assert firing is not None and firing.run_id == run["run_id"]
        assert [request.run_id for request in live.starter.requests] == [run["run_id"]]
