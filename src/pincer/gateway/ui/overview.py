"""``/ui/``: the overview, in pictures: calls per hour over the last day by decision (and the
busiest tools), approvals waiting, the slowest tools (p50/p95), runs by status with their
token and cost totals, denials and refusals by reason. Charts are SVG drawn here from numbers;
every label goes through the template's escaping like any other value. A non-main session's
overview counts only its own records and runs."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pincer.gateway.access import approvals_seen, audit_session_filter, runs_session_filter
from pincer.gateway.rest.audit import MAX_AUDIT_LIMIT
from pincer.gateway.ui.auth import require_identity
from pincer.gateway.ui.render import pages_of, pincer_of
from pincer.store.approvals import ApprovalStatus

__all__ = ["OVERVIEW_WINDOW_S", "page", "percentile"]

OVERVIEW_WINDOW_S = 86_400.0
HOURS = 24
SLOWEST_SHOWN = 8
REASONS_SHOWN = 8
_DECISION_ORDER = ("allow", "allow_once", "allow_always", "ask", "deny")
CHART_W, CHART_H = 720, 180


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (non-empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def _hourly(records: list[Any], now: float) -> dict[str, Any]:
    start = now - OVERVIEW_WINDOW_S
    counts: dict[str, list[int]] = defaultdict(lambda: [0] * HOURS)
    for r in records:
        slot = min(HOURS - 1, int((r.ts - start) // 3600))
        counts[r.decision][slot] += 1
    decisions = [d for d in _DECISION_ORDER if d in counts] + sorted(d for d in counts if d not in _DECISION_ORDER)
    top = max([sum(counts[d][h] for d in decisions) for h in range(HOURS)] + [1])
    bar_w = CHART_W / HOURS
    bars = []
    for h in range(HOURS):
        y = float(CHART_H)
        for index, d in enumerate(decisions):
            n = counts[d][h]
            if not n:
                continue
            height = CHART_H * n / top
            y -= height
            bars.append({"x": round(h * bar_w + 1, 1), "y": round(y, 1), "w": round(bar_w - 2, 1),
                         "h": round(height, 1), "series": index % 6, "title": f"{d}: {n}"})  # fmt: skip
    legend = [{"name": d, "series": i % 6, "total": sum(counts[d])} for i, d in enumerate(decisions)]
    return {"bars": bars, "legend": legend, "top": top, "width": CHART_W, "height": CHART_H}


def _horizontal(rows: list[tuple[str, float, float | None]], unit: str) -> dict[str, Any]:
    """Bars of ``(label, value, second value or None)``, longest first."""
    top = max([r[1] for r in rows] + [r[2] or 0 for r in rows] + [1e-9])
    row_h = 22
    bars = []
    for i, (label, value, second) in enumerate(rows):
        bars.append({"label": label, "y": i * row_h, "w": round(340 * value / top, 1), "value": value,
                     "w2": round(340 * second / top, 1) if second is not None else None, "second": second})  # fmt: skip
    return {"bars": bars, "height": max(row_h, len(rows) * row_h), "unit": unit}


async def page(request: Request) -> Response:
    identity = require_identity(request)
    pincer = pincer_of(request)
    now = time.time()
    session = audit_session_filter(identity.session, None)
    records = [
        r for r in pincer.audit.records(session=session, limit=MAX_AUDIT_LIMIT) if r.ts >= now - OVERVIEW_WINDOW_S
    ]
    calls = [r for r in records if r.kind == "call"]
    by_tool = Counter(r.tool for r in calls)
    durations: dict[str, list[float]] = defaultdict(list)
    for r in calls:
        if r.outcome in ("ok", "error") and not r.cached:
            durations[r.tool].append(float(r.duration_ms))
    slow = sorted(((t, percentile(v, 0.5), percentile(v, 0.95)) for t, v in durations.items()), key=lambda x: -x[2])
    reasons = Counter(
        r.reason or r.error_code or "(no reason)" for r in records if r.decision == "deny" or r.outcome == "refused"
    )
    waiting = [
        a
        for a in approvals_seen(identity.session, pincer.approvals.list_pending())
        if a.status is ApprovalStatus.PENDING
    ]
    runs = pincer.runs.list(session=runs_session_filter(identity.session), limit=1000)
    by_status: dict[str, dict[str, float]] = defaultdict(lambda: {"runs": 0.0, "tokens": 0.0, "cost": 0.0})
    for run in runs:
        totals = by_status[run.status]
        totals["runs"] += 1
        usage = dict(run.usage)
        totals["tokens"] += int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)
        totals["cost"] += float(run.cost_usd or 0.0)
    context = {
        "calls": len(calls),
        "hourly": _hourly(calls, now),
        "busiest": by_tool.most_common(SLOWEST_SHOWN),
        "slowest": _horizontal([(t, p50, p95) for t, p50, p95 in slow[:SLOWEST_SHOWN]], "ms"),
        "denials": _horizontal(
            [(reason[:120], float(n), None) for reason, n in reasons.most_common(REASONS_SHOWN)], ""
        ),
        "waiting": waiting,
        "runs_by_status": _horizontal([(s, t["runs"], None) for s, t in sorted(by_status.items())], ""),
        "run_totals": sorted(by_status.items()),
    }
    return pages_of(request).render(request, "overview.html", context)
