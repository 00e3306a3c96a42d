"""An authenticated webhook delivery -> the runs it starts (after the gateway checked it).

The gateway's route (``gateway/hooks.py``) has checked the method, the size, the signature and
the timestamp; :func:`accept_delivery` does the rest:

- a delivery id stored before: 200 with the first delivery's answer, and no second run;
- an event outside the hook's ``events`` filter: 202 ``{"ignored": true}``, no run;
- the runs: the hook's ``skill`` (its ``params`` mapping rendered over the payload in the
  Jinja2 sandbox), or its ``message`` for a plain agent turn, or, when it names neither, every
  eligible skill whose ``webhook:`` trigger matches the event (each given the mapped
  parameters it declares). The payload goes with each run as untrusted input;
- 202 with the run ids at once; the runs start in the background from the persisted queue.

An authentic delivery whose mapping cannot make a run (a required parameter missing, a value
of the wrong type) is answered 422 with the reason, recorded and audited like any firing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pincer.core.errors import PincerError
from pincer.core.offload import off_loop
from pincer.skills.model import Trust
from pincer.store.triggers import DeliveryExists, DeliveryRow
from pincer.triggers.events import event_matches
from pincer.triggers.requests import TriggerKind, UntrustedInput

if TYPE_CHECKING:
    from pincer.config import HookSettings
    from pincer.skills.library import SkillLibrary
    from pincer.triggers.engine import TriggerEngine, _Prepared

logger = logging.getLogger(__name__)

__all__ = ["DeliveryAnswer", "accept_delivery", "hook_targets", "QUEUE_FULL_RETRY_S"]

QUEUE_FULL_RETRY_S = 30


@dataclass(frozen=True, kw_only=True, slots=True)
class DeliveryAnswer:
    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    # The run and firing ids this process made for a fresh answer (128 random bits in hex): no
    # secret can be in them, and the leak scan's search for an encoded secret in a 32-digit hex
    # run was most of what masking an answer cost (~60 us an id of ~165 us, bench/hooks.py).
    made_ids: frozenset[str] = frozenset()

    def shown(self, mask: Callable[[Any], Any]) -> Any:
        """The body as the sender sees it: ``mask`` (the leak scan) over every value in it but
        the ids made for it, which are put back as they are."""
        if not self.made_ids:
            return mask(self.body)
        blanked = _blanked(self.body, self.made_ids)
        masked = mask(blanked)
        # Nothing found: the scan hands back what it was given.
        return self.body if masked is blanked else _put_back(masked, self.body, self.made_ids)


def _blanked(value: Any, ids: frozenset[str]) -> Any:
    if isinstance(value, str):
        return "" if value in ids else value
    if isinstance(value, Mapping):
        return {k: _blanked(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_blanked(v, ids) for v in value]
    return value


def _put_back(masked: Any, original: Any, ids: frozenset[str]) -> Any:
    if isinstance(original, str) and original in ids:
        return original
    if isinstance(original, Mapping) and isinstance(masked, Mapping):
        # In order, pair by pair: a key the scan redacted is a new key holding the same value.
        pairs = zip(masked.items(), original.values(), strict=True)
        return {key: _put_back(value, before, ids) for (key, value), before in pairs}
    if isinstance(original, list) and isinstance(masked, list):
        return [_put_back(m, v, ids) for m, v in zip(masked, original, strict=True)]
    return masked


def hook_targets(hook: HookSettings, event: str | None, library: SkillLibrary | None) -> list[str | None]:
    """The skills a delivery runs (None: a plain agent turn with the hook's message)."""
    if hook.skill:
        return [hook.skill]
    if hook.message:
        return [None]
    if library is None:
        return []
    return [
        s.name
        for s in library.eligible()
        # Only a trusted skill answers a delivery by its own trigger; a person names others (skill = NAME).
        if s.trust is Trust.TRUSTED and any(t.kind == "webhook" and t.value and event_matches(t.value, event) for t in s.triggers)
    ]


async def accept_delivery(
    engine: TriggerEngine,
    hook: HookSettings,
    *,
    delivery_id: str | None,
    generated_id: bool,
    event: str | None,
    payload: Any,
    address: str,
) -> DeliveryAnswer:
    store = engine.store
    delivery = delivery_id or ""
    now = engine.clock.now()
    if not generated_id:
        seen = await store.delivery(hook.name, delivery)
        if seen is not None:
            return _replayed(seen)
    base: dict[str, Any] = {"hook": hook.name, "delivery": delivery, "event": event}
    if event == "github.ping":
        return DeliveryAnswer(status=200, body={**base, "ok": True, "pong": True})
    if hook.events and not any(event_matches(pattern, event) for pattern in hook.events):
        body = {**base, "accepted": True, "ignored": True, "reason": f"event {event!r} is not in the hook's events"}
        return _stored(await store.record_delivery(_row(hook, delivery, now, event, 202, body)))
    targets = hook_targets(hook, event, engine.skills)
    if not targets:
        body = {**base, "accepted": True, "ignored": True, "reason": f"no eligible skill's webhook trigger matches {event!r}"}
        return _stored(await store.record_delivery(_row(hook, delivery, now, event, 202, body)))
    if await engine.is_queue_full():
        return DeliveryAnswer(
            status=503,
            body={"error": {"code": "queue_full", "message": "too many runs are waiting to start",
                            "hint": "retry later, or raise [triggers] max_queued"}},
            headers={"Retry-After": str(QUEUE_FULL_RETRY_S)},
        )  # fmt: skip
    # Redacted once for every run it starts: what the runs read and what is recorded and audited.
    redacted = await engine.redacted_payload(payload)
    untrusted = await off_loop(_untrusted_text, redacted, over=redacted)
    prepared = [_prepare(engine, hook, target, delivery=delivery, event=event, payload=payload, redacted=redacted,
                         untrusted_text=untrusted, address=address) for target in targets]  # fmt: skip
    runs = [{"run_id": p.firing.run_id, "skill": p.firing.skill, "firing_id": p.firing.id} for p in prepared if p.request]
    errors = [{"skill": p.firing.skill, **(p.firing.error or {})} for p in prepared if p.request is None]
    if runs:
        status, body = 202, {**base, "accepted": True, "run_id": runs[0]["run_id"], "runs": runs}
        if errors:
            body["errors"] = errors
    else:
        status = 422
        first = errors[0] if errors else {}
        body = {**base, "accepted": False, "errors": errors,
                "error": {"code": first.get("code", "invalid_arguments"), "message": first.get("message", ""),
                          "hint": "check the hook's params mapping against the skill's parameters (`pincer skills show`)"}}  # fmt: skip
    row = _row(hook, delivery, now, event, status, body)
    try:
        await engine.commit(prepared, delivery=row)
    except DeliveryExists as exists:  # the same delivery, concurrently: the first one's answer
        return _replayed(exists.row)
    made = frozenset(i for run in runs for i in (run["run_id"], run["firing_id"]) if i is not None)
    return DeliveryAnswer(status=status, body=body, made_ids=made)


def _untrusted_text(redacted: Any) -> str:
    return json.dumps(redacted, ensure_ascii=False, default=str)


def _prepare(
    engine: TriggerEngine, hook: HookSettings, skill: str | None, *, delivery: str, event: str | None, payload: Any,
    redacted: Any, untrusted_text: str, address: str,
) -> _Prepared:  # fmt: skip
    """``payload`` as it came (the templates see it whole), ``redacted`` as the record keeps it,
    ``untrusted_text`` as the run reads it."""
    from pincer.skills.render import render_text

    context = {"payload": payload, "event": event or "", "hook": hook.name, "delivery": delivery}
    params: dict[str, Any] = {}
    message: str | None = None
    problem: PincerError | None = None
    try:
        declared = _declared(engine, skill) if not hook.skill else None
        for key, template in hook.params.items():
            if declared is not None and key not in declared:
                continue
            value = render_text(template, context, source=f"[[hooks]] {hook.name} params.{key}")
            if value != "":
                params[key] = value
        if hook.message:
            message = render_text(hook.message, context, source=f"[[hooks]] {hook.name} message")
    except PincerError as exc:
        problem = exc
    if message is None:
        message = f"A webhook delivery arrived on hook {hook.name!r}: event {event or '(none)'}."
    untrusted = UntrustedInput(
        source=f"webhook {hook.name}, delivery {delivery} ({event or 'no event'})", content=untrusted_text
    )
    prepared = engine.prepare(
        kind=TriggerKind.WEBHOOK, name=hook.name, fired_by=f"webhook from {address}", skill=skill, params=params,
        message=message, session=hook.session or f"hook:{hook.name}", untrusted=(untrusted,), payload=redacted,
        payload_redacted=True,
        audit_args={"event": event, "delivery": delivery},
    )  # fmt: skip
    if problem is not None:
        # The mapping itself failed: the firing is recorded with that error, like a parameter
        # that does not fit.
        return _with_error(prepared, problem)
    return prepared


def _with_error(prepared: _Prepared, problem: PincerError) -> _Prepared:
    message = problem.message
    row = replace(prepared.row, status="error", error=message, request=None, ended_at=prepared.row.ts)
    audit = replace(prepared.audit, decision="error", outcome="error", error_code=problem.code, error=message)
    firing = replace(prepared.firing, status="error", error=problem.to_dict())
    return replace(prepared, row=row, request=None, audit=audit, firing=firing)


def _declared(engine: TriggerEngine, skill: str | None) -> set[str] | None:
    library = engine.skills
    if skill is None or library is None or skill not in library:
        return None
    return {p.name for p in library.get(skill).parameters}


def _row(hook: HookSettings, delivery: str, now: float, event: str | None, status: int, body: Mapping[str, Any]) -> DeliveryRow:
    return DeliveryRow(hook=hook.name, delivery_id=delivery, received_at=now, event=event, status=status, response=dict(body))


def _stored(row: DeliveryRow) -> DeliveryAnswer:
    return DeliveryAnswer(status=row.status, body=row.response)


def _replayed(row: DeliveryRow) -> DeliveryAnswer:
    return DeliveryAnswer(status=200, body={**row.response, "replayed": True, "original_status": row.status})
