"""The loopback redirect of an OAuth login (RFC 8252 section 7.3): a listener on
``127.0.0.1:0`` that waits for the one redirect carrying this login's ``state``.

A request whose state is not this login's (another page poking the port, a stale tab) is answered
400 and refused; the wait goes on for the real one, bounded by the caller's timeout. Only
``GET /callback`` is read, and only its request line (at most :data:`MAX_REQUEST_BYTES`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream

from pincer.core.errors import OAuthCallbackRefused, UsageError

__all__ = ["LoopbackRedirect", "MAX_REQUEST_BYTES", "REQUEST_READ_TIMEOUT_S"]

logger = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 16_384
REQUEST_READ_TIMEOUT_S = 10.0  # one browser connection's request head
CALLBACK_PATH = "/callback"

_DONE = b"<!doctype html><title>pincer</title><p>Signed in. You can close this tab and return to pincer."
_REFUSED = b"<!doctype html><title>pincer</title><p>This redirect was refused (it does not belong to this login)."


class LoopbackRedirect:
    """``async with LoopbackRedirect() as loop``: ``loop.redirect_uri`` to register in the
    authorization URL, ``await loop.wait(check, timeout_s)`` for the code."""

    def __init__(self) -> None:
        self._listener: Any = None
        self.port = 0
        self.refused = 0

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    async def __aenter__(self) -> LoopbackRedirect:
        self._listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = int(self._listener.extra(SocketAttribute.local_port))
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        with anyio.CancelScope(shield=True):
            await self._listener.aclose()

    async def wait(self, check: Callable[[str], str], timeout_s: float) -> str:
        """The value ``check(redirect_url)`` returns for the first redirect it accepts.
        ``check`` raises OAuthCallbackRefused for a forged redirect (answered 400, wait goes on);
        when the provider's own error comes back with the right state, that error is raised."""
        result: dict[str, Any] = {}
        done = anyio.Event()

        async def handle(stream: SocketStream) -> None:
            async with stream:
                with anyio.move_on_after(REQUEST_READ_TIMEOUT_S):
                    line = await _request_line(stream)
                    if line is None:
                        return
                    method, _, target = line.partition(" ")
                    target = target.rsplit(" ", 1)[0]
                    if method != "GET" or not target.startswith(CALLBACK_PATH + "?"):
                        await _answer(stream, 404, b"not found")
                        return
                    try:
                        value = check(f"http://127.0.0.1:{self.port}{target}")
                    except OAuthCallbackRefused as exc:
                        if exc.declined:  # the provider's answer to this very login: it ends
                            result["error"] = exc
                            await _answer(stream, 400, _REFUSED)
                            done.set()
                            return
                        self.refused += 1
                        logger.warning("oauth loopback: refused a redirect (%s)", exc.message)
                        await _answer(stream, 400, _REFUSED)
                        return
                    result["value"] = value
                    await _answer(stream, 200, _DONE)
                    done.set()

        with anyio.move_on_after(timeout_s):
            async with anyio.create_task_group() as group:
                group.start_soon(self._listener.serve, handle, group)
                await done.wait()
                group.cancel_scope.cancel()
        if "error" in result:
            raise result["error"]
        if "value" not in result:
            raise UsageError(
                f"no redirect reached {self.redirect_uri} within {timeout_s:.0f} s",
                hint="run `pincer auth setup NAME --no-browser` and paste the redirect URL instead",
            )
        return str(result["value"])


async def _request_line(stream: SocketStream) -> str | None:
    data = b""
    while b"\r\n" not in data:
        if len(data) > MAX_REQUEST_BYTES:
            await _answer(stream, 431, b"request too large")
            return None
        try:
            chunk = await stream.receive(4096)
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            return None
        data += chunk
    # Read the rest of the head so the browser sees an answer, not a reset.
    while b"\r\n\r\n" not in data and len(data) <= MAX_REQUEST_BYTES:
        try:
            data += await stream.receive(4096)
        except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            break
    return data.split(b"\r\n", 1)[0].decode("latin-1")


async def _answer(stream: SocketStream, status: int, body: bytes) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 431: "Request Header Fields Too Large"}[status]
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n")
    try:
        await stream.send(head.encode("latin-1") + body)
    except (anyio.BrokenResourceError, OSError):
        pass
