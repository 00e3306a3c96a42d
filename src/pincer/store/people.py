"""People and their personal access tokens, in the store: every gateway of one store knows them.

A person is a name, an email, roles as written (policy/roles.py) and a status. A personal access
token is shown once, when it is made; the store keeps its sha256 only (a copy of the database
signs nobody in), the session its calls run under, when it expires, when it was last used and
whether it was revoked. A token is looked up by its sha256 and the stored value compared in
constant time; a revoked or expired token, or one whose person is gone, is no one's.

Written once against the database seam (store/sql/), for SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from pincer.core.errors import UsageError
from pincer.policy.roles import PersonAct, Roles, parse_roles
from pincer.store.sql import Database, Sql
from pincer.store.sql.database import Row

__all__ = ["Person", "PersonToken", "PeopleStore", "NewToken", "PERSON_TOKEN_PREFIX", "check_person_name", "parse_expiry"]

PERSON_TOKEN_PREFIX = "pcp_"
_TOKEN_BYTES = 32
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,63}$")
_NAME_HINT = "a person's name is 1-64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"
# A token's last use is written at most this often (each use would be a write on every request).
_TOUCH_EVERY_S = 30.0


_DURATION = re.compile(r"^(\d{1,6})([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def parse_expiry(text: str | None, *, now: float) -> float | None:
    """``--expires``: a duration (``90m``, ``12h``, ``30d``, ``8w``) or a date (``2027-01-31``)."""
    if text is None or text == "never":
        return None
    found = _DURATION.match(text.strip())
    if found:
        seconds = int(found.group(1)) * _SECONDS[found.group(2)]
        if seconds <= 0:
            raise UsageError(f"--expires {text!r} is no time at all", hint="pass --expires as a duration, e.g. 30d")
        return now + seconds
    try:
        day = dt.date.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--expires {text[:40]!r} is neither a duration nor a date",
                         hint="pass --expires as a duration, e.g. 30d, or a date such as 2027-01-31") from None  # fmt: skip
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp()


def check_person_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(f"not a person's name: {str(name)[:70]!r}", hint=_NAME_HINT)
    return name


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class Person:
    name: str
    email: str | None
    roles: Roles
    status: str
    created_at: float
    created_by: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "email": self.email, "roles": self.roles.written(), "status": self.status,
                "created_at": self.created_at, "created_by": self.created_by}  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class PersonToken:
    """A token as listed: never its value, never its sha256."""

    id: str
    person: str
    session: str | None
    created_at: float
    expires_at: float | None
    last_used: float | None
    revoked_at: float | None
    roles: Roles | None = None  # the roles it is scoped to; None: its person's, whatever they are

    def live(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "person": self.person, "session": self.session, "created_at": self.created_at,
                "expires_at": self.expires_at, "last_used": self.last_used, "revoked_at": self.revoked_at,
                "roles": None if self.roles is None else self.roles.written()}  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class NewToken:
    """A token just made: ``value`` is shown once and kept nowhere."""

    token: PersonToken
    value: str = ""

    def __repr__(self) -> str:  # the value never reaches a log through a repr
        return f"NewToken(token={self.token!r})"


_PERSON_COLUMNS = "name, email, roles, status, created_at, created_by"
_ADD = Sql(
    "INSERT INTO people (name, email, roles, status, created_at, created_by) "
    "VALUES (:name, :email, :roles, 'active', :created_at, :created_by)"
)
_GET = Sql(f"SELECT {_PERSON_COLUMNS} FROM people WHERE name = :name")
_LIST = Sql(f"SELECT {_PERSON_COLUMNS} FROM people ORDER BY name")
_SET_ROLES = Sql("UPDATE people SET roles = :roles WHERE name = :name")
_BY_EMAIL = Sql(f"SELECT {_PERSON_COLUMNS} FROM people WHERE lower(email) = :email ORDER BY name LIMIT 1")
_REMOVE = Sql("DELETE FROM people WHERE name = :name")
_REMOVE_TOKENS = Sql("DELETE FROM person_tokens WHERE person = :name")

_TOKEN_COLUMNS = "id, person, session, created_at, expires_at, last_used, revoked_at, roles"
_ADD_TOKEN = Sql(
    "INSERT INTO person_tokens (id, person, digest, session, created_at, expires_at, roles) "
    "VALUES (:id, :person, :digest, :session, :created_at, :expires_at, :roles)"
)
_BY_DIGEST = Sql(f"SELECT {_TOKEN_COLUMNS}, digest FROM person_tokens WHERE digest = :digest")
_TOKEN_BY_ID = Sql(f"SELECT {_TOKEN_COLUMNS} FROM person_tokens WHERE id = :id")
_TOKENS_OF = Sql(f"SELECT {_TOKEN_COLUMNS} FROM person_tokens WHERE person = :person ORDER BY created_at, id")
_ALL_TOKENS = Sql(f"SELECT {_TOKEN_COLUMNS} FROM person_tokens ORDER BY person, created_at, id")
_REVOKE = Sql("UPDATE person_tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL")
_TOUCH = Sql(
    "UPDATE person_tokens SET last_used = :now WHERE id = :id AND (last_used IS NULL OR last_used < :before)"
)


def _person(row: Row) -> Person:
    name, email, roles, status, created_at, created_by = row
    return Person(name=name, email=email, roles=parse_roles(json.loads(roles)), status=status,
                  created_at=float(created_at), created_by=created_by)  # fmt: skip


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def _token(row: Row) -> PersonToken:
    tid, person, session, created, expires, used, revoked, roles = row[:8]
    return PersonToken(id=tid, person=person, session=session, created_at=float(created), expires_at=_optional(expires),
                       last_used=_optional(used), revoked_at=_optional(revoked),
                       roles=None if roles is None else parse_roles(json.loads(roles)))  # fmt: skip


def _admins(people: list[Person]) -> list[str]:
    return [p.name for p in people if p.status == "active" and p.roles.may(PersonAct.MANAGE_PEOPLE)]


# Changes that could leave no admin run one at a time, on every gateway of the store: two admins
# removing each other at once cannot both see the other still there.
_PEOPLE_SERIAL = "people"
_LAST_ADMIN_HINT = "make another person an admin first: `pincer people add NAME --admin`"


class PeopleStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    # -- people ------------------------------------------------------------------------------

    async def add(self, name: str, *, roles: Roles, email: str | None, by: str, now: float) -> Person:
        check_person_name(name)
        if not roles.roles:
            raise UsageError(f"{name!r} needs a role", hint="pass --role viewer (or approver, operator, admin)")
        if await self.get(name) is not None:
            raise UsageError(f"{name!r} is a person already", hint=f"`pincer people remove {name}` first, or pick another name")
        await self._db.execute(_ADD, {"name": name, "email": email, "roles": json.dumps(roles.written()),
                                      "created_at": now, "created_by": by})  # fmt: skip
        person = await self.get(name)
        assert person is not None  # written just now, in this store
        return person

    async def get(self, name: str) -> Person | None:
        row = await self._db.fetch_one(_GET, {"name": name})
        return None if row is None else _person(row)

    async def all(self) -> list[Person]:
        return [_person(r) for r in await self._db.fetch_all(_LIST)]

    async def by_email(self, email: str) -> Person | None:
        row = await self._db.fetch_one(_BY_EMAIL, {"email": email.lower()})
        return None if row is None else _person(row)

    async def set_roles(self, name: str, roles: Roles) -> None:
        """Replace a person's roles; the last admin keeps theirs (nobody could manage people after)."""
        if not roles.roles:
            raise UsageError(f"{name!r} needs a role", hint="pass --role viewer (or approver, operator, admin)")
        async with self._db.transaction(serial=_PEOPLE_SERIAL) as tx:
            people = [_person(r) for r in await tx.fetch_all(_LIST)]
            if not any(p.name == name for p in people):
                raise UsageError(f"no person named {name!r}", hint="`pincer people list` names them")
            if _admins(people) == [name] and not roles.may(PersonAct.MANAGE_PEOPLE):
                raise UsageError(f"{name!r} is the last admin and stays one", hint=_LAST_ADMIN_HINT)
            tx.add(_SET_ROLES, {"name": name, "roles": json.dumps(roles.written())}, rows=1)

    async def remove(self, name: str) -> int:
        """Forget the person and every token of theirs; how many tokens went with them."""
        async with self._db.transaction(serial=_PEOPLE_SERIAL) as tx:
            people = [_person(r) for r in await tx.fetch_all(_LIST)]
            if not any(p.name == name for p in people):
                raise UsageError(f"no person named {name!r}", hint="`pincer people list` names them")
            if _admins(people) == [name]:
                raise UsageError(f"{name!r} is the last admin and cannot be removed", hint=_LAST_ADMIN_HINT)
            tokens = len(await tx.fetch_all(_TOKENS_OF, {"person": name}))
            tx.add(_REMOVE_TOKENS, {"name": name})
            tx.add(_REMOVE, {"name": name}, rows=1)
        return tokens

    # -- tokens ------------------------------------------------------------------------------

    async def new_token(
        self, person: str, *, now: float, expires_at: float | None = None, session: str | None = None,
        roles: Roles | None = None,
    ) -> NewToken:
        """A new token of ``person``'s; ``roles`` scopes it to roles the person holds (None: theirs)."""
        holder = await self.get(person)
        if holder is None:
            raise UsageError(f"no person named {person!r}", hint="`pincer people add NAME --role ROLE` first")
        if expires_at is not None and expires_at <= now:
            raise UsageError("the token would expire before it is made", hint="pass --expires as a duration, e.g. 30d")
        if roles is not None:
            beyond = [str(r) for r in roles.roles if not holder.roles.covers(r)]
            if not roles.roles or beyond:
                raise UsageError(f"{person!r} does not hold the role(s) {', '.join(beyond) or '(none given)'}",
                                 hint=f"scope a token to roles among {', '.join(holder.roles.written())} (`pincer people list` shows them)")  # fmt: skip
        value = PERSON_TOKEN_PREFIX + secrets.token_urlsafe(_TOKEN_BYTES)
        token = PersonToken(id="pt_" + secrets.token_hex(6), person=person, session=session, created_at=now,
                            expires_at=expires_at, last_used=None, revoked_at=None, roles=roles)  # fmt: skip
        await self._db.execute(_ADD_TOKEN, {"id": token.id, "person": person, "digest": _digest(value),
                                            "session": session, "created_at": now, "expires_at": expires_at,
                                            "roles": None if roles is None else json.dumps(roles.written())})  # fmt: skip
        return NewToken(token=token, value=value)

    async def tokens(self, person: str | None = None) -> list[PersonToken]:
        rows = await (self._db.fetch_all(_ALL_TOKENS) if person is None else self._db.fetch_all(_TOKENS_OF, {"person": person}))
        return [_token(r) for r in rows]

    async def token(self, token_id: str) -> PersonToken | None:
        row = await self._db.fetch_one(_TOKEN_BY_ID, {"id": token_id})
        return None if row is None else _token(row)

    async def revoke(self, token_id: str, *, now: float) -> None:
        if not await self._db.execute(_REVOKE, {"id": token_id, "now": now}):
            raise UsageError(f"no live token {token_id!r}", hint="`pincer people tokens` lists them with their ids")

    async def holder(self, presented: str, *, now: float) -> tuple[Person, PersonToken] | None:
        """The person a presented token is live for, with the token; None for anything else."""
        if not presented.startswith(PERSON_TOKEN_PREFIX):
            return None
        digest = _digest(presented)
        row = await self._db.fetch_one(_BY_DIGEST, {"digest": digest})
        return await self._live(row, digest, now)

    async def holder_of_digest(self, digest: str, *, now: float) -> tuple[Person, PersonToken] | None:
        """As :meth:`holder`, for a token known by its sha256 (a dashboard sign-in keeps no token)."""
        row = await self._db.fetch_one(_BY_DIGEST, {"digest": digest})
        return await self._live(row, digest, now)

    async def _live(self, row: Row | None, digest: str, now: float) -> tuple[Person, PersonToken] | None:
        if row is None or not hmac.compare_digest(str(row[8]), digest):
            return None
        token = _token(row)
        if not token.live(now):
            return None
        person = await self.get(token.person)
        if person is None or person.status != "active":
            return None
        await self._db.execute(_TOUCH, {"id": token.id, "now": now, "before": now - _TOUCH_EVERY_S})
        return person, token
