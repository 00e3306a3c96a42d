"""The 13 effect kinds a tool declares, and the runtime kinds tools come from."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["EffectKind", "RuntimeKind", "Mode", "parse_effects"]


class EffectKind(StrEnum):
    """What a tool may do to the world. Grants decide per effect."""

    READ_FILESYSTEM = "read_filesystem"
    WRITE_FILESYSTEM = "write_filesystem"
    DELETE_FILESYSTEM = "delete_filesystem"
    NETWORK = "network"
    USE_SECRET = "use_secret"
    EXECUTE_CODE = "execute_code"
    SPAWN_PROCESS = "spawn_process"
    DISPATCH_CAPABILITY = "dispatch_capability"
    MODIFY_EXTENSION = "modify_extension"
    MODIFY_APPROVAL = "modify_approval"
    MODIFY_BUDGET = "modify_budget"
    EXTERNAL_WRITE = "external_write"
    FINANCIAL = "financial"


class RuntimeKind(StrEnum):
    NATIVE = "native"
    WASM = "wasm"
    MCP = "mcp"
    OPENAPI = "openapi"
    SCRIPT = "script"


class Mode(StrEnum):
    """A decision mode: the order is the order of strictness (deny > ask > allow)."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"

    @property
    def strictness(self) -> int:
        return _STRICTNESS[self]


_STRICTNESS = {Mode.ALLOW: 0, Mode.ASK: 1, Mode.DENY: 2}


def parse_effects(values: object, *, source: str = "effects") -> frozenset[EffectKind]:
    """Turn a list of effect names into a set, naming the first unknown one."""
    from pincer.core.errors import UsageError

    if isinstance(values, str) or not isinstance(values, (list, tuple, set, frozenset)):
        raise UsageError(f"{source}: expected a list of effect names, got {type(values).__name__}")
    effects: set[EffectKind] = set()
    for value in values:
        try:
            effects.add(EffectKind(value))
        except ValueError:
            known = ", ".join(e.value for e in EffectKind)
            raise UsageError(f"{source}: unknown effect {value!r}", hint=f"known effects: {known}") from None
    return frozenset(effects)
