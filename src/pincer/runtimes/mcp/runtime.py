"""The MCP runtime: every configured MCP server's tools as pincer tools.

    runtime = McpRuntime.from_home(home, secrets=store, scanner=pincer.scanner)
    await pincer.add_runtime(runtime)
    runtime.subscribe(lambda: pincer.registry.refresh(runtime))   # list_changed, restarts

``tools()`` answers from what is known without starting anything: a running server's current
tools, else the pinned definitions of a lazy server. ``start()`` starts the eager servers and
those never seen before (their tools must be learnt and pinned once). Which upstream tool gets
which registry name, which are blocked and which refused is decided by :mod:`.assignment`: every
definition is leak-scanned with ``scanner()`` (the store's scanner) before it is pinned or
listed, pinned tools keep their names, and a tool whose offered definition or effect annotations
differ from its pin is listed with the pinned definition and refuses calls until
``pincer mcp trust``; the runtime re-reads the pins on such a call, so a trust given by another
process takes effect without a restart.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio

from pincer.core.effects import RuntimeKind
from pincer.core.errors import Denied, SecretError, ToolNotFound
from pincer.core.offload import off_loop
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.runtimes.base import ChangeListener, ChangeListeners
from pincer.runtimes.mcp.assignment import Assignment, Refused, assign_tools, holds_secret
from pincer.runtimes.mcp.config import ServerConfig, ServerStore, tool_name
from pincer.runtimes.mcp.connection import ServerConnection, ServerStatus
from pincer.runtimes.mcp.environment import SecretLookup
from pincer.runtimes.mcp.lean import ProgressFn
from pincer.runtimes.mcp.operations import (
    OPERATION_KEY,
    RESOURCES_READ,
    listed_prompt,
    listed_resource,
    listed_template,
    operation_args,
    operation_spec,
    prompt_output,
    resource_output,
)
from pincer.runtimes.mcp.person_instances import (
    PersonInstances,
    PersonValues,
    person_secret_names,
    without_person_secrets,
)
from pincer.runtimes.mcp.person_questions import asker_for
from pincer.runtimes.mcp.pins import PinStore, ToolDefinition
from pincer.runtimes.mcp.results import to_tool_output
from pincer.runtimes.mcp.tools import build_spec
from pincer.safety.scanner import LeakScanner

logger = logging.getLogger(__name__)

__all__ = ["McpRuntime", "secret_lookup", "TIMEOUT_MARGIN_S", "START_TIMEOUT_S"]

# The dispatcher bounds the whole invoke by tools.timeout_s; the call's own timeout ends a little
# earlier so the caller gets the MCP-specific error (and the hung-server probe runs).
TIMEOUT_MARGIN_S = 0.5
START_TIMEOUT_S = 60.0  # all servers started by start(), together


@runtime_checkable
class SecretFinder(Protocol):
    """A store that looks a secret up by name (``SecretStore`` is one)."""

    def find(self, name: str) -> str | None: ...


SecretSource = SecretFinder | Mapping[str, str] | SecretLookup


def secret_lookup(secrets: SecretSource | None) -> SecretLookup | None:
    """Accept a SecretStore (``find``), a mapping, or a function name -> value."""
    if secrets is None:
        return None
    if isinstance(secrets, SecretFinder) and callable(secrets.find):
        return secrets.find
    if isinstance(secrets, Mapping):
        return secrets.get
    if callable(secrets):
        return secrets
    raise TypeError(f"cannot look secrets up in {type(secrets).__name__}")


ScannerFactory = Callable[[], LeakScanner]


def _always(scanner: LeakScanner) -> ScannerFactory:
    return lambda: scanner
ListsListener = Callable[[str], None]


class McpRuntime:
    """``scanner`` returns the leak scanner over the store's secrets (``Pincer.scanner``); without
    one, definitions are still scanned for credential shapes."""

    kind = RuntimeKind.MCP

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        pins: PinStore,
        secrets: SecretSource | None = None,
        scanner: ScannerFactory | None = None,
        starts: Callable[[str], bool] | None = None,
        lean_calls: bool = False,
        per_person: Collection[str] = (),
        person_values: PersonValues | None = None,
        max_person_instances: int = 8,
        person_idle_s: float = 600.0,
    ) -> None:
        """``starts``: which of the servers ``start`` may start (by name; default: all it would);
        a one-shot command starts only the servers that may own the tool it calls.
        ``per_person``: the secrets each person holds their own value of (``[secrets]
        per_person``), read with ``person_values(person, name)``; a server whose env or headers
        name one runs once per person (:mod:`.person_instances`), at most
        ``max_person_instances`` of them, each closed after ``person_idle_s`` unused."""
        self.pins = pins
        self._starts = starts
        self._lean_calls = lean_calls
        self._per_person = frozenset(per_person)
        self._person_values = person_values
        self._max_person_instances = max_person_instances
        self._person_idle_s = person_idle_s
        self._people: dict[str, PersonInstances] = {}  # server -> its per-person instances
        self._lookup = secret_lookup(secrets)
        self._scanner = scanner if scanner is not None else _always(LeakScanner(()))  # credential shapes only
        self.servers: dict[str, ServerConfig] = {s.name: s for s in servers if s.enabled}
        self.connections: dict[str, ServerConnection] = {
            name: self._connection(config) for name, config in self.servers.items()
        }
        self._offered: dict[str, list[ToolDefinition]] = {}
        self._refused: dict[str, tuple[Refused, ...]] = {}
        self._specs: dict[str, dict[str, ToolSpec]] = {}  # server -> registry name -> spec
        self._owners: dict[str, tuple[str, str]] = {}  # registry name -> (server, upstream tool)
        self._blocked: dict[str, str] = {}  # registry name -> reason
        self._changes = ChangeListeners("the MCP runtime")
        self._list_listeners: list[ListsListener] = []
        for name in self.servers:
            self._rebuild(name)

    def _connection(self, config: ServerConfig) -> ServerConnection:
        """The server's one connection; for a server that names a per-person secret, the one that
        learns its tools and lists its resources, started without those env variables and headers
        (nobody's value), while calls go to the calling person's own instance."""
        names = person_secret_names(config, self._per_person)
        if not names:
            return self._make_connection(config, self._lookup)
        self._people[config.name] = PersonInstances(
            config, names, make=self._make_connection, shared=self._lookup, values=self._read_person_value,
            limit=self._max_person_instances, idle_s=self._person_idle_s,
        )  # fmt: skip
        return self._make_connection(without_person_secrets(config, names), self._lookup)

    def _make_connection(self, config: ServerConfig, lookup: SecretLookup | None) -> ServerConnection:
        return ServerConnection(
            config, secrets=lookup, on_tools=self._on_tools, on_lists=self._on_lists, lean=self._lean_calls
        )

    def _read_person_value(self, person: str, name: str) -> str | None:
        return self._person_values(person, name) if self._person_values is not None else None

    def person_instances(self, server: str) -> PersonInstances | None:
        """The per-person instances of ``server`` (None: it names no per-person secret)."""
        return self._people.get(server)

    @classmethod
    def from_home(
        cls, home: Path, *, secrets: SecretSource | None = None, scanner: ScannerFactory | None = None
    ) -> McpRuntime:
        return cls(ServerStore(home).load(), pins=PinStore(home), secrets=secrets, scanner=scanner)

    # -- the Runtime protocol -------------------------------------------------------------------

    async def start(self) -> None:
        """Start eager servers and the ones with no pinned tools; a failure is logged, never
        fatal (the server is tried again on its first call)."""
        starts = self._starts
        await self._start_wanted([name for name in self.connections if starts is None or starts(name)])

    async def reconcile(self, servers: Sequence[ServerConfig]) -> None:
        """Follow an edited server list (``pincer mcp add/remove`` by another process): servers
        whose entry is unchanged keep running, with their calls in flight; removed and changed
        ones are stopped, new and changed ones started as ``start`` would."""
        wanted = {s.name: s for s in servers if s.enabled}
        gone = [name for name, config in self.servers.items() if wanted.get(name) != config]
        fresh = [name for name, config in wanted.items() if self.servers.get(name) != config]
        if not gone and not fresh:
            return
        for name in gone:
            conn = self.connections.pop(name)
            del self.servers[name]
            for registry_name in self._specs.pop(name, {}):
                self._owners.pop(registry_name, None)
                self._blocked.pop(registry_name, None)
            self._offered.pop(name, None)
            self._refused.pop(name, None)
            people = self._people.pop(name, None)
            with anyio.CancelScope(shield=True):
                await conn.aclose()
                if people is not None:
                    await people.aclose()
        for name in fresh:
            self.servers[name] = wanted[name]
            self.connections[name] = self._connection(wanted[name])
            self._rebuild(name)
        self._changes.notify()
        for kind in ("resources", "prompts"):
            self._notify_list(kind)
        await self._start_wanted(fresh)

    async def _start_wanted(self, names: list[str]) -> None:
        wanted = [
            self.connections[name]
            for name in names
            if self.servers[name].startup == "eager" or not self.pins.pins(name)
        ]
        if not wanted:
            return

        async def start_one(conn: ServerConnection) -> None:
            try:
                await conn.start()
            except Exception as exc:  # noqa: BLE001
                # Not the message: it may carry the server's stderr, which may echo a secret.
                logger.warning("MCP server %s did not start (%s); `pincer mcp test %s` shows why",
                               conn.name, type(exc).__name__, conn.name)

        with anyio.move_on_after(START_TIMEOUT_S):
            async with anyio.create_task_group() as tg:
                for conn in wanted:
                    tg.start_soon(start_one, conn)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for conn in self.connections.values():
                    tg.start_soon(conn.aclose)
                for people in self._people.values():
                    tg.start_soon(people.aclose)

    def tools(self) -> Sequence[ToolSpec]:
        return [spec for specs in self._specs.values() for spec in specs.values()]

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> None:
        """Refuse a blocked tool before anyone is asked to approve it: the server is started if
        it is not running (its listing is what shows a changed definition), the tool is not run."""
        if OPERATION_KEY in spec.annotations:
            self._operation_server(spec)
            return
        await self._ready(spec, host)

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        if OPERATION_KEY in spec.annotations:
            return await self._invoke_operation(spec, args, host)
        conn, upstream, timeout_s = await self._ready(spec, host)
        progress: ProgressFn | None = None
        if host.client is not None:
            channel = host.client

            async def report(progress: float, total: float | None, message: str | None) -> None:
                await channel.progress(progress, total, message)

            progress = report

        asker = asker_for(host, self._scanner())
        with self._in_call(conn.name, host):
            result = await conn.call_tool(upstream, args, timeout_s=timeout_s, progress=progress, asker=asker)
        return to_tool_output(result, server=conn.name)

    def _in_call(self, server: str, host: HostContext) -> contextlib.AbstractContextManager[None]:
        people = self._people.get(server)
        if people is None or host.person is None:
            return contextlib.nullcontext()
        return people.in_call(host.person)

    # -- resources and prompts (operations.py) -------------------------------------------------

    def operation(self, server: str, method: str) -> ToolSpec:
        """The spec of ``server``'s ``resources/read`` or ``prompts/get``, for ``dispatch.Operation``."""
        config = self.servers.get(server)
        if config is None:
            raise ToolNotFound(f"no MCP server named {server!r}", hint="`pincer mcp list` shows the configured servers")
        return operation_spec(config, method)

    async def listing(self, server: str, kind: str, *, timeout_s: float) -> list[dict[str, Any]]:
        """``server``'s resources, resource templates or prompts as the gateway lists them:
        namespaced, leak-scanned (starting the server if need be)."""
        shapes: dict[str, Callable[[str, Any], dict[str, Any] | None]] = {
            "resources": listed_resource, "resource_templates": listed_template, "prompts": listed_prompt,
        }  # fmt: skip
        shape = shapes[kind]
        items = [shape(server, item) for item in await self.connections[server].listing(kind, timeout_s=timeout_s)]
        listed = [item for item in items if item is not None]
        scanned, _ = await off_loop(self._scanner().scan, listed, over=listed)  # a server may list thousands
        return list(scanned)

    async def find_prompt(self, server: str, name: str, *, timeout_s: float) -> str | None:
        """The server's own name of the prompt listed as ``name``, if it lists one."""
        for prompt in await self.connections[server].listing("prompts", timeout_s=timeout_s):
            if tool_name(server, prompt.name) == name:
                return str(prompt.name)
        return None

    def _operation_server(self, spec: ToolSpec) -> ServerConnection:
        conn = self.connections.get(str(spec.annotations.get("server")))
        if conn is None:
            raise ToolNotFound(f"no MCP server serves {spec.name}", hint="`pincer mcp list` shows the configured servers")
        return conn

    async def _person_connection(self, server: str, host: HostContext) -> ServerConnection | None:
        """The calling person's own instance of a server that names a per-person secret (None: the
        server names none). A call of no person, or of a person without every value, is refused
        here, in the chain's preflight, before anyone is asked, as a built-in's is."""
        people = self._people.get(server)
        if people is None:
            return None
        person = host.person
        values = people.current_values(person) if person is not None else None
        if person is None or values is None:
            missing = next(name for name in people.names if person is None or not self._read_person_value(person, name))
            raise self._per_person_refusal(missing, host)
        secrets = host.secrets
        for value in values.values():  # redacted from this call's output, as an injected credential is
            if secrets is not None:
                secrets.record(value)
        return await people.ready(person, values)

    @staticmethod
    def _per_person_refusal(name: str, host: HostContext) -> SecretError:
        from pincer.secrets.access import per_person_refusal

        refusal = per_person_refusal(host.secrets, name, tool=host.tool)
        if refusal is not None:
            return refusal
        who = "no person" if host.person is None else host.person
        return SecretError(  # a bench's stand-in access: the same refusal, in fewer words
            f"{host.tool}: secret {name!r} is per person and {who} has no value of it, so the call cannot run",
            hint=f"set it with `pincer secrets set {name} --person NAME`, then call again",
        )

    async def _invoke_operation(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        conn = self._operation_server(spec)
        conn = await self._person_connection(conn.name, host) or conn
        limit = max(host.timeout_s - min(TIMEOUT_MARGIN_S, host.timeout_s * 0.1), 0.001)
        timeout_s = min(conn.config.timeout_s or limit, limit)
        method = str(spec.annotations[OPERATION_KEY])
        target, arguments = operation_args(method, args)
        if method == RESOURCES_READ:
            return resource_output(conn.name, await conn.read_resource(target, timeout_s=timeout_s))
        return prompt_output(conn.name, await conn.get_prompt(target, arguments, timeout_s=timeout_s))

    def subscribe_lists(self, listener: ListsListener) -> Callable[[], None]:
        """``listener(kind)`` runs when a server says its ``resources`` or ``prompts`` changed,
        and when servers come or go."""
        self._list_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._list_listeners:
                self._list_listeners.remove(listener)

        return unsubscribe

    def _on_lists(self, conn: ServerConnection, kind: str) -> None:
        self._notify_list(kind)

    def _notify_list(self, kind: str) -> None:
        for listener in list(self._list_listeners):
            try:
                listener(kind)
            except Exception:  # one broken listener must not keep the change from the others
                logger.exception("MCP %s listener failed", kind)

    async def _ready(self, spec: ToolSpec, host: HostContext) -> tuple[ServerConnection, str, float]:
        """The running connection, the server's name for the tool and the call's timeout; raises
        ToolNotFound or Denied (a blocked definition)."""
        owner = self._owners.get(spec.name)
        if owner is None:
            raise ToolNotFound(f"no MCP tool named {spec.name!r}", hint="`pincer tools list` shows the tools there are")
        server, upstream = owner
        conn = await self._person_connection(server, host) or self.connections[server]
        config = self.servers[server]
        limit = max(host.timeout_s - min(TIMEOUT_MARGIN_S, host.timeout_s * 0.1), 0.001)
        timeout_s = min(config.timeout_s or limit, limit)
        if spec.name in self._blocked:
            self._rebuild(server, notify=True)  # maybe trusted meanwhile, by another process
        if not conn.is_running:
            await conn.start(timeout_s=timeout_s)
            # Its listing may have moved the name (an owner change is blocked below, never called).
            current = self._owners.get(spec.name)
            if current is None or (current != owner and spec.name not in self._blocked):
                raise ToolNotFound(
                    f"MCP server {server!r} no longer offers {upstream!r} as {spec.name}",
                    hint="`pincer tools list` shows its current tools",
                )
            upstream = current[1]
        reason = self._blocked.get(spec.name)
        if reason is not None:
            raise Denied(reason, hint=f"review the change and run `pincer mcp trust {server} {upstream}`")
        return conn, upstream, timeout_s

    # -- changes ------------------------------------------------------------------------------

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """``listener()`` runs after the tool set changed (list_changed, a restart, a trust)."""
        return self._changes.subscribe(listener)

    def statuses(self) -> list[ServerStatus]:
        return [conn.status() for conn in self.connections.values()]

    def offered(self, server: str) -> dict[str, ToolDefinition] | None:
        """What the running server offers now, minus definitions refused for holding a secret
        (None: not seen in this process)."""
        offered = self._offered.get(server)
        if offered is None:
            return None
        scanner = self._scanner()
        found: dict[str, ToolDefinition] = {}
        for definition in offered:
            if definition.name not in found and not holds_secret(scanner, definition):
                found[definition.name] = definition
        return found

    def assignment(self, server: str) -> Assignment:
        """How the server's offered tools fare against their pins now: trusted, new, changed (with
        the candidates ``pincer mcp trust`` or the dashboard may pin), refused."""
        return assign_tools(
            server, self.pins.pins(server), self._offered.get(server), scanner=self._scanner(), taken=self._taken(server)
        )

    def trust(self, server: str, definitions: Iterable[ToolDefinition]) -> None:
        """Pin ``definitions`` as trusted and rebuild the server's tools at once (the dashboard's
        "Trust changed definition"; the CLI writes the pins file, which a running server follows)."""
        self.pins.trust(server, definitions)
        self._rebuild(server, notify=True)

    def refused(self, server: str) -> tuple[Refused, ...]:
        """The server's tools that got no registry entry, and why (safe to show)."""
        return self._refused.get(server, ())

    def _on_tools(self, conn: ServerConnection, definitions: list[ToolDefinition]) -> None:
        server = conn.name
        assignment = assign_tools(
            server, self.pins.pins(server), definitions, scanner=self._scanner(), taken=self._taken(server)
        )
        first_sight = not self.pins.pins(server)
        new = self.pins.record_new(server, [t.definition for t in assignment.tools if t.state == "new"])
        if new and not first_sight:
            logger.warning("MCP server %s offers new tools: %s", server, ", ".join(sorted(new)))
        for refused in assignment.refused:
            logger.warning("%s (%s)", refused.reason, refused.hint)
        self._offered[server] = list(definitions)
        self._rebuild(server, notify=True)

    def _taken(self, server: str) -> set[str]:
        """Registry names other servers hold: their pins (on a name two servers pinned, the
        server whose name sorts first keeps it) and what they list now."""
        every = self.pins.all()
        mine = {pin.registry_name for pin in every.get(server, {}).values()}
        taken: set[str] = set()
        for other, pins in every.items():
            if other == server:
                continue
            for pin in pins.values():
                if not (pin.registry_name in mine and server < other):
                    taken.add(pin.registry_name)
        for other, specs in self._specs.items():
            if other != server:
                taken.update(name for name in specs if name not in mine)
        return taken

    def _rebuild(self, server: str, *, notify: bool = False) -> None:
        config = self.servers[server]
        assignment = assign_tools(
            server, self.pins.pins(server), self._offered.get(server), scanner=self._scanner(), taken=self._taken(server)
        )
        specs: dict[str, ToolSpec] = {}
        blocked: dict[str, str] = {}
        owners: dict[str, tuple[str, str]] = {}
        for tool in assignment.tools:
            specs[tool.registry_name] = build_spec(
                config, tool.definition, registry_name=tool.registry_name, blocked=tool.blocked
            )
            owners[tool.registry_name] = (server, tool.upstream)
            if tool.blocked is not None:
                blocked[tool.registry_name] = tool.blocked
        old = self._specs.get(server, {})
        changed = {n: s.identity for n, s in old.items()} != {n: s.identity for n, s in specs.items()}
        changed = changed or {n for n in old if n in self._blocked} != set(blocked)
        for name in old:
            self._owners.pop(name, None)
            self._blocked.pop(name, None)
        self._specs[server] = specs
        self._refused[server] = assignment.refused
        self._owners.update(owners)
        self._blocked.update(blocked)
        if notify and changed:
            self._changes.notify()
