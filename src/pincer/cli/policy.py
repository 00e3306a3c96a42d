"""``pincer policy show``: the grants, sessions and limits in force, and the defaults."""

from __future__ import annotations

from typing import Any

import typer

from pincer.cli.common import JsonOption, emit_json, open_pincer, run, stderr
from pincer.policy.session import SANDBOX_DEFAULT_ALLOW, SANDBOX_DEFAULT_DENY, TOOL_GROUPS

app = typer.Typer(help="Show the policy in force.", no_args_is_help=True)


@app.command("show")
def show(as_json: bool = JsonOption) -> None:
    """Print grants (config and allow-always), sessions, rate limits and the defaults."""

    async def body() -> dict[str, Any]:
        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            config = pincer.config
            return {
                "home": str(config.home),
                "workspace": str(config.workspace),
                "defaults": {
                    "grants": "effects limited to read_filesystem (or none) are allowed; anything else asks",
                    "unconfigured_session": "non-main, sandbox default lists",
                    "sandbox_allow": list(SANDBOX_DEFAULT_ALLOW),
                    "sandbox_deny": list(SANDBOX_DEFAULT_DENY),
                },
                "grants": [g.to_dict() for g in config.grants + await pincer.grants.all()],
                "sessions": {name: s.to_dict() for name, s in config.sessions.items()},
                "limits": {
                    pattern: {"calls_per_minute": lim.calls_per_minute, "calls_per_hour": lim.calls_per_hour}
                    for pattern, lim in config.limits
                },
                "groups": {name: list(members) for name, members in TOOL_GROUPS.items()},
                "approval_timeout_s": config.approval_timeout_s,
                "tool_timeout_s": config.tool_timeout_s,
                "max_output_bytes": config.max_output_bytes,
                "allow_private_network": config.allow_private_network,
            }

    policy = run(body, as_json=as_json)
    if as_json:
        emit_json(policy)
        return
    import json

    stderr.print_json(json.dumps(policy))
