"""Webhooks with a real HTTP client against a real gateway (the recording starter stands in for
the agent loop): what verifies starts a run at once, everything else gets its status and no run,
and only accepted deliveries reach the audit log.

Failed on main before the triggers: every POST /hooks/NAME was a 401 from the bearer-token
guard, and nothing could start a run from a delivery.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from pincer.triggers.signatures import sign_github
from tests.safety.disguises import revealed

from .conftest import LiveHooks, live_gateway

pytestmark = pytest.mark.anyio

STD_SECRET = "whsec_" + base64.b64encode(b"standard-webhooks-test-key-32byt").decode()
GH_SECRET = "gh-hook-secret-value-7731"
TOKEN = "hook-bearer-token-5527"
CONFIG = """
[[hooks]]
name = "gh"
skill = "code-review"
auth = "github"
secret = "gh_hook_secret"
events = ["github.pr.opened"]
params = { pr_url = "{{ payload.pull_request.html_url }}" }

[[hooks]]
name = "std"
message = "New event: {{ event }} for {{ payload.data.customer }}"
auth = "standard"
secret = "std_hook_secret"

[[hooks]]
name = "any-pr"
auth = "github"
secret = "gh_hook_secret"

[[hooks]]
name = "tok"
auth = "bearer"
secret = "tok_secret"
message = "token delivery"

[[hooks]]
name = "nosecret"
auth = "bearer"
secret = "never_set"
message = "x"
"""
SECRETS = {"gh_hook_secret": GH_SECRET, "std_hook_secret": STD_SECRET, "tok_secret": TOKEN}
PR_OPENED = {
    "action": "opened",
    "number": 42,
    "pull_request": {"html_url": "https://github.com/acme/app/pull/42", "title": "Fix the login"},
    "repository": {"full_name": "acme/app"},
}


def _standard(body: bytes, *, msg_id: str = "msg_1", secret: str = STD_SECRET, age_s: float = 0) -> dict[str, str]:
    when = int(time.time() - age_s)
    signature = Webhook(secret).sign(msg_id, dt.datetime.fromtimestamp(when, dt.UTC), body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(when), "webhook-signature": signature,
            "content-type": "application/json"}  # fmt: skip


def _github(body: bytes, *, event: str = "pull_request", delivery: str = "d-1", secret: str = GH_SECRET) -> dict[str, str]:
    return {"x-github-event": event, "x-github-delivery": delivery, "x-hub-signature-256": sign_github(secret, body),
            "content-type": "application/json"}  # fmt: skip


async def _trigger_records(live: LiveHooks) -> list[Any]:
    return [r for r in await live.pincer.audit.records() if r.kind == "trigger"]


async def _settle(live: LiveHooks) -> None:
    await live.pincer.triggers.settle()


async def test_a_standard_webhooks_delivery_starts_a_run(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = json.dumps({"type": "invoice.paid", "data": {"customer": "ACME", "card": "4242"}}).encode()
        answer = await http.post("/hooks/std", content=body, headers=_standard(body, msg_id="msg_a"))
        assert answer.status_code == 202, answer.text
        data = answer.json()
        assert data["accepted"] is True and data["event"] == "invoice.paid" and data["delivery"] == "msg_a"
        await _settle(live)
        [request] = live.starter.requests
        assert request.run_id == data["run_id"] and request.skill is None
        assert request.message == "New event: invoice.paid for ACME" and request.session == "hook:std"
        assert str(request.trigger) == "webhook:std" and request.trigger.fired_by == "webhook from 127.0.0.1"
        [untrusted] = request.untrusted
        assert "delivery msg_a (invoice.paid)" in untrusted.source and json.loads(untrusted.content)["data"]["customer"] == "ACME"
        [record] = await _trigger_records(live)
        assert record.tool == "webhook:std" and record.outcome == "ok" and record.args["run_id"] == data["run_id"]
        assert record.args["payload"]["type"] == "invoice.paid" and record.session == "hook:std"
        firing = await live.pincer.triggers.store.firing(data["runs"][0]["firing_id"])
        assert firing is not None and firing.status == "done" and firing.audit_id == record.id


async def test_a_github_pull_request_starts_code_review_with_pr_url(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = json.dumps(PR_OPENED).encode()
        answer = await http.post("/hooks/gh", content=body, headers=_github(body))
        assert answer.status_code == 202, answer.text
        assert answer.json()["event"] == "github.pr.opened"
        await _settle(live)
        [request] = live.starter.requests
        assert request.skill == "code-review"
        assert dict(request.params) == {"path": ".", "focus": "all", "pr_url": "https://github.com/acme/app/pull/42"}
        # an event the hook filters out: 202 ignored, no run
        issue = json.dumps({"action": "opened", "issue": {"number": 1}}).encode()
        ignored = await http.post("/hooks/gh", content=issue, headers=_github(issue, event="issues", delivery="d-2"))
        assert ignored.status_code == 202 and ignored.json()["ignored"] is True
        # GitHub's ping when a hook is set up: answered, no run
        ping = await http.post("/hooks/gh", content=b"{}", headers=_github(b"{}", event="ping", delivery="d-3"))
        assert ping.status_code == 200 and ping.json()["pong"] is True
        await _settle(live)
        assert len(live.starter.requests) == 1 and len(await _trigger_records(live)) == 1


async def test_a_hook_without_skill_runs_the_skills_whose_webhook_trigger_matches(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = json.dumps(PR_OPENED).encode()
        answer = await http.post("/hooks/any-pr", content=body, headers=_github(body, delivery="d-9"))
        assert answer.status_code == 202, answer.text
        assert [r["skill"] for r in answer.json()["runs"]] == ["code-review"]  # webhook: github.pull_request.opened
        push = json.dumps({"ref": "refs/heads/main"}).encode()
        none = await http.post("/hooks/any-pr", content=push, headers=_github(push, event="push", delivery="d-10"))
        assert none.status_code == 202 and none.json()["ignored"] is True and "github.push" in none.json()["reason"]
        await _settle(live)
        assert [r.skill for r in live.starter.requests] == ["code-review"]


async def test_each_bad_delivery_gets_its_status_and_no_run(pincer_home: Path) -> None:
    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = json.dumps({"type": "invoice.paid", "data": {"customer": "ACME"}}).encode()
        good = _standard(body, msg_id="msg_r")
        cases = {
            "tampered body": (body.replace(b"ACME", b"EVIL"), good, 401),
            "wrong secret": (body, _standard(body, msg_id="msg_w", secret="whsec_" + base64.b64encode(b"x" * 32).decode()), 401),
            "old timestamp": (body, _standard(body, msg_id="msg_o", age_s=301), 401),
            "no signature": (body, {"content-type": "application/json"}, 401),
        }
        for name, (sent, headers, status) in cases.items():
            answer = await http.post("/hooks/std", content=sent, headers=headers)
            assert answer.status_code == status, (name, answer.text)
            assert answer.json()["error"]["code"] == "signature_invalid" and answer.json()["error"]["hint"], name
        old = await http.post("/hooks/std", content=body, headers=_standard(body, msg_id="msg_o2", age_s=601))
        assert "tolerance" in old.json()["error"]["message"]
        assert " s old," in old.json()["error"]["message"], "a late delivery is old, not 'from now'"
        ahead = await http.post("/hooks/std", content=body, headers=_standard(body, msg_id="msg_f", age_s=-601))
        assert " s in the future," in ahead.json()["error"]["message"]

        first = await http.post("/hooks/std", content=body, headers=good)
        assert first.status_code == 202
        replay = await http.post("/hooks/std", content=body, headers=good)
        assert replay.status_code == 200 and replay.json()["replayed"] is True
        assert replay.json()["run_id"] == first.json()["run_id"] and replay.json()["original_status"] == 202

        big = b'{"type": "x", "pad": "' + b"a" * (300 * 1024) + b'"}'
        too_big = await http.post("/hooks/std", content=big, headers=_standard(big, msg_id="msg_b"))
        assert too_big.status_code == 413 and "262,144" in too_big.json()["error"]["message"]

        async def chunks() -> Any:
            for _ in range(300):
                yield b"a" * 1024

        streamed = await http.post("/hooks/std", content=chunks(), headers={"webhook-id": "msg_c"})
        assert streamed.status_code == 413  # no Content-Length: refused once the read passes the limit

        get = await http.get("/hooks/std")
        assert get.status_code == 405 and get.headers["allow"] == "POST"
        query = await http.post("/hooks/tok?token=" + TOKEN, content=b"{}")
        assert query.status_code == 400 and query.json()["error"]["code"] == "credential_in_query"
        unknown = await http.post("/hooks/nope", content=b"{}")
        assert unknown.status_code == 404
        gateway_token = await http.post("/hooks/tok", content=b"{}", headers=live.headers)
        assert gateway_token.status_code == 401, "the gateway's token is not the hook's"
        ok = await http.post("/hooks/tok", content=b"{}", headers={"authorization": f"Bearer {TOKEN}"})
        assert ok.status_code == 202
        missing = await http.post("/hooks/nosecret", content=b"{}", headers={"authorization": "Bearer x"})
        assert missing.status_code == 503 and "'never_set'" in missing.json()["error"]["message"]
        assert "pincer secrets set never_set" in missing.json()["error"]["hint"]
        foreign = await http.post("/hooks/tok", content=b"{}", headers={"host": "evil.example", "authorization": f"Bearer {TOKEN}"})
        assert foreign.status_code == 421, "the Host rules still apply"

        await _settle(live)
        assert len(live.starter.requests) == 2, "only the accepted delivery and the token delivery ran"
        assert [r.tool for r in await _trigger_records(live)] == ["webhook:std", "webhook:tok"]
        metrics = (await http.get("/api/v1/metrics", headers=live.headers)).json()["gateway"]["refused_unauthenticated"]
        assert metrics["by_code"]["signature_invalid"] == 7 and metrics["by_code"]["body_too_large"] == 2


async def test_twenty_failures_a_minute_then_429(pincer_home: Path) -> None:
    """Each guess names a new X-Forwarded-For address: the gateway counts the connection's own
    address all the same (a local sender cannot buy a fresh window per guess)."""
    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = b'{"type": "x"}'
        statuses = []
        for n in range(25):
            forged = {"x-forwarded-for": f"198.51.100.{n}"}
            answer = await http.post("/hooks/std", content=body, headers={**forged, **_standard(body, msg_id=f"m{n}", secret="whsec_" + base64.b64encode(b"y" * 32).decode())})
            statuses.append(answer.status_code)
            if answer.status_code == 429:
                assert 1 <= int(answer.headers["retry-after"]) <= 60 and answer.json()["error"]["code"] == "too_many_failures"
        assert statuses == [401] * 20 + [429] * 5
        good = await http.post("/hooks/std", content=body, headers=_standard(body, msg_id="late"))
        assert good.status_code == 429, "blocked for everyone from that address until the window passes"
        await _settle(live)
        assert live.starter.requests == [] and await _trigger_records(live) == []


async def test_a_mapping_that_does_not_fit_is_422_recorded_and_replayable(pincer_home: Path) -> None:
    config = CONFIG.replace('params = { pr_url = "{{ payload.pull_request.html_url }}" }',
                            'params = { focus = "{{ payload.pull_request.title }}" }')  # fmt: skip
    async with live_gateway(pincer_home, config=config, secrets=SECRETS) as live, live.http() as http:
        body = json.dumps(PR_OPENED).encode()
        answer = await http.post("/hooks/gh", content=body, headers=_github(body, delivery="d-x"))
        assert answer.status_code == 422 and "must be one of" in answer.json()["error"]["message"]
        again = await http.post("/hooks/gh", content=body, headers=_github(body, delivery="d-x"))
        assert again.status_code == 200 and again.json()["original_status"] == 422
        await _settle(live)
        assert live.starter.requests == []
        [record] = await _trigger_records(live)
        assert record.outcome == "error" and record.error_code == "invalid_arguments"


async def test_hooks_follow_a_reloaded_config_toml(pincer_home: Path) -> None:
    import anyio

    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        headers = {"authorization": f"Bearer {TOKEN}"}
        assert (await http.post("/hooks/late", content=b"{}", headers=headers)).status_code == 404
        (pincer_home / "config.toml").write_text(CONFIG + '\n[[hooks]]\nname = "late"\nauth = "bearer"\nsecret = "tok_secret"\nmessage = "late one"\n')
        # polled without the token: 401 once the hook exists, 404 once it is gone (nothing runs)
        with anyio.fail_after(30):
            while (await http.post("/hooks/late", content=b"{}")).status_code == 404:
                await anyio.sleep(0.25)
        assert (await http.post("/hooks/late", content=b"{}", headers=headers)).status_code == 202
        (pincer_home / "config.toml").write_text(CONFIG)
        with anyio.fail_after(30):
            while (await http.post("/hooks/late", content=b"{}")).status_code != 404:
                await anyio.sleep(0.25)
        await _settle(live)
        assert [r.message for r in live.starter.requests] == ["late one"]


async def test_payloads_are_recorded_redacted_and_bounded(pincer_home: Path) -> None:
    """The disguised copies (issue 34 item 3) failed on main: the dash-joined value and the list of
    its characters were recorded and passed to the run as they came (the \\u-escaped one was not)."""
    config = CONFIG + "\n[triggers]\npayload_record_bytes = 1024\n"
    leaked = "stripe-like-secret-4417-value"
    disguised = {"dashed": "-".join(leaked), "escaped": "".join(f"\\u{ord(c):04x}" for c in leaked), "chars": list(leaked)}
    async with live_gateway(pincer_home, config=config, secrets={**SECRETS, "stripe_key": leaked}) as live, live.http() as http:
        data = {"customer": "ACME", "note": f"key {leaked}", **disguised, "pad": "p" * 4000}
        body = json.dumps({"type": "x", "data": data}).encode()
        answer = await http.post("/hooks/std", content=body, headers=_standard(body, msg_id="msg_big"))
        assert answer.status_code == 202, answer.text
        await _settle(live)
        [record] = await _trigger_records(live)
        firing = await live.pincer.triggers.store.firing(answer.json()["runs"][0]["firing_id"])
        assert firing is not None
        for kept in (json.dumps(record.args), json.dumps(firing.payload), live.starter.requests[0].untrusted[0].content):
            assert leaked not in kept and "[REDACTED:secret]" in kept
            assert disguised["dashed"] not in kept and not revealed(kept, leaked), kept
        assert len(json.dumps(record.args["payload"])) < 1_400 and "truncated" in json.dumps(record.args["payload"])
        assert "p" * 4000 in live.starter.requests[0].untrusted[0].content, "the run reads the whole payload"


async def test_a_json_body_sent_as_a_form_is_told_its_content_type(pincer_home: Path) -> None:
    """Failed on main before this test: ``curl -d '{...}'`` sends JSON as
    ``application/x-www-form-urlencoded``, and the answer was "the delivery's body is not JSON",
    which it is: what was wrong is the content type, and now the answer says so."""
    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = b'{"text": "hello"}'
        headers = {"authorization": f"Bearer {TOKEN}", "content-type": "application/x-www-form-urlencoded"}
        answer = await http.post("/hooks/tok", content=body, headers=headers)
        assert answer.status_code == 415, answer.text
        error = answer.json()["error"]
        assert error["code"] == "unsupported_media_type" and "application/x-www-form-urlencoded" in error["message"]
        assert "content-type: application/json" in error["hint"] and "payload=" in error["hint"]
        garbled = await http.post("/hooks/tok", content=b"{nope", headers={**headers, "content-type": "application/json"})
        assert garbled.status_code == 400 and "content-type: application/json" in garbled.json()["error"]["message"]
        await _settle(live)
        assert live.starter.requests == []


async def test_a_github_form_delivery_is_read_from_its_payload_field(pincer_home: Path) -> None:
    """GitHub sends ``payload=<url-encoded JSON>`` when a hook's content type is set to
    ``application/x-www-form-urlencoded``; the signature is over the raw form body."""
    from urllib.parse import urlencode

    async with live_gateway(pincer_home, config=CONFIG, secrets=SECRETS) as live, live.http() as http:
        body = urlencode({"payload": json.dumps(PR_OPENED)}).encode()
        headers = {**_github(body), "content-type": "application/x-www-form-urlencoded"}
        answer = await http.post("/hooks/gh", content=body, headers=headers)
        assert answer.status_code == 202, answer.text
        assert answer.json()["event"] == "github.pr.opened"
        await _settle(live)
        [request] = live.starter.requests
        assert request.params["pr_url"] == "https://github.com/acme/app/pull/42"
