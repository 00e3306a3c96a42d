"""The spans pincer makes, named and attributed as the OpenTelemetry semantic conventions say.

=====================================  ========  ==============================================
span                                   kind      made by
=====================================  ========  ==============================================
``{METHOD} {route}``                   server    the gateway, per HTTP request (gateway/tracing.py)
``tools/call {tool}``                  server    the MCP server, per ``tools/call`` (continues ``_meta``)
``execute_tool {tool}``                internal  the dispatcher, per governed call
``approval {tool}``                    internal  the dispatcher, while a call waits for an answer
``invoke_agent {skill}``               internal  the agent loop, per run
``chat {model}``                       client    the agent loop, per model request (a turn)
``webhook {hook}``                     internal  the gateway, per webhook delivery
``{METHOD}``                           client    the egress transport, per upstream HTTP request
``MCP send tools/call {tool}``         client    the MCP SDK, per upstream MCP request (its own)
=====================================  ========  ==============================================

GenAI attributes (``gen_ai.*``) follow the GenAI conventions (development status; the names of
the current registry: ``gen_ai.provider.name``, not the older ``gen_ai.system``); pincer's own are
``pincer.*``. No span holds an argument, an output, a URL's path or query, or an error message:
each may carry a secret or a person's data. ``[telemetry] record_content`` adds the arguments and
the result of a call (``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``) as the audit
log keeps them, leak-scanned and with secret-named keys masked, cut to ``content_max_chars``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pincer.telemetry.tracing import TRACING

if TYPE_CHECKING:
    from pincer.core.values import CallRequest
    from pincer.store.audit import AuditEntry

__all__ = [
    "CallSpan",
    "start_call",
    "end_call",
    "approval_span",
    "start_run",
    "end_run",
    "chat_span",
    "end_chat",
    "upstream_http_span",
    "end_upstream_http",
    "mcp_server_span",
    "webhook_span",
    "end_webhook",
    "OPERATION",
    "TOOL_NAME",
]

OPERATION = "gen_ai.operation.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
# Runtimes whose tools live in another service: the conventions' "extension" (an agent-side
# function is a "function").
_EXTENSION_RUNTIMES = frozenset({"mcp", "openapi"})


@dataclass(slots=True)
class CallSpan:
    """An ``execute_tool`` span, current in the caller's task until :func:`end_call`."""

    span: Any
    token: object


def start_call(request: CallRequest) -> CallSpan:
    attributes: dict[str, Any] = {
        OPERATION: "execute_tool",
        TOOL_NAME: request.tool,
        "pincer.session": request.session,
        "pincer.caller": request.caller,
    }
    if request.call_id is not None:
        attributes[TOOL_CALL_ID] = request.call_id
    if request.run_id is not None:
        attributes["pincer.run_id"] = request.run_id
    span = TRACING.start(f"execute_tool {request.tool}", attributes=attributes)
    return CallSpan(span=span, token=TRACING.attach(span))


def end_call(
    call: CallSpan, entry: AuditEntry | None, audit_id: int | None, *, runtime: str | None, result: Any = None
) -> None:
    """End the call's span with what its audit record says (``entry``; None when the record was
    never written). ``result`` is what the caller got back, already scanned: kept only with
    ``record_content``."""
    TRACING.detach(call.token)
    span = call.span
    if runtime is not None:
        span.set_attribute("pincer.runtime", runtime)
        span.set_attribute(TOOL_TYPE, "extension" if runtime in _EXTENSION_RUNTIMES else "function")
    else:  # no tool has the name the caller gave: it stays an attribute, out of the span's name
        span.update_name("execute_tool")
    if audit_id is not None:
        span.set_attribute("pincer.audit_id", audit_id)
    if entry is None:
        TRACING.fail(span, "not_recorded")
        span.end()
        return
    span.set_attribute("pincer.decision", entry.decision)
    span.set_attribute("pincer.outcome", entry.outcome)
    span.set_attribute("pincer.effects", list(entry.effects))
    if entry.approval_id is not None:
        span.set_attribute("pincer.approval_id", entry.approval_id)
    if entry.cached:
        span.set_attribute("pincer.cached", True)
    if TRACING.record_content:
        span.set_attribute(TOOL_ARGUMENTS, TRACING.content(entry.args))
        if result is not None:
            span.set_attribute(TOOL_RESULT, TRACING.content(result))
    if entry.outcome != "ok":
        TRACING.fail(span, entry.error_code or entry.outcome)
    span.end()


@contextmanager
def approval_span(tool: str) -> Iterator[Any]:
    """The wait for a person's answer, a child of the call's span; a refusal, a timeout or a
    detached request ends it with that error code."""
    with TRACING.span(f"approval {tool}", attributes={TOOL_NAME: tool}) as span:
        yield span


@contextmanager
def mcp_server_span(
    tool: str, *, known: bool, meta: Mapping[str, Any] | None, protocol_version: str | None
) -> Iterator[Any]:
    """A ``tools/call`` pincer serves over MCP: the parent is the trace context in the request's
    ``_meta`` when the client sent one (SEP-414, as the MCP SDKs do), else the current span. A
    name no tool has stays out of the span's name (``known`` False)."""
    attributes: dict[str, Any] = {"mcp.method.name": "tools/call", TOOL_NAME: tool}
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    name = f"tools/call {tool}" if known else "tools/call"
    with TRACING.span(name, kind="server", attributes=attributes, parent=TRACING.extract(meta)) as span:
        yield span


@contextmanager
def webhook_span(hook: str | None) -> Iterator[Any]:
    """One webhook delivery; ``hook`` None for a name no ``[[hooks]]`` table has (not repeated:
    anyone can send those). The runs it starts are its children."""
    attributes = {"pincer.hook": hook} if hook is not None else {}
    with TRACING.span(f"webhook {hook}" if hook else "webhook", attributes=attributes) as span:
        yield span


def end_webhook(span: Any, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 400:
        TRACING.fail(span, str(status))


# -- agent runs ------------------------------------------------------------------------------------


def start_run(*, agent: str, run_id: str, session: str, provider: str, model: str) -> Any:
    """An ``invoke_agent`` span, not current: the run makes it current while it works. A run a
    trigger queued in this process continues the firing's trace (a webhook delivery's span)."""
    return TRACING.start(
        f"invoke_agent {agent}",
        attributes={
            OPERATION: "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.conversation.id": run_id,
            PROVIDER: provider,
            REQUEST_MODEL: model,
            "pincer.run_id": run_id,
            "pincer.session": session,
        },
        parent=TRACING.recall(run_id),
    )


def end_run(
    span: Any, *, status: str, input_tokens: int, output_tokens: int, cost_usd: float | None, error: str | None
) -> None:
    span.set_attribute("pincer.run.status", status)
    span.set_attribute(INPUT_TOKENS, input_tokens)
    span.set_attribute(OUTPUT_TOKENS, output_tokens)
    if cost_usd is not None:
        span.set_attribute("pincer.run.cost_usd", cost_usd)
    if status != "done":
        TRACING.fail(span, error or status)
    span.end()


@contextmanager
def chat_span(*, provider: str, model: str, base_url: str | None, max_tokens: int) -> Iterator[Any]:
    """One model request (a turn, its retries included), current while it streams."""
    attributes: dict[str, Any] = {
        OPERATION: "chat",
        PROVIDER: provider,
        REQUEST_MODEL: model,
        "gen_ai.request.max_tokens": max_tokens,
    }
    attributes.update(_server(base_url))
    with TRACING.span(f"chat {model}", kind="client", attributes=attributes) as span:
        yield span


def end_chat(span: Any, *, input_tokens: int, output_tokens: int, finish: str) -> None:
    span.set_attribute(INPUT_TOKENS, input_tokens)
    span.set_attribute(OUTPUT_TOKENS, output_tokens)
    span.set_attribute("gen_ai.response.finish_reasons", [finish])


# -- upstream requests -------------------------------------------------------------------------------


@contextmanager
def upstream_http_span(method: str, *, scheme: str, host: str, port: int | None) -> Iterator[Any]:
    """An outbound HTTP request (the http tool, OpenAPI operations, a WASM tool's requests): its
    method and server only; the path and query are the caller's arguments."""
    attributes: dict[str, Any] = {"http.request.method": method, "server.address": host, "url.scheme": scheme}
    if port is not None:
        attributes["server.port"] = port
    with TRACING.span(method, kind="client", attributes=attributes) as span:
        yield span


def end_upstream_http(span: Any, status: int) -> None:
    span.set_attribute("http.response.status_code", status)
    if status >= 400:  # the conventions: a client span fails on 4xx and 5xx
        TRACING.fail(span, str(status))


def _server(url: str | None) -> dict[str, Any]:
    if not url:
        return {}
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return {}
    found: dict[str, Any] = {}
    if host:
        found["server.address"] = host
    if port is not None:
        found["server.port"] = port
    return found
