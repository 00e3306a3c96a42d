"""The dashboard over plain HTTP (httpx, no browser) against a real ``pincer serve``: the same
flows as the browser tests, so a broken page is told from a broken browser."""

from __future__ import annotations

import html
import json
from pathlib import Path

import httpx

from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import (
    AGENT_TOKEN,
    CLI_TIMEOUT_S,
    SECRET,
    WAIT_S,
    csrf_of,
    dashboard_config,
    pincer_cli,
    sign_in,
    tamper_audit,
    wait_until,
    waiting_call,
)  # fmt: skip

WRITE_ARGS = '{"path": "from-dashboard.txt", "content": "hello"}'


def _client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, trust_env=False, timeout=WAIT_S)


def _pending(home: Path) -> list[dict]:
    return list(json.loads(pincer_cli(home, "approvals", "list", "--json").stdout)["approvals"])


def test_every_page_wants_a_sign_in_and_a_token_gets_a_strict_cookie(dashboard_home: Path) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        for path in ("/ui", "/ui/", "/ui/approvals", "/ui/audit", "/ui/runs", "/ui/tasks", "/ui/tools", "/ui/approvals/events"):
            answer = http.get(path)
            assert answer.status_code == 303, path
            assert answer.headers["location"].startswith("/ui/login") or answer.headers["location"] == "/ui/", path
        form = http.get("/ui/login")
        assert form.status_code == 200 and '<label for="token">Token</label>' in form.text and 'name="token"' in form.text
        policy = form.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "<script>" not in form.text  # no inline script at all
        signed = sign_in(http, server.token)
        assert signed.status_code == 303 and signed.headers["location"] == "/ui/"
        cookie = next(c for c in signed.headers.get_list("set-cookie") if c.startswith("pincer_ui="))
        parts = {p.strip().lower() for p in cookie.split(";")}
        assert "httponly" in parts and "samesite=strict" in parts and "path=/ui" in parts
        assert "secure" not in parts  # plain http here; https sets it
        assert server.token not in cookie
        for path in ("/ui/", "/ui/approvals", "/ui/audit", "/ui/runs", "/ui/tasks", "/ui/tools"):
            page = http.get(path)
            assert page.status_code == 200 and "Sign out" in page.text, path
            assert page.headers["cache-control"] == "no-store" and page.headers["x-frame-options"] == "DENY"


def test_a_wrong_token_gets_the_form_again_and_counts_toward_the_failure_limit(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config(max_failures=3))
    with pincer_serve(pincer_home) as server, _client(server.info["url"]) as http:
        for _ in range(3):
            wrong = sign_in(http, "pcr_not_the_token_at_all_0123456789")
            assert wrong.status_code == 401 and "wrong token" in wrong.text and 'name="token"' in wrong.text
            assert "pincer_ui=" not in wrong.headers.get("set-cookie", "")
        limited = sign_in(http, server.token)  # even the right token waits out the window
        assert limited.status_code == 429 and "try again in" in limited.text
        metrics = http.get("/api/v1/metrics", headers={"Authorization": f"Bearer {server.token}"}).json()
        assert metrics["gateway"]["refused_unauthenticated"]["by_code"]["ui_sign_in_failed"] == 3


def test_a_forged_forwarded_for_does_not_reset_the_failure_limit(pincer_home: Path) -> None:
    """A local client naming a new X-Forwarded-For address on every guess must not get a fresh
    failure window each time (uvicorn believes that header from loopback by default, so before
    the fix every guess came from "another" address and the limit never applied), nor make the
    gateway blame an address it names."""
    (pincer_home / "config.toml").write_text(dashboard_config(max_failures=3))
    with pincer_serve(pincer_home) as server, _client(server.info["url"]) as http:
        for n in range(3):
            form = http.get("/ui/login", headers={"X-Forwarded-For": f"198.51.100.{n}"})
            wrong = http.post("/ui/login", data={"token": "pcr_not_the_token_at_all_0123456789", "csrf_token": csrf_of(form.text)},
                              headers={"X-Forwarded-For": f"198.51.100.{n}"})  # fmt: skip
            assert wrong.status_code == 401
        form = http.get("/ui/login", headers={"X-Forwarded-For": "198.51.100.77"})
        limited = http.post("/ui/login", data={"token": server.token, "csrf_token": csrf_of(form.text)},
                            headers={"X-Forwarded-For": "198.51.100.77"})  # fmt: skip
        assert limited.status_code == 429 and "127.0.0.1" in limited.text and "198.51.100" not in limited.text


def test_a_login_post_without_its_form_cookie_is_refused(dashboard_home: Path) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        forged = http.post("/ui/login", data={"token": server.token, "csrf_token": "made-up"})
        assert forged.status_code == 403 and "pincer_ui=" not in forged.headers.get("set-cookie", "")


def test_an_asking_cli_call_appears_live_and_is_answered_from_the_page(dashboard_home: Path, stopped_calls: list) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        with http.stream("GET", "/ui/approvals/events") as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            call = waiting_call(dashboard_home, "write_file", WRITE_ARGS)
            stopped_calls.append(call)
            for line in stream.iter_lines():
                if line == "event: approvals":
                    break
        rows = http.get("/ui/approvals/rows").text
        approval = _pending(dashboard_home)[0]
        assert f'id="approval-{approval["id"]}"' in rows and "write_file" in rows
        assert html.escape('"content": "hello"', quote=True) in rows or "&#34;content&#34;: &#34;hello&#34;" in rows
        page = http.get("/ui/approvals").text
        # Without csrf_token: 403 and the request still waits.
        refused = http.post(f"/ui/approvals/{approval['id']}", data={"decision": "allow_once"})
        assert refused.status_code == 403
        assert _pending(dashboard_home)[0]["status"] == "pending"
        answered = http.post(f"/ui/approvals/{approval['id']}", data={"decision": "allow_once", "csrf_token": csrf_of(page)})
        assert answered.status_code == 303
        out, err = call.communicate(timeout=CLI_TIMEOUT_S)
        assert call.returncode == 0, err
        assert json.loads(out)["ok"] is True
        assert (dashboard_home / "workspace" / "from-dashboard.txt").read_text() == "hello"
        after = http.get(answered.headers["location"]).text
        assert f"approval {approval['id']} (write_file): allow_once" in after
        audit = http.get("/ui/audit", params={"tool": "write_file"}).text
        assert "write_file" in audit and "allow_once" in audit
        verified = http.post("/ui/audit/verify", data={"csrf_token": csrf_of(audit)})
        assert verified.status_code == 200 and "Chain intact" in verified.text


def test_verify_chain_names_the_first_bad_record(dashboard_home: Path) -> None:
    for text in ("one", "two", "three"):
        assert pincer_cli(dashboard_home, "tools", "call", "echo", "--args", json.dumps({"text": text})).returncode == 0
    tamper_audit(dashboard_home, 2)
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        page = http.get("/ui/audit").text
        verified = http.post("/ui/audit/verify", data={"csrf_token": csrf_of(page)})
        assert verified.status_code == 409
        assert "Chain broken at record" in verified.text and 'href="/ui/audit/2"' in verified.text
        assert "audit record 2 was altered" in verified.text


def test_a_non_main_token_sees_only_its_own_and_cannot_answer(dashboard_home: Path, stopped_calls: list) -> None:
    call = waiting_call(dashboard_home, "write_file", WRITE_ARGS)
    stopped_calls.append(call)
    approval = wait_until("the main session's call asking", lambda: _pending(dashboard_home))[0]  # type: ignore[index]
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        signed = sign_in(http, AGENT_TOKEN)
        assert signed.status_code == 303
        page = http.get("/ui/approvals")
        assert approval["id"] not in page.text and "write_file" not in page.text
        assert "session <b>agent</b>" in page.text
        answered = http.post(f"/ui/approvals/{approval['id']}", data={"decision": "allow_once", "csrf_token": csrf_of(page.text)})
        assert answered.status_code == 403 and "may not answer approvals" in answered.text
        assert _pending(dashboard_home)[0]["status"] == "pending"
        audit = http.get("/ui/audit").text
        assert "write_file" not in audit
        assert http.get("/ui/audit", params={"session": "main"}).status_code == 403
        assert http.get("/ui/audit/1").status_code == 404  # main's record, as if there were none


def test_payload_html_is_escaped_and_stored_secrets_are_redacted(dashboard_home: Path) -> None:
    assert pincer_cli(dashboard_home, "secrets", "set", "github_token", stdin=SECRET + "\n").returncode == 0
    script = "<script>document.title='pwned'</script>"
    # One call with the secret known (the chain redacts it), one made before a second secret
    # was stored (the record holds it; the page's own scan must redact it).
    later = "sk_later_stored_secret_0123456789abcdef"
    for text in (f"{script} {SECRET}", f"{script} {later}"):
        assert pincer_cli(dashboard_home, "tools", "call", "echo", "--args", json.dumps({"text": text})).returncode == 0
    assert pincer_cli(dashboard_home, "secrets", "set", "later_token", stdin=later + "\n").returncode == 0
    listed = json.loads(pincer_cli(dashboard_home, "audit", "list", "--json").stdout)
    echoes = [r["id"] for r in listed if r["tool"] == "echo"]
    assert len(echoes) == 2, listed
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        for record_id in echoes:
            page = http.get(f"/ui/audit/{record_id}")
            assert page.status_code == 200
            assert "&lt;script&gt;document.title=" in page.text and "<script>document" not in page.text
            assert SECRET not in page.text and later not in page.text
        for path in ("/ui/audit", "/ui/"):
            text = http.get(path).text
            assert SECRET not in text and later not in text and "<script>document" not in text


def test_a_foreign_origin_or_host_is_refused_before_any_page(dashboard_home: Path) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        page = http.get("/ui/approvals").text
        foreign = http.post("/ui/logout", data={"csrf_token": csrf_of(page)}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "foreign_origin"
        assert http.get("/ui/approvals", headers={"Host": "evil.example"}).status_code == 421
        assert http.get("/ui/approvals").status_code == 200  # still signed in: the forged sign-out did nothing


def test_sign_out_ends_the_session(dashboard_home: Path) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        cookie = http.cookies.get("pincer_ui")
        page = http.get("/ui/").text
        assert http.post("/ui/logout", data={"csrf_token": csrf_of(page)}).status_code == 303
        with _client(server.info["url"]) as other:
            other.cookies.set("pincer_ui", cookie or "", path="/ui")
            assert other.get("/ui/approvals").status_code == 303




def test_grants_are_added_and_revoked_from_the_page_and_every_edit_is_audited(dashboard_home: Path) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        page = http.get("/ui/grants").text
        form = {"tool": "write_file", "mode": "allow", "effects": ["write_filesystem"], "csrf_token": csrf_of(page)}
        assert http.post("/ui/grants", data={k: v for k, v in form.items() if k != "csrf_token"}).status_code == 403
        assert http.post("/ui/grants", data={**form, "effects": []}).status_code == 400
        added = http.post("/ui/grants", data=form)
        assert added.status_code == 303
        # The grant is in force for a call of another process: write_file no longer asks.
        called = pincer_cli(dashboard_home, "tools", "call", "write_file", "--args", WRITE_ARGS, "--json")
        assert called.returncode == 0 and json.loads(called.stdout)["ok"] is True
        listed = http.get("/ui/grants").text
        grant_id = listed.split('id="grant-', 1)[1].split('"', 1)[0]
        assert http.post(f"/ui/grants/{grant_id}/revoke", data={"csrf_token": csrf_of(listed)}).status_code == 303
        assert f'id="grant-{grant_id}"' not in http.get("/ui/grants").text
    records = json.loads(pincer_cli(dashboard_home, "audit", "list", "--json").stdout)
    edits = [(r["kind"], r["outcome"], r["effects"], r["caller"]) for r in records if r["kind"] == "grant"]
    assert edits == [("grant", "added", ["modify_approval"], "ui:main"), ("grant", "revoked", ["modify_approval"], "ui:main")]
    asking = waiting_call(dashboard_home, "write_file", WRITE_ARGS)
    try:
        assert wait_until("write_file asking again after the revoke", lambda: _pending(dashboard_home))
    finally:
        asking.kill()
        asking.communicate(timeout=CLI_TIMEOUT_S)


def test_a_non_main_token_cannot_edit_grants(dashboard_home: Path) -> None:
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, AGENT_TOKEN)
        page = http.get("/ui/grants").text
        assert "Add a grant" not in page
        form = {"tool": "*", "mode": "allow", "effects": ["execute_code"], "csrf_token": csrf_of(page)}
        refused = http.post("/ui/grants", data=form)
        assert refused.status_code == 403 and "may not edit grants" in refused.text
    assert all(r["kind"] != "grant" for r in json.loads(pincer_cli(dashboard_home, "audit", "list", "--json").stdout))


def test_skills_show_loaded_shadowed_by_which_and_ineligible_why(dashboard_home: Path) -> None:
    from tests.skills.conftest import write_skill

    config = dashboard_home / "config.toml"
    config.write_text(config.read_text() + "\n[skills]\ntrust_workspace = true\n")
    write_skill(dashboard_home / "workspace" / "skills", "code-review", "activation: {keywords: [review]}", "mine\n")
    write_skill(dashboard_home / "skills", "needs-a-bin", "requires: {bins: [no-such-bin-here]}")
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        page = http.get("/ui/skills").text
        assert 'id="skill-code-review"' in page and 'id="skill-needs-a-bin"' in page
        assert '<span class="error">no</span>: needs no-such-bin-here on PATH' in page
        assert "command: /summarize" in page  # a bundled skill's command
        assert "<b>code-review</b> from bundled" in page and "is shadowed by <b>code-review</b> from workspace" in page
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, AGENT_TOKEN)  # the agent session's sandbox policy withholds the skill tool
        withheld = http.get("/ui/skills").text
        assert "sees no skills" in withheld and "code-review" not in withheld


def test_the_overview_draws_calls_slow_tools_and_denials_and_counts_only_ones_own(dashboard_home: Path) -> None:
    for text in ("a", "b"):
        assert pincer_cli(dashboard_home, "tools", "call", "echo", "--args", json.dumps({"text": text})).returncode == 0
    config = dashboard_home / "config.toml"
    config.write_text(config.read_text() + '\n[[grants]]\ntool = "write_file"\ndefault = "deny"\n')
    assert pincer_cli(dashboard_home, "tools", "call", "write_file", "--args", WRITE_ARGS).returncode == 1
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, server.token)
        page = http.get("/ui/").text
        assert "<b>3</b> calls in the last day" in page
        assert '<rect class="d-allow"' in page and '<rect class="d-deny"' in page  # the hourly bars, by decision
        assert "<b>allow</b> 2" in page and "<b>deny</b> 1" in page
        assert '<a href="/ui/audit?tool=echo">echo</a></th>' in page  # busiest tools
        assert "write_file" in page.split("Refusals in the last day", 1)[1]
    with pincer_serve(dashboard_home) as server, _client(server.info["url"]) as http:
        sign_in(http, AGENT_TOKEN)
        mine = http.get("/ui/").text
        assert "<b>0</b> calls in the last day" in mine and "echo" not in mine
