"""An upstream MCP server (stdio, the official SDK's MCPServer) that traces itself, for the trace tests.

Its OpenTelemetry SDK exports to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` as service ``upstream``
(the SDK's own server middleware makes a ``tools/call NAME`` span continuing ``_meta``'s trace
context), and its tool ``trace_context`` answers with the trace context its request carried in
``_meta``, so a test sees both what reached it and the span it made of it.
"""

import json

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource({"service.name": "upstream"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))  # each span sent as it ends
trace.set_tracer_provider(provider)

from mcp.server import MCPServer  # noqa: E402
from mcp.server.mcpserver import Context  # noqa: E402

server = MCPServer("upstream")


@server.tool(name="trace_context", description="The trace context this request carried in _meta")
def trace_context(text: str, ctx: Context) -> str:
    meta = ctx.request_context.meta or {}
    carried = {key: meta.get(key) for key in ("traceparent", "tracestate")}
    return json.dumps({"meta": carried, "text_length": len(text)})


if __name__ == "__main__":
    server.run("stdio")
