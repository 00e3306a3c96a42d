"""A person's own personal access tokens on the dashboard (``/ui/tokens``), through a real
``pincer serve``: made (shown once), listed with their last use, revoked, each only by the
person whose they are. Attack first: a person cannot list or revoke another's token, cannot
mint a token with a role they do not hold nor for a session they are not signed in to, and the
token's value is on the one page that made it: never on a later page, in a file of the home (the
database, logs), the server's output or an audit record (those name its id)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from playwright.sync_api import Browser

from tests.acts.support import audit_rows, last_id, rows_after
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import AGENT_TOKEN, WAIT_S, browser, csrf_of, dashboard_config, pincer_cli, sign_in  # noqa: F401 - browser: a fixture
from tests.people.test_people_paths import add_person

_VALUE = re.compile(r'value="(pcp_[A-Za-z0-9_\-]+)"')


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _token_ids(home: Path, person: str) -> list[str]:
    listed = json.loads(pincer_cli(home, "people", "tokens", person, "--json").stdout)
    return [t["id"] for t in listed]


def _home_holds(home: Path, value: str) -> list[str]:
    needle = value.encode()
    return [str(p) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_person_makes_lists_and_revokes_only_their_own_tokens_and_sees_the_value_once(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config())
    vera_cli = add_person(pincer_home, "vera", "viewer")
    gina_cli = add_person(pincer_home, "gina", "approver:tool=github_*")
    (gina_id,) = _token_ids(pincer_home, "gina")
    (vera_cli_id,) = _token_ids(pincer_home, "vera")
    made = pincer_cli(pincer_home, "people", "token", "vera", "--session", "agent", "--json")
    vera_agent = json.loads(made.stdout)["token"]
    vera_before = set(_token_ids(pincer_home, "vera"))
    with pincer_serve(pincer_home) as server:
        base = server.info["url"]
        with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as vera, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as gina, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as agent_vera, \
                httpx.Client(base_url=server.info["api_url"], trust_env=False, timeout=WAIT_S) as api:  # fmt: skip
            assert sign_in(vera, vera_cli).status_code == 303
            assert sign_in(gina, gina_cli).status_code == 303
            assert sign_in(agent_vera, vera_agent).status_code == 303
            page = vera.get("/ui/tokens")
            assert page.status_code == 200 and vera_cli_id in page.text
            assert gina_id not in page.text, "vera's token page lists gina's token"
            csrf = csrf_of(page.text)
            before = last_id(pincer_home)

            # No CSRF token: refused, nothing made.
            assert vera.post("/ui/tokens", data={"roles": "viewer"}).status_code == 403
            # A role she does not hold, alone or beside one she does: refused, nothing made or recorded.
            for roles in (["admin"], ["viewer", "operator"], ["approver"]):
                refused = vera.post("/ui/tokens", data={"csrf_token": csrf, "roles": roles})
                assert refused.status_code == 400 and "does not hold" in refused.text, (roles, refused.text)
                assert not _VALUE.search(refused.text)
            # gina's scoped approver role covers a narrower one, not a wider one.
            gina_csrf = csrf_of(gina.get("/ui/tokens").text)
            assert gina.post("/ui/tokens", data={"csrf_token": gina_csrf, "roles": "approver"}).status_code == 400
            narrower = gina.post("/ui/tokens", data={"csrf_token": gina_csrf, "roles": "approver:tool=github_issue"})
            assert narrower.status_code == 200, narrower.text
            # Signed in to the non-main session agent, vera cannot make a token of the main session.
            agent_page = agent_vera.get("/ui/tokens").text
            refused = agent_vera.post("/ui/tokens", data={"csrf_token": csrf_of(agent_page), "session": "main"})
            assert refused.status_code == 403 and not _VALUE.search(refused.text), refused.text
            assert [r["outcome"] for r in rows_after(pincer_home, before)] == ["token-created"]  # gina's narrower one

            # vera makes a token: its value is on this page, once.
            shown = vera.post("/ui/tokens", data={"csrf_token": csrf, "roles": "viewer", "expires": "7d"})
            assert shown.status_code == 200, shown.text
            assert "no-store" in shown.headers["cache-control"]
            found = _VALUE.search(shown.text)
            assert found, "the new token's value is not on the page that made it"
            value = found.group(1)
            (new_id,) = set(_token_ids(pincer_home, "vera")) - vera_before
            assert api.get("/approvals", headers=_bearer(value)).status_code == 200
            again = vera.get("/ui/tokens").text
            assert value not in again and new_id in again
            listed = json.loads(pincer_cli(pincer_home, "people", "tokens", "vera", "--json").stdout)
            (row,) = [t for t in listed if t["id"] == new_id]
            assert row["roles"] == ["viewer"] and row["session"] == "main" and row["last_used"] is not None
            assert row["expires_at"] is not None

            # Another's token: neither revoked nor told apart from a missing one; it keeps working.
            refused = vera.post(f"/ui/tokens/{gina_id}/revoke", data={"csrf_token": csrf})
            assert refused.status_code == 404 and "no live token" in refused.text, refused.text
            assert api.get("/approvals", headers=_bearer(gina_cli)).status_code == 200
            # Her own: revoked, and refused at the door at once.
            revoked = vera.post(f"/ui/tokens/{new_id}/revoke", data={"csrf_token": csrf})
            assert revoked.status_code == 303, revoked.text
            assert api.get("/approvals", headers=_bearer(value)).status_code == 401
            after = vera.get("/ui/tokens").text
            assert value not in after and "revoked" in after
        server_output = "".join(server.stderr_lines.queue)
    acts = [r for r in rows_after(pincer_home, before) if r["kind"] == "person"]
    assert [(r["outcome"], r["caller"], r["person"]) for r in acts] == [
        ("token-created", "ui:gina", "gina"), ("token-created", "ui:vera", "vera"), ("token-revoked", "ui:vera", "vera")]  # fmt: skip
    assert json.loads(acts[1]["args"])["token_id"] == new_id
    assert value not in json.dumps(audit_rows(pincer_home)) and value not in server_output
    assert _home_holds(pincer_home, value) == []
    assert pincer_cli(pincer_home, "audit", "verify").returncode == 0


def test_a_session_signed_in_with_a_configured_token_has_no_personal_tokens(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config())
    add_person(pincer_home, "vera", "viewer")
    (vera_id,) = _token_ids(pincer_home, "vera")
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as agent:
        assert sign_in(agent, AGENT_TOKEN).status_code == 303
        page = agent.get("/ui/tokens")
        assert "personal access tokens are a person" in page.text and vera_id not in page.text
        before = last_id(pincer_home)
        refused = agent.post("/ui/tokens", data={"csrf_token": csrf_of(page.text)})
        assert refused.status_code == 403 and not _VALUE.search(refused.text)
        assert agent.post(f"/ui/tokens/{vera_id}/revoke", data={"csrf_token": csrf_of(page.text)}).status_code == 403
    assert rows_after(pincer_home, before) == []
    assert [t["revoked_at"] for t in json.loads(pincer_cli(pincer_home, "people", "tokens", "--json").stdout)] == [None]


def test_the_token_and_people_pages_work_in_chromium_without_javascript_and_break_no_csp(pincer_home: Path, browser: Browser) -> None:  # noqa: F811
    ann_cli = add_person(pincer_home, "ann", "admin")
    with pincer_serve(pincer_home) as server:
        url = server.info["url"]
        errors: list[str] = []  # console errors (a CSP violation, a script error), both passes
        for javascript in (False, True):
            context = browser.new_context(java_script_enabled=javascript)
            context.set_default_timeout(WAIT_S * 1000)
            try:
                page = context.new_page()
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(url + "/ui/login")
                page.get_by_label("Token").fill(ann_cli)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(url + "/ui/")
                page.get_by_role("link", name="Tokens").click()
                page.get_by_label("admin").check()
                page.get_by_label("Expires").fill("30d")
                page.get_by_role("button", name="Make token").click()
                value = page.get_by_label("the new token, shown once").input_value()
                assert value.startswith("pcp_")
                page.goto(url + "/ui/tokens")  # later: listed, its value nowhere
                assert value not in page.content() and page.get_by_role("button", name="Revoke").count() == 2 + javascript
                page.get_by_role("link", name="People").click()
                adding = page.get_by_role("form", name="Add a person")
                adding.get_by_label("Name").fill(f"pat{int(javascript)}")
                adding.get_by_label("Roles").fill("viewer")
                page.get_by_role("button", name="Add person").click()
                page.wait_for_url(url + "/ui/people?done=added")
                assert page.get_by_role("button", name=f"Remove pat{int(javascript)}").count() == 1
            finally:
                context.close()
        assert not errors, errors
    people = json.loads(pincer_cli(pincer_home, "people", "list", "--json").stdout)
    assert sorted(p["name"] for p in people) == ["ann", "pat0", "pat1"]


def test_a_sign_in_with_a_scoped_token_makes_no_token_wider_than_itself(pincer_home: Path) -> None:
    add_person(pincer_home, "ann", "admin")
    scoped = json.loads(pincer_cli(pincer_home, "people", "token", "ann", "--role", "viewer", "--json").stdout)
    assert scoped["roles"] == ["viewer"]
    earlier = set(_token_ids(pincer_home, "ann"))
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as ui:
        assert sign_in(ui, scoped["token"]).status_code == 303
        assert ui.get("/ui/people").status_code == 403  # a viewer's token of an admin is a viewer's
        page = ui.get("/ui/tokens").text
        before = last_id(pincer_home)
        for roles in (["admin"], ["operator"]):
            refused = ui.post("/ui/tokens", data={"csrf_token": csrf_of(page), "roles": roles})
            assert refused.status_code == 400 and "does not hold" in refused.text and not _VALUE.search(refused.text)
        assert rows_after(pincer_home, before) == []
        made = ui.post("/ui/tokens", data={"csrf_token": csrf_of(page)})  # no role chosen: the sign-in's own
        assert made.status_code == 200 and _VALUE.search(made.text), made.text
    listed = json.loads(pincer_cli(pincer_home, "people", "tokens", "ann", "--json").stdout)
    assert [t["roles"] for t in listed if t["id"] not in earlier] == [["viewer"]]
