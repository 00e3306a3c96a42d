"""What the model is told for a build: the contract of ``submit_plan`` and ``submit_code``."""

from __future__ import annotations

from pincer.builder.code import CODE_SCHEMA, GUEST_MODULES
from pincer.builder.plan import PLAN_SCHEMA
from pincer.llm.messages import ToolDefinition

__all__ = ["SYSTEM", "SUBMIT_PLAN", "SUBMIT_CODE"]

SUBMIT_PLAN = ToolDefinition(
    name="submit_plan",
    description="Submit the tool's plan: name, description, input JSON Schema, output shape, the hosts it calls, "
    "the secrets it needs and where the host puts them, its effects.",
    parameters=PLAN_SCHEMA,
)
SUBMIT_CODE = ToolDefinition(
    name="submit_code",
    description="Submit the tool's Python source (written against pincer_guest), example calls with expected outputs, "
    "and HTTP fixtures that answer the tests' requests.",
    parameters=CODE_SCHEMA,
)

SYSTEM = f"""You build one tool for pincer, a runtime that runs tools in a WebAssembly sandbox.
Answer only through the tool calls: first submit_plan, then submit_code (again after each failure report).

The source is one Python module run by componentize-py's interpreter with stubbed WASI: no files, sockets,
processes or environment. It may import only: {", ".join(sorted(GUEST_MODULES))}. Write it like this:

    from pincer_guest import Tool, ToolFailed, http_request, tool  # Tool must be imported

    @tool(description="...", schema={{"type": "object", "properties": {{"q": {{"type": "string"}}}}, "required": ["q"]}})
    def run(params: dict) -> dict:
        resp = http_request("GET", "https://api.example.com/search?q=" + params["q"])
        if resp.status != 200:
            raise ToolFailed(f"the API answered {{resp.status}}")
        return {{"items": resp.json()["items"]}}

http_request(method, url, headers=None, body=None) reaches only the hosts of the plan, over https; the host
injects the credentials of the plan's secrets itself: never put a secret in the code, the URL or a header.
Tests are example calls: args and a JSON value the output must contain (or {{"error": true}}); fixtures
answer the tests' HTTP requests by method and URL.
"""
