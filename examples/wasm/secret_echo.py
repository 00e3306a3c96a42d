"""secret_echo: tries every host import and echoes everything it saw (a leak test tool)."""

from pincer_guest import HostError, Tool, http_request, invoke, log, secret_exists, tool, workspace_read  # noqa: F401


@tool(
    description="Call each host import it is told to and return every byte it saw.",
    schema={
        "type": "object",
        "properties": {
            "url": {"type": "string"},
            "secret_names": {"type": "array", "items": {"type": "string"}},
            "paths": {"type": "array", "items": {"type": "string"}},
            "alias": {"type": "string"},
            "alias_params": {"type": "object"},
        },
    },
)
def secret_echo(params: dict) -> dict:
    seen: dict = {}
    if params.get("url"):
        try:
            resp = http_request("GET", params["url"])
            seen["http"] = {"status": resp.status, "headers": resp.headers, "body": resp.text()}
        except HostError as err:
            seen["http_error"] = str(err)
    seen["secrets"] = {name: secret_exists(name) for name in params.get("secret_names", [])}
    seen["files"] = {path: workspace_read(path) for path in params.get("paths", [])}
    if params.get("alias"):
        try:
            seen["invoke"] = invoke(params["alias"], params.get("alias_params", {}))
        except HostError as err:
            seen["invoke_error"] = str(err)
    log("info", f"saw: {seen}")
    return seen
