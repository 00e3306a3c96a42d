"""Every use of the MCP SDK client's private internals, in one place (the lean path, :mod:`.lean`).

A lean ``tools/call`` must go out and come back exactly as the SDK's ``Client.call_tool`` would
send and read it, so it reuses the SDK's own steps rather than copies of them:

- ``call_request``: the request's ``params`` and HTTP headers as ``ClientSession.send_request``
  builds them: the model dump of ``CallToolRequest``, then the session's ``_stamp`` (on a
  2026-07-28 connection it adds the protocol version, client info and capabilities to ``_meta``
  and the ``Mcp-*`` headers; on a handshake connection only the protocol version header), then
  ``Mcp-Name`` if the request type names a ``name_param`` and the stamp set none (stdio ignores
  the headers);
- ``finish_call``: the raw result read as ``send_request`` reads it (``_clamp_inbound_ttl``,
  ``mcp_types.methods.validate_server_result``, ``_later_revision_fields``, the session's
  ``_call_tool_adapter``), its structured content checked against the tool's output schema
  (the public ``validate_tool_result``), and an ``InputRequiredResult`` handed to the client's
  own driver (``Client._drive_input_required``), whose later rounds go the SDK's way; a claimed
  shape (an upstream task) resolved by its extension's claim (``Client._folded_extensions``),
  as ``Client.call_tool`` does.

- ``FormQuestionsClient``: the SDK's ``Client`` declaring ``elicitation`` with ``form`` only (the
  SDK declares ``url`` too whenever an elicitation callback is given; pincer passes on form
  questions alone, so a server must not be told it may ask for a URL): it wraps the session's
  ``_build_capabilities``, made by ``Client._build_session`` before the handshake reads it.

``tests/runtimes/mcp/test_sdk_client_compat.py`` checks that each still exists with the shape
used here, so an SDK upgrade that moves one fails that test by name instead of failing calls.
When it fails: find the new home of the internal, change it here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client import session as client_session
from mcp.client.extension import ClaimContext, UnexpectedClaimedResult
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp_types import methods as wire_methods

from pincer.runtimes.mcp.lean import ProgressFn

__all__ = ["call_request", "finish_call", "negotiated_version", "FormQuestionsClient"]


class FormQuestionsClient(Client):
    """``Client`` whose capabilities declare form elicitation only (see the module's docstring)."""

    async def _build_session(self, exit_stack: AsyncExitStack) -> client_session.ClientSession:
        session = await super()._build_session(exit_stack)
        build = session._build_capabilities

        def form_only(version: str) -> types.ClientCapabilities:
            capabilities = build(version)
            if capabilities.elicitation is None:
                return capabilities
            return capabilities.model_copy(
                update={"elicitation": types.ElicitationCapability(form=types.FormElicitationCapability())}
            )

        session._build_capabilities = form_only  # type: ignore[method-assign]
        return session


def negotiated_version(client: Client) -> str | None:
    return client.session._negotiated_version


def call_request(client: Client, tool: str, arguments: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=dict(arguments)))
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict[str, Any] = {}
    client.session._stamp(data, opts)  # type: ignore[arg-type]  # CallOptions is a TypedDict
    params: dict[str, Any] = data.get("params") or {}
    headers: dict[str, str] = opts.setdefault("headers", {})
    if type(request).name_param is not None and MCP_NAME_HEADER not in headers:
        headers[MCP_NAME_HEADER] = encode_header_value(tool)
    return params, headers


async def finish_call(
    client: Client,
    tool: str,
    arguments: Mapping[str, Any],
    raw: dict[str, Any],
    *,
    timeout_s: float,
    progress: ProgressFn | None,
) -> types.CallToolResult:
    session = client.session
    client_session._clamp_inbound_ttl(raw)
    version = session._negotiated_version or "2025-11-25"
    try:
        wire_methods.validate_server_result("tools/call", version, raw)
    except KeyError:
        pass
    foreign = client_session._later_revision_fields("tools/call", version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    result = session._call_tool_adapter.validate_python(raw, by_name=False)
    if isinstance(result, types.CallToolResult):
        if not result.is_error:
            await session.validate_tool_result(tool, result)
        return result
    if isinstance(result, types.InputRequiredResult):

        async def retry(responses: Any, state: str | None) -> Any:
            return await session.call_tool(
                tool, dict(arguments), read_timeout_seconds=timeout_s, progress_callback=progress,
                input_responses=responses, request_state=state, allow_input_required=True, allow_claimed=True,
            )  # fmt: skip

        final = await client._drive_input_required(result, retry)
        if isinstance(final, types.CallToolResult):
            return final
        result = final
    # A claimed shape (an upstream task): resolved by its extension as Client.call_tool does.
    claim = client._folded_extensions.by_model.get(type(result))
    if claim is None:
        raise UnexpectedClaimedResult(result)
    resolved: types.CallToolResult = await claim.resolve(
        result, ClaimContext(session=session, tool_name=tool, read_timeout_seconds=timeout_s)
    )
    if not resolved.is_error:
        await session.validate_tool_result(tool, resolved)
    return resolved
