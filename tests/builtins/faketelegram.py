"""A local stand-in for Telegram's Bot API on 127.0.0.1:0: ``POST /bot<token>/<method>`` with a
JSON body or, for a file upload, a ``multipart/form-data`` one (parsed with the standard
library's MIME parser; the file parts are kept in ``seen[i]["files"]``). Every request is checked
against the method's parameters and every answer against its result, both as ``@grammyjs/types``
declares them (:mod:`tests.builtins.declared`); a request that does not fit is answered as
Telegram does (``400 {"ok": false, "description": "Bad Request: ..."}``), and a request or an
answer that does not fit is kept in ``violations``.

``mode`` makes it misbehave for the error paths: ``"500"`` answers a 500 whose body echoes the
request path (as some proxies do; ``"500-dashed"`` with a dash between its characters), ``"hang"`` answers only after :data:`HANG_S`.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from tests.builtins import declared

TOKEN = "7012345678:AAHfakeTelegramBotTokenForTests_0123x"
HANG_S = 3.0
# getMe's answer: a bot's own settings are part of it (UserFromGetMe); a bot's mention elsewhere
# (a message's "from") is a plain User.
BOT = {"id": 7012345678, "is_bot": True, "first_name": "pincer", "username": "pincer_test_bot"}
ME = {**BOT, "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": False,
      "can_connect_to_business": False, "has_main_web_app": False, "has_topics_enabled": False,
      "allows_users_to_create_topics": False, "can_manage_bots": False, "supports_join_request_queries": False}
CHAT = {"id": 424242, "type": "private", "first_name": "Ada", "username": "ada"}


def _message(message_id: int, **extra: Any) -> dict[str, Any]:
    return {"message_id": message_id, "from": BOT, "chat": CHAT, "date": 1712345678, **extra}


def answer(method: str, body: dict[str, Any]) -> Any:
    if method == "sendMessage":
        return _message(52, text=body["text"])
    if method == "sendPhoto":
        sizes = [{"file_id": f"AgACAgQAAx{i}", "file_unique_id": f"AQAD{i}", "width": 90 * (i + 1),
                  "height": 60 * (i + 1), "file_size": 1000 * (i + 1)} for i in range(3)]
        return _message(53, photo=sizes, caption=body.get("caption"))
    if method == "sendDocument":
        return _message(54, document={"file_name": "report.pdf", "mime_type": "application/pdf",
                                      "file_id": "BQACAgQAAxk", "file_unique_id": "AgAD", "file_size": 2048})
    if method == "getUpdates":
        return [
            {"update_id": 100, "message": {**_message(50, text="hi bot"), "from": {"id": 1, "is_bot": False,
                                                                                  "first_name": "Ada", "username": "ada"}}},
            {"update_id": 101, "edited_message": {**_message(51, text="hi bot!"), "edit_date": 1712345700}},
        ]
    if method == "editMessageText":
        return {**_message(body["message_id"], text=body["text"]), "edit_date": 1712345790}
    if method == "deleteMessage":
        return True
    if method == "getMe":
        return ME
    raise KeyError(method)


@dataclass(frozen=True, kw_only=True, slots=True)
class Upload:
    """A file part of a multipart body."""

    filename: str
    content_type: str
    data: bytes = field(repr=False)


def parse_multipart(method: str, content_type: str, raw: bytes) -> tuple[dict[str, Any], dict[str, Upload]]:
    """The parameters of a ``multipart/form-data`` body as the Bot API reads them (text where the
    parameter takes text, else its JSON; file parts as :class:`Upload`, also in the second mapping
    by name); ValueError says what does not fit RFC 7578."""
    if "boundary=" not in content_type:
        raise ValueError("multipart/form-data without a boundary")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart() or message.defects:
        raise ValueError(f"not a well-formed multipart body ({[type(d).__name__ for d in message.defects]})")
    texts: dict[str, str] = {}
    files: dict[str, Upload] = {}
    for part in message.iter_parts():
        if part.get_content_disposition() != "form-data" or part.defects:
            raise ValueError("a part without Content-Disposition: form-data")
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            raise ValueError("a part without a name")
        if name in texts or name in files:
            raise ValueError(f"parameter {name!r} sent twice")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = Upload(filename=filename, content_type=part.get_content_type(), data=data)
        else:
            texts[name] = data.decode("utf-8")
    body: dict[str, Any] = {**declared.read_text_values("telegram", method, texts), **files}
    return body, files


def request_problems(method: str, body: dict[str, Any]) -> list[str]:
    """Why a request body does not fit the method as @grammyjs/types declares it."""
    if method not in declared.telegram_methods():
        return [f"{method} is not a Bot API method"]
    if method not in declared.TELEGRAM_METHODS:
        return [f"{method} has no schema here: add it to tests/builtins/declared.py TELEGRAM_METHODS"]
    as_sent = {k: {declared.UPLOAD_KEY: v.filename} if isinstance(v, Upload) else v for k, v in body.items()}
    return declared.request_problems("telegram", method, as_sent)


@dataclass
class FakeTelegram:
    server: ThreadingHTTPServer
    seen: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    mode: str = "ok"

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def serve() -> Iterator[FakeTelegram]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: Any, method: str | None = None) -> None:
            if method in declared.TELEGRAM_METHODS:
                state.violations.extend(f"{method}: {p}" for p in declared.answer_problems("telegram", method, payload))
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            url = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            record: dict[str, Any] = {"verb": self.command, "path": url.path, "headers": dict(self.headers.items())}
            state.seen.append(record)
            if state.mode == "hang":
                time.sleep(HANG_S)
            if state.mode in ("500", "500-dashed"):
                path = "-".join(url.path) if state.mode == "500-dashed" else url.path
                self._send(500, {"ok": False, "error_code": 500, "description": f"Internal error at {path}"})
                return
            parts = unquote(url.path).split("/")
            if len(parts) != 3 or not parts[1].startswith("bot"):
                state.violations.append(f"{self.command} {url.path}: not /bot<token>/<method>")
                self._send(404, {"ok": False, "error_code": 404, "description": "Not Found"})
                return
            token, method = parts[1][3:], parts[2]
            record["method"] = method
            problems = []
            if self.command != "POST":
                problems.append(f"{method}: verb {self.command}; pincer sends POST with a JSON body")
            content_type = self.headers.get("Content-Type") or ""
            if raw and content_type.split(";")[0].strip() == "multipart/form-data":
                try:
                    body, files = parse_multipart(method, content_type, raw)
                except ValueError as exc:
                    body, files = {}, {}
                    problems.append(f"{method}: {exc}")
                record["files"] = files
            else:
                if raw and content_type.split(";")[0] != "application/json":
                    problems.append(f"{method}: body {content_type!r}, not application/json or multipart/form-data")
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                    problems.append(f"{method}: the body is not JSON")
            record["body"] = body
            problems += [f"{method}: {p}" for p in request_problems(method, body if isinstance(body, dict) else {})]
            if problems:
                state.violations.extend(problems)
                self._send(400, {"ok": False, "error_code": 400, "description": "Bad Request: " + "; ".join(problems)}, method)
                return
            if token != TOKEN:
                self._send(401, {"ok": False, "error_code": 401, "description": "Unauthorized"}, method)
                return
            if method == "sendMessage" and body.get("chat_id") == 404:
                self._send(400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}, method)
                return
            self._send(200, {"ok": True, "result": answer(method, body)}, method)

        do_GET = do_POST = _handle

        def log_message(self, *args: Any) -> None:
            return

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            return  # a client that gave up on a "hang" answer: expected, not worth a traceback

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = FakeTelegram(server=server)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)
