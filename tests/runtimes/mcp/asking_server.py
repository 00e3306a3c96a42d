"""An upstream MCP server (the official SDK's ``MCPServer``, stdio, in the era its client picks)
whose tools send a plain ``elicitation/create`` in the middle of a ``tools/call`` (no task), for
the tests of upstream questions (test_upstream_questions.py).

Tools: ``ask`` (one question, answers "got <the ElicitResult as JSON>"), ``ask_leak`` (a question
holding a token's shape, ``LEAKED``), ``ask_leak_schema`` (its form holding it), ``ask_flood`` (20 questions at once), ``ask_big`` (a
100,000-character question), ``ask_big_schema`` (a form of over 16,000 characters of JSON),
``ask_again`` (40 questions one after another), ``ask_url`` (a URL-mode question),
``capabilities`` (the client's capabilities as the server got them), ``ask_resolved`` (one
question through the SDK's ``Resolve``/``Elicit``: a mid-call request on the handshake era, an
``InputRequiredResult`` round when the client speaks 2026-07-28).
``--log FILE`` appends one JSON line per answer the server got (tool, outcome).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context, Elicit, Resolve
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

LOG = sys.argv[sys.argv.index("--log") + 1] if "--log" in sys.argv else None
LEAKED = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"  # a GitHub token's shape
NAME_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"name": {"type": "string"}}}

server = MCPServer("asking")


def log(tool: str, outcome: Any) -> None:
    if LOG:
        with open(LOG, "a") as out:
            out.write(json.dumps({"tool": tool, "outcome": outcome}) + "\n")


async def ask(ctx: Context, tool: str, message: str, schema: dict[str, Any] = NAME_SCHEMA) -> str:
    try:
        result = await ctx.request_context.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    except MCPError as exc:
        log(tool, {"error": exc.message})
        raise
    answer = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    log(tool, answer)
    return "got " + json.dumps(answer, sort_keys=True)


@server.tool(name="ask")
async def ask_name(ctx: Context) -> str:
    return await ask(ctx, "ask", "Your name?")


@server.tool(name="ask_leak")
async def ask_leak(ctx: Context) -> str:
    return await ask(ctx, "ask_leak", f"the server's token is {LEAKED}; your name?")


@server.tool(name="ask_leak_schema")
async def ask_leak_schema(ctx: Context) -> str:
    schema = {"type": "object", "properties": {"name": {"type": "string", "description": f"token {LEAKED}"}}}
    return await ask(ctx, "ask_leak_schema", "Your name?", schema)


@server.tool(name="ask_flood")
async def ask_flood(ctx: Context) -> str:
    async with anyio.create_task_group() as group:
        for number in range(20):
            group.start_soon(ask, ctx, "ask_flood", f"question {number}?")
    return "all answered"


@server.tool(name="ask_big")
async def ask_big(ctx: Context) -> str:
    return await ask(ctx, "ask_big", "x" * 100_000)


@server.tool(name="ask_big_schema")
async def ask_big_schema(ctx: Context) -> str:
    properties = {f"field_{n}": {"type": "string", "description": "y" * 200} for n in range(100)}
    return await ask(ctx, "ask_big_schema", "Fill this in", {"type": "object", "properties": properties})


@server.tool(name="ask_again")
async def ask_again(ctx: Context) -> str:
    for number in range(40):
        await ask(ctx, "ask_again", f"question {number}?")
    return "asked 40"


@server.tool(name="ask_url")
async def ask_url(ctx: Context) -> str:
    try:
        result = await ctx.request_context.session.elicit_url(
            "Sign in", "https://example.com/login", "e-1", related_request_id=ctx.request_id
        )
    except MCPError as exc:
        log("ask_url", {"error": exc.message})
        raise
    return "got " + result.action


@server.tool(name="capabilities")
async def capabilities(ctx: Context) -> str:
    declared = ctx.request_context.session.client_capabilities
    return json.dumps(declared.model_dump(by_alias=True, mode="json", exclude_none=True) if declared else None)


class Name(BaseModel):
    name: str


def name_question() -> Elicit[Name]:
    return Elicit("Your name, please?", Name)


@server.tool(name="ask_resolved")
async def ask_resolved(name: Annotated[Name, Resolve(name_question)]) -> str:
    log("ask_resolved", {"name": name.name})
    return f"got {name.name}"


if __name__ == "__main__":
    server.run("stdio")
