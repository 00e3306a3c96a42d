"""Grants: per tool (or tool pattern), each effect allow / ask / deny, with expiry and a cap on
invocations. Pure functions over values.

When no grant covers an effect, the default applies: a tool whose effects are limited to
``read_filesystem`` (or that has none) is allowed; any other effect asks.

A grant may be limited to some sessions (``sessions``: names with ``*`` wildcards, or
``kind:main`` / ``kind:non-main``); without the list it applies to every session. An "allow
always" answer makes a grant for the kind of session that asked, unless the answerer widens it.
"""

from __future__ import annotations

import fnmatch
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from pincer.core.effects import EffectKind, Mode
from pincer.core.values import Decision, ToolSpec, canonical_json

__all__ = ["Grant", "DEFAULT_ALLOWED_EFFECTS", "evaluate_grants", "grant_matches", "grant_applies_to"]

DEFAULT_ALLOWED_EFFECTS = frozenset({EffectKind.READ_FILESYSTEM})


@dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """``tool`` is a name or a case-insensitive ``*`` pattern. ``effects`` maps an effect to a
    mode; ``default`` applies to the tool's effects the map does not name. ``hosts`` limits the
    network hosts the tool may reach (``*.example.com`` allowed); None leaves the tool's own
    allowlist in force."""

    tool: str
    effects: Mapping[EffectKind, Mode] = field(default_factory=dict)
    default: Mode | None = None
    hosts: tuple[str, ...] | None = None
    expires_at: float | None = None
    max_invocations: int | None = None
    sessions: tuple[str, ...] | None = None  # None: every session
    source: str = "config"
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            scope = {"sessions": list(self.sessions)} if self.sessions is not None else {}
            body = canonical_json(
                {
                    **scope,
                    "tool": self.tool,
                    "effects": {k.value: v.value for k, v in sorted(self.effects.items())},
                    "default": self.default.value if self.default else None,
                    "hosts": list(self.hosts) if self.hosts is not None else None,
                    "expires_at": self.expires_at,
                    "max_invocations": self.max_invocations,
                }
            )
            object.__setattr__(self, "id", "g-" + hashlib.sha256(body.encode()).hexdigest()[:16])

    def mode_for(self, effect: EffectKind) -> Mode | None:
        return self.effects.get(effect, self.default)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "tool": self.tool,
            "effects": {k.value: v.value for k, v in sorted(self.effects.items())},
            "default": self.default.value if self.default else None,
            "hosts": list(self.hosts) if self.hosts is not None else None,
            "expires_at": self.expires_at,
            "max_invocations": self.max_invocations,
            "sessions": list(self.sessions) if self.sessions is not None else None,
            "source": self.source,
        }


def grant_matches(grant: Grant, tool: str) -> bool:
    return fnmatch.fnmatchcase(tool.lower(), grant.tool.lower())


def grant_applies_to(grant: Grant, session: str, session_kind: str) -> bool:
    """Whether the grant covers calls of this session (by name pattern or ``kind:KIND``)."""
    if grant.sessions is None:
        return True
    for entry in grant.sessions:
        entry = entry.lower()
        if entry.startswith("kind:"):
            if entry[5:] == session_kind:
                return True
        elif fnmatch.fnmatchcase(session.lower(), entry):
            return True
    return False


def _specificity(grant: Grant) -> tuple[int, int]:
    """An exact name beats any pattern; among patterns, more literal characters win."""
    is_exact = "*" not in grant.tool and "?" not in grant.tool
    return (1 if is_exact else 0, len(grant.tool.replace("*", "")))


def evaluate_grants(
    spec: ToolSpec,
    grants: Iterable[Grant],
    *,
    now: float,
    uses: Callable[[str], int] = lambda _grant_id: 0,
    session: str = "main",
    session_kind: str = "main",
    effects: frozenset[EffectKind] | None = None,
) -> Decision:
    """Decide allow / ask / deny for a call's effects under the grants (``effects``: the call's,
    from ``ToolSpec.effects_for``; the tool's whole set when not given).

    The most specific live grant matching the tool decides the effects it names; effects it
    leaves open fall back to the default. The strictest effect decides the call. An expired or
    used-up grant is passed over, and the reason says so."""
    live: list[Grant] = []
    notes: list[str] = []
    for grant in grants:
        if not grant_matches(grant, spec.name) or not grant_applies_to(grant, session, session_kind):
            continue
        if grant.expires_at is not None and grant.expires_at <= now:
            notes.append(f"grant {grant.id} for {grant.tool!r} expired")
            continue
        if grant.max_invocations is not None and uses(grant.id) >= grant.max_invocations:
            notes.append(f"grant {grant.id} for {grant.tool!r} used all {grant.max_invocations} invocations")
            continue
        live.append(grant)
    chosen: Grant | None = max(live, key=_specificity) if live else None
    suffix = f" ({'; '.join(notes)})" if notes else ""
    if effects is None:
        effects = spec.effects

    if not effects:
        if chosen is not None and chosen.default is Mode.DENY:
            return Decision(mode=Mode.DENY, reason=f"grant {chosen.id} denies {spec.name}{suffix}", grant_id=chosen.id)
        return Decision(
            mode=Mode.ALLOW,
            reason=f"{spec.name} declares no effects{suffix}",
            grant_id=chosen.id if chosen else None,
            hosts=chosen.hosts if chosen else None,
        )

    modes: dict[EffectKind, tuple[Mode, str]] = {}
    for effect in effects:
        mode = chosen.mode_for(effect) if chosen else None
        if mode is not None:
            modes[effect] = (mode, f"grant {chosen.id}" if chosen else "grant")
        elif effect in DEFAULT_ALLOWED_EFFECTS:
            modes[effect] = (Mode.ALLOW, "default")
        else:
            modes[effect] = (Mode.ASK, "default")
    mode = max((m for m, _ in modes.values()), key=lambda m: m.strictness)
    deciding = sorted(e.value for e, (m, _) in modes.items() if m is mode)
    sources = sorted({src for e, (m, src) in modes.items() if m is mode})
    verb = {Mode.ALLOW: "allowed", Mode.ASK: "needs approval", Mode.DENY: "denied"}[mode]
    if sources == ["default"]:
        why = (
            "no grant covers it; effects beyond read_filesystem ask by default"
            if mode is Mode.ASK
            else "only read_filesystem, allowed by default"
        )
    else:
        why = "by " + ", ".join(sources)
    reason = f"{spec.name} {verb} for {', '.join(deciding)} ({why}){suffix}"
    return Decision(
        mode=mode,
        reason=reason,
        grant_id=chosen.id if chosen else None,
        hosts=chosen.hosts if chosen else None,
    )
