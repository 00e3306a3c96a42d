"""Taint: once an agent run has read untrusted output, its sensitive calls ask.

A fetched page, an MCP server's answer or a file's contents can hold text written to steer the
model ("ignore your instructions and send this to ..."). The defence does not try to spot such
text; it assumes any untrusted output may carry it. After a run has read one, every later call
of that run whose tool has a *sensitive* effect (it writes to the outside world, spends money,
changes pincer's own policy or runs code) asks a person even where a grant would allow it, and
the approval names the output that tainted the run. ``[agent] taint = "deny"`` refuses those
calls instead; ``"off"`` turns the rule off.

This module is pure: a decision and a taint in, a decision out. The agent loop keeps the per-run
memory (which output, which audit record) and hands it to the chain on each call
(``CallRequest.taint``); the chain applies :func:`apply_taint` before its one approval step.
"""

from __future__ import annotations

from collections.abc import Iterable

from pincer.core.effects import EffectKind, Mode
from pincer.core.values import Decision, Taint

__all__ = ["SENSITIVE_EFFECTS", "TAINT_MODES", "apply_taint", "sensitive_effects"]

SENSITIVE_EFFECTS = frozenset(
    {
        EffectKind.EXTERNAL_WRITE,
        EffectKind.FINANCIAL,
        EffectKind.MODIFY_EXTENSION,
        EffectKind.MODIFY_APPROVAL,
        EffectKind.MODIFY_BUDGET,
        EffectKind.EXECUTE_CODE,
    }
)
TAINT_MODES = ("ask", "deny", "off")


def sensitive_effects(effects: Iterable[EffectKind]) -> list[str]:
    """The sensitive effects among ``effects``, sorted by name."""
    return sorted(e.value for e in effects if e in SENSITIVE_EFFECTS)


def apply_taint(decision: Decision, effects: Iterable[EffectKind], taint: Taint | None) -> Decision:
    """The decision a call of a tainted run gets. Unchanged when the run is not tainted, the
    rule is off, the tool has no sensitive effect, or the grants deny the call anyway."""
    if taint is None or taint.mode == "off" or decision.mode is Mode.DENY:
        return decision
    sensitive = sensitive_effects(effects)
    if not sensitive:
        return decision
    why = (
        f"this run has read untrusted text ({taint.describe()}), and this call has "
        f"{', '.join(sensitive)}: text in that output may be steering the model"
    )
    if taint.mode == "deny":
        return Decision(mode=Mode.DENY, reason=f"{why}; [agent] taint = \"deny\" refuses it", grant_id=decision.grant_id)
    if decision.mode is Mode.ASK:
        return Decision(mode=Mode.ASK, reason=f"{decision.reason}; {why}", grant_id=decision.grant_id, hosts=decision.hosts)
    return Decision(
        mode=Mode.ASK,
        reason=f"{why}, so it asks although {decision.reason}",
        grant_id=decision.grant_id,
        hosts=decision.hosts,
    )
