"""An MCP server on the official SDK that says which key reached it: ``whoami`` answers with its
process id, the key it holds (stdio: the ``PERSON_KEY`` environment variable it was started with;
``--http PORT``: the ``X-Api-Key`` header of the request, served as streamable HTTP on
127.0.0.1:PORT) and the key's SHA-256, so a test can tell whose key it was even where pincer
redacts the key itself from the output. ``--die-with-key``: a careless server that, started with a
key, writes it to stderr and exits (without one it serves, so its tools can be listed)."""

import hashlib
import json
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("keyed")


@app.tool()
async def whoami(ctx: Context) -> str:
    """This process's id and the key this process or this request carries."""
    if "--http" in sys.argv:
        headers = ctx.headers or {}
        key = headers.get("x-api-key")
        session = headers.get("mcp-session-id")
    else:
        key = os.environ.get("PERSON_KEY")
        session = None
    digest = hashlib.sha256(key.encode()).hexdigest() if key else None
    return json.dumps({"pid": os.getpid(), "key": key, "key_sha256": digest, "session": session})


if __name__ == "__main__":
    if "--die-with-key" in sys.argv and os.environ.get("PERSON_KEY"):
        sys.stderr.write(f"fatal: cannot log in with key {os.environ['PERSON_KEY']}\n")
        sys.exit(1)
    if "--http" in sys.argv:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        app.run()
