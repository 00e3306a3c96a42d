"""One MCP server's instances per person, for a server whose env or headers name a per-person secret.

A stdio server reads its ``${secret:NAME}`` once, in its environment, and a streamable HTTP
client session sends its headers on every request: one process or session cannot hold two
people's values. So a server whose configuration names a secret of ``[secrets] per_person`` gets
one connection per person, started on that person's first call with that person's values and
reused for their later calls, never another's.

Bounds (``[tools] mcp_max_person_instances``, ``[tools] mcp_person_idle_s``): a person's
instance idle longer than the timeout is closed; a new person when the bound is reached closes
the least recently used idle instance first, and is refused when every instance is in a call.

A changed value must never keep serving: each instance keeps a digest of the values it was
started with, and a call whose person's values differ now closes it and starts a new one. A
sweeper also closes, every few seconds, the instances that sat idle too long and those whose
person's values changed or are gone (a person removed loses their values with them), so a
removed value does not leave a process running with it until someone calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass

import anyio

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.mcp.config import ServerConfig
from pincer.runtimes.mcp.connection import ServerConnection
from pincer.runtimes.mcp.environment import SecretLookup, secret_refs

logger = logging.getLogger(__name__)

__all__ = ["PersonInstances", "PersonValues", "person_secret_names", "without_person_secrets"]

SWEEP_EVERY_S = 2.0  # the most a removed or changed value's instance outlives it without a call

PersonValues = Callable[[str, str], str | None]  # (person, secret name) -> their value
ConnectionMaker = Callable[[ServerConfig, SecretLookup], ServerConnection]


def person_secret_names(config: ServerConfig, per_person: Collection[str]) -> tuple[str, ...]:
    """The per-person secrets ``config``'s env values and headers name, sorted."""
    named = {name for value in (*config.env.values(), *config.headers.values()) for name in secret_refs(value)}
    return tuple(sorted(named & set(per_person)))


def without_person_secrets(config: ServerConfig, names: Collection[str]) -> ServerConfig:
    """``config`` with every env variable and header that names one of ``names`` left out: the
    server as it starts for no person (to learn its tools), holding nobody's value."""

    def keep(items: Mapping[str, str]) -> dict[str, str]:
        return {key: value for key, value in items.items() if not set(secret_refs(value)) & set(names)}

    return config.with_changes(env=keep(config.env), headers=keep(config.headers))


def _digest(values: Mapping[str, str]) -> str:
    """What an instance remembers of its values: enough to see a change, never the values."""
    hasher = hashlib.sha256()
    for name in sorted(values):
        hasher.update(name.encode() + b"\0" + values[name].encode() + b"\0")
    return hasher.hexdigest()


@dataclass(kw_only=True, slots=True)
class _Instance:
    conn: ServerConnection
    digest: str
    used_at: float
    busy: int = 0


class PersonInstances:
    """The per-person connections of one server. ``make(config, lookup)`` makes a connection
    whose ``${secret:NAME}`` resolve through ``lookup``; ``shared`` looks up the server's other
    (shared) secrets; ``values(person, name)`` reads a person's own value now."""

    def __init__(
        self,
        config: ServerConfig,
        names: tuple[str, ...],
        *,
        make: ConnectionMaker,
        shared: SecretLookup | None,
        values: PersonValues,
        limit: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.names = names
        self._make = make
        self._shared = shared
        self._values = values
        self._limit = limit
        self._idle_s = idle_s
        self._clock = clock
        self._instances: dict[str, _Instance] = {}
        self._lock = anyio.Lock()
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def people(self) -> list[str]:
        """Whose instances are open, least recently used first."""
        return sorted(self._instances, key=lambda person: self._instances[person].used_at)

    def connection(self, person: str) -> ServerConnection | None:
        instance = self._instances.get(person)
        return None if instance is None else instance.conn

    def current_values(self, person: str) -> dict[str, str] | None:
        """The person's values of every per-person secret the server names; None when one is missing."""
        found: dict[str, str] = {}
        for name in self.names:
            value = self._values(person, name)
            if not value:
                return None
            found[name] = value
        return found

    async def ready(self, person: str, values: Mapping[str, str]) -> ServerConnection:
        """The person's connection for ``values`` (their values now): theirs if it was started
        with the same values, else a new one, its start left to the caller."""
        digest = _digest(values)
        stale: list[ServerConnection] = []
        async with self._lock:
            instance = self._instances.get(person)
            if instance is not None and instance.digest != digest:
                stale.append(self._instances.pop(person).conn)
                instance = None
            if instance is None:
                if len(self._instances) >= self._limit:
                    stale.append(self._evict())
                own = dict(values)
                shared = self._shared

                def lookup(name: str) -> str | None:
                    if name in own:
                        return own[name]
                    return shared(name) if shared is not None else None

                instance = _Instance(conn=self._make(self.config, lookup), digest=digest, used_at=self._clock())
                self._instances[person] = instance
                self._ensure_sweeper()
            instance.used_at = self._clock()
        for conn in stale:
            await _close(conn)
        return instance.conn

    @contextlib.contextmanager
    def in_call(self, person: str) -> Iterator[None]:
        """Marks the person's instance busy (never evicted) while a call runs on it."""
        instance = self._instances.get(person)
        if instance is not None:
            instance.busy += 1
        try:
            yield
        finally:
            if instance is not None:
                instance.busy -= 1
                instance.used_at = self._clock()

    def _evict(self) -> ServerConnection:
        idle = [person for person in self.people if self._instances[person].busy == 0]
        if not idle:
            raise RuntimeUnavailable(
                f"MCP server {self.config.name!r} runs for {self._limit} people at once, every one in a call",
                hint="call again when one of their calls has ended, or raise [tools] mcp_max_person_instances",
            )
        logger.info("MCP server %s: closing the least recently used person's instance", self.config.name)
        return self._instances.pop(idle[0]).conn

    async def close(self, person: str) -> None:
        async with self._lock:
            instance = self._instances.pop(person, None)
        if instance is not None:
            await _close(instance.conn)

    async def sweep(self) -> None:
        """Close the instances idle past the timeout and those whose person's values changed or are gone."""
        now = self._clock()
        gone: list[ServerConnection] = []
        async with self._lock:
            for person, instance in list(self._instances.items()):
                if instance.busy:
                    continue
                values = self.current_values(person)
                if now - instance.used_at > self._idle_s or values is None or _digest(values) != instance.digest:
                    gone.append(self._instances.pop(person).conn)
        for conn in gone:
            await _close(conn)

    def _ensure_sweeper(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            # Like each session's task (connection.py): it lives as long as the instances do.
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever(), name=f"mcp-people-{self.config.name}")

    async def _sweep_forever(self) -> None:
        while self._instances:
            await anyio.sleep(min(SWEEP_EVERY_S, self._idle_s))
            try:
                await self.sweep()
            except Exception:  # a store that cannot be read now: the call-time check still holds
                logger.exception("MCP server %s: sweeping per-person instances failed", self.config.name)

    async def aclose(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None and sweeper is not asyncio.current_task():
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await sweeper
        async with self._lock:
            conns = [instance.conn for instance in self._instances.values()]
            self._instances.clear()
        for conn in conns:
            await _close(conn)


async def _close(conn: ServerConnection) -> None:
    with anyio.CancelScope(shield=True):
        await conn.aclose()
