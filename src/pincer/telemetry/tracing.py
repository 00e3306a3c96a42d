"""The process's traces: off by default, switched on once at start by :meth:`Tracing.configure`.

OpenTelemetry's tracer provider is one per process, so this state is one per process too:
:data:`TRACING`. Every hot path asks ``TRACING.on`` (one attribute read) and does nothing more while
it is False; nothing imports OpenTelemetry until ``configure`` turns tracing on, so a CLI command
never pays for it.

On, the official SDK batches spans and exports them over OTLP/HTTP with the official exporter,
which reads the standard ``OTEL_EXPORTER_OTLP_*`` variables (endpoint, headers, timeout,
compression); the SDK reads ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER`` and ``OTEL_BSP_*``. ``[telemetry] endpoint`` wins over the endpoint
variables when it is set; ``OTEL_SDK_DISABLED=true`` keeps tracing off whatever the config says.
Trace context comes in and goes out through the global propagator (W3C trace context unless
``OTEL_PROPAGATORS`` says otherwise), the one the MCP SDK uses for ``_meta``; of what a caller
sends only ``traceparent`` and ``tracestate`` are read.

A span never holds an exception's message (it may quote an argument): a failure is its
``error.type``, a code or a class name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pincer.core.extras import require

if TYPE_CHECKING:
    from pincer.config import TelemetrySettings

__all__ = ["TRACING", "Tracing", "TRACE_CONTEXT_KEYS"]

# What is read of a carrier (HTTP headers, an MCP request's _meta): the W3C trace context alone.
# A caller's baggage is not taken in, so it never rides along to the upstreams pincer calls.
TRACE_CONTEXT_KEYS = ("traceparent", "tracestate")
_TRUNCATED = "…[truncated]"
REMEMBERED_MAX = 1_024  # contexts kept for queued work (its queue holds at most [triggers] max_queued)


class Tracing:
    """Whether this process traces, and the few operations the rest of pincer needs while it does.

    Every method but :meth:`configure` and :meth:`shutdown` may be called only while ``on``."""

    __slots__ = ("on", "record_content", "content_max_chars", "_tracer", "_provider", "_trace", "_context",
                 "_propagate", "_kinds", "_error", "_remembered")  # fmt: skip

    def __init__(self) -> None:
        self.on = False
        self.record_content = False
        self.content_max_chars = 1_024
        self._tracer: Any = None
        self._provider: Any = None
        self._remembered: dict[str, Any] = {}

    def configure(self, settings: TelemetrySettings, *, environ: Mapping[str, str]) -> bool:
        """Turn tracing on as ``settings`` say (once per process); whether it is on."""
        if self.on or not settings.traces:
            return self.on
        if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return False
        # The SDK and exporter are the telemetry extra (core/extras.py names it when missing).
        require("telemetry", "opentelemetry.sdk.trace")
        require("telemetry", "opentelemetry.exporter.otlp.proto.http.trace_exporter")
        from opentelemetry import context, propagate, trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        import pincer

        resource = Resource.create({"service.version": pincer.__version__})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": "pincer"}))
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.endpoint)))
        # Global: the MCP SDK's own spans (its client's "MCP send tools/call") land in the same traces.
        trace.set_tracer_provider(provider)
        self._provider = provider
        self._tracer = provider.get_tracer("pincer", pincer.__version__)
        self._trace, self._context, self._propagate = trace, context, propagate
        self._kinds = {"internal": trace.SpanKind.INTERNAL, "server": trace.SpanKind.SERVER,
                       "client": trace.SpanKind.CLIENT}  # fmt: skip
        self._error = trace.StatusCode.ERROR
        self.record_content = settings.record_content
        self.content_max_chars = settings.content_max_chars
        self.on = True
        return True

    def shutdown(self) -> None:
        """Export what is still batched (blocks up to the exporter's timeout)."""
        if self._provider is not None:
            self._provider.force_flush()

    # -- spans ---------------------------------------------------------------------------------

    def start(
        self, name: str, *, kind: str = "internal", attributes: Mapping[str, Any] | None = None, parent: Any = None
    ) -> Any:
        """A started span, not made current: its parent is ``parent`` (a context from
        :meth:`extract`) or else the current span."""
        return self._tracer.start_span(name, context=parent, kind=self._kinds[kind], attributes=attributes)

    def attach(self, span: Any) -> Any:
        """Make ``span`` the current one in this task until :meth:`detach` with the token."""
        return self._context.attach(self._trace.set_span_in_context(span))

    def detach(self, token: Any) -> None:
        self._context.detach(token)

    def detach_all(self) -> None:
        """From here on in this task, no span is current (a task that outlives its starter's span)."""
        self._context.attach(self._context.Context())

    @contextmanager
    def span(
        self, name: str, *, kind: str = "internal", attributes: Mapping[str, Any] | None = None, parent: Any = None
    ) -> Iterator[Any]:
        """A span made current for the block; an exception ends it as failed, by its class name."""
        span = self.start(name, kind=kind, attributes=attributes, parent=parent)
        token = self.attach(span)
        try:
            yield span
        except BaseException as exc:
            self.fail(span, error_type(exc))
            raise
        finally:
            self.detach(token)
            span.end()

    def fail(self, span: Any, error: str) -> None:
        """Mark ``span`` failed with ``error`` (a code or a class name: never a message)."""
        span.set_attribute("error.type", error)
        span.set_status(self._error)

    # -- trace context -------------------------------------------------------------------------

    def inject(self, carrier: MutableMapping[str, str]) -> None:
        """Add the current trace context to ``carrier`` (outgoing HTTP headers, an MCP ``_meta``)."""
        self._propagate.inject(carrier)

    def extract(self, carrier: Mapping[str, Any] | None) -> Any:
        """The trace context a caller sent in ``carrier`` (HTTP headers with lower-case names, an
        MCP request's ``_meta``), or None when it holds no valid one: the current span stays
        the parent then. Only the trace context's own keys are read, and only as strings."""
        if not carrier:
            return None
        found = {key: value for key in TRACE_CONTEXT_KEYS if isinstance(value := carrier.get(key), str)}
        if "traceparent" not in found:
            return None
        try:
            context = self._propagate.extract(found)
        except (ValueError, TypeError):
            return None
        return context if self._trace.get_current_span(context).get_span_context().is_valid else None

    def remember(self, key: str) -> None:
        """Keep the current context for the work ``key`` names that starts later in this process
        (a queued run): :meth:`recall` gives it back once. At most :data:`REMEMBERED_MAX` kept."""
        remembered = self._remembered
        if len(remembered) >= REMEMBERED_MAX:
            remembered.pop(next(iter(remembered)))
        remembered[key] = self._context.get_current()

    def recall(self, key: str) -> Any:
        """The context :meth:`remember` kept for ``key`` (None when none: another process queued it)."""
        return self._remembered.pop(key, None)

    def content(self, value: Any) -> str:
        """``value`` as a span may hold it with ``record_content``: JSON, cut to ``content_max_chars``.
        The caller passes what is already leak-scanned."""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
        if len(text) > self.content_max_chars:
            return text[: self.content_max_chars] + _TRUNCATED
        return text


def error_type(exc: BaseException) -> str:
    """What a span says of a failure: a pincer error's code, else the exception's class name."""
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        return code
    if type(exc).__name__ in ("CancelledError", "Cancelled"):  # asyncio's, trio's
        return "cancelled"
    return type(exc).__qualname__


TRACING = Tracing()


def trace_headers() -> dict[str, str]:
    """The current trace context as HTTP headers for an upstream request (only while on)."""
    carrier: dict[str, str] = {}
    TRACING.inject(carrier)
    return carrier
