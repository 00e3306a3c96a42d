"""Contract tests of the six Google tools: each action through the whole call chain (the real
Pincer and dispatcher) against the local Google stand-in, which validates every request, and its
own answers, with Google's discovery documents. One login (through authlib's authorization
server) serves all six; the access token is injected host-side and absent from every output, log
and audit record; revoking the login makes all six ask for it again."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from pincer.builtins.google import GOOGLE_TOOLS, calendar, docs, drive, gmail, login_scopes, sheets, slides
from pincer.builtins.oauth import begin_login, code_from_redirect, exchange_code, provider_for, revoke_login
from pincer.config import parse_config
from pincer.core.values import CallRequest
from tests.builtins import fakegoogle, googlediscovery
from tests.builtins.fakegoogle import CLIENT_ID, CLIENT_SECRET, FakeGoogle

pytestmark = pytest.mark.anyio
HTTP_TIMEOUT_S = 30.0

_GRANTS = "".join(
    f'\n[[grants]]\ntool = "{t}"\neffects = {{ network = "allow", use_secret = "allow", external_write = "allow" }}\n'
    for t in GOOGLE_TOOLS
)
_MAIL = {"to": ["bob@example.com"], "subject": "Quarterly numbers", "body": "See the sheet.",
         "cc": ["carol@example.com"], "bcc": ["dave@example.com"]}
_REPLY = {"thread_id": "18c0", "in_reply_to": "<CAB123@mail.example.com>"}

# tool -> action -> (arguments, the discovery method ids it must call, in order)
CALLS: dict[str, dict[str, tuple[dict[str, Any], tuple[str, ...]]]] = {
    "gmail": {
        "search_messages": ({"query": "is:unread from:alice", "limit": 5, "label_ids": ["INBOX", "UNREAD"]},
                            ("gmail.users.messages.list", "gmail.users.messages.get")),
        "get_message": ({"message_id": "18c1"}, ("gmail.users.messages.get",)),
        "send_message": ({**_MAIL, **_REPLY}, ("gmail.users.messages.send",)),
        "create_draft": (_MAIL, ("gmail.users.drafts.create",)),
        "list_labels": ({}, ("gmail.users.labels.list",)),
        "modify_labels": ({"message_id": "18c1", "add_label_ids": ["STARRED"], "remove_label_ids": ["UNREAD"]},
                          ("gmail.users.messages.modify",)),
        "trash_message": ({"message_id": "18c1"}, ("gmail.users.messages.trash",)),
    },
    "google_calendar": {
        "list_calendars": ({}, ("calendar.calendarList.list",)),
        "list_events": ({"time_min": "2025-06-01T00:00:00Z", "time_max": "2025-06-08T00:00:00Z", "query": "standup",
                         "limit": 10}, ("calendar.events.list",)),
        "get_event": ({"event_id": "ev1", "calendar_id": "team@example.com"}, ("calendar.events.get",)),
        "create_event": ({"summary": "Review", "start": "2025-06-02T10:00:00", "end": "2025-06-02T11:00:00",
                          "time_zone": "Europe/Berlin", "location": "Room 1", "description": "Q2",
                          "attendees": ["bob@example.com"]}, ("calendar.events.insert",)),
        "update_event": ({"event_id": "ev1", "summary": "Review (moved)", "start": "2025-06-03",
                          "end": "2025-06-04"}, ("calendar.events.patch",)),
        "delete_event": ({"event_id": "ev1"}, ("calendar.events.delete",)),
    },
    "google_drive": {
        "list_files": ({"folder_id": "root", "limit": 10, "order_by": "modifiedTime desc"}, ("drive.files.list",)),
        "search_files": ({"query": "name contains 'report' and trashed = false"}, ("drive.files.list",)),
        "get_file": ({"file_id": "f1"}, ("drive.files.get",)),
        "download_file": ({"file_id": "f1"}, ("drive.files.get", "drive.files.get")),
        "upload_file": ({"name": "notes.txt", "content": "hello", "folder_id": "root"}, ("drive.files.create",)),
        "create_folder": ({"name": "Reports", "folder_id": "root"}, ("drive.files.create",)),
        "trash_file": ({"file_id": "f1"}, ("drive.files.update",)),
    },
    "google_docs": {
        "read_document": ({"document_id": "d1"}, ("docs.documents.get",)),
        "create_document": ({"title": "Minutes"}, ("docs.documents.create",)),
        "append_text": ({"document_id": "d1", "text": "Next steps\n"}, ("docs.documents.batchUpdate",)),
        "replace_text": ({"document_id": "d1", "find": "{{name}}", "replace_with": "Ada", "match_case": False},
                         ("docs.documents.batchUpdate",)),
    },
    "google_sheets": {
        "get_spreadsheet": ({"spreadsheet_id": "s1"}, ("sheets.spreadsheets.get",)),
        "read_range": ({"spreadsheet_id": "s1", "range": "Q2 budget!A1:B2"}, ("sheets.spreadsheets.values.get",)),
        "write_range": ({"spreadsheet_id": "s1", "range": "Sheet1!A1:B2", "values": [["a", 1], [True, None]]},
                        ("sheets.spreadsheets.values.update",)),
        "append_rows": ({"spreadsheet_id": "s1", "range": "Sheet1!A:B", "values": [["x", 2.5]]},
                        ("sheets.spreadsheets.values.append",)),
        "create_spreadsheet": ({"title": "Budget"}, ("sheets.spreadsheets.create",)),
    },
    "google_slides": {
        "read_presentation": ({"presentation_id": "p1"}, ("slides.presentations.get",)),
        "create_presentation": ({"title": "Deck"}, ("slides.presentations.create",)),
        "create_slide": ({"presentation_id": "p1", "layout": "TITLE_ONLY", "index": 1},
                         ("slides.presentations.batchUpdate",)),
        "replace_text": ({"presentation_id": "p1", "find": "2024", "replace_with": "2025"},
                         ("slides.presentations.batchUpdate",)),
    },
}
MODULES = {"gmail": gmail, "google_calendar": calendar, "google_docs": docs, "google_drive": drive,
           "google_sheets": sheets, "google_slides": slides}
ONE_READ = {"gmail": "list_labels", "google_calendar": "list_calendars", "google_docs": "read_document",
            "google_drive": "get_file", "google_sheets": "get_spreadsheet", "google_slides": "read_presentation"}


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    with fakegoogle.serve() as server:
        yield server


async def login(fake: FakeGoogle, home: Path, store: Any) -> str:
    """One Google login for all six tools, the way ``pincer auth setup google`` does it."""
    settings = parse_config(fake.config(*GOOGLE_TOOLS), home=home).builtins
    provider = provider_for("google", settings)
    store.set("google_oauth_client_id", CLIENT_ID)
    store.set("google_oauth_client_secret", CLIENT_SECRET)
    start = begin_login(provider, client_id=CLIENT_ID, scopes=login_scopes(settings),
                        redirect_uri="http://127.0.0.1:4711/callback")
    consent = httpx.get(start.url, follow_redirects=False, timeout=HTTP_TIMEOUT_S)
    code = code_from_redirect(start, consent.headers["location"])
    await exchange_code(provider, start, code, client_id=CLIENT_ID, client_secret=CLIENT_SECRET, store=store, home=home)
    return str(store.get("google_oauth_token"))


@asynccontextmanager
async def google_pincer(fake: FakeGoogle, home: Path, *, logged_in: bool = True) -> AsyncIterator[Any]:
    from pincer.service import Pincer

    config = parse_config(fake.config(*GOOGLE_TOOLS, extra=_GRANTS), home=home)
    async with Pincer.open(home, config=config, secret_key=b"g" * 32, external=False, wasm=False) as pincer:
        if logged_in:
            await login(fake, home, pincer.secrets)
        yield pincer


def _api(fake: FakeGoogle) -> list[fakegoogle.Seen]:
    return list(fake.requests)


def test_the_table_covers_every_action() -> None:
    assert sorted(CALLS) == sorted(GOOGLE_TOOLS)
    for tool, module in MODULES.items():
        assert sorted(CALLS[tool]) == sorted(a.name for a in module.ACTIONS), tool


@pytest.mark.parametrize(("tool", "action"), [(t, a) for t in sorted(CALLS) for a in sorted(CALLS[t])])
async def test_each_action_speaks_googles_api(
    tmp_path: Path, fake: FakeGoogle, tool: str, action: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    args, method_ids = CALLS[tool][action]
    async with google_pincer(fake, tmp_path) as pincer:
        token = pincer.secrets.get("google_oauth_token")
        result = await pincer.call(CallRequest(tool=tool, args={"action": action, **args}))
        records = await pincer.audit.records()
    assert result.ok, result.error
    assert fake.errors == []
    assert tuple(r.method_id for r in fake.requests) == method_ids
    for request in fake.requests:
        assert request.headers.get("Authorization") == f"Bearer {token}"  # injected on the way out
    assert records and records[-1].tool == tool and records[-1].outcome == "ok"
    writes = next(a for a in MODULES[tool].ACTIONS if a.name == action).writes
    assert ("external_write" in records[-1].effects) == writes  # effects per action, not per tool
    assert token not in json.dumps(result.output)
    assert token not in json.dumps([dataclasses.asdict(r) for r in records], default=str)
    # authlib's records come from the test's authorization server, which issued the token
    assert token not in "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("authlib"))
    assert token.encode() not in (tmp_path / "pincer.db").read_bytes()


async def test_what_the_tools_send_and_read(tmp_path: Path, fake: FakeGoogle) -> None:
    """The bodies carry what the arguments say: a real RFC 5322 message, a multipart upload."""
    async with google_pincer(fake, tmp_path) as pincer:
        sent = await pincer.call(CallRequest(tool="gmail", args={"action": "send_message", **_MAIL, **_REPLY}))
        read = await pincer.call(CallRequest(tool="gmail", args={"action": "get_message", "message_id": "18c1"}))
        down = await pincer.call(CallRequest(tool="google_drive", args={"action": "download_file", "file_id": "f1"}))
        rows = await pincer.call(CallRequest(tool="google_sheets", args={
            "action": "read_range", "spreadsheet_id": "s1", "range": "Q2 budget!A1:B2"}))
    assert sent.ok and read.ok and down.ok and rows.ok
    import base64
    from email import message_from_bytes

    raw = json.loads(fake.requests[0].body)["raw"]
    mail = message_from_bytes(base64.urlsafe_b64decode(raw))
    assert mail["To"] == "bob@example.com" and mail["Bcc"] == "dave@example.com"
    assert mail["In-Reply-To"] == "<CAB123@mail.example.com>" and "See the sheet." in mail.get_payload()
    assert json.loads(fake.requests[0].body)["threadId"] == "18c0"
    assert read.output["body"] == "Hello there" and read.output["headers"]["From"] == "alice@example.com"
    assert down.output["content"] == "hello world\n" and down.output["encoding"] == "utf-8"
    assert "/values/Q2%20budget!A1:B2" in fake.requests[-1].path
    assert rows.output["values"] == [["a", "b"], ["1", "2"]]


async def test_an_upload_up_to_drives_limit_is_sent_whole(tmp_path: Path, fake: FakeGoogle) -> None:
    """A Drive upload near the tool's own limit (MAX_UPLOAD_BYTES) reaches Google whole: before the
    manifest named a max_request_bytes, egress's 1 MiB default refused every upload over 1 MiB."""
    import base64

    from pincer.builtins.google.drive import MAX_UPLOAD_BYTES

    content = bytes(range(256)) * ((MAX_UPLOAD_BYTES - 4096) // 256)
    args = {"action": "upload_file", "name": "big.bin", "mime_type": "application/octet-stream",
            "content_base64": base64.b64encode(content).decode("ascii")}
    async with google_pincer(fake, tmp_path) as pincer:
        result = await pincer.call(CallRequest(tool="google_drive", args=args))
    assert result.ok, result.error
    assert [r.method_id for r in fake.requests] == ["drive.files.create"]
    assert content in fake.requests[0].body and fake.errors == []


async def test_a_google_doc_downloads_as_an_export(tmp_path: Path, fake: FakeGoogle) -> None:
    fake.answers["drive.files.get"] = (200, {**fakegoogle.FILE, "mimeType": "application/vnd.google-apps.document"})
    async with google_pincer(fake, tmp_path) as pincer:
        result = await pincer.call(CallRequest(tool="google_drive", args={"action": "download_file", "file_id": "f1"}))
    assert result.ok, result.error
    assert [r.method_id for r in fake.requests] == ["drive.files.get", "drive.files.export"]
    assert "mimeType=text%2Fplain" in fake.requests[-1].path and result.output["content"] == "exported text\n"
    assert fake.errors == []


def test_the_checker_refuses_a_wrong_shape() -> None:
    """The contract check itself: a wrong path, method, parameter or body fails it."""
    check = googlediscovery.validate_request
    assert check("GET", "/gmail/v1/users/me/mesages", b"")[1]  # path
    assert check("DELETE", "/v4/spreadsheets/s1", b"")[1]  # method
    assert any("'maxResult'" in p for p in check("GET", "/gmail/v1/users/me/messages?maxResult=5", b"")[1])
    assert any("integer" in p for p in check("GET", "/gmail/v1/users/me/messages?maxResults=many", b"")[1])
    assert any("'valuse'" in p for p in check(
        "PUT", "/v4/spreadsheets/s1/values/A1?valueInputOption=RAW", b'{"valuse": [[1]]}')[1])
    assert any("valueInputOption" in p for p in check(
        "PUT", "/v4/spreadsheets/s1/values/A1?valueInputOption=TYPED", b'{"values": [[1]]}')[1])
    assert any("'summry'" in p for p in check("POST", "/calendar/v3/calendars/primary/events", b'{"summry": "x"}')[1])
    assert googlediscovery.validate_response("drive.files.get", {"id": "f1", "size": 12})  # int64 is a string


async def test_a_deliberately_wrong_request_fails_at_the_stand_in(tmp_path: Path, fake: FakeGoogle) -> None:
    """A request off Google's description is answered 400 and recorded, so a test that made it fails."""
    async with google_pincer(fake, tmp_path) as pincer:
        token = pincer.secrets.get("google_oauth_token")
    answer = httpx.post(f"{fake.base_url}/calendar/v3/calendars/primary/events", json={"title": "x"},
                        headers={"Authorization": f"Bearer {token}"}, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 400
    assert any("'title' was unexpected" in e for e in fake.errors)


async def test_one_login_serves_all_six_and_revoking_asks_again(tmp_path: Path, fake: FakeGoogle) -> None:
    async with google_pincer(fake, tmp_path) as pincer:
        assert len(fake.token_requests) == 1  # one login
        for tool, action in ONE_READ.items():
            result = await pincer.call(CallRequest(tool=tool, args={"action": action, **CALLS[tool][action][0]}))
            assert result.ok, (tool, result.error)
        assert len({r.headers["Authorization"] for r in fake.requests}) == 1
        settings = parse_config(fake.config(*GOOGLE_TOOLS), home=tmp_path).builtins
        await revoke_login(provider_for("google", settings), store=pincer.secrets, home=tmp_path)
        seen = len(fake.requests)
        for tool, action in ONE_READ.items():
            result = await pincer.call(CallRequest(tool=tool, args={"action": action, **CALLS[tool][action][0]}))
            assert not result.ok
            assert "pincer auth setup google" in result.error.get("hint", ""), (tool, result.error)
        assert len(fake.requests) == seen  # nothing was sent without a login
    assert fake.errors == []


async def test_a_401_triggers_one_refresh_and_a_retry(tmp_path: Path, fake: FakeGoogle) -> None:
    async with google_pincer(fake, tmp_path) as pincer:
        old = pincer.secrets.get("google_oauth_token")
        fake.expire_access_tokens()  # Google stopped taking it; the record here still says valid
        result = await pincer.call(CallRequest(tool="gmail", args={"action": "list_labels"}))
        new = pincer.secrets.get("google_oauth_token")
        records = await pincer.audit.records()
    assert result.ok, result.error
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code", "refresh_token"]
    assert [r.headers["Authorization"] for r in fake.requests] == [f"Bearer {old}", f"Bearer {new}"]
    for value in (old, new):
        assert value not in json.dumps([dataclasses.asdict(r) for r in records], default=str)


async def test_a_token_near_its_expiry_is_refreshed_before_use(tmp_path: Path, fake: FakeGoogle) -> None:
    fake.access_ttl_s = 30  # inside the refresh leeway from the start
    async with google_pincer(fake, tmp_path) as pincer:
        first = pincer.secrets.get("google_oauth_token")
        result = await pincer.call(CallRequest(tool="google_drive", args={"action": "get_file", "file_id": "f1"}))
        now = pincer.secrets.get("google_oauth_token")
    assert result.ok, result.error
    assert now != first and [r.headers["Authorization"] for r in fake.requests] == [f"Bearer {now}"]
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code", "refresh_token"]


async def test_a_refused_refresh_is_a_reconnect_error_not_a_loop(tmp_path: Path, fake: FakeGoogle) -> None:
    async with google_pincer(fake, tmp_path) as pincer:
        fake.expire_access_tokens()
        fake.revoke_all()  # the 7-day revocation of apps in testing status
        result = await pincer.call(CallRequest(tool="google_calendar", args={"action": "list_calendars"}))
        again = await pincer.call(CallRequest(tool="google_calendar", args={"action": "list_calendars"}))
        refresh = pincer.secrets.get("google_oauth_refresh_token")
    assert not result.ok and result.error["code"] == "reauth_required"
    assert result.error["hint"] == "reconnect with `pincer auth setup google`"
    assert "invalid_grant" in result.error["message"] and refresh not in json.dumps(result.error)
    assert not again.ok and again.error["code"] == "reauth_required"
    # each call: one request, one refresh attempt, no retry after the refusal
    assert len(fake.requests) == 2
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code", "refresh_token", "refresh_token"]


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent(tmp_path: Path, fake: FakeGoogle) -> None:
    async with google_pincer(fake, tmp_path) as pincer:
        result = await pincer.call(CallRequest(tool="gmail", args={
            "action": "send_message", "to": ["bob@example.com"], "subject": "hi\r\nBcc: eve@example.com", "body": "x"}))
        two = await pincer.call(CallRequest(tool="gmail", args={
            "action": "send_message", "to": ["bob@example.com, eve@example.com"], "subject": "hi", "body": "x"}))
    assert not result.ok and "header injection" in result.error["message"]
    assert not two.ok and "one email address" in two.error["message"]
    assert fake.requests == []


def test_the_scopes_are_the_union_of_the_enabled_tools(tmp_path: Path, fake: FakeGoogle) -> None:
    config = fake.config("gmail", "google_drive", extra="[builtins.google_sheets]\nenabled = true\nread_only = true\n")
    settings = parse_config(config, home=tmp_path).builtins
    assert login_scopes(settings) == (
        "https://www.googleapis.com/auth/gmail.modify",
        "https://www.googleapis.com/auth/gmail.compose",
        "https://www.googleapis.com/auth/drive",
        "https://www.googleapis.com/auth/spreadsheets.readonly",
    )


async def test_concurrent_calls_share_one_refresh(tmp_path: Path, fake: FakeGoogle) -> None:
    import anyio

    async with google_pincer(fake, tmp_path) as pincer:
        fake.expire_access_tokens()
        results = []

        async def call(tool: str, action: str) -> None:
            results.append(await pincer.call(CallRequest(tool=tool, args={"action": action, **CALLS[tool][action][0]})))

        async with anyio.create_task_group() as group:
            for tool, action in ONE_READ.items():
                group.start_soon(call, tool, action)
    assert all(r.ok for r in results), [r.error for r in results]
    assert [t["grant_type"] for t in fake.token_requests] == ["authorization_code", "refresh_token"]


async def test_an_answer_echoing_the_tokens_is_redacted(tmp_path: Path, fake: FakeGoogle) -> None:
    """The stand-in puts the access and refresh tokens in a message snippet: neither reaches the
    output or the audit (the leak scanner knows every stored value, also after a refresh)."""
    async with google_pincer(fake, tmp_path) as pincer:
        token = pincer.secrets.get("google_oauth_token")
        refresh = pincer.secrets.get("google_oauth_refresh_token")
        fake.answers["gmail.users.messages.get"] = (200, {**fakegoogle.MESSAGE, "snippet": f"{token} and {refresh}"})
        result = await pincer.call(CallRequest(tool="gmail", args={"action": "get_message", "message_id": "18c1"}))
        records = await pincer.audit.records()
    assert result.ok, result.error
    text = json.dumps(result.output) + json.dumps([dataclasses.asdict(r) for r in records], default=str)
    assert token not in text and refresh not in text and "REDACTED" in json.dumps(result.output)


@pytest.mark.parametrize("tool", GOOGLE_TOOLS)
def test_read_only_drops_every_write_of_each_google_tool(tmp_path: Path, fake: FakeGoogle, tool: str) -> None:
    from pincer.builtins.catalog import bundled_tools

    settings = parse_config(fake.config(extra=f"[builtins.{tool}]\nenabled = true\nread_only = true\n"),
                            home=tmp_path).builtins
    (built,) = bundled_tools(settings)
    offered = set(built.spec.input_schema["properties"]["action"]["enum"])
    assert offered == {a.name for a in MODULES[tool].ACTIONS if not a.writes}
    assert "external_write" not in {e.value for e in built.spec.effects}
    assert built.spec.annotations["readOnlyHint"] is True
    assert all(h.host == f"127.0.0.1:{fake.server.server_address[1]}" for h in built.spec.capabilities.http.allowlist)
