"""spin: loops; with {"forever": true} it never stops (fuel and the deadline stop it)."""

from pincer_guest import Tool, tool  # noqa: F401


@tool(
    description="Count to n (default 1000); with forever=true, loop until the host stops it.",
    schema={
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "forever": {"type": "boolean"}},
    },
)
def spin(params: dict) -> dict:
    if params.get("forever"):
        i = 0
        while True:
            i += 1
    total = 0
    for i in range(int(params.get("n", 1000))):
        total += i
    return {"total": total}
