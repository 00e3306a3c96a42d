"""People and roles on every path of docs/acts.md's table, through a real ``pincer serve``:
each person signs in or calls with their own personal access token, and what their roles do not
hold is refused on REST, the dashboard and MCP, with nothing recorded; what they may do is
recorded as theirs. Attack first: a viewer cannot approve, an approver of one tool cannot approve
another, an operator cannot answer, a revoked or expired token is no one's, and a token of one
person cannot answer as another."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.acts.support import answered_over_rest, audit_rows, last_id, rows_after
from tests.acts.test_gateway_acts import catalog, waiting  # noqa: F401 - fixtures
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import WAIT_S, csrf_of, pincer_cli, sign_in
from tests.hub.conftest import hub_server, publisher  # noqa: F401 - fixtures

WRITE_ARGS = json.dumps({"path": "a.txt", "content": "hello"})
CALL_TIMEOUT_S = 120.0


def add_person(home: Path, name: str, *roles: str) -> str:
    """``pincer people add NAME --role ...`` and a token for them (printed once, by the CLI)."""
    added = pincer_cli(home, "people", "add", name, *(a for r in roles for a in ("--role", r)))
    assert added.returncode == 0, added.stderr
    made = pincer_cli(home, "people", "token", name, "--json")
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["token"])


@pytest.fixture
def team(pincer_home: Path) -> dict[str, str]:
    return {
        "vera": add_person(pincer_home, "vera", "viewer"),
        "gina": add_person(pincer_home, "gina", "approver:tool=github_*"),
        "olga": add_person(pincer_home, "olga", "operator"),
        "wes": add_person(pincer_home, "wes", "approver:tool=write_*"),
    }


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_over_rest_only_an_approver_whose_scope_holds_the_approval_answers_it_and_the_record_names_them(
    pincer_home: Path, team: dict[str, str], waiting: tuple[subprocess.Popen[str], dict[str, Any]]  # noqa: F811 - the fixture
) -> None:
    caller, pending = waiting
    url = f"/approvals/{pending['id']}"
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as http:
        before = last_id(pincer_home)
        # A viewer and an operator answer nothing; an approver of github tools not a write_file.
        for name in ("vera", "olga", "gina"):
            refused = http.post(url, json={"decision": "allow_once"}, headers=_bearer(team[name]))
            assert refused.status_code == 403, (name, refused.text)
            assert team[name] not in refused.text
        # A person's token cannot answer as another: the body names no one, and extra fields are refused.
        smuggled = http.post(url, json={"decision": "allow_once", "person": "wes"}, headers=_bearer(team["vera"]))
        assert smuggled.status_code in (400, 422), smuggled.text
        assert rows_after(pincer_home, before) == []
        assert http.get(url, headers=_bearer(team["vera"])).json()["status"] == "pending"
        # The viewer still reads: the approval is listed for them.
        assert [a["id"] for a in http.get("/approvals", headers=_bearer(team["vera"])).json()["approvals"]] == [pending["id"]]
        answered = http.post(url, json={"decision": "allow_once"}, headers=_bearer(team["wes"]))
        assert answered.status_code == 200, answered.text
        assert answered.json()["answered_by"] == "rest:wes"
    out, _ = caller.communicate(timeout=CALL_TIMEOUT_S)
    assert json.loads(out)["ok"] is True
    rows = rows_after(pincer_home, before)
    (answer,) = [r for r in rows if r["kind"] == "approval"]
    assert (answer["caller"], answer["person"], answer["session"]) == ("rest:wes", "wes", "main")
    (call,) = [r for r in rows if r["kind"] == "call"]
    assert (call["tool"], call["approval_id"], call["approved_by"], call["person"]) == ("write_file", pending["id"], "rest:wes", None)
    assert pincer_cli(pincer_home, "audit", "verify").returncode == 0


def test_a_revoked_an_expired_and_a_removed_persons_token_are_refused_at_the_door(pincer_home: Path, team: dict[str, str]) -> None:
    tokens = json.loads(pincer_cli(pincer_home, "people", "tokens", "--json").stdout)
    ids = {t["person"]: t["id"] for t in tokens}
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as http:
        for name in ("vera", "gina", "olga"):
            assert http.get("/approvals", headers=_bearer(team[name])).status_code == 200
        assert pincer_cli(pincer_home, "people", "revoke", ids["vera"]).returncode == 0
        with sqlite3.connect(pincer_home / "pincer.db") as conn:  # gina's token ran out a second ago
            conn.execute("UPDATE person_tokens SET expires_at = ? WHERE id = ?", (time.time() - 1, ids["gina"]))
        assert pincer_cli(pincer_home, "people", "remove", "olga").returncode == 0
        for name in ("vera", "gina", "olga"):
            refused = http.get("/approvals", headers=_bearer(team[name]))
            assert refused.status_code == 401, (name, refused.text)
            assert team[name] not in refused.text
        assert http.get("/approvals", headers=_bearer(team["wes"])).status_code == 200
    listed = {t["id"]: t for t in json.loads(pincer_cli(pincer_home, "people", "tokens", "--json").stdout)}
    assert listed[ids["vera"]]["revoked_at"] is not None and listed[ids["wes"]]["last_used"] is not None
    assert ids["olga"] not in listed
    assert not any(team[n] in json.dumps(audit_rows(pincer_home)) for n in team)


def test_on_the_dashboard_a_person_signs_in_with_their_token_and_their_roles_decide(
    pincer_home: Path, team: dict[str, str], waiting: tuple[subprocess.Popen[str], dict[str, Any]]  # noqa: F811 - the fixture
) -> None:
    caller, pending = waiting
    grant = {"tool": "echo", "mode": "allow", "effects": "network"}
    with pincer_serve(pincer_home) as server:
        base = server.info["url"]
        with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as vera, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as olga:  # fmt: skip
            assert sign_in(vera, team["vera"]).status_code == 303
            assert sign_in(olga, team["olga"]).status_code == 303
            before = last_id(pincer_home)
            page = vera.get("/ui/approvals").text
            refused = vera.post(f"/ui/approvals/{pending['id']}", data={"decision": "allow_once", "csrf_token": csrf_of(page)})
            assert refused.status_code == 403, refused.text
            page = olga.get("/ui/approvals").text
            refused = olga.post(f"/ui/approvals/{pending['id']}", data={"decision": "deny", "csrf_token": csrf_of(page)})
            assert refused.status_code == 403, refused.text
            grants = vera.get("/ui/grants").text
            refused = vera.post("/ui/grants", data={**grant, "csrf_token": csrf_of(grants)})
            assert refused.status_code == 403 and "may not edit grants" in refused.text
            assert rows_after(pincer_home, before) == []
            grants = olga.get("/ui/grants").text
            added = olga.post("/ui/grants", data={**grant, "csrf_token": csrf_of(grants)})
            assert added.status_code == 303, added.text
        with httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as http:
            assert http.post(f"/approvals/{pending['id']}", json={"decision": "deny"}, headers=_bearer(team["wes"])).status_code == 200
    caller.communicate(timeout=CALL_TIMEOUT_S)
    (act,) = [r for r in rows_after(pincer_home, before) if r["kind"] == "grant"]
    assert (act["caller"], act["person"], act["outcome"]) == ("ui:olga", "olga", "added")


@pytest.mark.anyio
async def test_over_mcp_a_viewer_cannot_install_and_an_operators_install_names_them_and_its_approver(catalog: Path) -> None:  # noqa: F811
    vera, olga, wes = (add_person(catalog, "vera", "viewer"), add_person(catalog, "olga", "operator"),
                       add_person(catalog, "wes", "approver:tool=skills_*"))  # fmt: skip
    with pincer_serve(catalog) as server:
        before = last_id(catalog)
        async with httpx2.AsyncClient(headers=_bearer(vera), trust_env=False) as transport, \
                Client(streamable_http_client(server.info["mcp_url"], http_client=transport), mode="legacy") as client:  # fmt: skip
            refused = await client.call_tool("skills_install", {"key": "meeting-notes"})
        assert refused.is_error and "vera may not call skills_install" in str(refused.content)
        assert [r for r in rows_after(catalog, before) if r["kind"] != "call"] == []
        async with httpx2.AsyncClient(headers=_bearer(olga), trust_env=False) as transport, \
                Client(streamable_http_client(server.info["mcp_url"], http_client=transport), mode="legacy") as client, \
                httpx.AsyncClient(base_url=server.info["api_url"], headers=_bearer(wes), trust_env=False, timeout=WAIT_S) as rest:  # fmt: skip
            result, approval = await answered_over_rest(lambda: client.call_tool("skills_install", {"key": "meeting-notes"}), rest)
    assert not result.is_error, result
    rows = rows_after(catalog, before)
    (denied,) = [r for r in rows if r["kind"] == "call" and r["outcome"] == "denied"]
    assert (denied["person"], denied["tool"]) == ("vera", "skills_install")
    (call,) = [r for r in rows if r["kind"] == "call" and r["outcome"] == "ok"]
    assert (call["person"], call["approved_by"], call["approval_id"]) == ("olga", "rest:wes", approval["id"])
    (answer,) = [r for r in rows if r["kind"] == "approval"]
    assert (answer["caller"], answer["person"]) == ("rest:wes", "wes")


def test_the_audit_filters_by_person_over_rest_and_on_the_dashboard(
    pincer_home: Path, team: dict[str, str], waiting: tuple[subprocess.Popen[str], dict[str, Any]]  # noqa: F811 - the fixture
) -> None:
    caller, pending = waiting
    with pincer_serve(pincer_home) as server:
        with httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as http:
            assert http.post(f"/approvals/{pending['id']}", json={"decision": "allow_once"}, headers=_bearer(team["wes"])).status_code == 200
            caller.communicate(timeout=CALL_TIMEOUT_S)
            records = http.get("/audit", params={"person": "wes"}, headers=_bearer(team["vera"])).json()["records"]
            assert sorted((r["kind"], r["tool"]) for r in records) == [("approval", "write_file"), ("call", "write_file")]
            assert http.get("/audit", params={"person": "gina"}, headers=_bearer(team["vera"])).json()["records"] == []
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as ui:
            assert sign_in(ui, team["vera"]).status_code == 303
            page = ui.get("/ui/audit", params={"person": "wes"}).text
            assert page.count('data-label="Record"') == 2 and "approved by rest:wes" in page
            assert ui.get("/ui/audit", params={"person": "olga"}).text.count('data-label="Record"') == 0
