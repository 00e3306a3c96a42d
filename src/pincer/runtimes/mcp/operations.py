"""An upstream server's resources and prompts, read through the call chain.

The gateway serves every configured server's resources, resource templates and prompts
(``gateway/upstream_mcp.py``), namespaced like its tools: URIs by :mod:`.uris`, prompt names as
``{server}_{prompt}``. A ``resources/read`` or ``prompts/get`` is a call through the whole chain
(``dispatch.Operation``) of one of two operations each server has, named like its tools:

=========================  ===============  ==================================================
operation                  arguments        effects
=========================  ===============  ==================================================
``{server}_resources/read``  ``{"uri"}``      the server's base set without the write effects
``{server}_prompts/get``     ``{"name",      (as a ``readOnlyHint`` tool): a remote server's
                             "arguments"}``  ``network``, none for a stdio server unless its
                                             entry's ``effects`` name some (``read_filesystem``)
=========================  ===============  ==================================================

Reading is what the MCP spec makes resources and prompts for: the server's data, handed to the
client, not an action. The names put them under the same session lists and grants as the server's
tools: ``deny = ["github_*"]`` withholds them with the tools, an allow list must name them
(``github_resources/read``), and a grant on ``github_*`` covers them. Each read is one audit
record (the server's own URI or prompt name as its arguments); what comes back is leak-scanned
like any output and limited by ``[output] max_resource_bytes``.

Listings (``resources/list``, ``resources/templates/list``, ``prompts/list``) are not calls:
like ``tools/list`` they show what a session may reach (the servers whose operation it may see),
leak-scanned and namespaced, and are not audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from pincer.core.effects import RuntimeKind
from pincer.core.errors import ArgumentsInvalid
from pincer.core.values import ToolOutput, ToolSpec
from pincer.runtimes.mcp.config import ServerConfig, tool_name
from pincer.runtimes.mcp.results import describe_block
from pincer.runtimes.mcp.tools import WRITE_EFFECTS, default_effects
from pincer.runtimes.mcp.uris import PINCER_META_PREFIX, namespaced_block, namespaced_uri

__all__ = [
    "RESOURCES_READ",
    "PROMPTS_GET",
    "OPERATION_KEY",
    "operation_name",
    "operation_spec",
    "listed_resource",
    "listed_template",
    "listed_prompt",
    "resource_output",
    "prompt_output",
    "operation_args",
]

RESOURCES_READ = "resources/read"
PROMPTS_GET = "prompts/get"
OPERATION_KEY = "mcp_operation"  # ToolSpec.annotations: which operation a spec stands for

_SCHEMAS: dict[str, Mapping[str, Any]] = {
    RESOURCES_READ: {
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "the server's own URI of the resource"}},
        "required": ["uri"],
        "additionalProperties": False,
    },
    PROMPTS_GET: {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the server's own name of the prompt"},
            "arguments": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
}
_DESCRIPTIONS = {
    RESOURCES_READ: "read a resource of MCP server {server!r} (resources/read)",
    PROMPTS_GET: "get a prompt of MCP server {server!r} (prompts/get)",
}


def operation_name(server: ServerConfig, method: str) -> str:
    """``github_resources/read``: the server's prefix, as its tools have, and the MCP method (a
    ``/`` no tool's registry name holds, so no upstream tool can take it)."""
    return f"{server.prefix}_{method}"


def operation_spec(server: ServerConfig, method: str) -> ToolSpec:
    effects = default_effects(server) - WRITE_EFFECTS
    return ToolSpec(
        name=operation_name(server, method),
        description=_DESCRIPTIONS[method].format(server=server.name),
        input_schema=_SCHEMAS[method],
        effects=effects,
        runtime=RuntimeKind.MCP,
        side_effecting=False,
        source=f"mcp:{server.name}",
        annotations={"server": server.name, OPERATION_KEY: method},
    )


def _dump(model: Any) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    meta = data.get("_meta")
    if isinstance(meta, Mapping):  # pincer's own keys are pincer's to set
        data["_meta"] = {k: v for k, v in meta.items() if not str(k).startswith(PINCER_META_PREFIX)}
    return data


def _served(server: str, data: dict[str, Any], key: str) -> dict[str, Any] | None:
    served = namespaced_uri(server, str(data[key]))
    return None if served is None else {**data, key: served}


def listed_resource(server: str, resource: types.Resource) -> dict[str, Any] | None:
    """A ``resources/list`` entry as the gateway lists it (None: its URI cannot be served)."""
    return _served(server, _dump(resource), "uri")


def listed_template(server: str, template: types.ResourceTemplate) -> dict[str, Any] | None:
    return _served(server, _dump(template), "uriTemplate")


def listed_prompt(server: str, prompt: types.Prompt) -> dict[str, Any]:
    data = _dump(prompt)
    data["name"] = tool_name(server, prompt.name)
    return data


def resource_output(server: str, result: types.ReadResourceResult) -> ToolOutput:
    """A ``resources/read`` result as the chain carries it: each content an embedded resource
    block (so it is scanned and limited like a tool's), its URI the one the gateway serves."""
    blocks = tuple(
        namespaced_block(server, {"type": "resource", "resource": _dump(content)}) for content in result.contents
    )
    return ToolOutput(value="\n".join(_summary(block) for block in blocks), content=blocks)


def _summary(block: Mapping[str, Any]) -> str:
    resource = block.get("resource")
    if isinstance(resource, Mapping) and isinstance(resource.get("text"), str):
        return f"[resource {resource.get('uri', '?')}, {resource.get('mimeType', '?')}, {len(resource['text'])} characters]"
    return describe_block(block)


def prompt_output(server: str, result: types.GetPromptResult) -> ToolOutput:
    """A ``prompts/get`` result as the chain carries it: ``value`` is the result (description and
    messages, their resource URIs served ones), scanned and limited whole."""
    data = _dump(result)
    messages = []
    for message in data.get("messages", []):
        content = message.get("content")
        if isinstance(content, Mapping):
            message = {**message, "content": namespaced_block(server, content)}
        messages.append(message)
    data["messages"] = messages
    data.pop("resultType", None)
    return ToolOutput(value=data)


def operation_args(method: str, args: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    """The URI (resources/read) or the prompt name and arguments (prompts/get) of a validated call."""
    if method == RESOURCES_READ:
        return str(args["uri"]), {}
    if method == PROMPTS_GET:
        arguments = args.get("arguments") or {}
        return str(args["name"]), {str(k): str(v) for k, v in arguments.items()}
    raise ArgumentsInvalid(f"unknown MCP operation {method!r}")
