"""A run's transcript as a conversation: what ``run_transcript.html`` shows.

Messages become turns (the system prompt folded, the user's and the model's words as Markdown),
and each tool call of the model becomes a card with its arguments, its result (the tool's output
as a value, not the envelope the model reads), and what the audit record of the call says: its
decision, effects, duration (the tool's own, apart from the time a person took to answer) and a
link to the record. A call still waiting on a person carries its approval, answerable in place.
Everything here is redacted (``Pages.redact``) before it is rendered; Markdown goes through
``markdown.render_markdown``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from pincer.core.display import honest_block, honest_json
from pincer.gateway.ui.markdown import render_markdown
from pincer.store.audit import AuditRecord
from pincer.store.runs import RunMessage

__all__ = ["Turn", "ToolCard", "conversation", "tool_result", "approval_wait_ms"]

_ENVELOPE = re.compile(
    r'\A<tool_output tool="[^"]*" trusted="(?P<trusted>true|false)"(?P<error> error="true")?>\n(?P<body>.*)\n</tool_output>\Z',
    re.DOTALL,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """A tool message as a person reads it: its value (parsed JSON when it is JSON) or text."""

    value: Any
    is_text: bool
    trusted: bool | None  # None: not the tool's own output (a refusal, an error of pincer's)
    is_error: bool


@dataclass(kw_only=True, slots=True)
class ToolCard:
    call_id: str
    tool: str
    arguments: Any
    raw: str
    result: ToolResult | None = None
    result_ts: float | None = None
    record: AuditRecord | None = None
    approvals: list[Any] = field(default_factory=list)  # approval_view() dicts waiting on this call

    @property
    def decision(self) -> str | None:
        return self.record.decision if self.record else None

    @property
    def outcome(self) -> str:
        if self.record is not None:
            return self.record.outcome
        if self.result is None:
            return "waiting" if self.approvals else "running"
        return "error" if self.result.is_error else "ok"

    @property
    def wait_ms(self) -> float:
        return approval_wait_ms(self.record) if self.record else 0.0

    @property
    def tool_ms(self) -> float | None:
        return max(0.0, self.record.duration_ms - self.wait_ms) if self.record else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    seq: int
    ts: float
    role: str
    text: Markup | None  # Markdown rendered; None for a turn without words
    plain: str | None = None  # the system prompt, shown as the text it is
    cards: tuple[ToolCard, ...] = ()
    raw: str = ""


def approval_wait_ms(record: AuditRecord) -> float:
    """How long the call of ``record`` waited for a person (``usage.approval_wait_ms``, written
    by the dispatcher since the approval wait is kept apart from the tool's time)."""
    usage = record.usage if isinstance(record.usage, Mapping) else {}
    value = usage.get("approval_wait_ms", 0)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def tool_result(content: str, *, is_error: bool) -> ToolResult:
    """The tool's output out of its envelope (``llm/prompt.py`` ``wrap_output``), parsed when it
    is a JSON object or list; pincer's own words (a refusal) as text."""
    found = _ENVELOPE.match(content)
    if found is None:
        return ToolResult(value=content, is_text=True, trusted=None, is_error=is_error)
    body = found.group("body")  # as the model read it (a "<" that would open one of pincer's tags defused)
    trusted = found.group("trusted") == "true"
    error = is_error or bool(found.group("error"))
    if body[:1] in "[{":
        try:
            return ToolResult(value=json.loads(body), is_text=False, trusted=trusted, is_error=error)
        except ValueError:
            pass
    return ToolResult(value=body, is_text=True, trusted=trusted, is_error=error)


def _words(text: Any) -> Markup | None:
    if not isinstance(text, str) or not text.strip():
        return None
    return render_markdown(honest_block(text))


def conversation(
    messages: Sequence[RunMessage],
    records: Iterable[AuditRecord],
    waiting: Sequence[Mapping[str, Any]],
    redact: Any,
) -> tuple[list[Turn], list[Mapping[str, Any]]]:
    """The turns of a run, and the waiting approvals no card shows (the call's message is not
    written yet). ``records`` are the run's audit records the reader may see; ``waiting`` its
    approval requests still waiting (``approvals.approval_view`` dicts)."""
    by_id = {r.id: r for r in records}
    cards: dict[str, ToolCard] = {}
    turns: list[Turn] = []
    for message in messages:
        body = redact(dict(message.body))
        raw = honest_json(body, indent=2)
        if message.role == "tool":
            card = cards.get(str(body.get("tool_call_id")))
            result = tool_result(str(body.get("content", "")), is_error=bool(body.get("is_error")))
            if card is not None:
                card.result, card.result_ts = result, message.ts
                card.record = by_id.get(message.audit_id) if message.audit_id is not None else None
                card.raw += "\n\n" + raw
                continue
            orphan = ToolCard(call_id=str(body.get("tool_call_id", "")), tool=str(body.get("name", "")), arguments={},
                              raw=raw, result=result, result_ts=message.ts,
                              record=by_id.get(message.audit_id) if message.audit_id is not None else None)  # fmt: skip
            turns.append(Turn(seq=message.seq, ts=message.ts, role="tool", text=None, cards=(orphan,), raw=raw))
            continue
        made: list[ToolCard] = []
        for call in body.get("tool_calls") or ():
            arguments = call.get("arguments")
            card = ToolCard(
                call_id=str(call.get("id", "")), tool=str(call.get("name", "")),
                arguments=arguments if arguments is not None else call.get("raw_arguments", ""),
                raw=honest_json(call, indent=2),
            )  # fmt: skip
            cards[card.call_id] = card
            made.append(card)
        content = body.get("content", "")
        if message.role == "system":
            turns.append(Turn(seq=message.seq, ts=message.ts, role="system", text=None,
                              plain=honest_block(str(content)), raw=raw))  # fmt: skip
            continue
        turns.append(Turn(seq=message.seq, ts=message.ts, role=message.role, text=_words(content), cards=tuple(made), raw=raw))
    return turns, _place_waiting(cards, waiting)


def _place_waiting(cards: Mapping[str, ToolCard], waiting: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Each waiting approval on the card of an unanswered call of its tool; those that fit none."""
    open_cards = [c for c in cards.values() if c.result is None]
    unplaced = []
    for approval in waiting:
        card = next((c for c in open_cards if c.tool == approval["tool"] and not c.approvals), None)
        if card is None:  # the model's name for the tool may differ (provider-safe names)
            card = next((c for c in open_cards if not c.approvals), None)
        if card is None:
            unplaced.append(approval)
        else:
            card.approvals.append(approval)
    return unplaced
