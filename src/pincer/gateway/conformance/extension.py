"""The conformance suite's prompts, resources, completion and logging fixtures.

pincer's registry holds tools only; these handlers are installed on the gateway's MCP server
when the fixture bundle is enabled, and nowhere else.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pincer.gateway.conformance.tools import TEST_IMAGE_BASE64
from pincer.gateway.mcp_server import McpGateway, complete

logger = logging.getLogger(__name__)

__all__ = ["FixtureExtension", "DYNAMIC_PROMPT"]

DYNAMIC_PROMPT = "test_dynamic_prompt"
_TEMPLATE = re.compile(r"^test://template/(?P<id>[^/]+)/data$")


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _user(content: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": dict(content)}


_PROMPTS: dict[str, dict[str, Any]] = {
    "test_simple_prompt": {
        "name": "test_simple_prompt",
        "title": "Simple Test Prompt",
        "description": "A simple prompt without arguments",
    },
    "test_prompt_with_arguments": {
        "name": "test_prompt_with_arguments",
        "title": "Prompt With Arguments",
        "description": "A prompt with required arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    "test_prompt_with_embedded_resource": {
        "name": "test_prompt_with_embedded_resource",
        "title": "Prompt With Embedded Resource",
        "description": "A prompt that includes an embedded resource",
        "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
    },
    "test_prompt_with_image": {
        "name": "test_prompt_with_image",
        "title": "Prompt With Image",
        "description": "A prompt that includes image content",
    },
    "test_input_required_result_prompt": {
        "name": "test_input_required_result_prompt",
        "description": "A prompt that asks the user for context first (InputRequiredResult)",
    },
}
_RESOURCES: dict[str, dict[str, Any]] = {
    "test://static-text": {
        "uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
        "description": "A static text resource for testing", "mimeType": "text/plain",
    },
    "test://static-binary": {
        "uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
        "description": "A static binary resource (image) for testing", "mimeType": "image/png",
    },
    "test://watched-resource": {
        "uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
        "description": "A resource that can be subscribed to", "mimeType": "text/plain",
    },
}  # fmt: skip
_TEMPLATES = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template",
        "title": "Resource Template",
        "description": "A resource template with parameter substitution",
        "mimeType": "application/json",
    }
]


class FixtureExtension:
    """Prompts, resources, completion, logging level and subscriptions for the conformance suite."""

    def __init__(self) -> None:
        self.subscriptions: set[str] = set()
        self.log_level = "info"
        self._dynamic_prompt = False
        self._gateways: list[McpGateway] = []

    def install(self, server: Server[Any], gateway: McpGateway) -> None:
        self._gateways.append(gateway)
        server.add_request_handler("prompts/list", types.PaginatedRequestParams, self._list_prompts)
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, self._get_prompt)
        server.add_request_handler("resources/list", types.PaginatedRequestParams, self._list_resources)
        server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, self._list_templates)
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, self._read_resource)
        server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, self._subscribe)
        server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe)
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_level)
        server.add_request_handler("completion/complete", types.CompleteRequestParams, self._complete)

    def toggle_prompt(self) -> bool:
        """Add or remove the dynamic prompt; tells every gateway's clients. Returns presence."""
        self._dynamic_prompt = not self._dynamic_prompt
        for gateway in self._gateways:
            gateway.schedule_notification("prompts")
        return self._dynamic_prompt

    # -- prompts -----------------------------------------------------------------------------

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        prompts = list(_PROMPTS.values())
        if self._dynamic_prompt:
            prompts.append({"name": DYNAMIC_PROMPT, "description": "Added by test_trigger_prompt_change"})
        return complete(ctx, {"prompts": prompts})

    async def _get_prompt(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        args = params.arguments or {}
        name = params.name
        if name == "test_simple_prompt":
            messages = [_user(_text("This is a simple prompt for testing."))]
        elif name == "test_prompt_with_arguments":
            messages = [_user(_text(f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"))]
        elif name == "test_prompt_with_embedded_resource":
            resource = {
                "uri": args.get("resourceUri", ""),
                "mimeType": "text/plain",
                "text": "Embedded resource content for testing.",
            }
            messages = [
                _user({"type": "resource", "resource": resource}),
                _user(_text("Please process the embedded resource above.")),
            ]
        elif name == "test_prompt_with_image":
            image = {"type": "image", "data": TEST_IMAGE_BASE64, "mimeType": "image/png"}
            messages = [_user(image), _user(_text("Please analyze the image above."))]
        elif name == "test_input_required_result_prompt":
            answers = ctx.params.get("inputResponses") if isinstance(ctx.params, Mapping) else None
            answer = answers.get("user_context") if isinstance(answers, Mapping) else None
            context = answer.get("content", {}).get("context") if isinstance(answer, Mapping) else None
            if not isinstance(context, str):
                request = {
                    "method": "elicitation/create",
                    "params": {
                        "message": "What context should the prompt use?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"context": {"type": "string"}},
                            "required": ["context"],
                        },
                    },
                }
                return {"resultType": "input_required", "inputRequests": {"user_context": request}}
            messages = [_user(_text(f"Use this context: {context}"))]
        elif name == DYNAMIC_PROMPT and self._dynamic_prompt:
            messages = [_user(_text("A dynamic prompt."))]
        else:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", data={"name": name})
        return complete(ctx, {"description": _PROMPTS.get(name, {}).get("description", name), "messages": messages})

    # -- resources ---------------------------------------------------------------------------

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return complete(ctx, {"resources": list(_RESOURCES.values())})

    async def _list_templates(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return complete(ctx, {"resourceTemplates": list(_TEMPLATES)})

    async def _read_resource(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        uri = str(params.uri)
        if uri == "test://static-text":
            contents = [
                {"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."}
            ]
        elif uri == "test://static-binary":
            contents = [{"uri": uri, "mimeType": "image/png", "blob": TEST_IMAGE_BASE64}]
        elif uri == "test://watched-resource":
            contents = [{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}]
        elif match := _TEMPLATE.match(uri):
            ident = match.group("id")
            text = json.dumps({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
            contents = [{"uri": uri, "mimeType": "application/json", "text": text}]
        else:
            raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
        return complete(ctx, {"contents": contents})

    async def _subscribe(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        self.subscriptions.add(str(params.uri))
        return {}

    async def _unsubscribe(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        self.subscriptions.discard(str(params.uri))
        return {}

    # -- logging, completion -----------------------------------------------------------------

    async def _set_level(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        self.log_level = str(params.level)
        return {}

    async def _complete(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return complete(ctx, {"completion": {"values": [], "total": 0, "hasMore": False}})
