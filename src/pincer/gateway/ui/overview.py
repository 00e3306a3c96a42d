"""``/ui/``: the overview, in pictures: calls per hour over the last day by decision (one colour
per decision, the legend saying what each means), the busiest tools, approvals waiting, the
slowest tools (p50/p95 of the tool's own time) beside how long calls waited for a person, runs by
status with their token and cost totals, and refusals of every kind (policy denials, egress
refusals, approvals denied or timed out, rate limits, requests the gateway refused) by reason.
Bars are SVG drawn here from numbers; labels and values are HTML text (escaped like any other
value, wrapped, never cut). A non-main session's overview counts only its own records and runs."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from pincer.gateway.access import approvals_seen, audit_session_filter, runs_session_filter
from pincer.gateway.rest.audit import MAX_AUDIT_LIMIT
from pincer.gateway.ui.audit import DECISION_MEANINGS
from pincer.gateway.ui.auth import UI_PREFIX, require_identity
from pincer.gateway.ui.conversation import approval_wait_ms
from pincer.gateway.ui.render import pages_of
from pincer.gateway.ui.services import services_of
from pincer.store.approvals import ApprovalStatus
from pincer.store.audit import AuditRecord

__all__ = ["OVERVIEW_WINDOW_S", "REFUSAL_KINDS", "page", "percentile", "refusal_kind"]

OVERVIEW_WINDOW_S = 86_400.0
HOURS = 24
TOP_SHOWN = 8
REASONS_SHOWN = 10
_DECISION_ORDER = ("allow", "allow_once", "allow_always", "ask", "deny", "none")
CHART_W, CHART_H = 720, 160

# Every way a call is refused, by the error code the dispatcher records (core/errors.py's
# PolicyError family), in the order the overview lists them.
REFUSAL_KINDS = {
    "denied": "policy denial",
    "egress_denied": "egress refusal",
    "approval_denied": "approval denied by a person",
    "approval_timeout": "approval timed out",
    "budget_exceeded": "rate limit or budget",
    "refused_at_gateway": "refused by the gateway",
}


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (non-empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def refusal_kind(record: AuditRecord) -> str | None:
    """Which kind of refusal ``record`` is (a key of REFUSAL_KINDS), or None if it was not one."""
    code = record.error_code
    if code == "denied" and record.decision == "none":
        return "refused_at_gateway"  # the guard refused the request before the chain (record_refusal)
    if code in REFUSAL_KINDS:
        return code
    if record.decision == "deny" or record.outcome == "denied":
        return "denied"
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Bar:
    label: str
    value: float
    width: float  # 0..100, of the longest bar
    second: float | None = None
    second_width: float | None = None
    link: str | None = None


def bars(rows: Sequence[tuple[str, float, float | None]], *, links: Sequence[str | None] = ()) -> list[Bar]:
    """Bars of ``(label, value, second value or None)`` scaled to the largest value."""
    top = max([r[1] for r in rows] + [r[2] or 0 for r in rows] + [1e-9])
    return [
        Bar(label=label, value=value, width=round(100 * value / top, 2), second=second,
            second_width=round(100 * second / top, 2) if second is not None else None,
            link=links[i] if i < len(links) else None)
        for i, (label, value, second) in enumerate(rows)
    ]


def _hourly(records: list[AuditRecord], now: float) -> dict[str, Any]:
    start = now - OVERVIEW_WINDOW_S
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * HOURS)
    for r in records:
        slot = min(HOURS - 1, max(0, int((r.ts - start) // 3600)))
        counts[r.decision][slot] += 1
    decisions = [d for d in _DECISION_ORDER if d in counts] + sorted(d for d in counts if d not in _DECISION_ORDER)
    top = max([sum(counts[d][h] for d in decisions) for h in range(HOURS)] + [1])
    bar_w = CHART_W / HOURS
    rects = []
    for h in range(HOURS):
        y = float(CHART_H)
        for d in decisions:
            n = counts[d][h]
            if not n:
                continue
            height = CHART_H * n / top
            y -= height
            hours_ago = HOURS - h
            rects.append({"x": round(h * bar_w + 1, 1), "y": round(y, 1), "w": round(bar_w - 2, 1), "h": round(height, 1),
                          "decision": d, "title": f"{d}: {n} call{'s' if n != 1 else ''}, {hours_ago - 1}-{hours_ago} h ago"})  # fmt: skip
    legend = [{"name": d, "total": sum(counts[d]), "meaning": DECISION_MEANINGS.get(d, "")} for d in decisions]
    return {"rects": rects, "legend": legend, "top": top, "width": CHART_W, "height": CHART_H}


def _audit_link(**params: str) -> str:
    return f"{UI_PREFIX}/audit?" + urlencode(params)


async def page(request: Request) -> Response:
    identity = await require_identity(request)
    services = services_of(request)
    now = time.time()
    session = audit_session_filter(identity.session, None)
    # The window's time bound is in the read: a quiet day reads its few records, not 10,000 older.
    records = await services.audit.records(session=session, since=now - OVERVIEW_WINDOW_S, limit=MAX_AUDIT_LIMIT)
    calls = [r for r in records if r.kind == "call"]
    by_tool = Counter(r.tool for r in calls)
    tool_time: dict[str, list[float]] = defaultdict(list)
    waits: dict[str, list[float]] = defaultdict(list)
    for r in calls:
        wait = approval_wait_ms(r)
        if wait > 0:
            waits[r.tool].append(wait)
        if r.outcome in ("ok", "error") and not r.cached:
            tool_time[r.tool].append(max(0.0, float(r.duration_ms) - wait))
    slow = sorted(((t, percentile(v, 0.5), percentile(v, 0.95)) for t, v in tool_time.items()), key=lambda x: -x[2])
    waited = sorted(((t, percentile(v, 0.5), percentile(v, 0.95)) for t, v in waits.items()), key=lambda x: -x[2])
    refusals = [(kind, r) for r in calls if (kind := refusal_kind(r)) is not None]
    by_kind = Counter(kind for kind, _ in refusals)
    by_reason = Counter((kind, (r.error if kind != "denied" and r.error else r.reason) or "(no reason given)")
                        for kind, r in refusals)  # fmt: skip
    waiting = [
        a
        for a in approvals_seen(identity.session, await services.approvals.list_pending())
        if a.status is ApprovalStatus.PENDING and a.expires_at > now
    ]
    runs = await services.runs.list(session=runs_session_filter(identity.session), limit=1000)
    by_status: dict[str, dict[str, float]] = defaultdict(lambda: {"runs": 0.0, "tokens": 0.0, "cost": 0.0})
    for run in runs:
        totals = by_status[run.status]
        totals["runs"] += 1
        usage = dict(run.usage)
        totals["tokens"] += int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)
        totals["cost"] += float(run.cost_usd or 0.0)
    kinds = [k for k in REFUSAL_KINDS if by_kind[k]]
    context = {
        "calls": len(calls),
        "refused": len(refusals),
        "running": int(by_status["running"]["runs"]) if "running" in by_status else 0,
        "hourly": _hourly(calls, now),
        "busiest": bars([(t, float(n), None) for t, n in by_tool.most_common(TOP_SHOWN)],
                        links=[_audit_link(tool=t) for t, _ in by_tool.most_common(TOP_SHOWN)]),
        "slowest": bars([(t, p50, p95) for t, p50, p95 in slow[:TOP_SHOWN]]),
        "waited": bars([(t, p50, p95) for t, p50, p95 in waited[:TOP_SHOWN]]),
        "refusal_kinds": bars([(REFUSAL_KINDS[k], float(by_kind[k]), None) for k in kinds]),
        "refusal_reasons": [{"kind": REFUSAL_KINDS[k], "reason": reason, "count": n}
                            for (k, reason), n in by_reason.most_common(REASONS_SHOWN)],
        "waiting": waiting,
        "run_totals": sorted(by_status.items()),
        "runs_by_status": bars([(s, float(t["runs"]), None) for s, t in sorted(by_status.items())],
                               links=[f"{UI_PREFIX}/runs?status={s}" for s, _ in sorted(by_status.items())]),
        # settings config.toml changed that wait for a restart (reload.py); names, never values
        "restart_needed": list(services.restart_needed()),
    }  # fmt: skip
    return pages_of(request).render(request, "overview.html", context)
