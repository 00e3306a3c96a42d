"""The acts on people and their tokens, one function each, whatever path asks: the CLI
(``pincer people``), REST (``/api/v1/people``) and the dashboard (``/ui/people``, ``/ui/tokens``)
call these, so each change is made and recorded one way (docs/acts.md: kind ``person``). A
person's own value of a per-person secret is set and removed here too, by ``pincer secrets set
NAME --person WHO`` (and ``pincer auth setup``, ``pincer secrets rm``) and by ``/ui/credentials``
(kind ``secret``: the record names the secret and the person, never the value).

Who may ask is each path's question (the CLI is the owner; REST and the dashboard ask the
roles, gateway/access.py); what may never happen is the store's (store/people.py: no token with a
role its person does not hold, no removing or demoting the last admin). A record names a token by
its id, never its value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from pincer.core.acts import ActKind, Actor
from pincer.core.errors import UsageError
from pincer.policy.roles import Roles
from pincer.store.acts import act_entry
from pincer.store.audit import AuditLog
from pincer.store.people import NewToken, PeopleStore, Person, PersonToken

if TYPE_CHECKING:
    from pincer.secrets.store import SecretStore

__all__ = ["add_person", "set_person_roles", "remove_person", "make_token", "revoke_token", "set_own_credential",
           "remove_own_credential", "record_own_credential", "require_per_person"]  # fmt: skip


async def _record(audit: AuditLog, actor: Actor, *, subject: str, outcome: str, reason: str, args: dict[str, object]) -> None:
    entry = act_entry(ActKind.PERSON, actor=actor, subject=subject, outcome=outcome, reason=reason, args=args)
    await audit.append(entry, gather=False)


async def add_person(
    people: PeopleStore, audit: AuditLog, *, actor: Actor, name: str, roles: Roles, email: str | None, now: float
) -> Person:
    person = await people.add(name, roles=roles, email=email, by=str(actor), now=now)
    await _record(audit, actor, subject=name, outcome="added", args={"roles": roles.written()},
                  reason=f"person {name!r} added with roles {', '.join(roles.written())}")  # fmt: skip
    return person


async def set_person_roles(people: PeopleStore, audit: AuditLog, *, actor: Actor, name: str, roles: Roles) -> None:
    await people.set_roles(name, roles)
    await _record(audit, actor, subject=name, outcome="roles-set", args={"roles": roles.written()},
                  reason=f"roles of {name!r} set to {', '.join(roles.written())}")  # fmt: skip


async def remove_person(
    people: PeopleStore, audit: AuditLog, *, actor: Actor, name: str, forget_credentials: Callable[[str], int]
) -> tuple[int, int]:
    """Remove a person, their tokens and their values of per-person secrets (``forget_credentials``:
    a person added later under the same name must not be handed the credentials of the one
    removed); how many tokens and credentials went with them."""
    tokens = await people.remove(name)
    credentials = forget_credentials(name)
    await _record(audit, actor, subject=name, outcome="removed", args={"tokens": tokens, "credentials": credentials},
                  reason=f"person {name!r} removed with {tokens} token(s) and {credentials} credential(s)")  # fmt: skip
    return tokens, credentials


async def make_token(
    people: PeopleStore, audit: AuditLog, *, actor: Actor, person: str, now: float, expires_at: float | None,
    session: str | None, roles: Roles | None,
) -> NewToken:
    """A token of ``person``'s: its value is in the answer only, never in the record."""
    made = await people.new_token(person, now=now, expires_at=expires_at, session=session, roles=roles)
    args: dict[str, object] = {"token_id": made.token.id, "expires_at": expires_at, "session": session,
            "roles": None if roles is None else roles.written()}  # fmt: skip
    await _record(audit, actor, subject=person, outcome="token-created", args=args,
                  reason=f"a token {made.token.id} for {person!r} made")  # fmt: skip
    return made


async def revoke_token(
    people: PeopleStore, audit: AuditLog, *, actor: Actor, token_id: str, now: float, of: str | None = None
) -> PersonToken:
    """Revoke a token; ``of``: only if it is that person's (another's is answered as no token at all)."""
    held = await people.token(token_id)
    if held is None or (of is not None and held.person != of):
        raise UsageError(f"no live token {token_id[:40]!r}", hint="`pincer people tokens` lists them with their ids")
    await people.revoke(token_id, now=now)
    await _record(audit, actor, subject=held.person, outcome="token-revoked", args={"token_id": token_id},
                  reason=f"token {token_id} of {held.person!r} revoked")  # fmt: skip
    return held


def require_per_person(name: str, per_person: Collection[str]) -> None:
    """UsageError unless ``name`` is a secret config.toml declares per person: a person's value of
    any other name would never be read (or, worse, be taken for the shared one)."""
    from pincer.secrets.store import validate_name

    validate_name(name)
    if name not in per_person:
        raise UsageError(f"secret {name!r} is not per person (not in [secrets] per_person): every call shares its one value",
                         hint=f'add "{name}" to [secrets] per_person in config.toml for each person to hold their own')  # fmt: skip


async def set_own_credential(
    people: PeopleStore, audit: AuditLog, secrets: SecretStore, *, actor: Actor, person: str, name: str, value: str,
    per_person: Collection[str], what: str = "",
) -> str:  # fmt: skip
    """``person``'s own value of the per-person secret ``name``: only for a person of the store (a
    value kept for no one would be injected for whoever is given that name later); "set" or
    "replaced". The record names the secret and the person, never the value."""
    require_per_person(name, per_person)
    if await people.get(person) is None:
        raise UsageError(f"no person named {person!r}", hint=f"add them first: `pincer people add {person} --role viewer`")
    had = any(i.name == name for i in secrets.person_names(person))
    secrets.set_for(person, name, value)
    outcome = "replaced" if had else "set"
    await record_own_credential(audit, actor=actor, person=person, name=name, outcome=outcome, what=what)
    return outcome


async def record_own_credential(audit: AuditLog, *, actor: Actor, person: str, name: str, outcome: str,
                                what: str = "") -> None:  # fmt: skip
    """The record of ``person``'s value of ``name`` set or replaced (by a paste, or by their own
    OAuth login on the dashboard): the secret and the person, never the value."""
    entry = act_entry(ActKind.SECRET, actor=actor, subject=name, outcome=outcome, args={"person": person},
                      reason=f"{person}'s value of secret {name} {outcome}{what}")  # fmt: skip
    await audit.append(entry, gather=False)


async def remove_own_credential(audit: AuditLog, secrets: SecretStore, *, actor: Actor, person: str, name: str) -> None:
    """Remove ``person``'s own value of ``name`` (SecretError when they have none)."""
    secrets.delete_for(person, name)
    entry = act_entry(ActKind.SECRET, actor=actor, subject=name, outcome="removed", args={"person": person},
                      reason=f"{person}'s value of secret {name} removed")  # fmt: skip
    await audit.append(entry, gather=False)
