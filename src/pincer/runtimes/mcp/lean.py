"""The lean path: pincer's own JSON-RPC requests on an upstream connection, past the SDK.

The SDK's client session costs pincer's gateway most of its CPU per proxied call (a validated
envelope per message, two memory-stream hops, a dispatcher task, the request built and dumped
through pydantic). On the hot ``tools/call`` path pincer needs none of that: the transport's one
reader task hands every parsed message to :meth:`LeanCalls.claim` first, which takes the
answers to the ids in its own table (and the progress of those requests) and leaves everything
else (the SDK's own answers, requests from the server such as elicitation, list changes, logs)
to the SDK as before. The SDK keeps initialization, capabilities and all that is off the hot path.

Guarantees kept from the SDK's dispatcher, so a caller sees the same outcome on either path:

* an error answer raises ``MCPError`` with the server's code, message and data;
* a call cancelled by its caller, or past its time, sends ``notifications/cancelled`` (bounded,
  never hanging on a stuck pipe) and its id leaves the table on every path: a late answer is
  then left to the SDK, which drops it;
* the connection ending fails every call in flight at once with ``CONNECTION_CLOSED``; the
  transport's reason (exit status, garbage, a line too long) is what the caller is told.

Bounded: at most ``MAX_IN_FLIGHT`` calls per connection, and per call at most
``PROGRESS_BACKLOG`` progress updates waiting for a slow caller (the oldest go first: a
progress update replaces the ones before it), so a server flooding notifications costs memory
it cannot grow.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, REQUEST_TIMEOUT

logger = logging.getLogger(__name__)

__all__ = ["LeanCalls", "encode_line", "MAX_IN_FLIGHT", "PROGRESS_BACKLOG", "FIRST_ID", "CANCEL_WRITE_TIMEOUT_S"]

# Ids of lean requests start here, far above the SDK's own counter (it counts up from 0 on the
# same connection), and stay within a signed 32-bit integer for servers that parse ids so.
FIRST_ID = 1 << 30
LAST_ID = (1 << 31) - 1
MAX_IN_FLIGHT = 4096
PROGRESS_BACKLOG = 16
CANCEL_WRITE_TIMEOUT_S = 2.0  # the courtesy cancel must not hang a caller on a stuck pipe



class ProgressFn(Protocol):
    """Receives a call's progress notifications (the call shape of the SDK's ``ProgressFnT``, so
    one callback serves both the lean path and ``Client.call_tool``)."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


# Sends one JSON-RPC message (a dict) with the HTTP headers it needs (None on stdio).
Send = Callable[[dict[str, Any], Mapping[str, str] | None], Awaitable[None]]


def _as_id(value: Any) -> int | None:
    """A JSON-RPC id as the table keys it: an int (a server may echo "7" for 7, as the SDK allows)."""
    if type(value) is int:
        return value
    if isinstance(value, str) and value.isdigit() and len(value) < 12:
        return int(value)
    return None


class _Call:
    __slots__ = ("outcome", "progress", "wake", "on_progress")

    def __init__(self, on_progress: ProgressFn | None) -> None:
        self.outcome: dict[str, Any] | MCPError | None = None
        self.progress: collections.deque[tuple[float, float | None, str | None]] = collections.deque(
            maxlen=PROGRESS_BACKLOG
        )
        self.wake = anyio.Event()
        self.on_progress = on_progress


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One message as a stdio line: compact UTF-8 JSON, as the SDK's pydantic dump writes it."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", errors="surrogatepass") + b"\n"


class LeanCalls:
    """The table of pincer's own requests on one connection. ``send`` writes one message on the
    transport (stdio: a line through its one writer; HTTP: into the SDK transport's write stream,
    which posts it)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._pending: dict[int, _Call] = {}
        self._next = FIRST_ID
        self.closed: str | None = None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    # -- the reader's side (sync: it never blocks the one reader task) --------------------------

    def claim(self, message: Any) -> bool:
        """Take ``message`` (a parsed JSON value) if it answers or reports on a lean request.
        Anything else, and anything malformed, is left to the SDK path, which reads it exactly
        as it would have (a malformed envelope then ends the connection there, as it always did)."""
        if not self._pending or type(message) is not dict:
            return False
        if "method" in message:
            return self._claim_progress(message)
        key = _as_id(message.get("id"))
        call = self._pending.get(key) if key is not None else None
        if call is None or message.get("jsonrpc") != "2.0":
            return False
        has_result, has_error = "result" in message, "error" in message
        if has_result == has_error:
            return False
        if has_result:
            result = message["result"]
            if type(result) is not dict:
                return False
            outcome: dict[str, Any] | MCPError = result
        else:
            error = message["error"]
            if type(error) is not dict or type(error.get("code")) is not int or type(error.get("message")) is not str:
                return False
            outcome = MCPError(code=error["code"], message=error["message"], data=error.get("data"))
        if call.outcome is None:  # a second answer to the same id is dropped: the first one counts
            call.outcome = outcome
            call.wake.set()
        return True

    def _claim_progress(self, message: dict[str, Any]) -> bool:
        if message.get("method") != "notifications/progress":
            return False
        params = message.get("params")
        if type(params) is not dict:
            return False
        key = _as_id(params.get("progressToken"))
        call = self._pending.get(key) if key is not None else None
        progress, total, text = params.get("progress"), params.get("total"), params.get("message")
        if (
            call is None
            or not isinstance(progress, int | float)
            or isinstance(progress, bool)
            or (total is not None and (not isinstance(total, int | float) or isinstance(total, bool)))
            or (text is not None and not isinstance(text, str))
        ):
            return False
        if call.on_progress is not None and call.outcome is None:
            call.progress.append((float(progress), None if total is None else float(total), text))
            call.wake.set()
        return True

    def close(self, reason: str) -> None:
        """The connection ended: every call in flight fails now."""
        if self.closed is None:
            self.closed = reason
        for call in self._pending.values():
            if call.outcome is None:
                call.outcome = MCPError(code=CONNECTION_CLOSED, message="Connection closed")
            call.wake.set()

    # -- the caller's side ---------------------------------------------------------------------

    def _allocate(self) -> int:
        while True:
            key = self._next
            self._next = key + 1 if key < LAST_ID else FIRST_ID
            if key not in self._pending:
                return key

    async def request(
        self,
        method: str,
        params: Mapping[str, Any],
        *,
        timeout_s: float,
        on_progress: ProgressFn | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """Send one request and wait for its result (a dict). Raises ``MCPError``: the server's
        error, ``REQUEST_TIMEOUT`` after ``timeout_s``, ``CONNECTION_CLOSED`` when the connection
        ends (or has ended). ``headers``: the HTTP headers the request goes with."""
        if self.closed is not None:
            raise MCPError(code=CONNECTION_CLOSED, message="Connection closed")
        if len(self._pending) >= MAX_IN_FLIGHT:
            raise MCPError(
                code=INTERNAL_ERROR, message=f"{MAX_IN_FLIGHT} calls are in flight on this connection already"
            )
        key = self._allocate()
        out = dict(params)
        if on_progress is not None:
            out["_meta"] = {**(out.get("_meta") or {}), "progressToken": key}
        message = {"jsonrpc": "2.0", "id": key, "method": method, "params": out}
        call = _Call(on_progress)
        self._pending[key] = call
        written = False
        try:
            with anyio.fail_after(timeout_s):
                written = True  # a write cut short may still have been read: it counts as sent
                try:
                    await self._send(message, headers)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    raise MCPError(code=CONNECTION_CLOSED, message="Connection closed") from None
                return await self._outcome(call)
        except TimeoutError:
            await self._cancel(key, f"timed out after {timeout_s}s")
            raise MCPError(code=REQUEST_TIMEOUT, message=f"Request {method!r} timed out") from None
        except anyio.get_cancelled_exc_class():
            if written:
                with anyio.CancelScope(shield=True):
                    await self._cancel(key, "caller cancelled")
            raise
        finally:
            self._pending.pop(key, None)

    async def _outcome(self, call: _Call) -> dict[str, Any]:
        while True:
            await call.wake.wait()
            call.wake = anyio.Event()
            while call.progress:
                await self._report(call, *call.progress.popleft())
            outcome = call.outcome
            if outcome is None:
                continue
            if isinstance(outcome, MCPError):
                raise outcome
            return outcome

    @staticmethod
    async def _report(call: _Call, progress: float, total: float | None, text: str | None) -> None:
        assert call.on_progress is not None
        try:
            await call.on_progress(progress, total, text)
        except Exception:
            logger.exception("progress callback raised")

    async def _cancel(self, key: int, reason: str) -> None:
        """The courtesy ``notifications/cancelled``, so the server stops the work (best effort)."""
        if self.closed is not None:
            return
        message = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key, "reason": reason}}
        with anyio.move_on_after(CANCEL_WRITE_TIMEOUT_S):
            try:
                await self._send(message, None)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                logger.debug("courtesy cancel for lean request %d not sent: %s", key, type(exc).__name__)
