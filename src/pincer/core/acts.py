"""Acts: what a person or an agent does that changes what pincer may do, and who did it.

A grant added or revoked, a changed MCP definition trusted, a tool, skill or server installed or
removed, an approval answered, a secret set, a hub key trusted, a skill approved, a policy
reloaded from config.toml: each is one *act*, and each act is one audit record, whichever path
it took (the CLI, REST, the dashboard, an MCP tool). docs/acts.md is the table of them.

Who did it is an :class:`Actor`, written into the record's ``caller`` as ``channel:principal``:

- ``cli:<user>``: the CLI, as the operating-system user it runs as (by uid, never ``$USER``);
- ``rest:<session>``, ``ui:<session>``: a REST or dashboard caller, by the session its token
  (or its sign-in's token) names;
- ``mcp-elicitation:<session>``: an MCP client that answered an elicitation;
- ``agent:<session>``, ``mcp:<session>``, ...: a tool call's caller (the call's own record
  names the approval that let it through);
- ``config:<host>``: a gateway applying an edited config.toml (the file does not say who
  edited it; the record says which gateway now runs under it).

The principal is a session name or a user name today; when pincer knows people, it is the
person, and the record keeps its shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pincer.core.effects import EffectKind

__all__ = ["Actor", "ActKind", "act_effect", "CANCELLED"]

# The outcome of a call that never ran to an end: its caller went away (cancelled, killed) or
# nobody answered its approval in time.
CANCELLED = "cancelled"


@dataclass(frozen=True, kw_only=True, slots=True)
class Actor:
    """Who did an act: the path it came by and the principal on that path."""

    channel: str
    principal: str
    # Set when the principal is a person (a personal access token's, or a sign-in's): the session
    # the person acts in. The record is filed under that session and names the person.
    session_name: str | None = None

    def __str__(self) -> str:
        return f"{self.channel}:{self.principal}"

    @property
    def person(self) -> str | None:
        return self.principal if self.session_name is not None else None

    @property
    def session(self) -> str:
        """The session a record of this actor's act is filed under: a session-bound channel's
        session (its principal unless a person acts in it), else the channel itself (``cli``, ``config``)."""
        if self.channel in _SESSIONLESS:
            return self.channel
        return self.session_name if self.session_name is not None else self.principal


_SESSIONLESS = frozenset({"cli", "config"})


class ActKind(StrEnum):
    """An act's audit ``kind``: what it changed."""

    GRANT = "grant"  # a grant added or revoked
    EXTENSION = "extension"  # tools, MCP servers, OpenAPI services, pinned definitions
    HUB = "hub"  # what the hub installed, updated, removed, rolled back, pinned
    SKILL = "skill"  # a skill approved (trusted, or its allowed-tools)
    APPROVAL = "approval"  # an approval answered
    SECRET = "secret"  # a secret set or removed
    SIGNER = "signer"  # a hub signing key trusted or forgotten
    TOKEN = "token"  # a gateway token made
    CONFIG = "config"  # a reloaded config.toml that changed policy
    PERSON = "person"  # a person added or removed, a personal access token made or revoked


_EFFECTS = {
    ActKind.GRANT: EffectKind.MODIFY_APPROVAL,
    ActKind.EXTENSION: EffectKind.MODIFY_EXTENSION,
    ActKind.HUB: EffectKind.MODIFY_EXTENSION,
    ActKind.SKILL: EffectKind.MODIFY_EXTENSION,
    ActKind.APPROVAL: EffectKind.MODIFY_APPROVAL,
    ActKind.SECRET: EffectKind.USE_SECRET,
    ActKind.SIGNER: EffectKind.MODIFY_EXTENSION,
    ActKind.TOKEN: EffectKind.MODIFY_APPROVAL,
    ActKind.CONFIG: EffectKind.MODIFY_APPROVAL,
    ActKind.PERSON: EffectKind.MODIFY_APPROVAL,
}


def act_effect(kind: ActKind) -> EffectKind:
    """The effect an act of ``kind`` has on what pincer may do (the record's ``effects``)."""
    return _EFFECTS[kind]
