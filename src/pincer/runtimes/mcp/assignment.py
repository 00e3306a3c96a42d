"""Which upstream tool holds which registry name, which may be called, and which are refused.

:func:`assign_tools` is the one decision the runtime (for the registry), ``pincer mcp test``
(for its report) and ``pincer mcp trust`` (for what there is to trust) share. Its rules:

1. **Leak screen.** Every definition, offered or pinned, is leak-scanned whole (name, title,
   description, input and output schema with their ``default``/``examples``/``enum`` values,
   annotations) with the store's scanner. One that holds a secret or a credential shape is
   refused: not listed, not pinned, never shown (names in messages are redacted too).
2. **Pins first.** A pinned upstream tool keeps its registry name. Offered as pinned (same
   definition, same effect annotations): callable. Offered differently: listed with the pinned
   definition and blocked until ``pincer mcp trust``.
3. **Newcomers** get their derived name only if no pin holds it. When two unpinned upstream
   names map to one registry name, the smallest name wins (so the server's listing order never
   decides); the others are refused.
4. **Owner change.** A pinned tool that is no longer offered keeps its registry name claimed; a
   newcomer that maps to it is blocked like a changed definition (listed with the pinned
   definition, calls refused) until someone trusts it, which moves the name to the newcomer.
5. A name another server's pin holds (``a`` + ``b_c`` against ``a_b`` + ``c``) goes to that server.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pincer.runtimes.mcp.config import tool_name
from pincer.runtimes.mcp.pins import Pin, ToolDefinition
from pincer.safety.scanner import LeakScanner

__all__ = ["Assigned", "Refused", "Candidate", "Assignment", "assign_tools", "holds_secret", "LEAK_HINT"]

State = Literal["trusted", "new", "changed", "owner_changed"]

LEAK_HINT = (
    "the server's own configuration puts a stored secret (or something shaped like a credential) into "
    "what it tells agents: give the secret only where the server needs it (its env, not its arguments "
    "or description), or fix the server; `pincer mcp test {server}` shows the refused tools"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Assigned:
    """One registry entry. ``definition`` is what the registry shows (the pinned one whenever the
    tool is blocked); ``upstream`` is the tool a call reaches, or, when blocked, the one whose
    trust would unblock it; ``blocked`` says why calls are refused."""

    registry_name: str
    upstream: str
    definition: ToolDefinition
    state: State
    blocked: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Refused:
    """An upstream tool that gets no registry entry. ``tool`` is safe to show (redacted)."""

    tool: str
    kind: Literal["secret", "collision"]
    reason: str
    hint: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """What ``pincer mcp trust`` may pin: an offered, clean definition, with what it replaces
    (``pinned`` is redacted when the old pin itself held a secret)."""

    definition: ToolDefinition
    change: State
    pinned: ToolDefinition | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Assignment:
    tools: tuple[Assigned, ...]
    refused: tuple[Refused, ...]
    candidates: tuple[Candidate, ...]

    def state_of(self, upstream: str) -> str:
        """How an offered upstream tool fares: trusted | new | changed | owner_changed | refused."""
        for tool in self.tools:
            if tool.upstream == upstream:
                return tool.state
        return "refused"


def holds_secret(scanner: LeakScanner, definition: ToolDefinition) -> bool:
    return scanner.scan(definition.public_json())[1] > 0


def _redacted(scanner: LeakScanner, definition: ToolDefinition) -> ToolDefinition:
    clean, _ = scanner.scan(definition.public_json())
    return ToolDefinition(
        name=str(clean["name"]),
        description=str(clean["description"] or ""),
        input_schema=clean["input_schema"] if isinstance(clean["input_schema"], Mapping) else {"type": "object"},
        annotations=clean["annotations"] if isinstance(clean["annotations"], Mapping) else {},
        output_schema=clean["output_schema"] if isinstance(clean["output_schema"], Mapping) else None,
        title=clean["title"] if isinstance(clean["title"], str) else None,
        meta=clean["meta"] if isinstance(clean["meta"], Mapping) else None,
    )


def assign_tools(
    server: str,
    pins: Mapping[str, Pin],
    offered: Sequence[ToolDefinition] | None,
    *,
    scanner: LeakScanner,
    taken: Collection[str] = (),
) -> Assignment:
    """Decide the registry entries of one server. ``offered``: what the server lists now (None:
    not seen in this process, so the pins are listed as they are); ``taken``: registry names
    held by other servers' pins."""
    tools: list[Assigned] = []
    refused: list[Refused] = []
    candidates: list[Candidate] = []

    def safe(name: str) -> str:
        return scanner.scan_text(name)[0]

    def refuse_secret(name: str, what: str) -> None:
        refused.append(
            Refused(
                tool=safe(name),
                kind="secret",
                reason=f"MCP server {server!r}: {what} of tool {safe(name)!r} holds a secret; the tool is refused",
                hint=LEAK_HINT.format(server=server),
            )
        )

    def refuse_collision(name: str, registry_name: str, holder: str) -> None:
        refused.append(
            Refused(
                tool=safe(name),
                kind="collision",
                reason=(
                    f"MCP server {server!r}: tool {safe(name)!r} would be called {registry_name}, "
                    f"which belongs to {holder}; the tool is refused"
                ),
                hint=f"the trusted tool keeps its name; `pincer mcp test {server}` lists the server's tools",
            )
        )

    # Pins: one holder per registry name (a hand-edited file could hold two), clean or refused.
    holders: dict[str, str] = {}
    for upstream in sorted(pins):
        holders.setdefault(pins[upstream].registry_name, upstream)
    leaky_pins = {upstream for upstream, pin in pins.items() if holds_secret(scanner, pin.definition)}
    for upstream in sorted(leaky_pins):
        refuse_secret(upstream, "the pinned definition")

    def pinned_shown(upstream: str) -> ToolDefinition:
        pin = pins[upstream]
        return _redacted(scanner, pin.definition) if upstream in leaky_pins else pin.definition

    if offered is None:
        for upstream in sorted(pins):
            pin = pins[upstream]
            if upstream in leaky_pins or holders[pin.registry_name] != upstream:
                continue
            if pin.registry_name in taken:
                refuse_collision(upstream, pin.registry_name, "another server's tool")
                continue
            tools.append(Assigned(registry_name=pin.registry_name, upstream=upstream, definition=pin.definition,
                                  state="trusted"))
        return Assignment(tools=tuple(tools), refused=tuple(refused), candidates=())

    live: dict[str, ToolDefinition] = {}
    leaked: set[str] = set()
    for definition in offered:
        if definition.name in live or definition.name in leaked:
            continue  # a name listed twice: the first listing counts
        if holds_secret(scanner, definition):
            leaked.add(definition.name)
            refuse_secret(definition.name, "the definition offered now")
        else:
            live[definition.name] = definition

    for upstream in sorted(pins):
        pin = pins[upstream]
        name = pin.registry_name
        if holders[name] != upstream:
            continue
        if name in taken:
            refuse_collision(upstream, name, "another server's tool")
            continue
        current = live.get(upstream)
        if upstream in leaky_pins:
            if current is not None:  # trusting the clean offer replaces the leaky pin
                candidates.append(Candidate(definition=current, change="changed", pinned=pinned_shown(upstream)))
            continue
        if current is None:
            if upstream in leaked:
                tools.append(Assigned(
                    registry_name=name, upstream=upstream, definition=pin.definition, state="changed",
                    blocked=(f"MCP server {server!r} now offers a definition of {upstream!r} that holds a secret; "
                             "calls are refused until the server is fixed"),
                ))
            continue  # not offered now: the name stays claimed (rule 4)
        if pin.matches(current):
            tools.append(Assigned(registry_name=name, upstream=upstream, definition=current, state="trusted"))
        else:
            tools.append(Assigned(
                registry_name=name, upstream=upstream, definition=pin.definition, state="changed",
                blocked=(f"MCP server {server!r} changed the definition of {upstream!r} since it was trusted; "
                         "calls are refused until someone reviews and trusts the change"),
            ))
            candidates.append(Candidate(definition=current, change="changed", pinned=pin.definition))

    newcomers: dict[str, list[ToolDefinition]] = {}
    for upstream, definition in live.items():
        if upstream not in pins:
            newcomers.setdefault(tool_name(server, upstream), []).append(definition)
    for name in sorted(newcomers):
        first, *others = sorted(newcomers[name], key=lambda d: d.name)
        for other in others:
            refuse_collision(other.name, name, f"its tool {safe(first.name)!r}")
        holder = holders.get(name)
        if name in taken:
            refuse_collision(first.name, name, "another server's tool")
        elif holder is None:
            tools.append(Assigned(registry_name=name, upstream=first.name, definition=first, state="new"))
            candidates.append(Candidate(definition=first, change="new", pinned=None))
        elif holder in live or holder in leaked:
            refuse_collision(first.name, name, f"its trusted tool {safe(holder)!r}")
        else:
            candidates.append(Candidate(definition=first, change="owner_changed", pinned=pinned_shown(holder)))
            if holder in leaky_pins:
                continue
            tools.append(Assigned(
                registry_name=name, upstream=first.name, definition=pins[holder].definition, state="owner_changed",
                blocked=(f"MCP server {server!r} now offers {safe(first.name)!r} under the name {name}, which was "
                         f"trusted as {holder!r}; calls are refused until someone reviews and trusts the change"),
            ))
    return Assignment(tools=tuple(tools), refused=tuple(refused), candidates=tuple(candidates))

