"""Bearer tokens of the gateway and the sessions they stand for.

The token generated at first start lives in ``$PINCER_HOME/gateway.token`` (mode 0600) and
runs calls under ``[gateway] session`` (``main`` by default). More tokens are configured by
their sha256 under ``[[gateway.tokens]]``, each with its own session; ``pincer token new``
makes one. A presented token is compared in constant time and never logged or recorded.

A person's personal access token (``pincer people token NAME``, store/people.py) is known by the
store, not by config.toml: :meth:`TokenBook.resolve` asks the store for a token that is none of
the configured ones. Its calls run under the token's session (``[gateway] session`` unless it
names one), and the session carries the person and their roles (policy/roles.py): what every
path asks before an approval is answered or policy changed.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pincer.core.acts import Actor
from pincer.core.errors import ConfigError
from pincer.policy.session import SessionKind

if TYPE_CHECKING:  # the config's pydantic schema is not needed to read or make a token
    from pincer.config import Config
    from pincer.policy.roles import Roles
    from pincer.store.people import PeopleStore

logger = logging.getLogger(__name__)

__all__ = ["TOKEN_FILENAME", "GatewaySession", "TokenBook", "load_or_create_token", "new_token", "token_digest"]

TOKEN_FILENAME = "gateway.token"
_TOKEN_BYTES = 32
_MAX_TOKEN_FILE_BYTES = 4_096


@dataclass(frozen=True, kw_only=True, slots=True)
class GatewaySession:
    """Who is calling: the session a token maps to and that session's kind; for a person's
    token, the person and their roles too (None: a configured token, as before people)."""

    name: str
    kind: SessionKind
    person: str | None = None
    roles: Roles | None = None
    token_id: str | None = None  # the personal access token's id (never its value)

    @property
    def is_main(self) -> bool:
        return self.kind is SessionKind.MAIN

    @property
    def principal(self) -> str:
        """Who acts: the person, else the session."""
        return self.person if self.person is not None else self.name

    def actor(self, channel: str) -> Actor:
        """Who this session's acts on ``channel`` (rest, ui) are recorded as (core/acts.py)."""
        return Actor(channel=channel, principal=self.principal, session_name=self.name if self.person else None)


def new_token() -> str:
    return "pcr_" + secrets.token_urlsafe(_TOKEN_BYTES)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_or_create_token(home: Path) -> str:
    """The gateway token under ``home``, created (0600, exclusively) when there is none."""
    path = home / TOKEN_FILENAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_token(path)
    except OSError as exc:
        raise ConfigError(f"cannot create {path}: {exc.strerror}", hint="check PINCER_HOME's permissions") from exc
    token = new_token()
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    logger.info("created the gateway token at %s", path)
    return token


def _read_token(path: Path) -> str:
    try:
        info = path.stat()
        if info.st_size > _MAX_TOKEN_FILE_BYTES:
            raise ConfigError(f"{path} is larger than a token", hint=f"delete {path}; the next start makes a new one")
        if info.st_mode & 0o077:
            # Someone widened the file; narrow it again rather than serve with a readable token.
            os.chmod(path, 0o600)
        token = path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not a token", hint=f"delete {path}; the next start makes a new one") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}", hint="check PINCER_HOME's permissions") from exc
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError(f"{path} does not hold a token", hint=f"delete {path}; the next start makes a new one")
    return token


class TokenBook:
    """Maps a presented bearer token to its session; None for anything it does not know.

    ``config`` is the config or a way to read the current one: a running gateway follows a
    reloaded config.toml (a token added to ``[[gateway.tokens]]`` works at once, a removed one
    stops working, a session's kind is the one configured now)."""

    def __init__(
        self, *, config: Config | Callable[[], Config], primary_token: str, people: PeopleStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._current: Callable[[], Config] = config if callable(config) else (lambda: config)
        self._people = people
        self._clock = clock
        self._primary = primary_token.encode("utf-8")
        self._primary_digest = hashlib.sha256(self._primary).hexdigest()
        self._seen: Config | None = None
        self._digests: tuple[tuple[str, str], ...] = ()

    def _config(self) -> Config:
        config = self._current()
        if config is not self._seen:
            self._digests = tuple((t.sha256, t.session) for t in config.gateway.tokens)
            self._seen = config
        return config

    def session_for(self, presented: str) -> GatewaySession | None:
        config = self._config()
        raw = presented.encode("utf-8", "replace")
        if hmac.compare_digest(raw, self._primary):
            return self.session_named(config.gateway.session)
        digest = hashlib.sha256(raw).hexdigest()
        found: str | None = None
        for candidate, session in self._digests:
            if hmac.compare_digest(candidate, digest):
                found = session
        return self.session_named(found) if found is not None else None

    def session_for_digest(self, digest: str) -> GatewaySession | None:
        """As :meth:`session_for`, for a token known by its sha256 only (the dashboard keeps no
        token once it signed someone in, yet ends the sign-in when the token is removed)."""
        config = self._config()
        if hmac.compare_digest(digest, self._primary_digest):
            return self.session_named(config.gateway.session)
        found: str | None = None
        for candidate, session in self._digests:
            if hmac.compare_digest(candidate, digest):
                found = session
        return self.session_named(found) if found is not None else None

    async def resolve(self, presented: str) -> GatewaySession | None:
        """:meth:`session_for`, then a person's token in the store."""
        found = self.session_for(presented)
        if found is not None or self._people is None:
            return found
        return self._of_person(await self._people.holder(presented, now=self._clock()))

    async def resolve_digest(self, digest: str) -> GatewaySession | None:
        """:meth:`session_for_digest`, then a person's token in the store."""
        found = self.session_for_digest(digest)
        if found is not None or self._people is None:
            return found
        return self._of_person(await self._people.holder_of_digest(digest, now=self._clock()))

    def _of_person(self, held: tuple[Any, Any] | None) -> GatewaySession | None:
        if held is None:
            return None
        person, token = held
        name = token.session or self._config().gateway.session
        # A scoped token holds its roles only while its person does (a role taken away leaves it).
        roles = person.roles if token.roles is None else token.roles.within(person.roles)
        return GatewaySession(name=name, kind=self._config().session(name).kind, person=person.name,
                              roles=roles, token_id=token.id)  # fmt: skip

    def session_named(self, name: str) -> GatewaySession:
        return GatewaySession(name=name, kind=self._config().session(name).kind)
