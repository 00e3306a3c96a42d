"""A stdio MCP server on the SDK's MCPServer, which speaks the 2026-07-28 protocol: a tool that
asks the client for input (an ``InputRequiredResult`` on that protocol, an elicitation request
on the handshake one), and one that reports progress."""

from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

app = MCPServer("modern")


class Name(BaseModel):
    name: str


@app.tool()
async def greet(ctx: Context) -> str:
    """Ask for a name, then greet it."""
    answer = await ctx.elicit("Your name?", Name)
    return f"{answer.action}: {getattr(answer, 'data', None)}"


def ask_name() -> Elicit[Name]:
    return Elicit("Your name?", Name)


@app.tool()
async def greet_resolved(answer: Annotated[ElicitationResult[Name], Resolve(ask_name)]) -> str:
    """Ask for a name the framework's way (an InputRequiredResult on 2026-07-28), then greet it."""
    return f"{answer.action}: {getattr(answer, 'data', None)}"


@app.tool()
async def count(ctx: Context, steps: int = 3) -> dict[str, int]:
    """Report progress ``steps`` times; structured content with an output schema."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return {"steps": steps}


if __name__ == "__main__":
    app.run()
