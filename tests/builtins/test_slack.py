"""``slack`` through the real call chain against a local Slack stand-in that checks every request
and every answer against npm ``@slack/web-api`` (tests/builtins/declared.py: WebClient's method
names, verb and body encoding, and each method's argument and response types compiled into JSON
Schema). Slack publishes no machine-readable description of its Web API in a package registry, so
the SDK's declarations are the description. The bot token is injected host-side and is absent
from every output, log line and audit record."""

from __future__ import annotations

import dataclasses
import json
import logging
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pincer.builtins.slack import ACTIONS, slack_tool
from pincer.core.values import CallRequest
from tests.builtins import fakeslack
from tests.builtins.conftest import pincer_on
from tests.builtins.fakeslack import TOKEN

pytestmark = pytest.mark.anyio

GRANT = 'effects = { network = "allow", use_secret = "allow", external_write = "allow" }'

CALLS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "send_message": ({"channel": "C0123ABCD", "text": "hello"}, ["chat.postMessage"]),
    "reply_in_thread": ({"channel": "C0123ABCD", "thread_ts": "1512085950.000216", "text": "on it",
                         "reply_broadcast": True}, ["chat.postMessage"]),
    "get_channel_history": ({"channel": "C0123ABCD", "limit": 10, "oldest": "1512085000.000000"},
                            ["conversations.history"]),
    "get_thread_replies": ({"channel": "C0123ABCD", "thread_ts": "1512085950.000216"}, ["conversations.replies"]),
    "list_channels": ({"types": ["public_channel", "private_channel"], "limit": 50}, ["conversations.list"]),
    "add_reaction": ({"channel": "C0123ABCD", "timestamp": "1512085950.000216", "name": ":joy:"}, ["reactions.add"]),
    "upload_file": ({"channel": "C0123ABCD", "filename": "notes.txt", "content": "line one\nline two\n",
                     "initial_comment": "the notes", "thread_ts": "1512085950.000216"},
                    ["files.getUploadURLExternal", None, "files.completeUploadExternal"]),
    "upload_workspace_file": ({"channel": "C0123ABCD", "path": "out/chart.png", "title": "the chart",
                               "thread_ts": "1512085950.000216"},
                              ["files.getUploadURLExternal", None, "files.completeUploadExternal"]),
    "get_user_info": ({"user": "W012A3CDE"}, ["users.info"]),
}

CHART = bytes(range(256)) * 64 + b"\x00\xff\r\n"  # binary: every byte value, no text encoding survives it


def _workspace(home: Path) -> Path:
    """The default workspace of a pincer at ``home``, with a binary file in it."""
    workspace = home / "workspace"
    (workspace / "out").mkdir(parents=True, exist_ok=True)
    (workspace / "out" / "chart.png").write_bytes(CHART)
    return workspace


def _config(fake: fakeslack.FakeSlack, extra: str = "", grant: str = GRANT) -> str:
    return f"""
[builtins.slack]
enabled = true
base_url = "{fake.origin}"
{extra}

[[grants]]
tool = "slack"
{grant}
"""


def test_every_action_is_exercised() -> None:
    assert set(CALLS) == {a.name for a in ACTIONS}


@pytest.mark.parametrize("action", sorted(CALLS))
async def test_each_action_fits_slacks_method_table(
    tmp_path: Path, action: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    args, methods = CALLS[action]
    _workspace(tmp_path)
    with fakeslack.serve() as fake:
        async with pincer_on(tmp_path, _config(fake), secrets={"slack_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="slack", args={"action": action, **args}))
            records = await pincer.audit.records()
    assert result.ok, result.error
    assert fake.violations == []
    assert [r.get("method") for r in fake.seen] == methods
    assert all(r["headers"]["Authorization"] == f"Bearer {TOKEN}" for r in fake.seen)
    assert TOKEN not in json.dumps(result.output)
    assert TOKEN not in json.dumps([dataclasses.asdict(r) for r in records], default=str)
    assert TOKEN not in caplog.text


async def test_answers_are_trimmed_to_what_a_model_needs(tmp_path: Path) -> None:
    with fakeslack.serve() as fake:
        async with pincer_on(tmp_path, _config(fake), secrets={"slack_bot_token": TOKEN}) as pincer:
            history = await pincer.call(CallRequest(tool="slack", args={"action": "get_channel_history",
                                                                        "channel": "C0123ABCD"}))
            channels = await pincer.call(CallRequest(tool="slack", args={"action": "list_channels"}))
            upload = await pincer.call(CallRequest(tool="slack", args={"action": "upload_file", "channel": "C0123ABCD",
                                                                       "filename": "a.txt", "content": "héllo"}))
    assert history.output == {
        "messages": [{"ts": "1512085950.000216", "user": "U012AB3CDE", "text": "I find you punny",
                      "thread_ts": "1512085950.000216", "reply_count": 2, "reactions": [{"name": "joy", "count": 1}]}],
        "has_more": True,
        "next_cursor": "bmV4dF90czoxNTEyMDg1ODYxMDAwNTQz",
    }
    assert channels.output["channels"][0] == {"id": "C0123ABCD", "name": "general", "is_private": False,
                                              "is_archived": False, "is_member": True, "num_members": 12,
                                              "topic": "Company-wide"}
    assert upload.ok and fake.uploads["F0FILE1234"] == "héllo".encode()
    ticket = next(r for r in fake.seen if r.get("method") == "files.getUploadURLExternal")
    assert ticket["form"] == {"filename": "a.txt", "length": str(len("héllo".encode()))}


async def test_ok_false_is_a_tool_error_with_slacks_code(tmp_path: Path) -> None:
    """Slack answers HTTP 200 with ok: false; that is a failure carrying Slack's error code."""
    with fakeslack.serve() as fake:
        fake.script["chat.postMessage"] = {"ok": False, "error": "channel_not_found"}
        async with pincer_on(tmp_path, _config(fake), secrets={"slack_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="slack", args={"action": "send_message", "channel": "C404",
                                                                       "text": "x"}))
            bad_token = await pincer.call(CallRequest(tool="slack", args={"action": "list_channels"}))
        async with pincer_on(tmp_path / "other", _config(fake), secrets={"slack_bot_token": "xoxb-wrong"}) as pincer:
            refused = await pincer.call(CallRequest(tool="slack", args={"action": "list_channels"}))
    assert not result.ok
    assert result.error["code"] == "api_refused" and result.error["api_code"] == "channel_not_found"
    assert "list_channels" in result.error["hint"]
    assert bad_token.ok
    assert refused.error["api_code"] == "invalid_auth" and "pincer auth setup slack" in refused.error["hint"]


def _post(fake: fakeslack.FakeSlack, path: str, body: bytes, *, verb: str = "POST",
          content_type: str = "application/x-www-form-urlencoded") -> dict[str, Any]:
    request = urllib.request.Request(fake.origin + path, data=body if verb == "POST" else None, method=verb,
                                     headers={"Content-Type": content_type, "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_a_wrong_request_fails_the_contract() -> None:
    """The stand-in is strict: a misspelt argument, a missing one, a wrong type, a wrong verb,
    a JSON body where WebClient sends a form, and a method Slack does not have are all caught."""
    with fakeslack.serve() as fake:
        assert _post(fake, "/api/chat.postMessage", b"channel=C1&txt=hi")["ok"] is False
        assert _post(fake, "/api/reactions.add", b"channel=C1&name=joy")["ok"] is False
        assert _post(fake, "/api/conversations.list", b"limit=lots")["ok"] is False
        assert _post(fake, "/api/users.info", b"", verb="GET")["ok"] is False
        assert _post(fake, "/api/users.info", b'{"user": "U1"}', content_type="application/json")["ok"] is False
        assert _post(fake, "/api/chat.postMesage", b"channel=C1&text=hi")["ok"] is False
        assert _post(fake, "/api/chat.postMessage", b"channel=C1&text=hi")["ok"] is True
    joined = "\n".join(fake.violations)
    for expected in ("unknown parameter 'txt'", "missing required parameter 'timestamp'", "'limit' is \"lots\", not number",
                     "verb GET", "body 'application/json'", "chat.postMesage: not a method"):
        assert expected in joined


def test_every_answer_of_the_stand_in_fits_slacks_response_types() -> None:
    """Before: the answers were written by hand and checked against nothing. Each canned answer
    fits its method's response type in @slack/web-api, and one that does not is caught."""
    from tests.builtins import declared

    for method, answer in fakeslack.ANSWERS.items():
        assert declared.answer_problems("slack", method, answer) == [], method
    assert set(fakeslack.ANSWERS) | {"files.getUploadURLExternal"} == set(declared.SLACK_METHODS)
    wrong = {"ok": True, "chanel": "C1", "ts": 1712345678.0002, "message": {"text": "x", "user_name": "ada"}}
    assert sorted(declared.answer_problems("slack", "chat.postMessage", wrong)) == [
        "answer: 'ts' is 1712345678.0002, not string", "answer: unknown parameter 'chanel'",
        "answer: unknown parameter 'message.user_name'"]
    with fakeslack.serve() as fake:
        fake.script["chat.postMessage"] = wrong
        assert _post(fake, "/api/chat.postMessage", b"channel=C1&text=hi") == wrong
    assert fake.violations == [f"chat.postMessage: {p}" for p in declared.answer_problems("slack", "chat.postMessage", wrong)]


async def test_an_upload_url_elsewhere_is_refused(tmp_path: Path) -> None:
    """An answer cannot steer the file (and the bearer token) to another origin."""
    with fakeslack.serve() as fake:
        fake.script["files.getUploadURLExternal"] = {"ok": True, "upload_url": "https://files.evil.example/upload/v1/F1",
                                                     "file_id": "F1"}
        async with pincer_on(tmp_path, _config(fake), secrets={"slack_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="slack", args={"action": "upload_file", "channel": "C1",
                                                                       "filename": "a.txt", "content": "x"}))
    assert not result.ok and result.error["code"] == "egress_denied"
    assert [r.get("method") for r in fake.seen] == ["files.getUploadURLExternal"]


async def test_a_token_echoed_back_is_redacted(tmp_path: Path) -> None:
    with fakeslack.serve() as fake:
        fake.echo_token = True
        async with pincer_on(tmp_path, _config(fake), secrets={"slack_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="slack", args={"action": "get_channel_history",
                                                                       "channel": "C1"}))
    text = json.dumps(result.output)
    assert result.ok and TOKEN not in text and "REDACTED" in text


async def test_reads_run_and_writes_ask_under_a_read_grant(tmp_path: Path) -> None:
    with fakeslack.serve() as fake:
        config = _config(fake, grant='effects = { network = "allow", use_secret = "allow" }')
        asked: list[Any] = []
        async with pincer_on(tmp_path, config, secrets={"slack_bot_token": TOKEN}) as pincer:

            async def deny(approval: Any) -> None:
                asked.append(approval)
                await pincer.dispatcher.answer(approval.id, "deny", by="test")

            read = await pincer.call(CallRequest(tool="slack", args={"action": "list_channels"}), on_approval=deny)
            write = await pincer.call(CallRequest(tool="slack", args={"action": "send_message", "channel": "C1",
                                                                      "text": "x"}), on_approval=deny)
    assert read.ok
    assert not write.ok and write.error["code"] == "approval_denied", write.error
    assert len(asked) == 1 and "external_write" in asked[0].effects
    assert [r.get("method") for r in fake.seen] == ["conversations.list"]


def test_read_only_drops_every_write() -> None:
    tool = slack_tool(read_only=True)
    assert tool.spec.input_schema["properties"]["action"]["enum"] == [
        "get_channel_history", "get_thread_replies", "list_channels", "get_user_info"]
    assert tool.spec.annotations["readOnlyHint"] is True


def test_pincer_auth_setup_slack_checks_the_token_with_auth_test(tmp_path: Path) -> None:
    """Slack refuses a token with HTTP 200 and ok: false: the check reads the body, so a refused
    token is not stored (a status-only check would have stored it)."""
    from tests.builtins.test_auth_cli import _pincer

    with fakeslack.serve() as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text(f'[builtins.slack]\nenabled = true\nbase_url = "{fake.origin}"\n')
        refused = _pincer(home, "auth", "setup", "slack", stdin="xoxb-not-the-token\n")
        done = _pincer(home, "auth", "setup", "slack", "--json", stdin=TOKEN + "\n")
        status = {r["tool"]: r for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert refused.returncode == 1 and "refused the token" in refused.stderr
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checked"] == f"{fake.origin}/api/auth.test"
    assert status["slack"]["stored"] is True and status["slack"]["secret"] == "slack_bot_token"
    assert [r.get("method") for r in fake.seen] == ["auth.test", "auth.test"] and fake.violations == []
    for out in (refused, done):
        assert TOKEN not in out.stdout + out.stderr and "xoxb-not-the-token" not in out.stdout + out.stderr


@pytest.mark.parametrize("path", ["/upload/../api/chat.postMessage", "/upload/%2e%2e/api/x", "/api/upload/v1/F1"])
def test_an_upload_url_leaving_the_upload_path_is_refused(path: str) -> None:
    from pincer.builtins.api import BaseUrl
    from pincer.builtins.slack import _upload_path
    from pincer.core.errors import EgressDenied

    base = BaseUrl.parse("https://files.slack.com", configured=False, key="k")
    assert _upload_path(base, "https://files.slack.com/upload/v1/ABC?x=1") == "/upload/v1/ABC?x=1"
    with pytest.raises(EgressDenied):
        _upload_path(base, f"https://files.slack.com{path}")


async def test_a_workspace_file_goes_up_byte_for_byte(tmp_path: Path) -> None:
    """Before upload_workspace_file only text the model wrote could be uploaded: a chart or a PDF
    the agent made in its workspace could not reach Slack at all."""
    _workspace(tmp_path)
    with fakeslack.serve() as fake:
        async with pincer_on(tmp_path, _config(fake, grant=UPLOAD_GRANT), secrets={"slack_bot_token": TOKEN}) as pincer:
            sent = await pincer.call(CallRequest(tool="slack", args={"action": "upload_workspace_file",
                                                                     "channel": "C0123ABCD", "path": "out/chart.png"}))
    assert sent.ok, sent.error
    assert fake.uploads["F0FILE1234"] == CHART
    ticket = next(r for r in fake.seen if r.get("method") == "files.getUploadURLExternal")
    assert ticket["form"] == {"filename": "chart.png", "length": str(len(CHART))}
    done = next(r for r in fake.seen if r.get("method") == "files.completeUploadExternal")
    assert json.loads(done["form"]["files"]) == [{"id": "F0FILE1234", "title": "chart.png"}]


UPLOAD_GRANT = GRANT.replace("}", ', read_filesystem = "allow" }')


async def test_reading_the_workspace_is_an_effect_a_grant_decides(tmp_path: Path) -> None:
    """upload_workspace_file reads the workspace (read_filesystem) besides posting: a grant that
    denies reading refuses it before anything is sent, and leaves text uploads alone."""
    _workspace(tmp_path)
    no_reading = GRANT.replace("}", ', read_filesystem = "deny" }')
    with fakeslack.serve() as fake:
        async with pincer_on(tmp_path, _config(fake, grant=no_reading), secrets={"slack_bot_token": TOKEN}) as pincer:
            refused = await pincer.call(CallRequest(tool="slack", args={"action": "upload_workspace_file",
                                                                        "channel": "C1", "path": "out/chart.png"}))
            assert fake.seen == []
            text = await pincer.call(CallRequest(tool="slack", args={"action": "upload_file", "channel": "C1",
                                                                     "filename": "a.txt", "content": "x"}))
    assert not refused.ok and refused.error["code"] == "denied", refused.error
    assert "read_filesystem" in refused.error["message"]
    assert text.ok, text.error


@pytest.mark.parametrize(
    ("path", "code"),
    [("../secret.txt", "denied"), ("/etc/passwd", "denied"), ("link/secret.txt", "denied"),
     ("leak.png", "denied"), ("missing.png", "tool_error"), ("out", "tool_error")],
)
async def test_a_workspace_upload_reads_only_inside_the_workspace(tmp_path: Path, path: str, code: str) -> None:
    workspace = _workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for slack")
    (workspace / "link").symlink_to(outside)
    (workspace / "leak.png").symlink_to(outside / "secret.txt")
    with fakeslack.serve() as fake:
        async with pincer_on(tmp_path, _config(fake, grant=UPLOAD_GRANT), secrets={"slack_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="slack", args={"action": "upload_workspace_file",
                                                                       "channel": "C1", "path": path}))
    assert not result.ok
    assert result.error["code"] == code, result.error
    assert fake.seen == []


async def test_a_workspace_file_over_the_limit_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    from pincer.builtins.slack import MAX_WORKSPACE_UPLOAD_BYTES

    workspace = _workspace(tmp_path)
    with (workspace / "big.bin").open("wb") as big:
        big.truncate(MAX_WORKSPACE_UPLOAD_BYTES + 1)  # sparse: no disk used
    with fakeslack.serve() as fake:
        async with pincer_on(tmp_path, _config(fake, grant=UPLOAD_GRANT), secrets={"slack_bot_token": TOKEN}) as pincer:
            too_big = await pincer.call(CallRequest(tool="slack", args={"action": "upload_workspace_file",
                                                                        "channel": "C1", "path": "big.bin"}))
    assert too_big.error["code"] == "usage_error"
    assert "50 MB limit" in too_big.error["message"] and "link" in too_big.error["hint"]
    assert fake.seen == []
