"""echo: returns its params unchanged; the smallest pincer WASM tool."""

from pincer_guest import Tool, tool  # noqa: F401  (Tool is the component's export)


@tool(
    description="Return the given params unchanged.",
    schema={"type": "object", "properties": {"message": {"type": "string"}}, "additionalProperties": True},
)
def echo(params: dict) -> dict:
    return params
