"""The one shape of an act's audit record (core/acts.py, docs/acts.md), whatever path wrote it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.core.acts import ActKind, Actor, act_effect
from pincer.store.audit import AuditEntry

__all__ = ["act_entry", "hub_act", "trusted_definition"]


def act_entry(
    kind: ActKind,
    *,
    actor: Actor,
    subject: str,
    outcome: str,
    reason: str,
    args: Mapping[str, Any] | None = None,
    decision: str = "allow",
    session: str | None = None,
    approval_id: str | None = None,
) -> AuditEntry:
    """The record of one act: ``subject`` (the record's ``tool``) is what it changed,
    ``outcome`` what happened to it (added, removed, trusted, ...), ``args`` what else a reader
    needs (never a secret value). ``session``: the actor's own unless given."""
    return AuditEntry(
        session=session if session is not None else actor.session,
        caller=str(actor),
        tool=subject,
        kind=kind.value,
        decision=decision,
        reason=f"{reason} by {actor}",
        outcome=outcome,
        args=dict(args or {}),
        effects=(act_effect(kind).value,),
        approval_id=approval_id,
        person=actor.person,
    )


def trusted_definition(actor: Actor, *, server: str, tool: str, change: str, definition_hash: str) -> AuditEntry:
    """A changed (or new) MCP tool definition pinned as it is now: the same record from the CLI
    (``pincer mcp trust``) and the dashboard."""
    return act_entry(
        ActKind.EXTENSION, actor=actor, subject=f"{server}/{tool}", outcome="trusted",
        reason=f"the {change.replace('_', ' ')} definition of {server}/{tool} trusted",
        args={"server": server, "tool": tool, "change": change, "definition_hash": definition_hash},
    )  # fmt: skip


def hub_act(actor: Actor, action: str, key: str, version: str, reason: str, *, approval_id: str | None = None) -> AuditEntry:
    """One step of the hub's lifecycle that changed something (hub/installer.py's audit sink:
    installed, updated, removed, rolled back, pinned, ...), by whoever ran it."""
    return act_entry(ActKind.HUB, actor=actor, subject=key, outcome=action, reason=reason, args={"version": version},
                     approval_id=approval_id)  # fmt: skip
