"""An MCP server on the SDK's MCPServer, which speaks the 2026-07-28 protocol: tools that ask the
client for input, one that reports progress with structured content under an output schema, one
that answers with its own request id, one that sleeps. stdio; ``--http PORT`` serves streamable HTTP on
127.0.0.1:PORT (``--json`` with JSON answers instead of SSE streams)."""

import sys
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


@app.tool()
async def sleep(seconds: float, marker: str = "") -> str:
    """Sleep, then answer; ``marker``: a file created when the call arrives."""
    import anyio

    if marker:
        open(marker, "w").close()  # a test's signal that the call arrived
    await anyio.sleep(seconds)
    return "slept"


@app.tool()
async def request_id(ctx: Context) -> str:
    """The JSON-RPC id of this call."""
    return str(ctx.request_id)


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        app.run("streamable-http", host="127.0.0.1", port=port, json_response="--json" in sys.argv)
    else:
        app.run()
