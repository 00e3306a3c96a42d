"""``composio`` through the real call chain against a local stand-in for Composio's v3 API
(``POST /api/v3/tools/execute/{slug}``, key in ``x-api-key``). The person enables actions and
declares each one's effects in config.toml; an undeclared action is a config error (fail closed)
and an action not enabled is refused before anything is sent."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pincer.builtins.composio import composio_tool
from pincer.core.effects import EffectKind
from pincer.core.errors import ConfigError
from pincer.core.values import CallRequest
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

KEY = "ak_composioTestKey_9f8e7d6c5b4a3210"


@contextmanager
def serve_composio() -> Iterator[Any]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else None
            state.seen.append((self.command, self.path, dict(self.headers.items()), body))
            prefix = "/api/v3/tools/execute/"
            if self.headers.get("x-api-key") != KEY:
                status, payload = 401, {"error": {"message": "Invalid API key", "code": 401}}
            elif not self.path.startswith(prefix) or not isinstance(body, dict) or "arguments" not in body:
                status, payload = 400, {"error": {"message": "bad request"}}
            elif self.path == prefix + "GITHUB_STAR_A_REPOSITORY_FOR_THE_AUTHENTICATED_USER" and \
                    body["arguments"].get("owner") == "missing":
                status, payload = 200, {"data": {}, "error": "Repository not found", "successful": False,
                                        "log_id": "log_2"}
            else:
                status, payload = 200, {"data": {"echo": body["arguments"], "details": {"ok": True}},
                                        "error": None, "successful": True, "log_id": "log_1"}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True

    class State:
        origin = f"http://127.0.0.1:{server.server_address[1]}"
        seen: list[Any]

    state = State()
    state.seen = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)


STAR = "GITHUB_STAR_A_REPOSITORY_FOR_THE_AUTHENTICATED_USER"
GET = "GITHUB_GET_A_REPOSITORY"


def _config(origin: str, section: str | None = None) -> str:
    section = section if section is not None else f"""
actions = ["{GET}", "{STAR}"]
effects = {{ {GET} = ["network"], {STAR} = ["network", "external_write"] }}
"""
    return f"""
[builtins.composio]
enabled = true
base_url = "{origin}"
{section}

[[grants]]
tool = "composio"
effects = {{ network = "allow", use_secret = "allow" }}

[approvals]
timeout_s = 30
"""


async def test_enabled_actions_run_with_their_declared_effects(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    asked: list[Any] = []
    with serve_composio() as composio:
        async with pincer_on(tmp_path, _config(composio.origin), secrets={"composio_api_key": KEY}) as pincer:

            async def deny(approval: Any) -> None:
                asked.append(approval)
                pincer.dispatcher.answer(approval.id, "deny", by="test")

            read = await pincer.call(CallRequest(tool="composio", args={
                "action": GET, "arguments": {"owner": "octocat", "repo": "hello-world"}}), on_approval=deny)
            write = await pincer.call(CallRequest(tool="composio", args={
                "action": STAR, "arguments": {"owner": "octocat", "repo": "hello-world"}}), on_approval=deny)
            records = pincer.audit.records()
    assert read.ok, read.error
    assert read.output == {"action": GET, "data": {"echo": {"owner": "octocat", "repo": "hello-world"},
                                                   "details": {"ok": True}}}
    assert not write.ok and write.error["code"] == "approval_denied"
    (approval,) = asked
    assert "external_write" in approval.effects
    ((verb, path, headers, body),) = composio.seen  # the denied write sent nothing
    assert (verb, path) == ("POST", f"/api/v3/tools/execute/{GET}")
    assert headers["x-api-key"] == KEY and body == {"user_id": "default", "arguments": {"owner": "octocat",
                                                                                       "repo": "hello-world"}}
    assert KEY not in json.dumps([read.output, write.error])
    assert KEY not in json.dumps([dataclasses.asdict(r) for r in records], default=str)
    assert KEY not in caplog.text


async def test_an_action_not_enabled_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    with serve_composio() as composio:
        async with pincer_on(tmp_path, _config(composio.origin), secrets={"composio_api_key": KEY}) as pincer:
            result = await pincer.call(CallRequest(tool="composio", args={"action": "GMAIL_SEND_EMAIL",
                                                                          "arguments": {"to": "a@b.example"}}))
    assert not result.ok and result.error["code"] == "invalid_arguments"
    assert composio.seen == []


async def test_an_unsuccessful_answer_is_a_tool_error(tmp_path: Path) -> None:
    with serve_composio() as composio:
        config = _config(composio.origin, f'actions = ["{STAR}"]\neffects = {{ {STAR} = ["external_write"] }}')
        config = config.replace('use_secret = "allow" }', 'use_secret = "allow", external_write = "allow" }')
        async with pincer_on(tmp_path, config, secrets={"composio_api_key": KEY}) as pincer:
            result = await pincer.call(CallRequest(tool="composio", args={"action": STAR,
                                                                          "arguments": {"owner": "missing"}}))
    assert not result.ok and result.error["code"] == "api_refused"
    assert "Repository not found" in result.error["message"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (f'actions = ["{GET}"]', f"action {GET} has no declared effects"),
        (f'actions = ["{GET}"]\neffects = {{ {GET} = [] }}', f"action {GET} has no declared effects"),
        (f'actions = ["{GET}"]\neffects = {{ {GET} = ["network"], {STAR} = ["network"] }}', "not enabled"),
        ("", "enables no action"),
        ('actions = ["send mail"]\neffects = { "send mail" = ["network"] }', "is not a Composio action slug"),
    ],
)
async def test_undeclared_effects_are_a_config_error(tmp_path: Path, section: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        async with pincer_on(tmp_path, _config("https://backend.composio.dev", section)):
            pass
    assert "[builtins.composio]" in (caught.value.hint or "")


def test_a_declared_effect_must_be_an_effect() -> None:
    from pincer.config import parse_config

    with pytest.raises(ConfigError, match="effects"):
        parse_config(_config("https://backend.composio.dev", f'actions = ["{GET}"]\neffects = {{ {GET} = ["teleport"] }}'),
                     home=Path("/nonexistent"))


def test_the_schema_offers_exactly_the_enabled_actions_and_read_only_keeps_reads() -> None:
    effects = {GET: ["network"], STAR: ["network", "external_write"]}
    tool = composio_tool(actions=[GET, STAR], effects=effects)
    assert tool.spec.input_schema["properties"]["action"]["enum"] == [GET, STAR]
    assert tool.spec.call_effects is not None
    assert tool.spec.call_effects.table[GET] == frozenset({EffectKind.NETWORK, EffectKind.USE_SECRET})
    narrowed = composio_tool(actions=[GET, STAR], effects=effects, read_only=True)
    assert narrowed.spec.input_schema["properties"]["action"] == {**narrowed.spec.input_schema["properties"]["action"],
                                                                  "enum": [GET]}


def test_read_only_leaving_nothing_and_an_unknown_effect_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="leaves no action"):
        composio_tool(actions=[STAR], effects={STAR: ["external_write"]}, read_only=True)
    with pytest.raises(ConfigError, match="unknown effect"):
        composio_tool(actions=[STAR], effects={STAR: ["teleport"]})
