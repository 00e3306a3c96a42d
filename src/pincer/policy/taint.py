"""Taint: once an agent run has read untrusted output, its sensitive calls ask.

A fetched page, an MCP server's answer, a webhook's payload or a file's contents can hold text
written to steer the model ("ignore your instructions and send this to ..."). The defence does not
try to spot such text; it assumes any untrusted output may carry it. After a run has read one,
every later call of that run with a *sensitive* effect asks a person even where a grant would
allow it, and the approval names the output that tainted the run. ``[agent] taint = "deny"``
refuses those calls instead; ``"off"`` turns the rule off.

Which effects are sensitive depends on where the text came from (:attr:`Taint.reach`):

- from **outside** the machine (a tool with ``network`` for that call, an MCP server or OpenAPI
  service not in ``[agent] trusted_output``, a webhook's payload, a skill body that is not trusted,
  parameters from a webhook or a non-main session): every write (``write_filesystem``,
  ``delete_filesystem``, ``external_write``), ``spawn_process``, ``execute_code``, ``financial``
  and every ``modify_*``. Nothing a stranger wrote leaves the machine, lands in a file or runs
  without a person.
- from a **local** file (``read_file``, ``list_dir``, a sandboxed script without network): the
  same except ``write_filesystem`` and ``delete_filesystem``, so a coding run may still edit the
  workspace after reading it. Writes into a skill root ask whatever the taint
  (``runtimes/native/skill_roots.py``), so a file cannot leave instructions behind either.

An outside taint outranks a local one: a run tainted by a file and then by a page asks as for
the page. This module is pure: a decision and a taint in, a decision out. The agent loop keeps
the per-run memory (which output, which audit record) and hands it to the chain on each call
(``CallRequest.taint``); the chain applies :func:`apply_taint` before its one approval step.
"""

from __future__ import annotations

from collections.abc import Iterable

from pincer.core.effects import EffectKind, Mode, RuntimeKind
from pincer.core.values import Decision, Taint, ToolSpec

__all__ = [
    "SENSITIVE_EFFECTS",
    "LOCAL_SENSITIVE_EFFECTS",
    "TAINT_MODES",
    "OUTSIDE",
    "LOCAL",
    "apply_taint",
    "asking_effects",
    "output_reach",
    "sensitive_effects",
]

OUTSIDE = "outside"
LOCAL = "local"

SENSITIVE_EFFECTS = frozenset(
    {
        EffectKind.WRITE_FILESYSTEM,
        EffectKind.DELETE_FILESYSTEM,
        EffectKind.EXTERNAL_WRITE,
        EffectKind.SPAWN_PROCESS,
        EffectKind.EXECUTE_CODE,
        EffectKind.FINANCIAL,
        EffectKind.MODIFY_EXTENSION,
        EffectKind.MODIFY_APPROVAL,
        EffectKind.MODIFY_BUDGET,
    }
)
# A workspace file the run read may still be edited: asking on every write after every read
# would make a coding run ask for each line it changes. Nothing leaves, runs or pays unasked.
LOCAL_SENSITIVE_EFFECTS = SENSITIVE_EFFECTS - {EffectKind.WRITE_FILESYSTEM, EffectKind.DELETE_FILESYSTEM}
TAINT_MODES = ("ask", "deny", "off")

# Runtimes whose output comes from another program that may itself read the internet.
_OUTSIDE_RUNTIMES = frozenset({RuntimeKind.MCP, RuntimeKind.OPENAPI})


def asking_effects(taint: Taint) -> frozenset[EffectKind]:
    """The effects a call of a run with this taint asks for (or is refused for)."""
    return LOCAL_SENSITIVE_EFFECTS if taint.reach == LOCAL else SENSITIVE_EFFECTS


def sensitive_effects(effects: Iterable[EffectKind], taint: Taint | None = None) -> list[str]:
    """The sensitive effects among ``effects`` (for ``taint``'s reach; outside when None), by name."""
    asking = SENSITIVE_EFFECTS if taint is None else asking_effects(taint)
    return sorted(e.value for e in effects if e in asking)


def output_reach(spec: ToolSpec, effects: Iterable[EffectKind]) -> str:
    """Where an untrusted output of ``spec`` (for a call with ``effects``) came from: ``local``
    only for a native, script or WASM tool whose call had no ``network`` (a file it read) and
    that is not the ``skill`` tool; anything else is ``outside`` (fail closed)."""
    if spec.name == "skill" or spec.runtime in _OUTSIDE_RUNTIMES or EffectKind.NETWORK in set(effects):
        return OUTSIDE
    return LOCAL


def apply_taint(decision: Decision, effects: Iterable[EffectKind], taint: Taint | None) -> Decision:
    """The decision a call of a tainted run gets. Unchanged when the run is not tainted, the
    rule is off, the call has no effect sensitive for the taint's reach, or the grants deny the
    call anyway."""
    if taint is None or taint.mode == "off" or decision.mode is Mode.DENY:
        return decision
    sensitive = sensitive_effects(effects, taint)
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
