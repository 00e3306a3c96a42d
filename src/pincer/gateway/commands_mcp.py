"""Commands over MCP: each ``/NAME`` a skill declares is a prompt named ``NAME``.

MCP clients show prompts as slash commands, so a skill's ``command: /review`` becomes the prompt
``review`` beside the skill's own prompt (``code-review``): the same arguments (the skill's
parameters, or one free-text ``arguments`` for a skill without any), the same rendering. A
command whose name is already a prompt (a skill named like it) is left to that prompt.

Install it after the skills extension: it wraps the prompt handlers already there.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from pincer.core.errors import PincerError
from pincer.gateway.mcp_server import McpGateway, complete
from pincer.gateway.skills_mcp import SkillsMcpExtension, _plain
from pincer.policy.visibility import skills_visible
from pincer.triggers.commands import command_table

__all__ = ["CommandPromptsExtension"]

_FREE_TEXT = "arguments"


class CommandPromptsExtension:
    def __init__(self, library: Any) -> None:
        self.library = library
        self._previous: dict[str, Any] = {}

    def _commands(self, gateway: McpGateway, ctx: Any, taken: set[str]) -> dict[str, Any]:
        # the one rule for skills (skills_mcp.py): a session that may not see the skill tool sees none
        if not skills_visible(gateway.services.config().session(gateway.session_of(ctx).name)):
            return {}
        table = command_table(self.library.user_invocable())
        return {name.lstrip("/"): skill for name, skill in table.items() if name.lstrip("/") not in taken}

    def install(self, server: Server[Any], gateway: McpGateway) -> None:
        for method in ("prompts/list", "prompts/get"):
            entry = server.get_request_handler(method)
            if entry is not None:
                self._previous[method] = entry.handler
        server.add_request_handler("prompts/list", types.PaginatedRequestParams, functools.partial(self._list_prompts, gateway))
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, functools.partial(self._get_prompt, gateway))

    async def _earlier(self, ctx: Any, params: Any) -> list[Any]:
        handler = self._previous.get("prompts/list")
        return list(_plain(await handler(ctx, params)).get("prompts", [])) if handler else []

    async def _list_prompts(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        prompts = await self._earlier(ctx, params)
        taken = {p.get("name") for p in prompts if isinstance(p, Mapping)}
        for name, skill in sorted(self._commands(gateway, ctx, {n for n in taken if isinstance(n, str)}).items()):
            prompt = SkillsMcpExtension._prompt(skill)
            prompt["name"] = name
            prompt["description"] = f"/{name}: {skill.description}"
            prompt["_meta"] = {**prompt.get("_meta", {}), "pincer/command": {"command": f"/{name}", "skill": skill.name}}
            prompts.append(prompt)
        return complete(ctx, {"prompts": prompts})

    async def _get_prompt(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        previous = self._previous.get("prompts/get")
        skill = self._commands(gateway, ctx, {s.name for s in self.library.user_invocable()}).get(params.name)
        if skill is None:
            if previous is not None:
                return _plain(await previous(ctx, params))
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}", data={"name": params.name})
        given = dict(params.arguments or {})
        free = given.pop(_FREE_TEXT, None) if not skill.parameters else None
        try:
            rendered = self.library.render(skill.name, given, arguments=free)
        except PincerError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, data=exc.to_dict()) from None
        message = {"role": "user", "content": {"type": "text", "text": rendered.text}}
        return complete(ctx, {"description": f"/{params.name}: {skill.description}", "messages": [message]})
