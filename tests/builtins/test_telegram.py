"""``telegram`` through the real call chain against a local Bot API stand-in that checks every
request and every answer against npm ``@grammyjs/types`` (tests/builtins/declared.py: each
method's parameters and its ``ApiResponse`` compiled into JSON Schema). Telegram publishes no
machine-readable description of the Bot API in a package registry, so grammY's declarations are
the description. The bot token sits in the
URL path: it reaches the stand-in, and nothing else (outputs, errors, the audit, log lines at
DEBUG, the exception texts of a direct call), also when the request fails: connection refused,
a 500 that echoes the path, a timeout. A workspace file goes up as ``multipart/form-data``, read
under the file tools' rules."""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pincer.builtins.catalog import BUILTIN_NAMES
from pincer.builtins.telegram import ACTIONS, telegram_tool
from pincer.core.errors import PincerError
from pincer.core.values import CallRequest, HostContext
from tests.builtins import faketelegram
from tests.builtins.conftest import pincer_on
from tests.builtins.faketelegram import TOKEN
from tests.safety.disguises import revealed

pytestmark = pytest.mark.anyio

GRANT = 'effects = { network = "allow", use_secret = "allow", external_write = "allow", read_filesystem = "allow" }'
PHOTO = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8 + b"\r\n--not-a-boundary\r\n"
DOCUMENT = b"%PDF-1.7\n" + "r\u00e9sum\u00e9\r\n".encode() * 100

CALLS: dict[str, dict[str, Any]] = {
    "send_message": {"chat_id": 424242, "text": "*hello*", "parse_mode": "MarkdownV2", "reply_to_message_id": 50,
                     "disable_notification": True},
    "send_photo": {"chat_id": "@pincer_channel", "photo": "https://example.org/cat.jpg", "caption": "a cat"},
    "send_document": {"chat_id": 424242, "document": "BQACAgQAAxk", "caption": "the report", "message_thread_id": 7},
    "send_photo_file": {"chat_id": 424242, "path": "out/cat.png", "caption": "a cat", "reply_to_message_id": 50},
    "send_document_file": {"chat_id": "@pincer_channel", "path": "report.pdf", "message_thread_id": 7,
                           "disable_notification": True, "parse_mode": "HTML", "caption": "<b>the</b> report"},
    "get_updates": {"offset": 100, "limit": 10, "allowed_updates": ["message", "edited_message"]},
    "edit_message_text": {"chat_id": 424242, "message_id": 52, "text": "hello again", "parse_mode": "HTML"},
    "delete_message": {"chat_id": 424242, "message_id": 52},
}
METHODS = {"send_message": "sendMessage", "send_photo": "sendPhoto", "send_document": "sendDocument",
           "send_photo_file": "sendPhoto", "send_document_file": "sendDocument",
           "get_updates": "getUpdates", "edit_message_text": "editMessageText", "delete_message": "deleteMessage"}


def _config(base_url: str, extra: str = "") -> str:
    return f"""
[builtins.telegram]
enabled = true
base_url = "{base_url}"

{extra}

[[grants]]
tool = "telegram"
{GRANT}
"""


def _workspace(home: Path) -> Path:
    """The default workspace of a pincer at ``home``, with a photo and a document in it."""
    workspace = home / "workspace"
    (workspace / "out").mkdir(parents=True, exist_ok=True)
    (workspace / "out" / "cat.png").write_bytes(PHOTO)
    (workspace / "report.pdf").write_bytes(DOCUMENT)
    return workspace


def _no_token(*texts: str) -> None:
    for text in texts:
        assert TOKEN not in text
        assert TOKEN.split(":")[1] not in text  # not even the secret half


def test_every_action_is_exercised() -> None:
    assert set(CALLS) == {a.name for a in ACTIONS} == set(METHODS)


@pytest.mark.parametrize("action", sorted(CALLS))
async def test_each_action_fits_the_bot_api_method_table(
    tmp_path: Path, action: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _workspace(tmp_path)
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="telegram", args={"action": action, **CALLS[action]}))
            records = await pincer.audit.records()
    assert result.ok, result.error
    assert fake.violations == []
    (seen,) = fake.seen
    assert seen["method"] == METHODS[action] and seen["path"] == f"/bot{TOKEN}/{METHODS[action]}"
    if action.endswith("_file"):
        assert seen["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")
        (name, upload), = seen["files"].items()
        assert (upload.filename, upload.data) == (("cat.png", PHOTO) if name == "photo" else ("report.pdf", DOCUMENT))
    _no_token(json.dumps(result.output), json.dumps([dataclasses.asdict(r) for r in records], default=str), caplog.text)


async def test_answers_are_shaped_for_a_model(tmp_path: Path) -> None:
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            sent = await pincer.call(CallRequest(tool="telegram", args={"action": "send_message", "chat_id": 424242,
                                                                        "text": "hi", "reply_to_message_id": 50}))
            photo = await pincer.call(CallRequest(tool="telegram", args={"action": "send_photo", "chat_id": 1,
                                                                         "photo": "AgAC"}))
            updates = await pincer.call(CallRequest(tool="telegram", args={"action": "get_updates"}))
            deleted = await pincer.call(CallRequest(tool="telegram", args={"action": "delete_message", "chat_id": 1,
                                                                           "message_id": 5}))
    assert sent.output == {"message_id": 52, "date": 1712345678, "from": "pincer_test_bot", "text": "hi",
                           "chat": {"id": 424242, "type": "private", "username": "ada"}}
    assert fake.seen[0]["body"] == {"chat_id": 424242, "text": "hi", "reply_parameters": {"message_id": 50}}
    assert photo.output["photo"] == ["AgACAgQAAx2"]  # the largest size only
    assert updates.output["next_offset"] == 102
    assert [u["type"] for u in updates.output["updates"]] == ["message", "edited_message"]
    assert fake.seen[2]["body"] == {"limit": 100, "timeout": 0}
    assert deleted.output == {"deleted": True, "chat_id": 1, "message_id": 5}


async def test_ok_false_is_a_tool_error_with_telegrams_code(tmp_path: Path) -> None:
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            missing = await pincer.call(CallRequest(tool="telegram", args={"action": "send_message", "chat_id": 404,
                                                                           "text": "x"}))
        async with pincer_on(tmp_path / "b", _config(fake.origin), secrets={"telegram_bot_token": "1:wrong"}) as pincer:
            refused = await pincer.call(CallRequest(tool="telegram", args={"action": "get_updates"}))
    assert missing.error["code"] == "api_refused" and missing.error["api_code"] == "400"
    assert "chat not found" in missing.error["message"]
    assert refused.error["api_code"] == "401" and "pincer auth setup telegram" in refused.error["hint"]


def _post(fake: faketelegram.FakeTelegram, path: str, body: bytes, *, verb: str = "POST",
          content_type: str = "application/json") -> int:
    request = urllib.request.Request(fake.origin + path, data=body if verb == "POST" else None, method=verb,
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_wrong_request_fails_the_contract() -> None:
    """Misspelt, missing and mistyped parameters, a wrong verb, a form body, a method the Bot API
    does not have, and a path without the bot token segment are all caught."""
    bot = f"/bot{TOKEN}"
    with faketelegram.serve() as fake:
        assert _post(fake, f"{bot}/sendMessage", b'{"chat_id": 1, "txt": "hi"}') == 400
        assert _post(fake, f"{bot}/deleteMessage", b'{"chat_id": 1, "message_id": "5"}') == 400
        assert _post(fake, f"{bot}/sendMessage", b'{"chat_id": 1, "text": "x", "parse_mode": "XML"}') == 400
        assert _post(fake, f"{bot}/sendMessage", b'{"chat_id": 1, "text": "x", "reply_parameters": {"mesage_id": 1}}') == 400
        assert _post(fake, f"{bot}/getMe", b"", verb="GET") == 400
        assert _post(fake, f"{bot}/getMe", b"", verb="POST") == 200
        assert _post(fake, f"{bot}/sendMessage", b"chat_id=1&text=hi", content_type="application/x-www-form-urlencoded") == 400
        assert _post(fake, f"{bot}/sendMesage", b'{"chat_id": 1, "text": "hi"}') == 400
        assert _post(fake, "/sendMessage", b'{"chat_id": 1, "text": "hi"}') == 404
        assert _post(fake, f"{bot}/sendMessage", b'{"chat_id": 1, "text": "hi"}') == 200
    joined = "\n".join(fake.violations)
    for expected in ("unknown parameter 'txt'", "missing required parameter 'text'", "'message_id' is \"5\", not number",
                     "'parse_mode' is \"XML\", not one of [\"HTML\", \"Markdown\", \"MarkdownV2\"]",
                     "unknown parameter 'reply_parameters.mesage_id'", "verb GET",
                     "not application/json", "sendMesage is not a Bot API method", "not /bot<token>/<method>"):
        assert expected in joined, expected


class _Secrets:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.recorded: list[str] = []

    def find(self, name: str) -> str | None:
        self.asked.append(name)
        return TOKEN if name == "telegram_bot_token" else None

    def record(self, value: str) -> None:
        self.recorded.append(value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _direct_failure(base_url: str, timeout_s: float = 30.0) -> PincerError:
    tool = telegram_tool(base_url=base_url)
    secrets = _Secrets()
    host = HostContext(session="main", tool="telegram", capabilities=tool.spec.capabilities, secrets=secrets,
                       timeout_s=timeout_s)
    with pytest.raises(PincerError) as caught:
        await tool.run({"action": "send_message", "chat_id": 1, "text": "x"}, host)
    assert secrets.recorded == [TOKEN]  # it was injected: the failure happened on the wire
    return caught.value


def _texts(exc: BaseException) -> list[str]:
    out = [str(exc), repr(exc), json.dumps(getattr(exc, "to_dict", dict)(), default=str)]
    cause = exc.__cause__ or exc.__context__
    return out + (_texts(cause) if cause is not None and not exc.__suppress_context__ else [])


async def test_a_refused_connection_names_no_token(caplog: pytest.LogCaptureFixture) -> None:
    """Before the fix the egress error read "POST http://127.0.0.1:PORT/bot<token>/sendMessage:
    could not connect ...": the token in the exception text of every direct caller."""
    caplog.set_level(logging.DEBUG)
    exc = await _direct_failure(f"http://127.0.0.1:{_closed_port()}")
    assert exc.code == "tool_error" and "could not connect" in exc.message
    assert "/bot[REDACTED:secret]/sendMessage" in exc.message
    _no_token(*_texts(exc), caplog.text)


async def test_a_500_echoing_the_path_names_no_token(caplog: pytest.LogCaptureFixture) -> None:
    """Before the fix the tool's error quoted the answer, "Internal error at /bot<token>/...":
    the API echoing the request path handed the token to the exception text."""
    caplog.set_level(logging.DEBUG)
    with faketelegram.serve() as fake:
        fake.mode = "500"
        exc = await _direct_failure(fake.origin)
    assert exc.code == "api_refused" and "Internal error" in exc.message
    _no_token(*_texts(exc), caplog.text)


async def test_a_500_echoing_the_path_dash_joined_names_no_token(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 34 item 3. Failed on main: the response body's scrub replaced the token's literal forms
    only, so "Internal error at /-b-o-t-1-2-3-..." carried it into the exception text."""
    caplog.set_level(logging.DEBUG)
    with faketelegram.serve() as fake:
        fake.mode = "500-dashed"
        exc = await _direct_failure(fake.origin)
    assert exc.code == "api_refused" and "Internal error" in exc.message
    assert not any(revealed(text, TOKEN) for text in [*_texts(exc), caplog.text]), exc.message


async def test_a_timeout_names_no_token(caplog: pytest.LogCaptureFixture) -> None:
    """Before the fix: "POST http://127.0.0.1:PORT/bot<token>/sendMessage timed out ..."."""
    caplog.set_level(logging.DEBUG)
    with faketelegram.serve() as fake:
        fake.mode = "hang"
        exc = await _direct_failure(fake.origin, timeout_s=0.5)
    assert exc.code == "tool_timeout"
    _no_token(*_texts(exc), caplog.text)


@pytest.mark.parametrize("mode", ["refused", "500", "hang"])
async def test_failures_through_the_chain_name_no_token(
    tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with faketelegram.serve() as fake:
        fake.mode = mode
        base = f"http://127.0.0.1:{_closed_port()}" if mode == "refused" else fake.origin
        config = _config(base, "[tools]\ntimeout_s = 1.0" if mode == "hang" else "")
        async with pincer_on(tmp_path, config, secrets={"telegram_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="telegram", args={"action": "send_message", "chat_id": 1,
                                                                          "text": "x"}))
            records = await pincer.audit.records()
    assert not result.ok
    _no_token(json.dumps(result.error), json.dumps([dataclasses.asdict(r) for r in records], default=str), caplog.text)


async def test_the_token_check_sends_get_me_and_names_no_token(tmp_path: Path) -> None:
    from pincer.builtins.auth import target, validate_token
    from pincer.config import parse_config

    with faketelegram.serve() as fake:
        settings = parse_config(_config(fake.origin), home=tmp_path).builtins
        item = target(settings, "telegram")
        checked = await validate_token(item, TOKEN)
        with pytest.raises(PincerError) as refused:
            await validate_token(item, "7000:wrongwrongwrong")
    assert checked == f"{fake.origin}/bot{{TELEGRAM_BOT_TOKEN}}/getMe"
    assert [s["method"] for s in fake.seen] == ["getMe", "getMe"] and fake.violations == []
    assert "401" in refused.value.message and "wrongwrongwrong" not in str(refused.value)


def test_the_mtproto_user_account_tool_is_not_offered() -> None:
    assert "telegram_mtproto" not in BUILTIN_NAMES and "telegram" in BUILTIN_NAMES


def test_pincer_auth_setup_telegram_prints_no_token(tmp_path: Path) -> None:
    from tests.builtins.test_auth_cli import _pincer

    with faketelegram.serve() as fake:
        home = tmp_path / "home"
        home.mkdir()
        (home / "config.toml").write_text(f'[builtins.telegram]\nenabled = true\nbase_url = "{fake.origin}"\n')
        refused = _pincer(home, "auth", "setup", "telegram", stdin="7000:wrongwrongwrongwrong\n")
        done = _pincer(home, "auth", "setup", "telegram", "--json", stdin=TOKEN + "\n")
    assert refused.returncode == 1 and "401" in refused.stderr
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["checked"] == f"{fake.origin}/bot{{TELEGRAM_BOT_TOKEN}}/getMe"
    for out in (refused, done):
        _no_token(out.stdout + out.stderr)
        assert "wrongwrongwrong" not in out.stdout + out.stderr


async def test_an_upload_sends_the_parameters_as_the_bot_api_reads_them(tmp_path: Path) -> None:
    """The multipart fields carry numbers, booleans and reply_parameters as the Bot API parses
    them (JSON), strings as they are, and the file under the method's own parameter name."""
    _workspace(tmp_path)
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            sent = await pincer.call(CallRequest(tool="telegram", args={"action": "send_photo_file", **CALLS["send_photo_file"]}))
    assert sent.ok, sent.error
    assert sent.output["photo"] == ["AgACAgQAAx2"] and sent.output["caption"] == "a cat"
    body = dict(fake.seen[0]["body"])
    assert body.pop("photo").content_type == "image/png"
    assert body == {"chat_id": "424242", "caption": "a cat", "reply_parameters": {"message_id": 50}}


@pytest.mark.parametrize(
    ("path", "code"),
    [("../secret.txt", "denied"), ("/etc/passwd", "denied"), ("link/secret.txt", "denied"),
     ("leak.png", "denied"), ("missing.png", "tool_error"), ("out", "tool_error")],
)
async def test_an_upload_reads_only_inside_the_workspace(tmp_path: Path, path: str, code: str) -> None:
    """``..``, an absolute path and a symlink out of the workspace (a directory link or a file
    link) are refused as the file tools refuse them, and nothing reaches Telegram."""
    workspace = _workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for telegram")
    (workspace / "link").symlink_to(outside)
    (workspace / "leak.png").symlink_to(outside / "secret.txt")
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            result = await pincer.call(CallRequest(tool="telegram", args={"action": "send_document_file", "chat_id": 1,
                                                                          "path": path}))
    assert not result.ok
    assert result.error["code"] == code, result.error
    assert fake.seen == []


@pytest.mark.parametrize(("action", "limit_mb"), [("send_photo_file", 10), ("send_document_file", 50)])
async def test_an_upload_over_telegrams_limit_is_refused_before_it_is_sent(
    tmp_path: Path, action: str, limit_mb: int
) -> None:
    workspace = _workspace(tmp_path)
    with (workspace / "big.bin").open("wb") as big:
        big.truncate(limit_mb * 1024 * 1024 + 1)  # sparse: no disk used
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            too_big = await pincer.call(CallRequest(tool="telegram", args={"action": action, "chat_id": 1,
                                                                           "path": "big.bin"}))
    assert too_big.error["code"] == "usage_error"
    assert f"{limit_mb} MB limit" in too_big.error["message"] and "https URL" in too_big.error["hint"]
    assert fake.seen == []


async def test_a_document_at_the_limit_is_sent_whole(tmp_path: Path) -> None:
    """The egress limit on the request (max_request_bytes in the capabilities file) leaves room for
    a 50 MB document and its multipart framing."""
    workspace = _workspace(tmp_path)
    with (workspace / "big.bin").open("wb") as big:
        big.truncate(50 * 1024 * 1024)
    with faketelegram.serve() as fake:
        async with pincer_on(tmp_path, _config(fake.origin), secrets={"telegram_bot_token": TOKEN}) as pincer:
            sent = await pincer.call(CallRequest(tool="telegram", args={"action": "send_document_file", "chat_id": 1,
                                                                        "path": "big.bin", "caption": "x" * 1024}))
    assert sent.ok, sent.error
    assert len(fake.seen[0]["files"]["document"].data) == 50 * 1024 * 1024


async def test_reading_the_workspace_is_an_effect_the_grant_decides(tmp_path: Path) -> None:
    """With read_filesystem denied in the grant (it is allowed by default, as for the file tools),
    a photo by URL still goes and a workspace file does not."""
    _workspace(tmp_path)
    grant = GRANT.replace('read_filesystem = "allow"', 'read_filesystem = "deny"')
    with faketelegram.serve() as fake:
        config = _config(fake.origin).replace(GRANT, grant)
        async with pincer_on(tmp_path, config, secrets={"telegram_bot_token": TOKEN}) as pincer:
            by_url = await pincer.call(CallRequest(tool="telegram", args={"action": "send_photo", **CALLS["send_photo"]}))
            by_file = await pincer.call(CallRequest(tool="telegram", args={"action": "send_photo_file",
                                                                           **CALLS["send_photo_file"]}))
    assert by_url.ok, by_url.error
    assert not by_file.ok and by_file.error["code"] == "denied", by_file.error
    assert [s["method"] for s in fake.seen] == ["sendPhoto"]


def test_every_answer_of_the_stand_in_fits_the_bot_apis_result_types() -> None:
    """Before: the answers were written by hand and checked against nothing, and getMe's lacked
    nine fields grammY declares required (can_join_groups, supports_inline_queries, ...). Each
    answer fits its method's ApiResponse, and one that does not is caught, also inside
    getUpdates' messages."""
    from tests.builtins import declared

    bodies = {"sendMessage": {"text": "hi"}, "sendPhoto": {"caption": "c"}, "sendDocument": {}, "getUpdates": {},
              "editMessageText": {"message_id": 5, "text": "t"}, "deleteMessage": {}, "getMe": {}}
    assert set(bodies) == set(declared.TELEGRAM_METHODS)
    for method, body in bodies.items():
        assert declared.answer_problems("telegram", method, {"ok": True, "result": faketelegram.answer(method, body)}) == []
    assert declared.answer_problems("telegram", "getMe", {"ok": True, "result": faketelegram.BOT})[:2] == [
        "answer: missing required parameter 'result.allows_users_to_create_topics'",
        "answer: missing required parameter 'result.can_connect_to_business'"]
    update = faketelegram.answer("getUpdates", {})[0]
    misspelt = {**update, "message": {**update["message"], "txet": "hi"}}
    assert declared.answer_problems("telegram", "getUpdates", {"ok": True, "result": [misspelt]}) == [
        "answer: unknown parameter 'result.0.message.txet'"]
    assert declared.answer_problems("telegram", "sendMessage", {"ok": False, "description": "Bad Request"}) == [
        "answer: missing required parameter 'error_code'"]


def test_a_wrong_multipart_request_fails_the_contract() -> None:
    """The stand-in reads a multipart body as the Bot API does: a misspelt parameter, a file where
    the method takes none, a missing file and a body without a boundary are caught."""
    from pincer.builtins.telegram import multipart_body

    bot = f"/bot{TOKEN}"
    with faketelegram.serve() as fake:
        body, kind = multipart_body({"chat_id": 1, "captoin": "x"}, file_field="photo", filename="a.png", data=b"png")
        assert _post(fake, f"{bot}/sendPhoto", body, content_type=kind) == 400
        body, kind = multipart_body({"chat_id": 1}, file_field="caption", filename="a.png", data=b"png")
        assert _post(fake, f"{bot}/sendPhoto", body, content_type=kind) == 400
        body, kind = multipart_body({"chat_id": 1}, file_field="document", filename="a.pdf", data=b"pdf")
        assert _post(fake, f"{bot}/sendPhoto", body, content_type=kind) == 400
        assert _post(fake, f"{bot}/sendPhoto", body, content_type="multipart/form-data") == 400
        body, kind = multipart_body({"chat_id": 1}, file_field="photo", filename="a.png", data=b"png")
        assert _post(fake, f"{bot}/sendPhoto", body, content_type=kind) == 200
    joined = "\n".join(fake.violations)
    for expected in ("unknown parameter 'captoin'", "'caption' is {\"pincer_upload\": \"a.png\"}, not string",
                     "missing required parameter 'photo'",
                     "without a boundary"):
        assert expected in joined, expected
