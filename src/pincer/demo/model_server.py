"""A local model server that replays scripted turns, for the tests and ``pincer demo`` only.

It stands in for a paid internet API (no model weights can run here): a real HTTP server on
127.0.0.1 that speaks both wire formats the agent loop uses, so the official SDKs talk to it
through their ``base_url`` exactly as they talk to the real services:

- OpenAI Chat Completions, ``POST /v1/chat/completions`` (base_url ``http://127.0.0.1:PORT/v1``):
  JSON or SSE chunks ending with ``data: [DONE]``, text and tool-call deltas, ``finish_reason``,
  usage (with ``stream_options.include_usage``) including cached tokens;
- Anthropic Messages, ``POST /v1/messages`` (base_url ``http://127.0.0.1:PORT``): JSON or named SSE
  events (``message_start``, ``content_block_start/delta/stop`` with ``text_delta`` and
  ``input_json_delta``, ``message_delta``, ``message_stop``), ``tool_use`` blocks, usage.

Each request takes the next :class:`Turn` of the script (or asks a responder function). A turn
can also be a fault: an error status (429 with ``Retry-After``, 500, 401, 404, a context-length
400), a stream cut in the middle of a tool call, malformed JSON in a tool call's arguments, a
delay, or an answer that is not the API's shape at all (``raw_body``, ``raw_events``). Every request is recorded (``requests``) so a test can see what the model was sent.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ScriptedCall",
    "ScriptedError",
    "Turn",
    "ReceivedRequest",
    "ModelServer",
    "serve_models",
    "SERVER_STOP_TIMEOUT_S",
    "MAX_TURN_DELAY_S",
]

SERVER_STOP_TIMEOUT_S = 5.0
MAX_TURN_DELAY_S = 60.0  # a delayed turn waits at most this long (or until the server stops)
_POLL_INTERVAL_S = 0.02
_TEXT_CHUNK_CHARS = 16


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedCall:
    """A tool call the scripted model makes. ``arguments`` as a string is sent as it is (to
    script malformed JSON); ``id`` defaults to one the server makes up."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedError:
    """An error response. ``kind`` picks the body both formats use for it: rate_limit,
    server, auth, not_found, context_length, bad_request."""

    status: int
    kind: str = "server"
    message: str = "scripted error"
    retry_after: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    """One response of the model. Token counts default to an estimate (4 characters a token);
    ``input_tokens`` counts cached tokens too (OpenAI's way; the Anthropic wire gets them apart)."""

    text: str = ""
    calls: tuple[ScriptedCall, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int = 0
    stop: str | None = None  # override the normalised stop: "end", "tool_calls", "max_tokens"
    error: ScriptedError | None = None
    drop_mid_call: bool = False  # a stream cut off inside the first tool call's arguments
    delay_s: float = 0.0
    # A hostile or broken server: ``raw_body`` is the whole 200 answer as it is (an HTML page,
    # ``null``, a list) with ``raw_content_type``; ``raw_events`` is a streamed answer of these
    # SSE records as they are (``b"data: [1]"``, ``b"event: message_start\ndata: null"``).
    raw_body: bytes | None = None
    raw_content_type: str = "application/json"
    raw_events: tuple[bytes, ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReceivedRequest:
    format: str  # "openai" | "anthropic"
    path: str
    headers: Mapping[str, str]
    body: Mapping[str, Any]

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def tool_names(self) -> list[str]:
        tools = self.body.get("tools") or []
        if self.format == "openai":
            return [t["function"]["name"] for t in tools]
        return [t["name"] for t in tools]


Responder = Callable[[ReceivedRequest], Turn]


class ModelServer:
    """The server; use :func:`serve_models` to run it. ``api_key``: when set, a request that
    does not carry it gets 401 (and, like a careless real API, the body quotes the key it got)."""

    def __init__(self, script: Sequence[Turn] | Responder, *, api_key: str | None = None, model: str = "scripted-model") -> None:
        self._script: Iterator[Turn] | None = None
        self._responder: Responder | None = None
        if callable(script):
            self._responder = script
        else:
            self._script = iter(list(script))
        self.api_key = api_key
        self.model = model
        self.requests: list[ReceivedRequest] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the model server is not running")
        return int(self._server.server_address[1])

    @property
    def openai_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def extend(self, turns: Iterable[Turn]) -> None:
        """Append turns to a scripted server's script."""
        with self._lock:
            rest = list(self._script or ())
            self._script = iter(rest + list(turns))

    def next_turn(self, request: ReceivedRequest) -> Turn | None:
        with self._lock:
            self.requests.append(request)
            if self._responder is not None:
                return self._responder(request)
            assert self._script is not None
            return next(self._script, None)

    def record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):04d}"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        handler = type("Handler", (_Handler,), {"model_server": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": _POLL_INTERVAL_S}, daemon=True
        )
        thread.start()
        self._thread = thread

    def stop(self) -> None:
        self.stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(SERVER_STOP_TIMEOUT_S)


@contextmanager
def serve_models(
    script: Sequence[Turn] | Responder, *, api_key: str | None = None, model: str = "scripted-model"
) -> Iterator[ModelServer]:
    server = ModelServer(script, api_key=api_key, model=model)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def get_request(self) -> tuple[socket.socket, Any]:
        conn, address = super().get_request()
        # Without it, a keep-alive response waits ~40 ms for the client's delayed ACK (Nagle).
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        return  # a client that hung up mid-stream is part of the tests


# -- the wire formats ----------------------------------------------------------------------------


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _chunks(text: str) -> list[str]:
    # A long text (a test of the loop's output bound) goes in at most ~256 pieces.
    size = max(_TEXT_CHUNK_CHARS, len(text) // 256)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _arguments_text(call: ScriptedCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def _usage(turn: Turn, request: ReceivedRequest) -> tuple[int, int, int]:
    input_tokens = turn.input_tokens
    if input_tokens is None:
        input_tokens = _estimate_tokens(json.dumps(request.body))
    output_tokens = turn.output_tokens
    if output_tokens is None:
        output_tokens = _estimate_tokens(turn.text + "".join(c.name + _arguments_text(c) for c in turn.calls))
    return input_tokens, output_tokens, turn.cached_tokens


def _stop(turn: Turn) -> str:
    if turn.stop is not None:
        return turn.stop
    return "tool_calls" if turn.calls else "end"


_OPENAI_STOP = {"end": "stop", "tool_calls": "tool_calls", "max_tokens": "length", "refusal": "content_filter"}
_ANTHROPIC_STOP = {"end": "end_turn", "tool_calls": "tool_use", "max_tokens": "max_tokens", "refusal": "refusal"}
_ERROR_TYPES = {
    # kind: (OpenAI type, OpenAI code, Anthropic type)
    "rate_limit": ("rate_limit_exceeded", "rate_limit_exceeded", "rate_limit_error"),
    "server": ("server_error", None, "api_error"),
    "overloaded": ("server_error", None, "overloaded_error"),
    "auth": ("invalid_request_error", "invalid_api_key", "authentication_error"),
    "not_found": ("invalid_request_error", "model_not_found", "not_found_error"),
    "context_length": ("invalid_request_error", "context_length_exceeded", "invalid_request_error"),
    "bad_request": ("invalid_request_error", None, "invalid_request_error"),
}


class _Handler(BaseHTTPRequestHandler):
    model_server: ModelServer  # set on the subclass made per server
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
            return
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            fmt = "openai"
        elif path.endswith("/messages"):
            fmt = "anthropic"
        else:
            self._json(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = ReceivedRequest(format=fmt, path=path, headers=headers, body=body)
        server = self.model_server
        if server.api_key is not None:
            # OpenAI clients send a bearer token; Anthropic's send x-api-key (or, in SDK 2.x, a bearer too).
            given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
            if given != server.api_key:
                server.record(request)
                # Like a careless real API: the refusal quotes the key it was sent.
                self._error(fmt, ScriptedError(status=401, kind="auth", message=f"Incorrect API key provided: {given}"))
                return
        turn = server.next_turn(request)
        if turn is None:
            self._error(fmt, ScriptedError(status=400, kind="bad_request", message="the scripted model has no more turns"))
            return
        if turn.delay_s:
            server.stopping.wait(min(turn.delay_s, MAX_TURN_DELAY_S))
        if turn.error is not None:
            self._error(fmt, turn.error)
            return
        if turn.raw_body is not None:
            self.send_response(200)
            self.send_header("Content-Type", turn.raw_content_type)
            self.send_header("Content-Length", str(len(turn.raw_body)))
            self.end_headers()
            self.wfile.write(turn.raw_body)
            return
        if turn.raw_events is not None:
            self._start_stream()
            for data in turn.raw_events:
                self._send_chunk(data + b"\n\n")
            self._end_stream()
            return
        if fmt == "openai":
            self._openai(turn, request)
        else:
            self._anthropic(turn, request)

    # -- plumbing ------------------------------------------------------------------------------

    def _json(self, status: int, payload: Any, extra: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, fmt: str, error: ScriptedError) -> None:
        oa_type, oa_code, an_type = _ERROR_TYPES.get(error.kind, _ERROR_TYPES["server"])
        if fmt == "openai":
            payload: dict[str, Any] = {"error": {"message": error.message, "type": oa_type, "param": None, "code": oa_code}}
        else:
            payload = {"type": "error", "error": {"type": an_type, "message": error.message}}
        extra = {"Retry-After": error.retry_after} if error.retry_after is not None else None
        self._json(error.status, payload, extra)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _drop(self, partial: bytes) -> None:
        """Cut the stream inside a chunk: the client sees an incomplete chunked body."""
        self.wfile.write(f"{len(partial) + 64:x}\r\n".encode() + partial)
        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- OpenAI Chat Completions ---------------------------------------------------------------

    def _openai(self, turn: Turn, request: ReceivedRequest) -> None:
        server = self.model_server
        model = str(request.body.get("model") or server.model)
        input_tokens, output_tokens, cached = _usage(turn, request)
        usage = {
            "prompt_tokens": input_tokens,
            "completion_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        finish = _OPENAI_STOP.get(_stop(turn), "stop")
        calls = [(c.id or server.new_id("call_"), c) for c in turn.calls]
        completion_id = server.new_id("chatcmpl-")
        if not request.stream:
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                message["tool_calls"] = [
                    {"id": cid, "type": "function", "function": {"name": c.name, "arguments": _arguments_text(c)}}
                    for cid, c in calls
                ]
            self._json(
                200,
                {
                    "id": completion_id, "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
                    "usage": usage,
                },
            )  # fmt: skip
            return

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            payload = {
                "id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            }  # fmt: skip
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        self._start_stream()
        self._send_chunk(chunk({"role": "assistant", "content": ""}))
        for piece in _chunks(turn.text):
            self._send_chunk(chunk({"content": piece}))
        for index, (cid, call) in enumerate(calls):
            start = {"index": index, "id": cid, "type": "function", "function": {"name": call.name, "arguments": ""}}
            self._send_chunk(chunk({"tool_calls": [start]}))
            arguments = _arguments_text(call)
            half = len(arguments) // 2
            if turn.drop_mid_call and index == 0:
                self._drop(chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[:half]}}]}))
                return
            for piece in (arguments[:half], arguments[half:]):
                if piece:
                    self._send_chunk(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
        self._send_chunk(chunk({}, finish))
        if (request.body.get("stream_options") or {}).get("include_usage"):
            payload = {"id": completion_id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": usage}
            self._send_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")
        self._send_chunk(b"data: [DONE]\n\n")
        self._end_stream()

    # -- Anthropic Messages --------------------------------------------------------------------

    def _anthropic(self, turn: Turn, request: ReceivedRequest) -> None:
        server = self.model_server
        model = str(request.body.get("model") or server.model)
        input_tokens, output_tokens, cached = _usage(turn, request)
        stop = _ANTHROPIC_STOP.get(_stop(turn), "end_turn")
        calls = [(c.id or server.new_id("toolu_"), c) for c in turn.calls]
        message_id = server.new_id("msg_")
        # Anthropic counts cached input apart: input_tokens is what was not read from the cache.
        usage = {
            "input_tokens": max(input_tokens - cached, 0), "output_tokens": output_tokens,
            "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0,
        }  # fmt: skip
        if not request.stream:
            content: list[dict[str, Any]] = []
            if turn.text:
                content.append({"type": "text", "text": turn.text})
            for cid, call in calls:
                given = call.arguments if isinstance(call.arguments, Mapping) else {"_raw": call.arguments}
                content.append({"type": "tool_use", "id": cid, "name": call.name, "input": dict(given)})
            self._json(
                200,
                {
                    "id": message_id, "type": "message", "role": "assistant", "model": model, "content": content,
                    "stop_reason": stop, "stop_sequence": None, "usage": usage,
                },
            )  # fmt: skip
            return

        def event(name: str, payload: dict[str, Any]) -> bytes:
            return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()

        self._start_stream()
        start_usage = {**usage, "output_tokens": 1}
        self._send_chunk(
            event(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
                        "stop_reason": None, "stop_sequence": None, "usage": start_usage,
                    },
                },
            )
        )  # fmt: skip
        index = 0
        if turn.text:
            self._send_chunk(event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
            for piece in _chunks(turn.text):
                self._send_chunk(event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}))
            self._send_chunk(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
            index = 1
        for position, (cid, call) in enumerate(calls):
            block = {"type": "tool_use", "id": cid, "name": call.name, "input": {}}
            self._send_chunk(event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}))
            arguments = _arguments_text(call)
            half = len(arguments) // 2
            if turn.drop_mid_call and position == 0:
                cut = {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": arguments[:half]}}
                self._drop(event("content_block_delta", cut))
                return
            for part in (arguments[:half], arguments[half:]):
                if part:
                    delta = {"type": "input_json_delta", "partial_json": part}
                    self._send_chunk(event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
            self._send_chunk(event("content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1
        self._send_chunk(
            event(
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": output_tokens}},
            )
        )
        self._send_chunk(event("message_stop", {"type": "message_stop"}))
        self._end_stream()
