"""A local stand-in for Slack's Web API on 127.0.0.1:0: a real HTTP server answering in Slack's
shapes, checking every request and every answer against ``@slack/web-api``
(:mod:`tests.builtins.declared`): the path must name a method WebClient binds, the verb and body
encoding must be WebClient's, the arguments must fit the method's argument type, and each answer
its response type. A request that does not fit is answered ``ok: false``; a request or an answer
that does not fit is kept in ``violations``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.builtins import declared

TOKEN = "xoxb-1234567890-0987654321-slackTestBotToken0a1b2c"
TS = "1712345678.000200"

ANSWERS: dict[str, dict[str, Any]] = {
    "chat.postMessage": {"ok": True, "channel": "C0123ABCD", "ts": TS,
                         "message": {"type": "message", "text": "hello", "user": "U0BOT", "ts": TS}},
    "conversations.list": {
        "ok": True,
        "channels": [
            {"id": "C0123ABCD", "name": "general", "is_channel": True, "is_private": False, "is_archived": False,
             "is_member": True, "num_members": 12, "created": 1449252889,
             "topic": {"value": "Company-wide", "creator": "U012A3CDE", "last_set": 1449709364},
             "purpose": {"value": "This channel is for team-wide communication", "creator": "", "last_set": 0}},
        ],
        "response_metadata": {"next_cursor": "dGVhbTpDMDYxRkE1UEI="},
    },
    "conversations.history": {
        "ok": True,
        "messages": [
            {"type": "message", "user": "U012AB3CDE", "text": "I find you punny", "ts": "1512085950.000216",
             "reactions": [{"name": "joy", "users": ["U0G9QF9C6"], "count": 1}], "reply_count": 2,
             "thread_ts": "1512085950.000216"},
        ],
        "has_more": True,
        "pin_count": 0,
        "response_metadata": {"next_cursor": "bmV4dF90czoxNTEyMDg1ODYxMDAwNTQz"},
    },
    "conversations.replies": {
        "ok": True,
        "messages": [
            {"type": "message", "user": "U012AB3CDE", "text": "parent", "ts": "1512085950.000216",
             "thread_ts": "1512085950.000216", "reply_count": 1},
            {"type": "message", "user": "U061F7AUR", "text": "a reply", "ts": "1512104434.000490",
             "thread_ts": "1512085950.000216"},
        ],
        "has_more": False,
    },
    "reactions.add": {"ok": True},
    "users.info": {
        "ok": True,
        "user": {"id": "W012A3CDE", "team_id": "T012AB3C4", "name": "spengler", "deleted": False,
                 "real_name": "Egon Spengler", "tz": "America/Los_Angeles", "is_bot": False,
                 "profile": {"display_name": "spengler", "title": "Physicist", "image_72": "https://a.example/x.png"}},
    },
    "files.completeUploadExternal": {"ok": True, "files": [{"id": "F0FILE1234", "title": "notes.txt"}]},
    "auth.test": {"ok": True, "url": "https://subarachnoid.slack.com/", "team": "Subarachnoid Workspace",
                  "user": "grace", "team_id": "T12345678", "user_id": "W12345678", "bot_id": "B0BOT"},
}


@dataclass
class FakeSlack:
    server: ThreadingHTTPServer
    seen: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    uploads: dict[str, bytes] = field(default_factory=dict)
    script: dict[str, dict[str, Any]] = field(default_factory=dict)  # method -> answer, once
    echo_token: bool = False

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def serve() -> Iterator[FakeSlack]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _send(self, status: int, payload: Any, method: str | None = None) -> None:
            if method in declared.SLACK_METHODS:
                state.violations.extend(f"{method}: {p}" for p in declared.answer_problems("slack", method, payload))
            data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            url = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            auth = self.headers.get("Authorization")
            record = {"verb": self.command, "path": url.path, "headers": dict(self.headers.items()), "raw": raw}
            state.seen.append(record)
            if url.path.startswith("/upload/v1/") and self.command == "POST":
                state.uploads[url.path.rsplit("/", 1)[1]] = raw
                self._send(200, b"OK - " + str(len(raw)).encode())
                return
            if not url.path.startswith("/api/"):
                state.violations.append(f"{self.command} {url.path}: not a Slack Web API path")
                self._send(404, {"ok": False, "error": "unknown_method"})
                return
            name = url.path[len("/api/"):]
            if name not in declared.slack_method_names():
                state.violations.append(f"{name}: not a method of @slack/web-api")
                self._send(200, {"ok": False, "error": "unknown_method"})
                return
            if name not in declared.SLACK_METHODS:
                state.violations.append(f"{name}: no schema here; add it to tests/builtins/declared.py SLACK_METHODS")
                self._send(200, {"ok": False, "error": "unknown_method"})
                return
            verb, encoding = declared.slack_http_shape()
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            problems = []
            if self.command != verb:
                problems.append(f"{name}: verb {self.command}, WebClient sends {verb}")
            if content_type != encoding:
                problems.append(f"{name}: body {content_type!r}, WebClient sends {encoding!r}")
            form = {k: v[0] for k, v in parse_qs(raw.decode("utf-8"), keep_blank_values=True).items()}
            problems += [f"{name}: {p}" for p in declared.request_problems("slack", name, declared.read_text_values("slack", name, form))]
            record.update(method=name, form=form)
            if problems:
                state.violations.extend(problems)
                self._send(200, {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": problems}}, name)
                return
            if auth != f"Bearer {TOKEN}":
                self._send(200, {"ok": False, "error": "not_authed" if auth is None else "invalid_auth"}, name)
                return
            if name in state.script:
                self._send(200, state.script.pop(name), name)
                return
            if name == "files.getUploadURLExternal":
                answer = {"ok": True, "upload_url": f"{state.origin}/upload/v1/F0FILE1234", "file_id": "F0FILE1234"}
            else:
                answer = json.loads(json.dumps(ANSWERS[name]))
            if state.echo_token and name == "conversations.history":
                answer["messages"][0]["text"] = f"the header said {auth}"
            self._send(200, answer, name)

        do_GET = do_POST = _handle

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = FakeSlack(server=server)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)
