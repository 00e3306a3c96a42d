"""The MCP face of pincer: every tool in the registry, served through the dispatcher.

Built on the official SDK's low-level ``Server``, which negotiates the protocol era per client
(the 2026-07-28 per-request envelope, or the ``initialize`` handshake up to 2025-11-25). Here:

- ``tools/list`` is the registry, minus what the caller's session policy denies;
- ``tools/call`` is ``Dispatcher.call`` under the session of the caller's token, with an
  :class:`~pincer.gateway.channel.McpChannel` for progress, logs, elicitation and sampling;
  a failure is a result with ``isError``, a denial carries its reason;
- an ``ask`` goes to the client as an elicitation when it can take one mid-call (handshake
  era) or ends the round asking (2026-07-28) — for a main session only: a non-main session's
  client is never asked to approve its own call — and otherwise waits for
  ``POST /api/v1/approvals/{id}`` or ``pincer approvals``;
- registry changes go out as ``notifications/tools/list_changed`` to handshake-era connections
  and as ``toolsListChanged`` events on 2026-07-28 ``subscriptions/listen`` streams.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio
import anyio.abc
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.caching import CACHEABLE_METHODS, CacheableMethod, CacheHint
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    PaginatedRequestParams,
)
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import Receive, Scope, Send

from pincer import __version__
from pincer.core.errors import ApprovalPending, ArgumentsInvalid, PincerError, UsageError
from pincer.core.values import CallRequest, ToolResult, ToolSpec
from pincer.gateway.access import may_answer, may_operate
from pincer.gateway.approvals import (
    APPROVAL_DECISION_SCHEMA,
    ApprovalRounds,
    answer_approval,
    answer_from_reply,
    approval_message,
    waiting_message,
)
from pincer.gateway.channel import McpChannel
from pincer.gateway.events import MemoryEventStore
from pincer.gateway.guard import SESSION_SCOPE_KEY
from pincer.gateway.handshake_tasks import TASKS_CAPABILITY, HandshakeTasks
from pincer.gateway.sdk_compat import session_connection
from pincer.gateway.task_feed import TaskFeed
from pincer.gateway.task_notices import ListenStreams
from pincer.gateway.tasks import (
    TASKS_EXTENSION,
    TaskIdParams,
    TaskReceiver,
    TaskServices,
    UpdateTaskParams,
    declares_tasks,
    missing_extension,
)
from pincer.gateway.tokens import GatewaySession
from pincer.gateway.wire import INSTRUCTIONS, SERVER_NAME, add_task_support, tool_to_wire
from pincer.policy.visibility import as_seen, visible_tools
from pincer.registry import Registry, RegistryEvent
from pincer.store.approvals import ApprovalRequest
from pincer.telemetry import spans
from pincer.telemetry.tracing import TRACING

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.dispatch import Dispatcher, Operation
    from pincer.runtimes.mcp.runtime import McpRuntime

logger = logging.getLogger(__name__)

__all__ = [
    "McpGateway",
    "McpServices",
    "McpExtension",
    "IDEMPOTENCY_META_KEY",
    "NOTIFY_TIMEOUT_S",
    "APPROVAL_DECISION_SCHEMA",
]

IDEMPOTENCY_META_KEY = "pincer/idempotencyKey"
AUDIT_META_KEY = "pincer/auditId"
ERROR_META_KEY = "pincer/error"
# What SSE streams tell a client to wait before reconnecting after a drop (SEP-1699).
SSE_RETRY_INTERVAL_MS = 1_000
# A list_changed notification to one connection may not hold up the others for longer than this.
NOTIFY_TIMEOUT_S = 5.0
# Sessions whose visible tools are kept (session names come from tokens: a handful in practice).
_MAX_CACHED_SESSIONS = 1_024
# How often a call waiting for a person reports progress (clients' request timeouts are ~10 s).
APPROVAL_PROGRESS_INTERVAL_S = 2.0
_CHANGE_EVENTS: dict[str, tuple[Any, str]] = {
    "tools": (ToolsListChanged, "send_tool_list_changed"),
    "prompts": (PromptsListChanged, "send_prompt_list_changed"),
    "resources": (ResourcesListChanged, "send_resource_list_changed"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class McpServices:
    """What one MCP gateway uses of the service (``gateway/services.py`` makes it of a Pincer):
    the tools, the call chain, config.toml as it is now (a reload replaces it), its tasks, and the
    MCP runtime whose upstream servers' resources and prompts it serves (a reload may replace it;
    None while no server is configured)."""

    registry: Registry
    dispatcher: Dispatcher
    config: Callable[[], Config]
    tasks: TaskServices
    upstream: Callable[[], McpRuntime | None]


class McpExtension(Protocol):
    """Adds prompts, resources or other handlers to the gateway's server (the conformance
    fixture bundle is one)."""

    def install(self, server: Server[Any], gateway: McpGateway) -> None: ...


class _PincerServer(Server[Any]):
    """The SDK server, announcing ``tools.listChanged`` to handshake-era clients, and ``tasks``
    while the gateway takes task-augmented calls (``handshake_tasks.py``)."""

    takes_tasks: Callable[[], bool] | None = None  # set by the gateway: whether tasks are on now

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = super().create_initialization_options(
            notification_options
            or NotificationOptions(tools_changed=True, prompts_changed=True, resources_changed=True),
            experimental_capabilities,
            extensions,
        )
        if self.takes_tasks is not None and self.takes_tasks():
            options.capabilities = options.capabilities.model_copy(update={"tasks": TASKS_CAPABILITY})
        return options


class McpGateway:
    """One MCP server over one Pincer. ``default_session`` serves transports without a token
    (stdio); HTTP requests carry the session the guard derived from their token."""

    tasks: TaskReceiver  # MCP Tasks, both eras (gateway/tasks.py, gateway/handshake_tasks.py)

    def __init__(
        self,
        services: McpServices,
        *,
        default_session: GatewaySession,
        extensions: tuple[McpExtension, ...] = (),
    ) -> None:
        self.services = services
        self.default_session = default_session
        self.bus = InMemorySubscriptionBus()
        # The store's task changes, listened to once and handed to each part that follows them.
        self.task_feed = TaskFeed(lambda: self.tasks.store)
        # subscriptions/listen: the core change events, and the Tasks extension's taskIds.
        self._listen = ListenStreams(
            self.bus, session_of=self.session_of, tasks=lambda: self.tasks, feed=self.task_feed
        )
        self._connections: dict[int, Connection] = {}
        # Handshake-era sessions that completed initialization: id -> (connection, session name).
        self._handshakes: dict[str, tuple[Connection, str]] = {}
        self._handshake_path: Any = None
        # Per session: (the config it was filtered under, the visible tools as wire objects,
        # and the serialized tools/list result per protocol version).
        self._tool_cache: dict[str, tuple[Any, list[dict[str, Any]], dict[str, dict[str, Any]]]] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        # What extensions add to a final tools/call result: (session, tool name, wire result).
        self.result_hooks: list[Callable[[str, str, dict[str, Any]], None]] = []
        self.server: Server[Any] = _PincerServer(
            SERVER_NAME,
            version=__version__,
            title=SERVER_NAME,
            instructions=INSTRUCTIONS,
            # Lists change with the registry and are filtered per session: fresh and private.
            cache_hints={
                cast("CacheableMethod", method): CacheHint(ttl_ms=0, scope="private") for method in CACHEABLE_METHODS
            },
            get_tool_input_schema=self._input_schema,
            on_subscriptions_listen=self._listen,
        )
        # Registered as on_list_tools/on_call_tool would be (same params models), through the typed
        # seam that admits the plain JSON results these handlers answer with (HandlerResult).
        self.server.add_request_handler("tools/list", PaginatedRequestParams, self._list_tools)
        self.server.add_request_handler("tools/call", CallToolRequestParams, self._call_tool)
        # OpenTelemetry spans per message cost more than a native call; pincer's audit log is
        # the record. Then: note connections (for list_changed), check tools/call params (so
        # a malformed call is audited), seal requestState (2026-07-28 multi-round calls).
        self._state_boundary = RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience="pincer")
        # Handshake-era tasks (2025-11-25) are answered past the SDK's surface, which has none.
        self._handshake_tasks = HandshakeTasks(self)
        self.server.middleware = [
            self._track_connection,
            self._audit_malformed_call,
            self._handshake_tasks,
            self._state_boundary,
        ]
        for extension in extensions:
            extension.install(self.server, self)
        self._rounds = ApprovalRounds(services.dispatcher, config=services.config, task_group=lambda: self._task_group)
        # Where this gateway answers (set by `serve`); named in the approval progress messages.
        self.public_url: str | None = None
        # MCP Tasks (gateway/tasks.py): announced in server/discover, served on 2026-07-28.
        self.tasks = TaskReceiver(
            services.tasks,
            to_wire=self._wire_result,
            task_group=lambda: self._task_group,
            base_url=lambda: self.public_url,
        )
        self.server.extensions[TASKS_EXTENSION] = {}
        self.server.takes_tasks = self.tasks.enabled
        self.server.add_request_handler("tasks/get", TaskIdParams, self._tasks_get)
        self.server.add_request_handler("tasks/update", UpdateTaskParams, self._tasks_update)
        self.server.add_request_handler("tasks/cancel", TaskIdParams, self._tasks_cancel)
        self._unsubscribe = services.registry.subscribe(self._on_registry_event)

    # -- lifecycle ---------------------------------------------------------------------------

    @asynccontextmanager
    async def running(self) -> Any:
        """Hold the task group that fans out change notifications."""
        async with anyio.create_task_group() as tg:
            self._task_group = tg
            tg.start_soon(self.task_feed.run)  # the one listener on the store's task changes
            tg.start_soon(self.tasks.follow, self.task_feed)  # waiting tasks move on when answered, on any gateway
            tg.start_soon(self._listen.follow_tasks)  # and notifications/tasks tell their streams
            # 2025-11-25: notifications/tasks/status, and what tasks/result waits on
            tg.start_soon(self._handshake_tasks.changes.run)
            try:
                yield self
            finally:
                self._task_group = None
                self._listen.close()
                self._unsubscribe()
                tg.cancel_scope.cancel()

    # -- sessions ----------------------------------------------------------------------------

    def session_of(self, ctx: ServerRequestContext[Any, Any]) -> GatewaySession:
        request = ctx.request
        scope = getattr(request, "scope", None)
        if isinstance(scope, Mapping):
            session = scope.get(SESSION_SCOPE_KEY)
            if isinstance(session, GatewaySession):
                return session
            # An HTTP message that did not pass the guard: never fall back to the default.
            raise MCPError(INVALID_PARAMS, "request carries no authenticated session")
        return self.default_session

    # -- tools/list --------------------------------------------------------------------------

    def _input_schema(self, name: str) -> Mapping[str, Any] | None:
        try:
            return self.services.registry.get(name).input_schema
        except PincerError:
            return None

    tool_input_schema = _input_schema

    @staticmethod
    def idempotency_key(params: Mapping[str, Any]) -> str | None:
        return _idempotency_key(params)

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams) -> dict[str, Any]:
        return complete(ctx, {"tools": self._visible(self.session_of(ctx).name)[1]})

    def _visible(self, session: str) -> tuple[Any, list[dict[str, Any]], dict[str, dict[str, Any]]]:
        config = self.services.config()
        cached = self._tool_cache.get(session)
        # A reloaded config.toml may change what the session sees: filter again under it.
        if cached is None or cached[0] is not config:
            policy = config.session(session)
            tools = add_task_support(
                [tool_to_wire(spec, session=session) for spec in visible_tools(policy, self.services.registry.list())],
                enabled=config.tasks.enabled, only=config.tasks.only,
            )  # fmt: skip
            if len(self._tool_cache) > _MAX_CACHED_SESSIONS:
                self._tool_cache.clear()
            cached = self._tool_cache[session] = (config, tools, {})
        return cached

    def tools_list_result(self, session: GatewaySession, version: str) -> dict[str, Any]:
        """The handshake-era ``tools/list`` result for ``session``, shaped for the wire the way
        the SDK's runner shapes a handler's result (cache hints, then the per-version sieve)."""
        _, tools, by_version = self._visible(session.name)
        wire = by_version.get(version)
        if wire is None:
            hint = self.server.cache_hints.get("tools/list")
            result: dict[str, Any] = {"tools": tools}
            if hint is not None:
                result = {"ttlMs": hint.ttl_ms, "cacheScope": hint.scope, **result}
            wire = by_version[version] = serialize_server_result("tools/list", version, result)
        return wire

    # -- tools/call --------------------------------------------------------------------------

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> dict[str, Any]:
        # The raw wire values: answers stay plain JSON, and requestState is the plaintext the
        # RequestStateBoundary middleware verified and unsealed.
        raw = ctx.params if isinstance(ctx.params, Mapping) else {}
        responses = raw.get("inputResponses")
        state = raw.get("requestState")
        channel = McpChannel.from_context(
            ctx,
            input_responses=responses if isinstance(responses, Mapping) else None,
            request_state=state if isinstance(state, str) else None,
        )
        return await self.run_call(
            self.session_of(ctx), params.name, params.arguments or {}, channel, idempotency_key=_idempotency_key(raw)
        )

    async def run_call(
        self,
        session: GatewaySession,
        name: str,
        arguments: Mapping[str, Any],
        channel: McpChannel,
        *,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """One ``tools/call`` through the dispatcher, as the wire result (both eras, every
        transport). Raises MCPError only for a missing client capability on 2026-07-28."""
        if TRACING.on:
            # The MCP server span continues the trace the client put in _meta (the MCP SDKs'
            # way), else the HTTP request's; the call's own spans are its children.
            known = self._spec_or_none(name) is not None
            with spans.mcp_server_span(name, known=known, meta=channel.meta, protocol_version=channel.protocol_version):
                return await self._run_call(session, name, arguments, channel, idempotency_key=idempotency_key)
        return await self._run_call(session, name, arguments, channel, idempotency_key=idempotency_key)

    async def _run_call(
        self,
        session: GatewaySession,
        name: str,
        arguments: Mapping[str, Any],
        channel: McpChannel,
        *,
        idempotency_key: str | None,
    ) -> dict[str, Any]:
        request = self.call_request(session, name, arguments, channel, idempotency_key=idempotency_key)
        approval_id = self._rounds.continuation(channel)
        if channel.is_modern and approval_id is None and self.tasks.enabled():
            if declares_tasks(channel.meta):
                return await self.tasks.call(session, request)
            if self.tasks.only_as_task(name):
                raise missing_extension(f"{name} runs only as a task: declare the {TASKS_EXTENSION} extension")
        elif not channel.is_modern and self.tasks.enabled() and self.tasks.only_as_task(name):
            # 2025-11-25: a tool whose taskSupport is "required" called without params.task.
            raise MCPError(METHOD_NOT_FOUND, f"{name} runs only as a task: call it with params.task, e.g. {{}}")
        if approval_id is not None:
            result = await self._rounds.resume(approval_id, channel, session)
        elif self._rounds.can_start(channel, session):
            outcome = await self._rounds.start(request, channel, session)
            if isinstance(outcome, dict):
                return outcome
            result = outcome
        else:
            result = await self._call_asking_mid_call(request, channel, session)
        if channel.pending is not None:
            return {"resultType": "input_required", **channel.pending}
        if channel.missing_capability is not None and channel.is_modern:
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                str((result.error or {}).get("message", "missing client capability")),
                data={"requiredCapabilities": {channel.missing_capability: {}}},
            )
        wire = self._wire_result(session.name, name, result)
        if not channel.is_modern:
            del wire["resultType"]
        return wire

    def call_request(
        self,
        session: GatewaySession,
        name: str,
        arguments: Mapping[str, Any],
        channel: McpChannel,
        *,
        idempotency_key: str | None = None,
    ) -> CallRequest:
        """The chain's request for one ``tools/call`` of ``session``."""
        return CallRequest(
            tool=name,
            args=arguments,
            session=session.name,
            idempotency_key=idempotency_key,
            caller="mcp",
            client=channel,
            person=session.person,
            may_change_policy=may_operate(session),
        )

    def _wire_result(self, session: str, name: str, result: ToolResult) -> dict[str, Any]:
        """The 2026-07-28 wire ``CallToolResult`` of a call's result (a task's result too)."""
        seen = as_seen(self.services.config().session(session), name, result)
        # A tool the session may not see is answered as a missing one, its definition unsaid.
        wire = result_to_wire(seen, self._spec_or_none(name) if seen is result else None)
        if seen is result:
            for hook in self.result_hooks:
                hook(session, name, wire)
        wire["resultType"] = "complete"
        return wire

    # -- tasks/* (gateway/tasks.py) ------------------------------------------------------------

    def _task_session(self, ctx: ServerRequestContext[Any, Any]) -> GatewaySession:
        raw = ctx.params if isinstance(ctx.params, Mapping) else {}
        if not declares_tasks(raw.get("_meta")):
            raise missing_extension(f"{ctx.method} needs the {TASKS_EXTENSION} extension in the request's capabilities")
        return self.session_of(ctx)

    async def _tasks_get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        return await self.tasks.get(self._task_session(ctx), params.task_id)

    async def _tasks_update(self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams) -> dict[str, Any]:
        return await self.tasks.update(self._task_session(ctx), params.task_id, params.input_responses)

    async def _tasks_cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> dict[str, Any]:
        return await self.tasks.cancel(self._task_session(ctx), params.task_id)

    async def run_operation(
        self, request: CallRequest, channel: McpChannel, session: GatewaySession, operation: Operation
    ) -> ToolResult:
        """An upstream server's resources/read or prompts/get through the chain, any approval it
        needs asked as for a ``tools/call`` in the handshake era (``upstream_mcp.py``)."""
        return await self._call_asking_mid_call(request, channel, session, operation)

    async def _call_asking_mid_call(
        self, request: CallRequest, channel: McpChannel, session: GatewaySession, operation: Operation | None = None
    ) -> ToolResult:
        """The call, with any approval it needs put to the client as an elicitation right away
        (handshake era, main sessions) and left answerable over REST and the CLI as well. While
        it waits, progress notifications say how to answer (and keep a client's timeout alive);
        a client nobody can ask gets the approval id at once with when_no_elicitation = "return".
        ``operation``: an upstream server's resources/read or prompts/get (``upstream_mcp.py``)."""
        asks: list[anyio.CancelScope] = []
        call_scope = anyio.CancelScope()

        async def put_to_client(approval: ApprovalRequest) -> None:
            # Only a main session's client is asked (a person's: when their roles hold this
            # approval): an agent must not approve its own calls.
            can_ask = may_answer(session, approval) and channel.can_ask
            if not can_ask and self.services.config().approval_when_no_elicitation == "return":
                raise ApprovalPending("", approval_id=approval.id)  # the approver detaches it
            if self._task_group is None:
                return
            scope = anyio.CancelScope()
            asks.append(scope)
            self._task_group.start_soon(self._report_waiting, channel, approval, scope)
            if channel.caller_gone is not None:
                scope = anyio.CancelScope()
                asks.append(scope)
                self._task_group.start_soon(_cancel_when_gone, channel.caller_gone, call_scope, scope)
            if can_ask:
                scope = anyio.CancelScope()
                asks.append(scope)
                self._task_group.start_soon(self._ask_client, channel, approval, session, scope)

        try:
            with call_scope:
                return await self.services.dispatcher.call(request, on_approval=put_to_client, operation=operation)
            # The client hung up while the call waited: the chain recorded the cancellation and
            # expired the approval; this answer goes nowhere. A hang-up is normal: one quiet line.
            logger.debug(
                "tools/call %s of session %s: the client hung up; the call was cancelled", request.tool, session.name
            )
            return ToolResult(ok=False, error={"code": "cancelled", "message": "the client disconnected"})
        finally:
            # The call is over; an elicitation still open (answered elsewhere) is withdrawn.
            for scope in asks:
                scope.cancel()

    async def _report_waiting(self, channel: McpChannel, approval: ApprovalRequest, scope: anyio.CancelScope) -> None:
        """Progress notifications while the call waits for a person (sent only when the client
        asked for progress); each restarts a client's request timeout where it supports that."""
        message = waiting_message(approval, self.public_url)
        timeout_s = max(approval.expires_at - approval.created_at, 1.0)
        waited = 0.0
        with scope:
            while waited < timeout_s:
                await channel.progress(waited, timeout_s, message)
                await anyio.sleep(APPROVAL_PROGRESS_INTERVAL_S)
                waited += APPROVAL_PROGRESS_INTERVAL_S

    async def _ask_client(
        self, channel: McpChannel, approval: ApprovalRequest, session: GatewaySession, scope: anyio.CancelScope
    ) -> None:
        """Put one approval to the MCP client as an elicitation and answer it with the reply."""
        message = approval_message(approval)
        reply: dict[str, Any] | None = None
        with scope:
            try:
                reply = await channel.elicit(message, APPROVAL_DECISION_SCHEMA, key=f"approval:{approval.id}")
            except Exception as exc:  # the approval stays answerable over REST and the CLI  # noqa: BLE001
                logger.info("approval %s could not be put to the client: %s", approval.id, exc)
        answer = answer_from_reply(reply)
        if answer is not None:
            await answer_approval(self.services.dispatcher, approval.id, answer, session)

    def _spec_or_none(self, name: str) -> ToolSpec | None:
        try:
            return self.services.registry.get(name)
        except PincerError:
            return None

    # -- middleware --------------------------------------------------------------------------

    async def _track_connection(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and ctx.method == "notifications/initialized":
            connection = session_connection(ctx.session)
            if connection is not None and connection.has_standalone_channel:
                key = id(connection)
                self._connections[key] = connection
                connection.exit_stack.callback(self._connections.pop, key, None)
                self._note_handshake(ctx, connection)
        return await call_next(ctx)

    def _note_handshake(self, ctx: ServerRequestContext[Any, Any], connection: Connection) -> None:
        """Remember an initialized HTTP session for the direct path, with the principal the SDK
        bound it to (it refuses any other on every request, this one included)."""
        scope = getattr(ctx.request, "scope", None)
        session = scope.get(SESSION_SCOPE_KEY) if isinstance(scope, Mapping) else None
        session_id = connection.session_id
        if not isinstance(session, GatewaySession) or not session_id or session_id in self._handshakes:
            return
        self._handshakes[session_id] = (connection, session.name)
        connection.exit_stack.callback(self._end_handshake, session_id)

    def _end_handshake(self, session_id: str) -> None:
        self._handshakes.pop(session_id, None)
        if self._handshake_path is not None:
            self._handshake_path.end_session(session_id)

    def handshake_session(self, session_id: str) -> tuple[Connection, str] | None:
        """The connection of an initialized handshake-era session and the name of the gateway
        session (the principal) it belongs to."""
        return self._handshakes.get(session_id)

    @property
    def task_group(self) -> anyio.abc.TaskGroup | None:
        return self._task_group

    async def _audit_malformed_call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A tools/call whose params the SDK would refuse unseen: refuse it ourselves, audited."""
        if ctx.method != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else None
        name = params.get("name") if params is not None else None
        arguments = params.get("arguments") if params is not None else None
        problem: PincerError | None = None
        if not isinstance(name, str) or not name:
            problem = UsageError("tools/call needs params.name, the tool's name", hint="see tools/list for the names")
        elif arguments is not None and not isinstance(arguments, Mapping):
            problem = ArgumentsInvalid(
                f"tools/call arguments for {name!r} must be a JSON object, got {type(arguments).__name__}",
                hint="pass the arguments as an object whose keys are the parameter names",
            )
        if problem is None:
            return await call_next(ctx)
        session = self.session_of(ctx)
        request = CallRequest(
            tool=name if isinstance(name, str) and name else "(unknown)", args={}, session=session.name, caller="mcp"
        )
        rejected = await self.services.dispatcher.reject(request, problem)
        data = dict(rejected.error or {})
        data["auditId"] = rejected.audit_id
        raise MCPError(INVALID_PARAMS, problem.message, data=data)

    # -- change notifications ----------------------------------------------------------------

    def _on_registry_event(self, event: RegistryEvent) -> None:
        self._tool_cache.clear()
        self.schedule_notification("tools")

    def schedule_notification(self, kind: str) -> None:
        """Tell clients (in the background) that the ``tools``/``prompts``/``resources`` list changed."""
        if self._task_group is not None:
            self._task_group.start_soon(self.notify_changed, kind)

    async def notify_changed(self, kind: str) -> None:
        event, method = _CHANGE_EVENTS[kind]
        await self.bus.publish(event())
        for key, connection in list(self._connections.items()):
            with anyio.move_on_after(NOTIFY_TIMEOUT_S):
                try:
                    await getattr(connection, method)()
                except Exception:  # a connection that went away is forgotten, not fatal
                    logger.debug("%s list_changed to a closed connection dropped", kind, exc_info=True)
                    self._connections.pop(key, None)

    # -- HTTP --------------------------------------------------------------------------------

    def asgi_app(self, *, max_body_bytes: int) -> tuple[Any, Any]:
        """(ASGI app for ``/mcp``, the session manager whose ``run()`` must be entered)."""
        from mcp.server.transport_security import TransportSecuritySettings

        from pincer.gateway.sdk_compat import SessionScopedManager

        manager = SessionScopedManager(
            app=self.server,
            json_response=False,
            event_store=MemoryEventStore(),
            retry_interval=SSE_RETRY_INTERVAL_MS,
            # Host and Origin are checked by the gateway's guard, with the configured names.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=max_body_bytes,
        )

        from pincer.gateway.fastpath import ModernCallFastPath
        from pincer.gateway.handshake import HandshakeFastPath

        self._handshake_path = HandshakeFastPath(self, manager)
        endpoint = _McpEndpoint(manager, ModernCallFastPath(self, self._state_boundary), self._handshake_path)
        return endpoint, manager


_PROTOCOL_VERSION_HEADER = b"mcp-protocol-version"


class _McpEndpoint:
    """ASGI endpoint for ``/mcp`` (a class, so Starlette routes to it as an app)."""

    def __init__(self, manager: Any, fast_path: Any, handshake_path: Any) -> None:
        self._manager = manager
        self._fast_path = fast_path
        self._handshake_path = handshake_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        session = scope.get(SESSION_SCOPE_KEY)
        if isinstance(session, GatewaySession):
            # The SDK binds each MCP session to the principal that opened it.
            scope["user"] = AuthenticatedUser(AccessToken(token="-", client_id=f"session:{session.name}", scopes=[]))
        if scope.get("method") == "POST":
            # The guard has buffered the body: it arrives as one message.
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body = message.get("body", b"")
                version = next((v for k, v in scope["headers"] if k == _PROTOCOL_VERSION_HEADER), b"").decode("latin-1")
                if version in HANDSHAKE_PROTOCOL_VERSIONS:
                    if await self._handshake_path.try_handle(scope, body, send, receive, version):
                        return
                elif await self._fast_path.try_handle(scope, body, send, receive):
                    return
            receive = _replay(message, receive)
        await self._manager.handle_request(scope, receive, send)


async def _cancel_when_gone(
    caller_gone: Callable[[], Awaitable[None]], call_scope: anyio.CancelScope, scope: anyio.CancelScope
) -> None:
    with scope:
        await caller_gone()
        call_scope.cancel()


def _replay(first: Any, receive: Receive) -> Receive:
    pending = [first]

    async def replay() -> Any:
        return pending.pop() if pending else await receive()

    return replay


def complete(ctx: ServerRequestContext[Any, Any], result: dict[str, Any]) -> dict[str, Any]:
    """Mark a final result as such on 2026-07-28 (earlier versions have no resultType)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        result["resultType"] = "complete"
    return result


def _idempotency_key(params: Mapping[str, Any]) -> str | None:
    meta = params.get("_meta")
    key = meta.get(IDEMPOTENCY_META_KEY) if isinstance(meta, Mapping) else None
    return key if isinstance(key, str) else None


def result_to_wire(result: ToolResult, spec: ToolSpec | None) -> dict[str, Any]:
    """A ToolResult as an MCP ``CallToolResult``: content blocks, ``isError`` for failures."""
    meta: dict[str, Any] = {AUDIT_META_KEY: result.audit_id}
    if result.ok:
        content = [dict(block) for block in result.content] if result.content else [_text(_render(result.output))]
        wire: dict[str, Any] = {"content": content, "_meta": meta}
        if spec is not None and spec.output_schema and isinstance(result.output, dict):
            wire["structuredContent"] = result.output
        return wire
    error = dict(result.error or {})
    meta[ERROR_META_KEY] = error
    text = f"{error.get('message', 'the call failed')}"
    if error.get("hint"):
        text += f" (hint: {error['hint']})"
    content = [dict(block) for block in result.content] if result.content else []
    if not any(block.get("type") == "text" for block in content):
        content.insert(0, _text(text))
    return {"content": content, "isError": True, "_meta": meta}


def _render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
