"""membomb: allocates memory until the host's limit stops it."""

from pincer_guest import Tool, tool  # noqa: F401


@tool(
    description="Allocate mb megabytes (default 1024) in 1 MB chunks and keep them.",
    schema={"type": "object", "properties": {"mb": {"type": "integer", "minimum": 1}}},
)
def membomb(params: dict) -> dict:
    chunks = []
    for _ in range(int(params.get("mb", 1024))):
        chunks.append(bytearray(1024 * 1024))
    return {"allocated_mb": len(chunks)}
