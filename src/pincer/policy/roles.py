"""People's roles, and what each lets a person do: the one copy of the rule every path applies.

A role is written as a word, and an approver's may carry a scope after a colon::

    viewer                       reads the dashboard and the audit
    approver                     answers any approval
    approver:tool=github_*       answers the approvals of tools matching the glob
    approver:effect=network      answers approvals whose effects are all among the named ones
    approver:session=ops-*       answers the approvals of sessions matching the glob
    approver:tool=github_*,session=main
    operator                     grants, installs, trust, config reloads, secrets
    admin                        all of the above, and people and their roles

Within one scope a key given twice widens it (``tool=a,tool=b``: either); different keys narrow
it (``tool=github_*,session=main``: both). A person with several approver roles may answer what
any one of them allows. Roles never add up to more than what is written: an operator does not
answer approvals, an approver does not grant. Only ``admin`` holds everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase

from pincer.core.effects import EffectKind
from pincer.core.errors import UsageError

__all__ = ["Role", "RoleKind", "Roles", "parse_role", "parse_roles", "PersonAct"]

_ROLE_HINT = "write a role as viewer, operator, admin, approver or approver:tool=GLOB,effect=EFFECT,session=GLOB"
_SCOPE_KEYS = ("tool", "effect", "session")
_MAX_ROLE_CHARS = 512


class RoleKind(StrEnum):
    VIEWER = "viewer"
    APPROVER = "approver"
    OPERATOR = "operator"
    ADMIN = "admin"


class PersonAct(StrEnum):
    """What a role is asked for, beyond answering an approval (:meth:`Roles.may_answer`)."""

    READ = "read"  # the dashboard, the audit, the approvals listed
    OPERATE = "operate"  # grants, installs, builds, trust, config reloads, secrets
    MANAGE_PEOPLE = "manage_people"  # people, their roles and their tokens


_ACTS_OF = {
    RoleKind.VIEWER: frozenset({PersonAct.READ}),
    RoleKind.APPROVER: frozenset({PersonAct.READ}),
    RoleKind.OPERATOR: frozenset({PersonAct.READ, PersonAct.OPERATE}),
    RoleKind.ADMIN: frozenset(PersonAct),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Role:
    """One role; an approver's scope (each part empty: unrestricted on that key)."""

    kind: RoleKind
    tools: tuple[str, ...] = ()
    effects: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()

    def __str__(self) -> str:
        parts = [f"tool={t}" for t in self.tools] + [f"effect={e}" for e in self.effects]
        parts += [f"session={s}" for s in self.sessions]
        return self.kind.value + (":" + ",".join(parts) if parts else "")

    def answers(self, *, tool: str, effects: Iterable[str], session: str) -> bool:
        if self.kind is RoleKind.ADMIN:
            return True
        if self.kind is not RoleKind.APPROVER:
            return False
        if self.tools and not any(fnmatchcase(tool, glob) for glob in self.tools):
            return False
        if self.sessions and not any(fnmatchcase(session, glob) for glob in self.sessions):
            return False
        # An effect scope covers a call only when every effect of the call is in it: an approver
        # of network calls does not answer a call that also runs code.
        return not self.effects or set(effects) <= set(self.effects)

    def covers(self, other: Role) -> bool:
        """Whether holding this role holds ``other`` too (a token may carry only roles its person
        covers): admin covers all, every role reads (covers viewer), a role covers itself, and an
        approver covers a narrower approver (each scope key narrowed or kept)."""
        if self.kind is RoleKind.ADMIN or self == other or other.kind is RoleKind.VIEWER:
            return True
        if self.kind is not RoleKind.APPROVER or other.kind is not RoleKind.APPROVER:
            return False
        return (
            _narrower_globs(other.tools, self.tools)
            and _narrower_globs(other.sessions, self.sessions)
            and (not self.effects or (bool(other.effects) and set(other.effects) <= set(self.effects)))
        )


def _narrower_globs(inner: tuple[str, ...], outer: tuple[str, ...]) -> bool:
    """Whether every name ``inner`` matches, ``outer`` matches too. Conservative: an inner glob
    must be one of the outer ones, or a plain name an outer glob matches (glob inclusion in
    general is not decided here; ``a*`` is not taken as narrower than ``a?``)."""
    if not outer:
        return True
    if not inner:
        return False
    return all(glob in outer or (not set(glob) & set("*?[") and any(fnmatchcase(glob, o) for o in outer)) for glob in inner)


def parse_role(text: str) -> Role:
    """A role from its written form; a UsageError naming what is wrong."""
    if not isinstance(text, str) or not text.strip() or len(text) > _MAX_ROLE_CHARS:
        raise UsageError(f"not a role: {str(text)[:60]!r}", hint=_ROLE_HINT)
    word, colon, rest = text.strip().partition(":")
    try:
        kind = RoleKind(word.strip().lower())
    except ValueError:
        raise UsageError(f"unknown role {word.strip()[:40]!r}", hint=_ROLE_HINT) from None
    if not colon:
        return Role(kind=kind)
    if kind is not RoleKind.APPROVER:
        raise UsageError(f"role {kind.value!r} takes no scope (only approver does)", hint=_ROLE_HINT)
    found: dict[str, list[str]] = {key: [] for key in _SCOPE_KEYS}
    for part in rest.split(","):
        key, eq, value = part.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not eq or key not in found or not value or any(c.isspace() or c in ",:=" for c in value):
            raise UsageError(f"not a scope part of an approver: {part.strip()[:60]!r}", hint=_ROLE_HINT)
        if key == "effect" and value not in EffectKind.__members__.values():
            known = ", ".join(e.value for e in EffectKind)
            raise UsageError(f"unknown effect {value[:40]!r} in an approver's scope", hint=f"name one of {known}")
        if value not in found[key]:
            found[key].append(value)
    return Role(kind=kind, tools=tuple(found["tool"]), effects=tuple(found["effect"]), sessions=tuple(found["session"]))


def parse_roles(texts: Sequence[str]) -> Roles:
    return Roles(tuple(parse_role(t) for t in texts))


@dataclass(frozen=True, slots=True)
class Roles:
    """A person's roles, and the questions every path asks them."""

    roles: tuple[Role, ...] = ()

    def written(self) -> list[str]:
        return [str(r) for r in self.roles]

    def may(self, act: PersonAct) -> bool:
        return any(act in _ACTS_OF[r.kind] for r in self.roles)

    def answers_any(self) -> bool:
        """Whether any role answers approvals at all (the dashboard shows the buttons)."""
        return any(r.kind in (RoleKind.APPROVER, RoleKind.ADMIN) for r in self.roles)

    def covers(self, role: Role) -> bool:
        return any(r.covers(role) for r in self.roles)

    def within(self, held: Roles) -> Roles:
        """These roles, less those ``held`` does not cover: what a token scoped to these roles may
        do for a person who holds ``held`` now (a role taken from the person leaves their tokens)."""
        return Roles(tuple(r for r in self.roles if held.covers(r)))

    def may_answer(self, *, tool: str, effects: Iterable[str], session: str) -> bool:
        wanted = tuple(effects)
        return any(r.answers(tool=tool, effects=wanted, session=session) for r in self.roles)
