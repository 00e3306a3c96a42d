"""The gateway's Prometheus metrics, kept with ``prometheus-client`` in a registry of its own.

Names and units follow Prometheus' conventions (``pincer_`` prefix, ``_total`` counters,
``_seconds`` histograms). Every label set is bounded: a tool label is a name the registry
resolved (a call of an unknown name counts as ``_unknown``), at most :data:`MAX_LABEL_VALUES`
distinct values per label (then ``_other``), and no label ever holds an argument, a session,
a run id or any other id a caller chooses. See docs/operations.md for the list.

What changes on every call is counted as it happens; what is a state (MCP servers up, the
audit queue) is read when Prometheus scrapes, from the callables the gateway hands in.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Metrics", "ServerState", "MAX_LABEL_VALUES", "UNKNOWN", "OTHER"]

MAX_LABEL_VALUES = 250
UNKNOWN = "_unknown"
OTHER = "_other"
# Seconds. A governed call is sub-millisecond in-process and may run for minutes (tools.timeout_s).
CALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
# A person answers in seconds to minutes (approvals.timeout_s is at most a day).
APPROVAL_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 900.0, 1800.0, 3600.0, 86_400.0)
AUDIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
# How an approval wait ended (the approver's error codes) -> the counter it moves.
_ANSWERS = {"allowed": "allow", "approval_denied": "deny"}
_EXPIRED = frozenset({"approval_timeout", "cancelled"})


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerState:
    """An upstream MCP server as a scrape reads it."""

    name: str
    up: bool
    restarts: int


class _Bounded:
    """At most ``limit`` distinct values of one label; the ones after that are ``_other``."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str | None) -> str:
        if value is None:
            return UNKNOWN
        if value in self._seen:
            return value
        with self._lock:
            if len(self._seen) >= self._limit:
                return OTHER
            self._seen.add(value)
        return value


class Metrics:
    """One gateway's metrics. ``servers`` and ``audit_queue`` are read at each scrape."""

    def __init__(
        self,
        *,
        servers: Callable[[], Iterable[ServerState]] = tuple,
        audit_queue: Callable[[], int] = int,
        max_label_values: int = MAX_LABEL_VALUES,
    ) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, disable_created_metrics
        from prometheus_client.process_collector import ProcessCollector

        # A "_created" series beside every counter and histogram doubles what Prometheus stores
        # for a start time it knows from process_start_time_seconds.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated

        import pincer

        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        Info("pincer", "The pincer serving these metrics.", registry=registry).info({"version": pincer.__version__})
        self._tool = _Bounded(max_label_values)
        self._hook = _Bounded(max_label_values)
        self._server = _Bounded(max_label_values)
        tool_runtime = ["tool", "runtime"]
        self._calls = Counter(
            "pincer_tool_calls", "Governed tool calls by tool, decision (allow, ask, deny, none) and outcome "
            "(ok, error, denied, pending).", ["tool", "decision", "outcome"], registry=registry,
        )  # fmt: skip
        self._call_seconds = Histogram(
            "pincer_tool_call_duration_seconds", "A governed call from the dispatcher's start to its audit record, "
            "the approval wait left out.", tool_runtime, buckets=CALL_BUCKETS, registry=registry,
        )  # fmt: skip
        self._tool_seconds = Histogram(
            "pincer_tool_execution_duration_seconds", "The runtime's own time of a call (the tool running).",
            tool_runtime, buckets=CALL_BUCKETS, registry=registry,
        )  # fmt: skip
        self._approval_seconds = Histogram(
            "pincer_approval_wait_seconds", "How long a call waited for a person's answer.", tool_runtime,
            buckets=APPROVAL_BUCKETS, registry=registry,
        )  # fmt: skip
        self._pending = Gauge("pincer_approvals_pending", "Approvals calls of this gateway wait on now.", registry=registry)
        self._answered = Counter(
            "pincer_approvals_answered", "Approvals answered while a call waited, by answer (allow, deny).", ["answer"],
            registry=registry,
        )  # fmt: skip
        self._expired = Counter(
            "pincer_approvals_expired", "Approvals nobody answered in time, or whose call went away.", registry=registry
        )
        self._runs = Counter("pincer_runs", "Agent runs ended, by status.", ["status"], registry=registry)
        self._tokens = Counter(
            "pincer_run_tokens", "Model tokens of ended runs, by direction (input, output).", ["direction"],
            registry=registry,
        )  # fmt: skip
        self._cost = Counter("pincer_run_cost_usd", "What ended runs cost, in US dollars (priced models only).", registry=registry)
        self._deliveries = Counter(
            "pincer_webhook_deliveries", "Webhook deliveries answered, by hook and HTTP status.", ["hook", "status"],
            registry=registry,
        )  # fmt: skip
        self._audit_seconds = Histogram(
            "pincer_audit_append_duration_seconds", "From handing a call's record to the audit log to its commit.",
            buckets=AUDIT_BUCKETS, registry=registry,
        )  # fmt: skip
        self._store_errors = Counter(
            "pincer_store_errors", "Failed store operations of calls, by store (database, redis).", ["store"],
            registry=registry,
        )  # fmt: skip
        for store in ("database", "redis"):  # zero from the start: a rate() needs a first sample
            self._store_errors.labels(store)
        registry.register(_StateCollector(servers=servers, audit_queue=audit_queue, bound=self._server))
        # labels() validates and locks each time: the children of the hot path are kept.
        self._children: dict[tuple[Any, ...], Any] = {}

    # -- what happens --------------------------------------------------------------------------

    def call_finished(
        self,
        *,
        tool: str | None,
        runtime: str | None,
        decision: str,
        outcome: str,
        seconds: float,
        tool_seconds: float | None,
        audit_seconds: float | None,
    ) -> None:
        """A governed call ended; ``tool`` None: no tool of that name (the caller's word only)."""
        name = self._tool(tool)
        kind = runtime or UNKNOWN
        self._child(self._calls, name, decision, outcome).inc()
        self._child(self._call_seconds, name, kind).observe(seconds)
        if tool_seconds is not None:
            self._child(self._tool_seconds, name, kind).observe(tool_seconds)
        if audit_seconds is not None:
            self._audit_seconds.observe(audit_seconds)

    def approval_waiting(self, change: int) -> None:
        self._pending.inc(change)

    def approval_ended(self, ended: str, *, tool: str, runtime: str, seconds: float) -> None:
        """``ended``: "allowed", or the approver's error code (approval_denied, approval_timeout,
        approval_pending for a detached request, cancelled)."""
        self._child(self._approval_seconds, self._tool(tool), runtime).observe(seconds)
        answer = _ANSWERS.get(ended)
        if answer is not None:
            self._answered.labels(answer).inc()
        elif ended in _EXPIRED:
            self._expired.inc()

    def run_ended(self, *, status: str, input_tokens: int, output_tokens: int, cost_usd: float | None) -> None:
        self._runs.labels(status).inc()
        self._tokens.labels("input").inc(input_tokens)
        self._tokens.labels("output").inc(output_tokens)
        if cost_usd:
            self._cost.inc(cost_usd)

    def delivery(self, *, hook: str | None, status: int) -> None:
        """A webhook delivery answered; ``hook`` None: no configured hook has its name."""
        self._deliveries.labels(self._hook(hook), str(status)).inc()

    def store_error(self, store: str) -> None:
        self._store_errors.labels(store).inc()

    # -- reading ---------------------------------------------------------------------------------

    def exposition(self, accept: str | None) -> tuple[bytes, str]:
        """The metrics in the format ``accept`` asks for (OpenMetrics or Prometheus text), and its
        content type."""
        from prometheus_client.exposition import choose_encoder

        encode, content_type = choose_encoder(accept or "")
        return encode(self.registry), content_type

    def _child(self, metric: Any, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child


class _StateCollector:
    """The states a scrape reads: MCP servers up and their restarts, the audit queue."""

    def __init__(
        self, *, servers: Callable[[], Iterable[ServerState]], audit_queue: Callable[[], int], bound: _Bounded
    ) -> None:
        self._servers = servers
        self._audit_queue = audit_queue
        self._bound = bound

    def describe(self) -> list[Any]:
        return []  # states: nothing to check at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        up = GaugeMetricFamily("pincer_mcp_server_up", "Whether an upstream MCP server runs (1) or not (0).", labels=["server"])
        restarts = CounterMetricFamily(
            "pincer_mcp_server_restarts", "Starts of an upstream MCP server after its first.", labels=["server"]
        )
        seen: dict[str, tuple[float, float]] = {}  # servers past the bound add up under _other
        for state in self._servers():
            name = self._bound(state.name)
            running, started = seen.get(name, (0.0, 0.0))
            seen[name] = (running + (1.0 if state.up else 0.0), started + state.restarts)
        for name, (running, started) in seen.items():
            up.add_metric([name], running)
            restarts.add_metric([name], started)
        yield up
        yield restarts
        yield GaugeMetricFamily(
            "pincer_audit_queue_depth", "Audit records waiting for their commit.", value=float(self._audit_queue())
        )
