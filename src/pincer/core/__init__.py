"""Values and rules, no I/O."""

from pincer.core.effects import EffectKind, Mode, RuntimeKind
from pincer.core.errors import PincerError
from pincer.core.values import CallRequest, Decision, HostContext, ToolOutput, ToolResult, ToolSpec, Usage

__all__ = [
    "CallRequest",
    "Decision",
    "EffectKind",
    "HostContext",
    "Mode",
    "PincerError",
    "RuntimeKind",
    "ToolOutput",
    "ToolResult",
    "ToolSpec",
    "Usage",
]
