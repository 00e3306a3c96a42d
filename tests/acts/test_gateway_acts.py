"""The acts of docs/acts.md that go through a running gateway: REST, the dashboard (form posts
with its CSRF token), MCP, and the gateway's own (a reloaded config.toml). Each is exactly one
audit record of its kind, naming who: ``rest:<session>``, ``ui:<session>``, ``mcp:<session>``,
``config:<host>``. The gateway is a real ``pincer serve`` on 127.0.0.1:0."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pincer.hub.trust import TrustStore
from tests.acts.support import answered_over_rest, audit_rows, last_id, only_act, rows_after
from tests.cli.pending import wait_for_pending
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import WAIT_S, csrf_of, pincer_cli, sign_in, wait_until, waiting_call
from tests.hub.conftest import Publisher, RunningHub, hub_server, publisher, write_skill  # noqa: F401 - fixtures

WRITE_ARGS = json.dumps({"path": "a.txt", "content": "hello"})
CALL_TIMEOUT_S = 120.0


@pytest.fixture
def waiting(pincer_home: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """A ``pincer tools call write_file`` waiting on its approval, and that approval."""
    caller = waiting_call(pincer_home, "write_file", WRITE_ARGS)
    try:
        (pending,) = wait_for_pending(pincer_home, caller, lambda h: pincer_cli(h, "approvals", "list", "--json"))
        yield caller, pending
    finally:
        if caller.poll() is None:
            caller.kill()
        caller.communicate(timeout=CALL_TIMEOUT_S)


def _one_answer(home: Path, before: int, approval_id: str) -> dict[str, Any]:
    answers = [r for r in rows_after(home, before) if r["kind"] == "approval"]
    assert len(answers) == 1, answers
    assert answers[0]["approval_id"] == approval_id
    return answers[0]


def test_answering_an_approval_over_rest_writes_one_record_naming_the_session(
    pincer_home: Path, waiting: tuple[subprocess.Popen[str], dict[str, Any]]
) -> None:
    caller, pending = waiting
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as http:
        before = last_id(pincer_home)
        answered = http.post(f"/approvals/{pending['id']}", json={"decision": "deny"},
                             headers={"Authorization": f"Bearer {server.token}"})  # fmt: skip
        assert answered.status_code == 200, answered.text
    caller.communicate(timeout=CALL_TIMEOUT_S)
    answer = _one_answer(pincer_home, before, pending["id"])
    assert (answer["caller"], answer["decision"], answer["outcome"]) == ("rest:main", "deny", "answered")


def test_answering_an_approval_from_the_dashboard_writes_one_record_naming_the_sign_in(
    pincer_home: Path, waiting: tuple[subprocess.Popen[str], dict[str, Any]]
) -> None:
    caller, pending = waiting
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
        sign_in(http, server.token)
        page = http.get("/ui/approvals").text
        before = last_id(pincer_home)
        refused = http.post(f"/ui/approvals/{pending['id']}", data={"decision": "allow_once"})  # no CSRF token
        assert refused.status_code == 403 and rows_after(pincer_home, before) == []
        answered = http.post(f"/ui/approvals/{pending['id']}", data={"decision": "allow_once", "csrf_token": csrf_of(page)})
        assert answered.status_code == 303, answered.text
    caller.communicate(timeout=CALL_TIMEOUT_S)
    answer = _one_answer(pincer_home, before, pending["id"])
    assert (answer["caller"], answer["decision"]) == ("ui:main", "allow_once")


def _config_records(home: Path) -> list[dict[str, Any]]:
    return [r for r in audit_rows(home) if r["kind"] == "config"]


def test_a_config_reload_that_changes_policy_is_one_record_by_the_gateway(pincer_home: Path) -> None:
    config = pincer_home / "config.toml"
    config.write_text("[approvals]\ntimeout_s = 60\n")
    with pincer_serve(pincer_home) as server:
        assert _config_records(pincer_home) == []  # starting is no change
        config.write_text('[approvals]\ntimeout_s = 60\n\n[[grants]]\ntool = "write_file"\ndefault = "allow"\n')
        (record,) = wait_until("the reload's record", lambda: _config_records(pincer_home))  # type: ignore[misc]
        # The grant is in force for the gateway now: the write runs without asking.
        called = httpx.post(f"{server.info['api_url']}/tools/write_file/call", json={"args": json.loads(WRITE_ARGS)},
                            headers={"Authorization": f"Bearer {server.token}"}, timeout=WAIT_S, trust_env=False)  # fmt: skip
        assert called.status_code == 200, called.text
    assert (record["tool"], record["outcome"], record["caller"], record["session"]) == (
        "config.toml", "applied", f"config:{socket.gethostname()}", "config")  # fmt: skip
    args = json.loads(record["args"])
    assert args["changed"] == ["grants"] and len(args["sha256"]) == 64
    assert json.loads(record["effects"]) == ["modify_approval"]
    assert len(_config_records(pincer_home)) == 1


@pytest.fixture
def catalog(tmp_path: Path, hub_server: RunningHub, publisher: Publisher, pincer_home: Path) -> Path:  # noqa: F811
    """``pincer_home`` with a hub source that offers one skill, signed by a trusted publisher."""
    publisher.publish_path(write_skill(tmp_path / "src", "meeting-notes", description="Takes notes of meetings"))
    (pincer_home / "config.toml").write_text(f'[[hub.sources]]\nname = "team"\nurl = "{hub_server.url}"\n')
    TrustStore(pincer_home).add("alice", publisher.key.public)
    return pincer_home


@pytest.mark.anyio
async def test_an_mcp_client_installing_through_skills_install_is_one_record_naming_its_session(catalog: Path) -> None:
    """The MCP path of a hub install: the call asks, a person answers over REST, and the install
    is recorded once, as the MCP session's act, with the approval that let it."""
    with pincer_serve(catalog) as server:
        headers = {"Authorization": f"Bearer {server.token}"}
        async with httpx2.AsyncClient(headers=headers, trust_env=False) as transport, \
                Client(streamable_http_client(server.info["mcp_url"], http_client=transport), mode="legacy") as client, \
                httpx.AsyncClient(base_url=server.info["api_url"], headers=headers, trust_env=False, timeout=WAIT_S) as rest:  # fmt: skip
            result, approval = await answered_over_rest(lambda: client.call_tool("skills_install", {"key": "meeting-notes"}), rest)
    assert not result.is_error, result
    hub = [r for r in audit_rows(catalog) if r["kind"] == "hub"]
    assert [(r["tool"], r["outcome"], r["caller"], r["approval_id"]) for r in hub] == [
        ("skills/meeting-notes", "installed", "mcp:main", approval["id"])]  # fmt: skip
    answers = [r for r in audit_rows(catalog) if r["kind"] == "approval"]
    assert [(r["caller"], r["approval_id"]) for r in answers] == [("rest:main", approval["id"])]


def test_the_audit_chain_holds_every_act_record(pincer_home: Path, tmp_path: Path) -> None:
    """The act records go through the one append path: the chain verifies, and an edited act
    record is named by `pincer audit verify`."""
    for args, stdin in ((("secrets", "set", "api_token"), "value-0123456789abcdef\n"), (("token", "new", "--session", "x"), None),
                        (("secrets", "rm", "api_token"), None)):  # fmt: skip
        assert pincer_cli(pincer_home, *args, stdin=stdin).returncode == 0
    verified = pincer_cli(pincer_home, "audit", "verify", "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["records"] == 3, verified.stdout
    record = only_act([r for r in audit_rows(pincer_home) if r["kind"] == "token"])
    with sqlite3.connect(pincer_home / "pincer.db") as conn:
        conn.execute("UPDATE audit SET caller = 'cli:someone-else' WHERE id = ?", (record["id"],))
    broken = pincer_cli(pincer_home, "audit", "verify", "--json")
    assert broken.returncode == 1 and json.loads(broken.stdout)["record_id"] == record["id"]
