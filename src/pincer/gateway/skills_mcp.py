"""Skills over MCP: prompts, ``skill://`` resources and the skills extension.

- Who sees what is one rule (``SkillLibrary.invocable`` and ``skills_visible``): a session whose
  policy withholds the ``skill`` tool sees no skill here at all; prompts are what a person picks
  (``user-invocable: false`` keeps a skill out); resources and the extension hand a skill to the
  client's model (``disable-model-invocation: true`` keeps it out).
- Every eligible, user-invocable skill is a **prompt**: ``prompts/list`` names it with its
  parameters as arguments (a skill without parameters takes one optional ``arguments`` text),
  ``prompts/get`` renders it (arguments are validated and coerced like ``--param``).
- Every eligible skill's files are **resources** at ``skill://NAME/PATH`` (``resources/list``,
  ``resources/read``; text as text, other files as base64 blobs).
- The **skills extension** (``io.modelcontextprotocol/skills``, SEP-2640), announced in the
  server's capabilities: ``skills/list`` gives each skill's ``skill://NAME/SKILL.md`` URI, its
  frontmatter and every file with its ``sha256:`` digest and size, within the extension's
  per-skill limits (512 files, 16 MiB); ``skills/get`` one of them by URI. Skills whose name or
  description break the Agent Skills rules are left out of the extension (clients validate
  them strictly) but stay prompts and resources.
- When skills change, clients hear ``prompts/list_changed`` and ``resources/list_changed``
  (handshake era) or the matching ``subscriptions/listen`` events (2026-07-28).

Other extensions' prompts and resources (the conformance fixtures) are kept: this extension
wraps the handlers already installed, so install it last.
"""

from __future__ import annotations

import base64
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import BaseModel

from pincer.core.errors import PincerError
from pincer.gateway.mcp_server import McpGateway, complete
from pincer.policy.visibility import skills_visible
from pincer.skills.agentskills import MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, is_spec_name
from pincer.skills.files import MAX_SKILL_BYTES, MAX_SKILL_FILES, is_text, list_files, read_file
from pincer.skills.model import Skill
from pincer.skills.remote import SKILLS_EXTENSION, skill_uri

logger = logging.getLogger(__name__)

__all__ = ["SkillsMcpExtension", "SKILLS_PAGE_SIZE"]

SKILLS_PAGE_SIZE = 100
_FREE_TEXT = "arguments"


class ListSkillsParams(types.PaginatedRequestParams):
    """``skills/list``."""


class GetSkillParams(types.RequestParams):
    """``skills/get``."""

    uri: str


def _plain(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dict(result) if isinstance(result, Mapping) else {}


def _parse_skill_uri(uri: str) -> tuple[str, str] | None:
    parts = urlsplit(uri)
    if parts.scheme != "skill" or not parts.netloc:
        return None
    path = "/".join(unquote(p) for p in parts.path.split("/") if p)
    return unquote(parts.netloc), path


class SkillsMcpExtension:
    """Installs the skill handlers on a gateway's MCP server (``McpGateway(extensions=...)``)."""

    def __init__(self, library: Any) -> None:
        self.library = library
        self._gateways: list[McpGateway] = []
        self._previous: dict[str, Any] = {}
        self._unsubscribe = library.subscribe(self._changed)

    def install(self, server: Server[Any], gateway: McpGateway) -> None:
        self._gateways.append(gateway)
        for method in ("prompts/list", "prompts/get", "resources/list", "resources/read", "resources/templates/list"):
            entry = server.get_request_handler(method)
            if entry is not None:
                self._previous[method] = entry.handler
        def bound(handler: Any) -> Any:
            return functools.partial(handler, gateway)

        server.add_request_handler("prompts/list", types.PaginatedRequestParams, bound(self._list_prompts))
        server.add_request_handler("prompts/get", types.GetPromptRequestParams, bound(self._get_prompt))
        server.add_request_handler("resources/list", types.PaginatedRequestParams, bound(self._list_resources))
        server.add_request_handler("resources/read", types.ReadResourceRequestParams, bound(self._read_resource))
        if "resources/templates/list" not in self._previous:
            server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, self._list_templates)
        server.add_request_handler("skills/list", ListSkillsParams, bound(self._list_skills))
        server.add_request_handler("skills/get", GetSkillParams, bound(self._get_skill))
        server.extensions[SKILLS_EXTENSION] = {"maxFilesPerSkill": MAX_SKILL_FILES, "maxSkillBytes": MAX_SKILL_BYTES}

    def _sees_skills(self, gateway: McpGateway, ctx: Any) -> bool:
        """The one visibility rule: a session sees skills (as prompts, resources or extension
        entries) exactly when its session policy lets it see the ``skill`` tool."""
        session = gateway.session_of(ctx)
        return skills_visible(gateway.services.config().session(session.name))

    def _prompted(self, gateway: McpGateway, ctx: Any) -> list[Skill]:
        """Skills a person may pick as a prompt: user-invocable ones, for sessions that see skills."""
        return self.library.user_invocable() if self._sees_skills(gateway, ctx) else []

    def _readable(self, gateway: McpGateway, ctx: Any) -> list[Skill]:
        """Skills whose files go to a client's model (resources, the skills extension):
        model-invocable ones (``disable-model-invocation`` keeps a skill out), for sessions that
        see skills."""
        return self.library.offered() if self._sees_skills(gateway, ctx) else []

    def _changed(self) -> None:
        for gateway in self._gateways:
            gateway.schedule_notification("prompts")
            gateway.schedule_notification("resources")

    async def _previous_result(self, method: str, ctx: Any, params: Any) -> dict[str, Any]:
        handler = self._previous.get(method)
        if handler is None:
            return {}
        return _plain(await handler(ctx, params))

    # -- prompts -------------------------------------------------------------------------------

    @staticmethod
    def _prompt(skill: Skill) -> dict[str, Any]:
        arguments = [
            {"name": p.name, "description": p.description or f"{p.type.value} parameter", "required": p.required and p.default is None}
            for p in skill.parameters
        ]
        if not arguments:
            arguments = [{"name": _FREE_TEXT, "description": skill.argument_hint or "what to do (free text)", "required": False}]
        prompt: dict[str, Any] = {"name": skill.name, "description": skill.description, "arguments": arguments}
        prompt["_meta"] = {"pincer/skill": {"path": str(skill.path), "dialect": skill.dialect.value, "trust": skill.trust.value}}
        return prompt

    async def _list_prompts(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        earlier = await self._previous_result("prompts/list", ctx, params)
        prompts = list(earlier.get("prompts", []))
        taken = {p.get("name") for p in prompts if isinstance(p, Mapping)}
        prompts += [self._prompt(s) for s in self._prompted(gateway, ctx) if s.name not in taken]
        return complete(ctx, {"prompts": prompts})

    async def _get_prompt(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        name = params.name
        skill = next((s for s in self._prompted(gateway, ctx) if s.name == name), None)
        if skill is None:
            if "prompts/get" in self._previous:
                return _plain(await self._previous["prompts/get"](ctx, params))
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}", data={"name": name})
        given = dict(params.arguments or {})
        free = given.pop(_FREE_TEXT, None) if not skill.parameters else None
        try:
            rendered = self.library.render(name, given, arguments=free)
        except PincerError as exc:
            raise MCPError(INVALID_PARAMS, exc.message, data=exc.to_dict()) from None
        message = {"role": "user", "content": {"type": "text", "text": rendered.text}}
        return complete(ctx, {"description": skill.description, "messages": [message]})

    # -- resources -----------------------------------------------------------------------------

    async def _list_resources(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        earlier = await self._previous_result("resources/list", ctx, params)
        resources = list(earlier.get("resources", []))
        for skill in self._readable(gateway, ctx):
            for item in list_files(skill).files:
                resources.append(
                    {
                        "uri": skill_uri(skill.name, item.path),
                        "name": f"{skill.name}/{item.path}",
                        "description": skill.description if item.path == "SKILL.md" else f"a file of skill {skill.name}",
                        "mimeType": item.mime_type,
                        "size": item.size,
                    }
                )
        return complete(ctx, {"resources": resources})

    async def _list_templates(self, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        return complete(ctx, {"resourceTemplates": []})

    async def _read_resource(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        uri = str(params.uri)
        parsed = _parse_skill_uri(uri)
        if parsed is None:
            if "resources/read" in self._previous:
                return _plain(await self._previous["resources/read"](ctx, params))
            raise MCPError(INVALID_PARAMS, "Resource not found", data={"uri": uri})
        name, path = parsed
        skill = next((s for s in self._readable(gateway, ctx) if s.name == name), None)
        if skill is None:
            raise MCPError(INVALID_PARAMS, f"Resource not found: no skill {name!r} is served", data={"uri": uri})
        try:
            data = read_file(skill, path)
        except PincerError as exc:
            raise MCPError(INVALID_PARAMS, f"Resource not found: {exc.message}", data={"uri": uri}) from None
        from pincer.skills.files import mime_type

        kind = mime_type(path)
        if is_text(path):
            try:
                return complete(ctx, {"contents": [{"uri": uri, "mimeType": kind, "text": data.decode("utf-8")}]})
            except UnicodeDecodeError:
                pass
        blob = base64.b64encode(data).decode("ascii")
        return complete(ctx, {"contents": [{"uri": uri, "mimeType": kind, "blob": blob}]})

    # -- the skills extension ------------------------------------------------------------------

    @staticmethod
    def _entry(skill: Skill) -> dict[str, Any] | None:
        """The SEP-2640 entry, or None when the skill cannot be one (Agent Skills rules)."""
        if not is_spec_name(skill.name):
            return None
        if not skill.description.strip() or len(skill.description) > MAX_DESCRIPTION_CHARS:
            return None
        frontmatter = dict(skill.frontmatter.items())
        frontmatter["name"] = skill.name
        frontmatter["description"] = skill.description
        checks: tuple[tuple[str, Callable[[object], bool]], ...] = (
            ("license", lambda v: isinstance(v, str)),
            ("compatibility", lambda v: isinstance(v, str) and 1 <= len(v) <= MAX_COMPATIBILITY_CHARS),
            ("metadata", lambda v: isinstance(v, dict)),
            ("allowed-tools", lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v))),
        )
        for key, check in checks:
            if key in frontmatter and not check(frontmatter[key]):
                del frontmatter[key]
        listing = list_files(skill)
        resources = [{"uri": skill_uri(skill.name, f.path), "digest": f.digest, "size": f.size} for f in listing.files]
        if not any(f.path == "SKILL.md" for f in listing.files):
            return None
        entry: dict[str, Any] = {"uri": skill_uri(skill.name), "frontmatter": frontmatter, "resources": resources}
        if listing.truncated:
            entry["_meta"] = {"pincer/truncated": True}
        return entry

    def _entries(self, skills: list[Skill]) -> list[dict[str, Any]]:
        entries = [self._entry(s) for s in skills]
        return sorted((e for e in entries if e is not None), key=lambda e: e["uri"])

    async def _list_skills(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        entries = self._entries(self._readable(gateway, ctx))
        cursor = getattr(params, "cursor", None)
        start = 0
        if cursor:
            try:
                start = int(cursor)
            except ValueError:
                raise MCPError(INVALID_PARAMS, f"invalid cursor {cursor!r}") from None
        page = entries[start : start + SKILLS_PAGE_SIZE]
        result: dict[str, Any] = {"skills": page}
        if start + SKILLS_PAGE_SIZE < len(entries):
            result["nextCursor"] = str(start + SKILLS_PAGE_SIZE)
        return complete(ctx, result)

    async def _get_skill(self, gateway: McpGateway, ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
        uri = str(params.uri)
        parsed = _parse_skill_uri(uri)
        skill = next((s for s in self._readable(gateway, ctx) if parsed and s.name == parsed[0]), None)
        entry = self._entry(skill) if skill is not None and parsed and parsed[1] == "SKILL.md" else None
        if entry is None:
            raise MCPError(INVALID_PARAMS, f"Unknown skill URI: {uri}", data={"uri": uri})
        return complete(ctx, {"skill": entry})
