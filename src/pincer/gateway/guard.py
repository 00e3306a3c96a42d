"""The gate in front of every route: Host and Origin, the bearer token, the body-size limit.

Checks run in that order and each refusal is a JSON body that says what was wrong and what to
do: a JSON-RPC error object on ``/mcp``, ``{"error": {code, message, hint}}`` elsewhere.

Who is refused decides what is kept. A request with no valid bearer token (a missing or wrong
token, or a foreign Host or Origin without a valid token) is counted and logged by
:class:`~pincer.gateway.refusals.UnauthenticatedRefusals`, never put in the audit log: anyone
could send those by the thousand. A request with a valid token that was trying to call a tool
(``POST /api/v1/tools/{name}/call``, a ``tools/call`` on ``/mcp``) and is refused all the same
(foreign Host or Origin, body too large) is reported to ``on_refused`` for the audit log.

Paths under ``self_authenticated_prefixes`` (``/hooks/``: webhooks, which a sender like GitHub
cannot send our token with) authenticate themselves, each by its own signature or token: the
guard checks Host and Origin for them and leaves the body to the route, which bounds its own
read (a webhook's limit is smaller than the gateway's).

DNS-rebinding protection: a page on ``evil.example`` that resolves to 127.0.0.1 reaches us
with ``Host: evil.example`` and ``Origin: http://evil.example``; both must name this machine
(or a name listed in ``[gateway] allowed_hosts``/``allowed_origins``).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pincer.gateway.refusals import UnauthenticatedRefusals
from pincer.gateway.tokens import GatewaySession, TokenBook

logger = logging.getLogger(__name__)

__all__ = ["Guard", "Refusal", "SESSION_SCOPE_KEY", "LOOPBACK_NAMES", "json_error", "is_loopback_host", "duplicated_header"]

SESSION_SCOPE_KEY = "pincer.session"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
_REST_CALL = re.compile(r"^/api/v1/tools/(?P<name>[^/]{1,256})/call/?$")
# Enough to name the tool of an oversized JSON-RPC body we refuse to parse.
_RPC_TOOL_CALL = re.compile(rb'"method"\s*:\s*"tools/call"')
_RPC_TOOL_NAME = re.compile(rb'"name"\s*:\s*"(?P<name>[A-Za-z0-9_.\-]{1,128})"')
_OWS = (b" ", b"\t")


@dataclass(frozen=True, kw_only=True, slots=True)
class Refusal:
    """An authenticated request that tried to call ``tool`` and was refused: for the audit log."""

    caller: str  # mcp | rest
    tool: str
    session: str
    status: int
    code: str
    message: str


RefusalRecorder = Callable[[Refusal], Awaitable[None]]


def is_loopback_host(host: str) -> bool:
    return host.lower() in LOOPBACK_NAMES or host.startswith("127.")


def json_error(
    scope: Scope, status: int, code: str, message: str, hint: str | None = None, *, rpc_id: Any = None
) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The body and headers of a refusal, shaped for the route it answers."""
    if scope.get("path", "").startswith("/mcp"):
        data: dict[str, Any] = {"code": code}
        if hint:
            data["hint"] = hint
        # -32600 Invalid Request for refusals made before JSON-RPC even starts.
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "error": {"code": -32600, "message": message, "data": data},
        }
    else:
        error: dict[str, Any] = {"code": code, "message": message}
        if hint:
            error["hint"] = hint
        body = {"error": error}
    payload = json.dumps(body, ensure_ascii=False).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    return payload, headers


async def _respond(
    scope: Scope,
    send: Send,
    status: int,
    code: str,
    message: str,
    hint: str | None = None,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    payload, headers = json_error(scope, status, code, message, hint)
    await send({"type": "http.response.start", "status": status, "headers": headers + list(extra_headers)})
    await send({"type": "http.response.body", "body": payload})


class _BodyTooLarge(Exception):
    def __init__(self, head: bytes) -> None:
        self.head = head


class Guard:
    """ASGI middleware wrapping the whole gateway app.

    ``public_paths`` skip the token (``/healthz``), never the Host/Origin check. An accepted
    request carries its :class:`GatewaySession` in ``scope["pincer.session"]``.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tokens: TokenBook,
        max_body_bytes: int,
        bound_host: str,
        allowed_hosts: Iterable[str] = (),
        allowed_origins: Iterable[str] = (),
        public_paths: Iterable[str] = ("/healthz",),
        self_authenticated_prefixes: Iterable[str] = (),
        opaque_origin_prefixes: Iterable[str] = (),
        on_refused: RefusalRecorder | None = None,
        unauthenticated: UnauthenticatedRefusals | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.public_paths = frozenset(public_paths)
        self.self_authenticated_prefixes = tuple(self_authenticated_prefixes)
        # Self-authenticated paths a sandboxed document (Origin: null) may reach: the canvas
        # frame's CSP reports, which carry the frame's own token in their path.
        self.opaque_origin_prefixes = tuple(p for p in opaque_origin_prefixes if p.startswith(self.self_authenticated_prefixes))
        self.on_refused = on_refused
        self.unauthenticated = unauthenticated if unauthenticated is not None else UnauthenticatedRefusals()
        names = set(LOOPBACK_NAMES)
        if not is_loopback_host(bound_host) and bound_host not in ("0.0.0.0", "::"):
            names.add(bound_host.lower())
        self._host_names = frozenset(names)
        self._host_exact = frozenset(h for h in allowed_hosts if ":" in h.strip("[]") or h.startswith("["))
        self._host_any_port = frozenset(h for h in allowed_hosts if h not in self._host_exact)
        self._origins = frozenset(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope["headers"]
        if any(value[:1] in _OWS or value[-1:] in _OWS for _, value in raw):
            # RFC 9110 5.5: a field value excludes surrounding whitespace. Some HTTP parsers
            # (httptools) keep it; every check behind this one compares exact values.
            scope["headers"] = [(name, value.strip(b" \t")) for name, value in raw]
        headers = Headers(scope=scope)

        host = headers.get("host")
        if not self._host_allowed(host):
            await self._refuse_before_auth(
                scope, receive, send, headers, 421, "foreign_host",
                f"Host header {host!r} does not name this gateway",
                "connect to 127.0.0.1 or localhost, or add the name to [gateway] allowed_hosts",
            )  # fmt: skip
            return
        origin = headers.get("origin")
        opaque = origin == "null" and bool(self.opaque_origin_prefixes) and scope.get("path", "").startswith(self.opaque_origin_prefixes)
        if origin is not None and not opaque and not self._origin_allowed(origin):
            await self._refuse_before_auth(
                scope, receive, send, headers, 403, "foreign_origin",
                f"Origin {origin!r} may not use this gateway",
                "browser pages from other sites are refused; add the origin to [gateway] allowed_origins",
            )  # fmt: skip
            return

        path = scope.get("path", "")
        if self.self_authenticated_prefixes and path.startswith(self.self_authenticated_prefixes):
            await self.app(scope, receive, send)
            return
        if path not in self.public_paths:
            if duplicated_header(scope["headers"], ("authorization",)) is not None:
                # Starlette reads the first copy, a proxy in front may read the last.
                self._count_unauthenticated(scope, "duplicate_header")
                await _respond(
                    scope, send, 400, "duplicate_header", "the request has more than one Authorization header",
                    "send 'Authorization: Bearer <token>' once",
                )  # fmt: skip
                return
            session = await self._authenticate(headers.get("authorization"))
            if session is None:
                missing = headers.get("authorization") is None
                self._count_unauthenticated(scope, "unauthorized")
                await _respond(
                    scope, send, 401, "unauthorized",
                    "missing bearer token" if missing else "wrong bearer token",
                    "send 'Authorization: Bearer <token>'; `pincer token` prints it",
                    extra_headers=[(b"www-authenticate", b'Bearer realm="pincer"')],
                )  # fmt: skip
                return
            scope[SESSION_SCOPE_KEY] = session

        if scope.get("method") in _BODY_METHODS:
            declared = headers.get("content-length")
            try:
                too_big = declared is not None and int(declared) > self.max_body_bytes
            except ValueError:
                too_big = False
            try:
                if too_big and not scope.get("path", "").startswith("/mcp"):
                    await self._refuse_large(scope, send, b"")
                    return
                # A JSON-RPC body is read up to the limit even when its declared size is over:
                # that much names the tool the refused call was for.
                body = await self._read_body(receive)
            except _BodyTooLarge as exc:
                await self._refuse_large(scope, send, exc.head)
                return
            if too_big:
                await self._refuse_large(scope, send, body)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)

    # -- checks ------------------------------------------------------------------------------

    def _host_allowed(self, host: str | None) -> bool:
        if not host:
            return False
        host = host.lower()
        if host in self._host_exact:
            return True
        name = _strip_port(host)
        return name in self._host_names or name in self._host_any_port

    def _origin_allowed(self, origin: str) -> bool:
        origin = origin.lower().rstrip("/")
        if origin in self._origins:
            return True
        try:
            parts = urlsplit(origin)
            name = parts.hostname
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or not name:
            return False
        if ":" in name:
            name = f"[{name}]"
        return name in self._host_names or name in self._host_any_port

    async def _authenticate(self, authorization: str | None) -> GatewaySession | None:
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return await self.tokens.resolve(token.strip())

    async def _read_body(self, receive: Receive) -> bytes:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            body.extend(message.get("body", b""))
            if len(body) > self.max_body_bytes:
                raise _BodyTooLarge(bytes(body[: self.max_body_bytes]))
            if not message.get("more_body", False):
                break
        return bytes(body)

    # -- refusals ----------------------------------------------------------------------------

    async def _refuse_before_auth(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: Headers,
        status: int,
        code: str,
        message: str,
        hint: str,
    ) -> None:
        """Refuse a request at the Host/Origin check: audited only if it carries a valid token."""
        session = await self._authenticate(headers.get("authorization"))
        if session is None:
            self._count_unauthenticated(scope, code)
            await _respond(scope, send, status, code, message, hint)
            return
        scope[SESSION_SCOPE_KEY] = session
        await self._refuse(scope, receive, send, status, code, message, hint)

    def _count_unauthenticated(self, scope: Scope, code: str) -> None:
        client = scope.get("client")
        address = str(client[0]) if client else "(unknown address)"
        self.unauthenticated.record(
            address=address, method=str(scope.get("method")), path=str(scope.get("path", "")), code=code
        )

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        code: str,
        message: str,
        hint: str,
        extra_headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        logger.info("refused %s %r: %s", scope.get("method"), scope.get("path"), code)
        if self.on_refused is not None and scope.get("method") == "POST":
            head = b""
            if scope.get("path", "").startswith("/mcp"):
                try:
                    head = await self._read_body(receive)
                except _BodyTooLarge as exc:
                    head = exc.head
            await self._record(scope, head, status, code, message)
        await _respond(scope, send, status, code, message, hint, extra_headers)

    async def _refuse_large(self, scope: Scope, send: Send, head: bytes) -> None:
        message = f"request body is larger than {self.max_body_bytes} bytes"
        if scope.get("method") == "POST":
            await self._record(scope, head, 413, "body_too_large", message)
        await _respond(
            scope, send, 413, "body_too_large", message,
            "send less, or raise [gateway] max_body_bytes in config.toml",
        )  # fmt: skip

    async def _record(self, scope: Scope, head: bytes, status: int, code: str, message: str) -> None:
        if self.on_refused is None:
            return
        attempt = _call_attempt(scope, head)
        session = scope.get(SESSION_SCOPE_KEY)
        if attempt is None or not isinstance(session, GatewaySession):
            return  # only authenticated call attempts reach this far; defend anyway
        caller, tool = attempt
        refusal = Refusal(caller=caller, tool=tool, session=session.name, status=status, code=code, message=message)
        try:
            await self.on_refused(refusal)
        except Exception:  # recording must never turn a clean refusal into a crash
            logger.exception("recording a refused call failed")


def duplicated_header(raw_headers: Iterable[tuple[bytes, bytes]], names: Iterable[str]) -> str | None:
    """The first of ``names`` (lower case) that ``raw_headers`` (ASGI's) carries more than once."""
    wanted = frozenset(names)
    seen: set[str] = set()
    for key, _ in raw_headers:
        name = key.decode("latin-1").lower()
        if name in wanted:
            if name in seen:
                return name
            seen.add(name)
    return None


def _strip_port(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end != -1 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _call_attempt(scope: Scope, head: bytes) -> tuple[str, str] | None:
    """(caller, tool) when the refused request was a tool call, else None."""
    path = scope.get("path", "")
    match = _REST_CALL.match(path)
    if match:
        return "rest", match.group("name")
    if not path.startswith("/mcp") or not _RPC_TOOL_CALL.search(head):
        return None
    try:
        message = json.loads(head)
    except (ValueError, RecursionError):
        message = None
    if isinstance(message, dict):
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        return "mcp", name if isinstance(name, str) and name else "(unknown)"
    # A body cut off at the size limit: the first "name" is the best guess there is.
    found = _RPC_TOOL_NAME.search(head)
    return "mcp", found.group("name").decode() if found else "(unknown)"


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
