"""The canvas on a real gateway (uvicorn on 127.0.0.1:0), without a browser: who sees which
canvas, the headers that sandbox the frame, the CSP report endpoint, and the bounds (secrets,
size, rate, egress, eval asking)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.canvas.board import MAX_CANVAS_BYTES, MAX_PUSHES_PER_MINUTE
from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.ui.conftest import csrf_of

pytestmark = pytest.mark.anyio

BOB_TOKEN = "pcr_bob-token-for-the-canvas-tests-0123456789"
CANVAS = "[gateway]\ncanvas = true\n"


def _bob() -> str:
    return f'\n[[gateway.tokens]]\nsha256 = "{hashlib.sha256(BOB_TOKEN.encode()).hexdigest()}"\nsession = "bob"\n\n[sessions.bob]\nallow = ["canvas"]\ndeny = []\n'  # a non-main session is denied canvas by default (OpenClaw's list)


async def _call(gateway: LiveGateway, args: dict[str, Any], token: str | None = None, tool: str = "canvas") -> Any:
    async with gateway.http(timeout=60) as http:
        return await http.post(
            f"/api/v1/tools/{tool}/call", headers={"Authorization": f"Bearer {token or gateway.token}"}, json={"args": args}
        )


@asynccontextmanager
async def _ui(gateway: LiveGateway, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A client signed in to the dashboard with ``token`` (the gateway's by default)."""
    async with gateway.http(timeout=60) as http:
        form = await http.get("/ui/login")
        signed = await http.post("/ui/login", data={"token": token or gateway.token, "csrf_token": csrf_of(form.text)})
        assert signed.status_code == 303, signed.text
        yield http


async def _get(gateway: LiveGateway, path: str, token: str | None = None, **kwargs: Any) -> Any:
    """GET ``path`` signed in with ``token`` (the gateway's by default); ``token=""``: not signed in."""
    if token == "":
        async with gateway.http(timeout=60) as http:
            return await http.get(path, **kwargs)
    async with _ui(gateway, token) as http:
        return await http.get(path, **kwargs)


def _csrf(page: str) -> str:
    return page.split('const csrf = "')[1].split('"')[0]


def _frames(page: str) -> dict[str, str]:
    """The frame URL prefixes the page loads renderings under, by kind (html, a2ui)."""
    return dict(json.loads(page.split("const frames = ")[1].split(";\n")[0]))


async def _state(http: httpx.AsyncClient, session: str = "main") -> dict[str, Any]:
    answer = await http.get(f"/ui/canvas/{session}/state", params={"after": -1})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


async def test_the_page_frames_each_part_sandboxed_and_each_frame_is_its_own_opaque_origin(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home", config=CANVAS) as gateway:
        assert (await _call(gateway, {"action": "push", "html": "<p>hi</p>"})).status_code == 200
        surface = [{"beginRendering": {"surfaceId": "s", "root": "t"}}, {"surfaceUpdate": {"surfaceId": "s", "components": [
            {"id": "t", "component": {"Text": {"text": {"literalString": "pincer's"}}}}]}}]  # fmt: skip
        assert (await _call(gateway, {"messages": surface}, tool="a2ui_push")).status_code == 200
        async with _ui(gateway) as http:
            page = await http.get("/ui/canvas/main")
            state = await _state(http)
        assert page.status_code == 200
        assert "allow-same-origin" not in page.text and 'el.setAttribute("sandbox", "allow-scripts")' in page.text
        page_csp = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in page_csp
        # Frames: this canvas's own documents only, so no frame navigates itself anywhere else.
        assert f"frame-src {gateway.info.url}/ui/canvas-frame/main/;" in page_csp, page_csp
        frames = _frames(page.text)
        html_url = frames["html"] + state["html_render"]
        a2ui_url = frames["a2ui"] + state["a2ui_render"]
        assert frames["html"].split("/")[4] != frames["a2ui"].split("/")[4]  # a token per kind
        frame = await _get(gateway, html_url, token="")  # a sandboxed frame sends no cookie
        assert frame.status_code == 200 and "<p>hi</p>" in frame.text and "pincer's" not in frame.text
        csp = frame.headers["content-security-policy"]
        report = html_url.replace("/html/", "/csp-report/")
        for directive in ("sandbox allow-scripts", "connect-src 'none'", "form-action 'none'", "default-src 'none'", "frame-src 'none'",
                          f"frame-ancestors {gateway.info.url}", f"report-uri {report}"):  # fmt: skip
            assert directive in csp, csp
        assert "allow-same-origin" not in csp and "allow-top-navigation" not in csp and "allow-popups" not in csp and "allow-forms" not in csp
        a2ui = await _get(gateway, a2ui_url, token="")
        assert a2ui.status_code == 200 and "pincer's" in a2ui.text and "<p>hi</p>" not in a2ui.text
        a2ui_csp = a2ui.headers["content-security-policy"]
        assert "sandbox allow-scripts" in a2ui_csp and "'unsafe-inline'" not in a2ui_csp and "script-src 'nonce-" in a2ui_csp
        # One kind's token opens no other kind's document; an old or made-up rendering is gone.
        assert (await _get(gateway, frames["html"] + state["a2ui_render"], token="")).status_code == 404
        assert (await _get(gateway, frames["a2ui"].replace("/a2ui/", "/html/") + state["html_render"], token="")).status_code == 404
        assert (await _get(gateway, "/ui/canvas-frame/main/" + "0" * 40 + "/html/" + state["html_render"], token="")).status_code == 404
        # A navigation a sandboxed frame starts itself comes from an opaque origin: refused.
        opened = await _get(gateway, html_url, token="", headers={"Sec-Fetch-Site": "cross-site"})
        assert opened.status_code == 403, opened.text
        unsigned = await _get(gateway, "/ui/canvas/main", token="")
        assert unsigned.status_code == 303 and unsigned.headers["location"].startswith("/ui/login")
        assert (await _get(gateway, "/ui/canvas/main/state", token="")).status_code == 401
        # A bearer token is not a sign-in for the pages: a browser never holds one.
        async with gateway.http() as http:
            assert (await http.get("/ui/canvas/main/state", headers=gateway.headers)).status_code == 401
        # What a tool answers never names a rendering: no agent can write a script that claims one.
        shown = (await _call(gateway, {"action": "present"})).json()["output"]
        assert "html_render" not in shown and state["html_render"] not in json.dumps(shown)


async def test_a_non_main_session_sees_only_its_own_canvas_and_no_viewer_makes_its_html_trusted(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home", config=CANVAS + _bob()) as gateway:
        assert (await _get(gateway, "/ui/canvas/main", token=BOB_TOKEN)).status_code == 404
        assert (await _get(gateway, "/ui/canvas/bob", token=BOB_TOKEN)).status_code == 200
        assert (await _get(gateway, "/ui/canvas/bob")).status_code == 200  # main sees every canvas
        pushed = await _call(gateway, {"action": "push", "html": "<b>bob's</b>"}, token=BOB_TOKEN)
        assert pushed.status_code == 200, pushed.text
        assert pushed.json()["output"]["session"] == "bob"
        async with _ui(gateway, BOB_TOKEN) as bob:
            csrf = _csrf((await bob.get("/ui/canvas/bob")).text)
            render = (await _state(bob, "bob"))["html_render"]
            event = {"frame": "html", "render": render, "name": "clicked", "data": {"x": 1}}
            sent = await bob.post("/ui/canvas/bob/events", headers={"X-CSRF-Token": csrf}, json=event)
            assert sent.status_code == 202 and sent.json()["trusted"] is False
            forged = await bob.post("/ui/canvas/bob/events", json=event)  # no CSRF token
            assert forged.status_code == 403 and forged.json()["error"]["code"] == "csrf"
            unnamed = await bob.post("/ui/canvas/bob/events", headers={"X-CSRF-Token": csrf}, json={"name": "clicked"})
            assert unnamed.status_code == 400 and "rendering" in unnamed.json()["error"]["message"]
            gone = await bob.post("/ui/canvas/bob/events", headers={"X-CSRF-Token": csrf}, json={**event, "render": "not-a-rendering"})
            assert gone.status_code == 409 and gone.json()["error"]["code"] == "canvas_changed"
        async with _ui(gateway) as main:
            csrf = _csrf((await main.get("/ui/canvas/bob")).text)
            seen = await main.post("/ui/canvas/bob/events", headers={"X-CSRF-Token": csrf}, json={**event, "name": "seen"})
            # Bob's HTML speaks for bob's session whoever views it (before issue 34: trusted).
            assert seen.status_code == 202 and seen.json()["trusted"] is False
        assert (await _get(gateway, "/ui/canvas/a%20b", token=BOB_TOKEN)).status_code == 400


async def test_a_click_counts_only_on_a_control_of_the_rendering_it_names(tmp_path: Path) -> None:
    """The page names the A2UI rendering a click came from; the gateway accepts it only for a
    control that rendering has, with that control's action."""
    surface = [{"beginRendering": {"surfaceId": "s", "root": "b"}}, {"surfaceUpdate": {"surfaceId": "s", "components": [
        {"id": "b", "component": {"Button": {"child": "l", "action": {"name": "go"}}}},
        {"id": "l", "component": {"Text": {"text": {"literalString": "Go"}}}}]}}]  # fmt: skip
    async with live_gateway(tmp_path / "home", config=CANVAS) as gateway:
        assert (await _call(gateway, {"messages": surface}, tool="a2ui_push")).status_code == 200
        async with _ui(gateway) as http:
            csrf = _csrf((await http.get("/ui/canvas/main")).text)
            render = (await _state(http))["a2ui_render"]

            async def click(name: str, component: str, frame: str = "a2ui", event: str = "a2ui_action", **extra: Any) -> httpx.Response:
                action = {"name": name, "surfaceId": "s", "sourceComponentId": component, "timestamp": "2026-12-06T10:00:00Z", "context": {}, **extra}
                data = {"name": name, "surfaceId": "s", "message": {"userAction": {k: v for k, v in action.items() if v is not None}}}
                body = {"frame": frame, "render": render, "name": event, "data": data}
                return await http.post("/ui/canvas/main/events", headers={"X-CSRF-Token": csrf}, json=body)

            good = await click("go", "b")
            assert good.status_code == 202 and good.json()["trusted"] is True and good.json()["event"] == "a2ui_action"
            for name, component in (("approve_everything", "b"), ("go", "l"), ("go", "missing")):
                refused = await click(name, component)
                assert refused.status_code == 409 and refused.json()["error"]["code"] == "canvas_changed", refused.text
            # The same body from the agent HTML's frame names no HTML rendering: refused too.
            assert (await click("go", "b", frame="html")).status_code == 409
            # A control's click whose message is not A2UI's client-to-server shape is refused.
            for bad in ({"timestamp": None}, {"timestamp": "yesterday"}, {"context": ["a"]}):
                refused = await click("go", "b", **bad)
                assert refused.status_code == 422 and refused.json()["error"]["code"] == "a2ui_invalid", refused.text


async def test_csp_reports_from_the_sandboxed_frame_become_untrusted_events_without_the_token(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home", config=CANVAS) as gateway:
        assert (await _call(gateway, {"action": "push", "html": "<p>hi</p>"})).status_code == 200
        async with _ui(gateway) as ui:
            page = await ui.get("/ui/canvas/main")
            render = (await _state(ui))["html_render"]
        base = _frames(page.text)["html"].replace("/html/", "/csp-report/")
        token = base.split("/")[4]
        report = {"csp-report": {"blocked-uri": "http://127.0.0.1:9/x", "violated-directive": "connect-src",
                                 "document-uri": f"http://127.0.0.1/ui/canvas-frame/main/{token}/html/{render}", "script-sample": "x" * 50}}  # fmt: skip
        async with gateway.http() as http:
            # A sandboxed document's report comes with Origin: null and neither cookie nor bearer token.
            sent = await http.post(base + render, headers={"Origin": "null", "Content-Type": "application/csp-report"}, content=json.dumps(report))
            assert sent.status_code == 204, sent.text
            batch = [{"type": "csp-violation", "body": {"blockedURL": "http://evil.example/", "effectiveDirective": "img-src"}}]
            sent = await http.post(base + render, headers={"Origin": "null", "Content-Type": "application/reports+json"}, content=json.dumps(batch))
            assert sent.status_code == 204
            wrong = await http.post("/ui/canvas-frame/main/" + "1" * 40 + "/csp-report/" + render, headers={"Origin": "null"}, content=json.dumps(report))
            assert wrong.status_code == 404
            # Origin: null is let through for the frame's own paths only.
            elsewhere = await http.get("/api/v1/tools", headers={**gateway.headers, "Origin": "null"})
            assert elsewhere.status_code == 403
        listed = await _get(gateway, "/ui/canvas/main/events")
        assert listed.status_code == 200
        events = listed.json()["events"]
        assert [e["event"] for e in events] == ["csp_violation", "csp_violation"]
        assert events[0]["data"]["blocked-uri"] == "http://127.0.0.1:9/x" and events[0]["trusted"] is False
        assert token not in json.dumps(events) and "script-sample" not in events[0]["data"]
        assert events[1]["data"]["blocked-uri"] == "http://evil.example/" and events[1]["name"] == "img-src"


async def test_pushed_content_holding_a_secret_is_refused_and_never_shown(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home", config=CANVAS) as gateway:
        gateway.pincer.secrets.set("deploy_key", "s3cr3t-value-for-the-canvas-test")
        for args, tool in (
            ({"action": "push", "html": "<p>the key is s3cr3t-value-for-the-canvas-test</p>"}, "canvas"),
            ({"messages": [{"beginRendering": {"surfaceId": "s3cr3t-value-for-the-canvas-test", "root": "r"}}]}, "a2ui_push"),
            ({"action": "push", "html": "<p>ghp_" + "a" * 36 + "</p>"}, "canvas"),  # a credential pattern
        ):
            refused = await _call(gateway, args, tool=tool)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["code"] == "denied" and "secret" in refused.json()["error"]["message"]
        assert (await _call(gateway, {"action": "push", "html": "<p>clean</p>"})).status_code == 200
        async with _ui(gateway) as http:  # a secret a person types is redacted before any model reads it
            page = (await http.get("/ui/canvas/main")).text
            render = (await _state(http))["html_render"]
            frame = await http.get(_frames(page)["html"] + render)
            assert "s3cr3t-value" not in frame.text and "ghp_" not in frame.text
            typed = await http.post("/ui/canvas/main/events", headers={"X-CSRF-Token": _csrf(page)},
                                    json={"frame": "html", "render": render, "name": "typed", "data": {"field": "my s3cr3t-value-for-the-canvas-test"}})  # fmt: skip
            assert typed.status_code == 202
            listed = (await http.get("/ui/canvas/main/events")).json()["events"]
        assert listed[-1]["name"] == "typed" and "s3cr3t-value" not in json.dumps(listed)


async def test_a_canvas_is_bounded_in_size_and_in_changes_per_minute(tmp_path: Path) -> None:
    config = CANVAS + "max_body_bytes = 4194304\n"
    async with live_gateway(tmp_path / "home", config=config) as gateway:
        big = await _call(gateway, {"action": "push", "html": "x" * (MAX_CANVAS_BYTES + 1)})
        assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large", big.text
        for _ in range(MAX_PUSHES_PER_MINUTE - 1):  # the refused push above counted as one change
            assert (await _call(gateway, {"action": "present"})).status_code == 200
        over = await _call(gateway, {"action": "hide"})
        assert over.status_code == 429 and over.json()["error"]["code"] == "budget_exceeded", over.text


async def test_navigate_reaches_only_what_the_egress_rule_allows(tmp_path: Path) -> None:
    no_hosts = await _navigate(tmp_path / "a", '\n[[grants]]\ntool = "canvas"\neffects = { network = "allow" }\n', "https://example.com/")
    assert no_hosts["error"]["code"] == "egress_denied" and "default deny" in no_hosts["error"]["message"]
    grant = '\n[[grants]]\ntool = "canvas"\neffects = { network = "allow" }\nhosts = ["169.254.169.254", "127.0.0.1"]\n'
    metadata = await _navigate(tmp_path / "b", grant, "https://169.254.169.254/latest/meta-data/")
    assert metadata["error"]["code"] == "egress_denied", metadata
    loopback = await _navigate(tmp_path / "c", grant, "https://127.0.0.1/")
    assert loopback["error"]["code"] == "egress_denied", loopback  # private without [network] allow_private
    other_host = await _navigate(tmp_path / "d", grant, "https://example.org/")
    assert other_host["error"]["code"] == "egress_denied", other_host


async def _navigate(home: Path, extra: str, url: str) -> dict[str, Any]:
    async with live_gateway(home, config=CANVAS + extra) as gateway:
        answer = await _call(gateway, {"action": "navigate", "url": url})
        assert answer.status_code in (403, 502), answer.text
        state = (await _get(gateway, "/ui/canvas/main/state", params={"after": -1})).json()
        assert state["url"] is None  # nothing refused reaches a page
        return dict(answer.json())


async def test_eval_is_execute_code_and_asks(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home", config=CANVAS + "\n[approvals]\ntimeout_s = 1\n") as gateway:
        asked = await _call(gateway, {"action": "eval", "script": "return 1"})
        assert asked.status_code == 408 and asked.json()["error"]["code"] == "approval_timeout", asked.text
        shown = await _call(gateway, {"action": "push", "html": "<p>no effects: allowed by default</p>"})
        assert shown.status_code == 200


async def test_a2ui_push_answers_an_invalid_message_with_the_field_and_applies_nothing(tmp_path: Path) -> None:
    async with live_gateway(tmp_path / "home", config=CANVAS) as gateway:
        bad = await _call(gateway, {"messages": [
            {"beginRendering": {"surfaceId": "ok", "root": "r"}},
            {"surfaceUpdate": {"surfaceId": "ok", "components": [{"id": "r", "component": {"Blink": {}}}]}},
        ]}, tool="a2ui_push")  # fmt: skip
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "a2ui_invalid"
        assert "message 1 (surfaceUpdate)" in bad.json()["error"]["message"] and "/surfaceUpdate/components/0/component/Blink" in bad.json()["error"]["message"]
        orphan = await _call(gateway, {"messages": [{"version": "v0.9", "updateComponents": {"surfaceId": "nope", "components": [
            {"id": "root", "component": "Text", "text": "x"}]}}]}, tool="a2ui_push")  # fmt: skip
        assert orphan.status_code == 422 and "createSurface first" in orphan.json()["error"]["message"]
        state = (await _get(gateway, "/ui/canvas/main/state", params={"after": -1})).json()
        assert state["surfaces"] == []  # a refused batch applies none of its messages
        good = await _call(gateway, {"messages": [{"beginRendering": {"surfaceId": "ok", "root": "r"}}]}, tool="a2ui_push")
        assert good.status_code == 200 and good.json()["output"]["surfaces"] == ["ok"]
        reset = await _call(gateway, {}, tool="a2ui_reset")
        assert reset.json()["output"]["surfaces"] == []


async def test_a_model_is_offered_the_canvas_tools_but_never_canvas_event(tmp_path: Path) -> None:
    with serve_models([Turn(calls=(ScriptedCall(name="canvas", arguments={"action": "present"}),)), Turn(text="ok")]) as server:
        config = CANVAS + f'\n[llm]\nmodel = "scripted-model"\nbase_url = "{server.openai_url}"\n'
        async with live_gateway(tmp_path / "home", config=config) as gateway:
            async with gateway.http(timeout=60) as http:
                started = await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "show it"})
                assert started.status_code == 202
            import anyio

            with anyio.fail_after(60):
                while (await gateway.pincer.runs.get(started.json()["run_id"])).status == "running":
                    await anyio.sleep(0.05)
        offered = set(server.requests[0].tool_names)
        assert {"canvas", "a2ui_push", "a2ui_reset"} <= offered and "canvas_event" not in offered
