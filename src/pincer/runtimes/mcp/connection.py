"""One long-lived connection per MCP server, restarted with backoff when it breaks.

A :class:`ServerConnection` owns at most one live :class:`_Session` (a process or an HTTP
session with its ``mcp.Client``). Calls share it; none makes its own handshake. The session runs
in its own task for its whole life, because anyio scopes must be entered and left in one task
while callers come and go from many.

Failures and what follows:

* the server exits or is killed, or writes garbage on stdout: calls in flight fail at once with
  the reason; the next call starts a new session;
* a call times out: the caller gets ToolTimeout; the session is then probed (``tools/list``
  within ``PROBE_TIMEOUT_S``) and ended if it does not answer, so a hung server is restarted;
* starting fails (the command is missing, no answer to initialize within the connect timeout):
  the caller gets RuntimeUnavailable with the server's last stderr lines.

Consecutive failures space the next start out: immediately after the first, then
``BACKOFF_INITIAL_S`` doubling up to ``BACKOFF_MAX_S``; a session that stayed up
``STABLE_AFTER_S`` clears the count. A caller whose deadline ends before the next allowed start
gets an error saying when that is.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

import pincer
from pincer.core.errors import PincerError, RuntimeUnavailable, SecretError, ToolError, ToolTimeout
from pincer.runtimes.mcp import sdk_compat
from pincer.runtimes.mcp.config import ServerConfig
from pincer.runtimes.mcp.environment import SecretLookup, child_environment, resolve_secret_refs
from pincer.runtimes.mcp.lean import LeanCalls, ProgressFn
from pincer.runtimes.mcp.lean_streams import LeanStreams
from pincer.runtimes.mcp.person_questions import (
    CallQuestions,
    PersonAsker,
    answer_request,
    asking,
    current_call,
    detached_context,
)
from pincer.runtimes.mcp.pins import ToolDefinition
from pincer.runtimes.mcp.stdio import StdioLaunch, StdioTransport
from pincer.runtimes.mcp.upstream_tasks import UpstreamTasks
from pincer.telemetry.tracing import TRACING

logger = logging.getLogger(__name__)

__all__ = [
    "ServerConnection",
    "ServerStatus",
    "BACKOFF_INITIAL_S",
    "BACKOFF_MAX_S",
    "STABLE_AFTER_S",
    "PROBE_TIMEOUT_S",
    "CLOSE_TIMEOUT_S",
    "MAX_TOOL_PAGES",
    "backoff_delay",
]

BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 30.0
STABLE_AFTER_S = 60.0
PROBE_TIMEOUT_S = 5.0
CLOSE_TIMEOUT_S = 10.0
LIST_TIMEOUT_S = 30.0
MAX_TOOL_PAGES = 100
HTTP_READ_TIMEOUT_S = 300.0

ToolsListener = Callable[["ServerConnection", list[ToolDefinition]], None]
# Told that the server's ``resources`` or ``prompts`` list changed (its own notification).
ListsListener = Callable[["ServerConnection", str], None]
T = TypeVar("T")


def backoff_delay(failures: int) -> float:
    """Seconds to wait before the next start after ``failures`` consecutive failures."""
    if failures <= 1:
        return 0.0
    return min(BACKOFF_INITIAL_S * 2.0 ** (failures - 2), BACKOFF_MAX_S)


def describe_exception(exc: BaseException) -> str:
    """One line for a failure, unwrapping task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_exception(e) for e in exc.exceptions[:3])
    if isinstance(exc, PincerError):
        return exc.message
    if isinstance(exc, MCPError):
        return f"MCP error {exc.code}: {exc.message}"
    if isinstance(exc, FileNotFoundError):
        if isinstance(exc.filename, str) and "/" not in exc.filename:
            # a bare name the gateway's PATH lacks (a venv's bin/ is on the shell's PATH only)
            searched = os.environ.get("PATH", os.defpath)
            return (f"{exc.strerror}: {exc.filename} is not on the PATH this process searched ({searched}); "
                    "give the command's full path: `pincer mcp add NAME --command /full/path --replace`")  # fmt: skip
        return f"{exc.strerror}: {exc.filename}"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_pincer_error(exc: BaseException) -> PincerError | None:
    if isinstance(exc, PincerError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_pincer_error(inner)
            if found is not None:
                return found
    return None


def to_definition(tool: types.Tool) -> ToolDefinition:
    annotations: dict[str, Any] = {}
    if tool.annotations is not None:
        annotations = tool.annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
    return ToolDefinition(
        name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema or {"type": "object"},
        annotations=annotations,
        output_schema=tool.output_schema,
        title=tool.title,
        meta=dict(tool.meta) if tool.meta else None,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerStatus:
    name: str
    state: str  # idle | running | failed | closed
    pid: int | None
    protocol_version: str | None
    server_info: str | None
    failures: int
    last_error: str | None
    retry_in_s: float | None
    restarts: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "pid": self.pid,
            "protocol_version": self.protocol_version,
            "server": self.server_info,
            "failures": self.failures,
            "last_error": self.last_error,
            "retry_in_s": self.retry_in_s,
            "restarts": self.restarts,
        }


class _Session:
    """One connection's life, run by ``run()`` in its own task."""

    def __init__(self, conn: ServerConnection) -> None:
        self.conn = conn
        self.config = conn.config
        self.client: Client | None = None
        self.transport: StdioTransport | None = None
        self.lean_streams: LeanStreams | None = None  # the lean path over streamable HTTP
        self.tools: list[ToolDefinition] = []
        self.ready = anyio.Event()
        self.stopped = anyio.Event()
        self.error: BaseException | None = None
        self.reason: str | None = None  # why it ended, when the server ended it
        self.started_at = 0.0
        self.task: asyncio.Task[None] | None = None
        self._wake = anyio.Event()
        self._stop_requested = False
        self._tools_changed = False
        self._probe_requested = False
        self.probe_done: anyio.Event | None = None
        self.counted = False  # its end was counted as a failure

    @property
    def lean(self) -> LeanCalls | None:
        """The table of lean requests on this session's transport, if it takes the lean path."""
        if self.transport is not None:
            return self.transport.lean
        return self.lean_streams.lean if self.lean_streams is not None else None

    @property
    def alive(self) -> bool:
        return self.ready.is_set() and self.error is None and self.reason is None and not self.stopped.is_set()

    # -- requests from other tasks ------------------------------------------------------------

    def request_stop(self, reason: str | None = None) -> None:
        if reason is not None and self.reason is None:
            self.reason = reason
        self._stop_requested = True
        self._wake.set()

    def request_probe(self) -> anyio.Event:
        if self.probe_done is None or self.probe_done.is_set():
            self.probe_done = anyio.Event()
            self._probe_requested = True
            self._wake.set()
        return self.probe_done

    def tools_changed(self) -> None:
        self._tools_changed = True
        self._wake.set()

    # -- the task ------------------------------------------------------------------------------

    async def run(self) -> None:
        if TRACING.on:
            # The session outlives the call that started it: its own requests (initialize,
            # probes, tools/list) belong to no caller's trace.
            TRACING.detach_all()
        try:
            # One scope around the whole life: its deadline bounds the start (connect, handshake,
            # first tools/list) and is lifted once the session is up. A scope around the enter
            # alone would be left while the client's task groups are still inside it.
            with anyio.CancelScope(deadline=anyio.current_time() + self.config.connect_timeout_s) as scope:
                async with AsyncExitStack() as stack:
                    client = await self._connect(stack)
                    self.client = client
                    self.tools = await self._list_tools(client, self.config.connect_timeout_s)
                    scope.deadline = math.inf
                    self.started_at = time.monotonic()
                    self.ready.set()
                    self.conn._publish_tools(self, self.tools)
                    async with anyio.create_task_group() as tg:
                        if client.protocol_version.startswith("2026") and self._can_listen(client):
                            tg.start_soon(self._listen, client)
                        await self._serve(client)
                        tg.cancel_scope.cancel()
            if scope.cancelled_caught and not self.ready.is_set():
                self.error = TimeoutError(f"no answer within {self.config.connect_timeout_s:g} s")
        except Exception as exc:  # reported to whoever waits on ready; the task itself never fails  # noqa: BLE001
            self.error = exc
        except BaseException as exc:  # cancellation by aclose: still settle the waiters
            self.error = exc
            raise
        finally:
            if self.probe_done is not None:
                self.probe_done.set()
            self.ready.set()
            self.stopped.set()

    async def _connect(self, stack: AsyncExitStack) -> Client:
        config = self.config
        lookup = self.conn.secrets
        if config.transport == "stdio":
            env = child_environment(config.env, lookup=lookup, server=config.name)
            self.transport = StdioTransport(
                StdioLaunch(
                    server=config.name,
                    command=config.command or "",
                    args=config.args,
                    env=env,
                    cwd=config.cwd,
                ),
                on_closed=lambda reason: self.request_stop(reason),
                lean=self.conn.lean,
            )
            transport: Any = self.transport
        else:
            headers = {
                name: resolve_secret_refs(value, lookup, where=f"MCP server {config.name!r} header {name}")
                for name, value in config.headers.items()
            }
            transport = await self._http_transport(stack, headers)
            if self.conn.lean and config.transport == "http":
                transport = self.lean_streams = LeanStreams(transport)
        client = sdk_compat.FormQuestionsClient(
            transport,
            mode=config.protocol,
            client_info=types.Implementation(name="pincer", version=pincer.__version__),
            message_handler=self._on_message,
            # Declared (form only) on every connection: whether this call's caller may be asked is
            # decided per call (person_questions.py); one who may not fails the call, the server
            # gets an error answer.
            elicitation_callback=self.conn._on_question,
            cache=None,
            extensions=[UpstreamTasks(config.name)],
        )
        await stack.enter_async_context(client)
        return client

    async def _http_transport(self, stack: AsyncExitStack, headers: dict[str, str]) -> Any:
        import httpx2
        from mcp.client.sse import sse_client
        from mcp.client.streamable_http import streamable_http_client

        config = self.config
        url = config.url or ""
        if config.transport == "sse":
            return sse_client(
                url, headers=headers, timeout=config.connect_timeout_s, sse_read_timeout=HTTP_READ_TIMEOUT_S
            )
        http = httpx2.AsyncClient(
            headers=headers, timeout=httpx2.Timeout(config.connect_timeout_s, read=HTTP_READ_TIMEOUT_S)
        )
        await stack.enter_async_context(http)
        return streamable_http_client(url, http_client=http)

    @staticmethod
    def _changing_lists(client: Client) -> dict[str, bool]:
        """Which of its lists the server says it announces changes of."""
        capabilities = client.server_capabilities
        return {
            kind: bool(getattr(getattr(capabilities, kind, None), "list_changed", False))
            for kind in ("tools", "resources", "prompts")
        }

    @classmethod
    def _can_listen(cls, client: Client) -> bool:
        return any(cls._changing_lists(client).values())

    async def _listen(self, client: Client) -> None:
        """2026-07-28 servers send list changes only to a listening client."""
        from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged

        lists = self._changing_lists(client)
        with suppress(Exception):
            async with client.listen(
                tools_list_changed=lists["tools"],
                resources_list_changed=lists["resources"],
                prompts_list_changed=lists["prompts"],
            ) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        self.tools_changed()
                    elif isinstance(event, ResourcesListChanged):
                        self.conn._publish_list(self, "resources")
                    elif isinstance(event, PromptsListChanged):
                        self.conn._publish_list(self, "prompts")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed()
        elif isinstance(message, types.ResourceListChangedNotification):
            self.conn._publish_list(self, "resources")
        elif isinstance(message, types.PromptListChangedNotification):
            self.conn._publish_list(self, "prompts")
        elif isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %s", self.config.name, type(message).__name__)

    async def _serve(self, client: Client) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._stop_requested:
                return
            if self._probe_requested:
                self._probe_requested = False
                if not await self._probe(client):
                    return
            if self._tools_changed:
                self._tools_changed = False
                try:
                    self.tools = await self._list_tools(client, LIST_TIMEOUT_S)
                except Exception as exc:  # noqa: BLE001
                    logger.warning("MCP server %s: re-listing tools failed (%s)", self.config.name, type(exc).__name__)
                else:
                    self.conn._publish_tools(self, self.tools)

    async def _probe(self, client: Client) -> bool:
        """After a timed-out call: does the server still answer at all?"""
        done = self.probe_done
        try:
            with anyio.fail_after(PROBE_TIMEOUT_S):
                await client.list_tools(cache_mode="bypass")
            return True
        except Exception:  # noqa: BLE001
            self.reason = (
                f"stopped answering (a call timed out and a liveness probe got no answer within {PROBE_TIMEOUT_S:g} s)"
            )
            if self.transport is not None:
                await self.transport.kill()
            return False
        finally:
            if done is not None:
                done.set()

    @staticmethod
    async def _list_tools(client: Client, timeout_s: float) -> list[ToolDefinition]:
        with anyio.fail_after(timeout_s):
            return [to_definition(t) for t in await _all_pages(client.list_tools, "tools")]


async def _all_pages(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated list (``MAX_TOOL_PAGES`` pages at most)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        page = await fetch(cursor=cursor, cache_mode="bypass")
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            break
    return items


# Per listing: the client's method, the field of its result holding the items, the server
# capability that offers them and the wire method (for messages).
_LISTINGS = {
    "resources": ("list_resources", "resources", "resources", "resources/list"),
    "resource_templates": ("list_resource_templates", "resource_templates", "resources", "resources/templates/list"),
    "prompts": ("list_prompts", "prompts", "prompts", "prompts/list"),
}


class ServerConnection:
    """The connection to one configured server. ``secrets`` resolves ``${secret:NAME}``.
    ``lean``: ``tools/call`` on a running stdio or streamable HTTP session goes the lean path
    (:mod:`.lean`, :mod:`.lean_streams`) instead of through the SDK's client session
    (``[tools] mcp_lean_calls``)."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        secrets: SecretLookup | None = None,
        on_tools: ToolsListener | None = None,
        on_lists: ListsListener | None = None,
        clock: Callable[[], float] = time.monotonic,
        lean: bool = False,
    ) -> None:
        self.config = config
        self.lean = lean and config.transport in ("stdio", "http")
        self.secrets = secrets
        self._on_tools = on_tools
        self._on_lists = on_lists
        self._clock = clock
        self._session: _Session | None = None
        self._lock = anyio.Lock()
        self._failures = 0
        self._starts = 0  # sessions that came up: the ones after the first are restarts
        self._retry_at = 0.0
        self._last_error: str | None = None
        self._closed = False
        # The tools/call requests in flight (by id(), in the order they started): whose questions are asked.
        self._calls: dict[int, CallQuestions] = {}

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def is_running(self) -> bool:
        return self._session is not None and self._session.alive

    @property
    def pid(self) -> int | None:
        session = self._session
        if session is None or session.transport is None:
            return None
        return session.transport.pid

    def status(self) -> ServerStatus:
        session = self._session
        if self._closed:
            state = "closed"
        elif session is not None and session.alive:
            state = "running"
        elif self._last_error is not None:
            state = "failed"
        else:
            state = "idle"
        client = session.client if session is not None and session.alive else None
        info = client.server_info if client is not None else None
        wait = self._retry_at - self._clock()
        return ServerStatus(
            name=self.name,
            state=state,
            pid=self.pid if state == "running" else None,
            protocol_version=client.protocol_version if client is not None else None,
            # A server may send an empty version: "notes-srv", not "notes-srv ".
            server_info=" ".join(p for p in (str(info.name or "").strip(), str(info.version or "").strip()) if p) or None
            if info is not None
            else None,
            failures=self._failures,
            last_error=self._last_error,
            retry_in_s=round(wait, 3) if wait > 0 and state == "failed" else None,
            restarts=max(self._starts - 1, 0),
        )

    def _publish_tools(self, session: _Session, tools: list[ToolDefinition]) -> None:
        if session is not self._session or self._on_tools is None:
            return
        try:
            self._on_tools(self, list(tools))
        except Exception:
            logger.exception("MCP server %s: tool listener failed", self.name)

    @property
    def _offers_hint(self) -> str:
        return f"`pincer mcp test {self.name}` shows whether the server runs; check the name or URI against its list"

    def _publish_list(self, session: _Session, kind: str) -> None:
        if session is not self._session or self._on_lists is None:
            return
        try:
            self._on_lists(self, kind)
        except Exception:
            logger.exception("MCP server %s: %s listener failed", self.name, kind)

    # -- starting ----------------------------------------------------------------------------

    async def start(self, *, timeout_s: float | None = None) -> list[ToolDefinition]:
        """Make sure the server runs; its current tools."""
        session = await self._ready_session(self._clock() + (timeout_s or self.config.connect_timeout_s + 1))
        return list(session.tools)

    async def _ready_session(self, deadline: float) -> _Session:
        session = self._session
        if session is not None and session.alive:
            probe = session.probe_done
            if probe is None or probe.is_set():
                return session
            with anyio.move_on_after(max(deadline - self._clock(), 0)):
                await probe.wait()
            if session.alive:
                return session
        async with self._lock:
            if self._closed:
                raise RuntimeUnavailable(f"MCP server {self.name!r} is shut down", hint="pincer is closing")
            session = self._session
            if session is not None and session.alive:
                return session
            if session is not None:
                if session.reason is not None and not session.counted:
                    self._note_session_end(session, session.reason)
                await self._retire(session)
            wait = self._retry_at - self._clock()
            if wait > 0:
                if self._clock() + wait >= deadline:
                    raise RuntimeUnavailable(
                        f"MCP server {self.name!r} failed {self._failures} times in a row "
                        f"(last: {self._last_error}); the next start is in {wait:.1f} s",
                        hint="fix the server or its configuration; `pincer mcp test NAME` shows the error",
                    )
                await anyio.sleep(wait)
            return await self._open(deadline)

    async def _open(self, deadline: float) -> _Session:
        session = _Session(self)
        self._session = session
        # The session outlives the call that started it: a question its server sends on its own
        # must never find that call's questions in the context it inherited.
        session.task = asyncio.get_running_loop().create_task(
            session.run(), name=f"mcp-server-{self.name}", context=detached_context()
        )
        budget = max(deadline - self._clock(), 0.001)
        with anyio.move_on_after(budget):
            await session.ready.wait()
        if not session.ready.is_set():
            session.request_stop("did not finish starting in time")
            await self._retire(session)
            self._note_failure(f"did not answer initialize within {budget:.1f} s")
            raise ToolTimeout(
                f"MCP server {self.name!r} did not finish starting within {budget:.1f} s",
                hint="the server may need longer to start: raise its connect_timeout_s",
            )
        if session.error is not None or not session.alive:
            error = session.error
            await self._retire(session)
            message = self._start_failure(session, error)
            self._note_failure(message)
            known = _first_pincer_error(error) if error is not None else None
            if isinstance(known, SecretError):
                raise known
            raise RuntimeUnavailable(
                f"MCP server {self.name!r} could not be started: {message}",
                hint=f"`pincer mcp test {self.name}` shows the error; pincer retries on the next call",
            )
        self._last_error = None
        self._starts += 1
        return session

    def _start_failure(self, session: _Session, error: BaseException | None) -> str:
        timed_out = False
        if isinstance(error, TimeoutError) or (
            isinstance(error, BaseExceptionGroup) and error.subgroup(TimeoutError) is not None
        ):
            message = f"no answer to initialize within {self.config.connect_timeout_s:g} s"
            timed_out = True
        elif session.reason is not None:
            message = session.reason
        elif error is not None:
            message = describe_exception(error)
        else:
            message = "the connection ended while starting"
        if session.transport is not None:
            # After a timeout the process ended because we stopped it: not worth saying.
            if not timed_out and session.transport.failure and session.transport.failure != message:
                message = f"{message} ({session.transport.failure})"
            tail = session.transport.stderr_tail()
            if tail:
                message += f"; its stderr ends with: {tail[-600:]}"
        return message

    def _note_failure(self, message: str) -> None:
        self._failures += 1
        self._last_error = message
        self._retry_at = self._clock() + backoff_delay(self._failures)

    def _note_session_end(self, session: _Session, reason: str) -> None:
        """A running session broke: count it like a failed start unless it had been stable."""
        if session.counted:
            return
        session.counted = True
        if session.started_at and time.monotonic() - session.started_at >= STABLE_AFTER_S:
            self._failures = 0
        self._note_failure(reason)

    async def _retire(self, session: _Session) -> None:
        """Stop a session and wait (bounded) until its process is gone."""
        session.request_stop()
        with anyio.CancelScope(shield=True):
            if session.ready.is_set():
                with anyio.move_on_after(CLOSE_TIMEOUT_S):
                    await session.stopped.wait()
            # Still starting (or stuck in teardown): cancel it; the transport's own teardown is
            # shielded and bounded, so the process is still ended.
            task = session.task
            if task is not None and not task.done():
                task.cancel()
                with anyio.move_on_after(CLOSE_TIMEOUT_S), suppress(BaseException):
                    await asyncio.wait({task})
        if self._session is session:
            self._session = None

    async def list_tools(self, *, timeout_s: float = LIST_TIMEOUT_S) -> list[ToolDefinition]:
        """Ask the running server for its tools again (starting it if need be)."""
        session = await self._ready_session(self._clock() + timeout_s)
        assert session.client is not None
        return await session._list_tools(session.client, timeout_s)

    async def listing(self, kind: str, *, timeout_s: float = LIST_TIMEOUT_S) -> list[Any]:
        """The server's ``resources``, ``resource_templates`` or ``prompts`` (mcp_types models),
        starting it if need be; empty when its capabilities offer none."""
        method, field, capability, wire = _LISTINGS[kind]

        async def fetch(client: Client, remaining: float) -> list[Any]:
            if getattr(client.server_capabilities, capability, None) is None:
                return []
            return await _all_pages(getattr(client, method), field)

        return await self._request(f"{self.name} {wire}", wire, timeout_s, fetch, hint=self._offers_hint)

    async def read_resource(self, uri: str, *, timeout_s: float) -> types.ReadResourceResult:
        """One ``resources/read`` of the server's own URI."""
        return await self._request(
            f"{self.name} resources/read of {uri}", f"resources/read of {uri}", timeout_s,
            lambda client, _: client.read_resource(uri, cache_mode="bypass"),
            hint=self._offers_hint,
        )  # fmt: skip

    async def get_prompt(self, name: str, arguments: Mapping[str, str], *, timeout_s: float) -> types.GetPromptResult:
        """One ``prompts/get`` of the server's own prompt name."""
        return await self._request(
            f"{self.name} prompts/get of {name}", f"prompts/get of {name}", timeout_s,
            lambda client, _: client.get_prompt(name, dict(arguments)),
            hint=self._offers_hint,
        )  # fmt: skip

    # -- calling -----------------------------------------------------------------------------

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout_s: float,
        progress: ProgressFn | None = None,
        asker: PersonAsker | None = None,
    ) -> types.CallToolResult:
        """One ``tools/call``; every failure is a PincerError saying what happened. ``asker``:
        who answers the server's questions during the call (person_questions.py; none: nobody)."""
        questions = CallQuestions(asker or PersonAsker(), f"{self.name}/{tool}")

        async def call(client: Client, remaining: float) -> types.CallToolResult:
            lean = self._lean_calls(client)
            if lean is None:
                return await client.call_tool(
                    tool, dict(arguments), read_timeout_seconds=remaining, progress_callback=progress
                )
            params, headers = sdk_compat.call_request(client, tool, arguments)
            raw = await lean.request("tools/call", params, headers=headers, timeout_s=remaining, on_progress=progress)
            return await sdk_compat.finish_call(client, tool, arguments, raw, timeout_s=remaining, progress=progress)

        async def send(client: Client, remaining: float) -> types.CallToolResult:
            result: types.CallToolResult | None = None
            self._calls[id(questions)] = questions
            try:
                with asking(questions), anyio.CancelScope() as scope:
                    questions.scope = scope
                    result = await call(client, remaining)
            except Exception:
                if questions.failure is None:
                    raise
            finally:
                questions.scope = None
                del self._calls[id(questions)]
                questions.end()
            # A question refused in the connection's own task ended the call from there.
            if questions.failure is not None:
                raise questions.failure
            if result is None:  # cancelled from outside: the caller's own cancellation is raised
                raise ToolError(f"{self.name}/{tool}: the call ended without an answer")
            return result

        return await self._request(
            f"{self.name}/{tool}", f"the call to {tool}", timeout_s, send, sdk_timeout=True,
            hint="check the tool name and arguments against `pincer tools show`",
        )  # fmt: skip

    async def _request(
        self,
        what: str,
        during: str,
        timeout_s: float,
        send: Callable[[Client, float], Awaitable[T]],
        *,
        hint: str,
        sdk_timeout: bool = False,
    ) -> T:
        """One request on the running session (started if need be) within ``timeout_s``; every
        failure is a PincerError saying what happened to ``what`` (``during``: the same, said
        after the server's name, for a broken connection). ``sdk_timeout``: ``send``
        passes the remaining time to the SDK, whose timeout then fires first."""
        started = self._clock()
        deadline = started + timeout_s
        session = await self._ready_session(deadline)
        client = session.client
        assert client is not None
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise ToolTimeout(f"{what}: the server took the whole {timeout_s:g} s to start")
        try:
            with anyio.fail_after(remaining + (1.0 if sdk_timeout else 0.0)):
                return await send(client, remaining)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                session.request_probe()
                raise ToolTimeout(
                    f"{what} did not answer within {timeout_s:g} s",
                    hint="the server is checked and restarted if it hangs; raise its timeout_s if the tool is slow",
                ) from None
            if exc.code == CONNECTION_CLOSED:
                raise self._broken(session, during) from None
            raise ToolError(
                f"{what}: the server refused the request: {exc.message} (MCP error {exc.code})", hint=hint
            ) from None
        except TimeoutError:
            session.request_probe()
            raise ToolTimeout(f"{what} did not answer within {timeout_s:g} s") from None
        except ValidationError as exc:
            raise ToolError(
                f"{what}: the server's answer is not a valid MCP result: {exc.error_count()} problem(s)",
                hint="the server is broken or speaks another protocol version",
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            session.request_stop(f"its connection failed: {describe_exception(exc)}")
            raise self._broken(session, during) from None
        except Exception as exc:
            if self.config.transport != "stdio" and type(exc).__module__.startswith("httpx"):
                session.request_stop(f"its connection failed: {describe_exception(exc)}")
                raise self._broken(session, during) from None
            raise

    async def _on_question(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """An ``elicitation/create`` of the server (the SDK client's callback, on either path).
        In a call's own task (a 2026-07-28 ``InputRequiredResult``, which the SDK's driver asks
        there) it is that call's; sent on its own (a handshake server mid-call), it is put to
        the call in flight on this connection, and refused when calls of different callers are
        (nothing on the wire says which one it is for)."""
        call = current_call()
        if call is not None:
            return await answer_request(call, params)
        calls = list(self._calls.values())
        callers = {c.asker.who for c in calls}
        if len(calls) == 1 or (calls and len(callers) == 1 and None not in callers):
            return await answer_request(calls[0], params)
        why = (
            "no tools/call is in flight on this connection"
            if not calls
            else f"{len(calls)} calls of different callers are in flight on this connection, "
            "and nothing says whose question this is"
        )
        return await answer_request(None, params, unattributed=why)

    @property
    def lean_in_flight(self) -> int | None:
        """Lean calls waiting for their answer on the running session (None: no lean table)."""
        lean = self._session.lean if self._session is not None else None
        return lean.in_flight if lean is not None else None

    def _lean_calls(self, client: Client) -> LeanCalls | None:
        """The lean table of the running session of ``client``, when this connection takes the
        lean path: not while tracing (the SDK's path makes the client span and carries the trace
        context), not before the session is initialized, not on a session already replaced."""
        session = self._session
        if not self.lean or TRACING.on or session is None or session.client is not client or not session.alive:
            return None
        return session.lean

    def _broken(self, session: _Session, what: str) -> ToolError:
        """``what``: the request it broke, as "the call to TOOL" or "resources/read of URI"."""
        transport_reason = session.transport.failure if session.transport is not None else None
        reason = session.reason or transport_reason or "closed the connection"
        session.request_stop(reason)
        self._note_session_end(session, reason)
        message = f"MCP server {self.name!r} {reason} during {what}"
        if session.transport is not None:
            tail = session.transport.stderr_tail()
            if tail:
                message += f"; its stderr ends with: {tail[-400:]}"
        return ToolError(message, hint="the call may or may not have taken effect; the server is restarted on the next call")

    # -- closing -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            session = self._session
            if session is not None:
                await self._retire(session)
