"""Who may answer an upstream task's questions on one pincer call (``upstream_tasks.py`` asks).

The same rule as pincer's own elicitations: only a person's or a main session's client is asked
(an agent must not answer for the person it works for), and only a client that can be asked in
the middle of the call (MCP 2025-11-25 with ``elicitation``; a 2026-07-28 call cannot be, as its
round would run the tool again and start a second upstream task). The question is leak-scanned
on its way to the client as any output is; the answer on its way to the untrusted server too, and
an answer holding a secret is refused, never sent redacted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pincer.core.errors import ToolError
from pincer.core.values import HostContext
from pincer.runtimes.mcp.upstream_tasks import PersonAsker
from pincer.safety.scanner import LeakScanner

__all__ = ["asker_for"]


def asker_for(host: HostContext, scanner: LeakScanner) -> PersonAsker:
    """The asker for the call ``host`` describes; ``scanner``: the leak scanner of the chain."""
    client: Any = host.client  # the gateway's MCP channel, when an MCP client made the call
    if client is None:
        return PersonAsker(why_not="no person can be asked on this call (no MCP client made it)")
    if not host.speaks_for_person:
        return PersonAsker(
            why_not=f"session {host.session!r} is not a main session, and an agent does not answer for a person",
        )
    if not getattr(client, "can_ask", False):
        return PersonAsker(
            why_not="the calling client cannot be asked mid-call (an MCP 2025-11-25 client with elicitation can)",
        )
    injected = tuple(host.secrets.injected) if host.secrets is not None else ()
    scan = scanner.with_values(injected) if injected else scanner

    async def ask(message: str, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        shown, _ = scan.scan(message)
        reply = await client.elicit(str(shown), schema, key="upstream-task-question")
        _, found = scan.scan(reply)
        if found:
            raise ToolError(
                f"the answer to {host.tool}'s upstream question looks like a secret ({found} finding(s)); "
                "it is not sent to the server",
                hint="store it with `pincer secrets set` and give it to the server with `pincer mcp add --env`",
            )
        return dict(reply) if isinstance(reply, Mapping) else {}

    return PersonAsker(ask=ask)
