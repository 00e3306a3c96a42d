"""spin: busy work on demand: count to n, loop forever, or emit log lines (a limits test tool)."""

from pincer_guest import Tool, log, tool  # noqa: F401


@tool(
    description=(
        "Count to n (default 1000) and return the sum. forever=true loops until the host stops it; "
        "logs=k emits k log lines of log_bytes bytes each first."
    ),
    schema={
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 0},
            "forever": {"type": "boolean"},
            "logs": {"type": "integer", "minimum": 0},
            "log_bytes": {"type": "integer", "minimum": 1},
        },
    },
)
def spin(params: dict) -> dict:
    line = "x" * int(params.get("log_bytes", 10))
    for i in range(int(params.get("logs", 0))):
        log("info", f"{i}:{line}")
    if params.get("forever"):
        i = 0
        while True:
            i += 1
    total = 0
    for i in range(int(params.get("n", 1000))):
        total += i
    return {"total": total}
