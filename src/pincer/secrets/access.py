"""``SecretAccess``: one call's view of the secret store.

The dispatcher makes one per call with the tool's allowed-names rule (from its capabilities
manifest or config). Runtimes and credential injection ask it for values; every value it
hands out, and every value derived from one (a Basic auth header, a signed URL), is recorded so
the leak scanner redacts it from that call's output.

A secret declared per person (``[secrets] per_person``) is read for the call's person only:
their own value, never the shared one nor another person's. A call on no person's behalf is
refused it (fail closed), with an error naming the way to give the call a person.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from pincer.core.errors import SecretError

logger = logging.getLogger(__name__)

__all__ = ["SecretAccess", "SecretReader", "per_person_refusal"]


class SecretReader(Protocol):
    """What an access reads from: the store's two lookups (``SecretStore`` is one). A Protocol
    rather than the store's class, so that this module does not import the store that imports it."""

    def get(self, name: str) -> str: ...

    def find(self, name: str) -> str | None: ...

    def find_for(self, person: str, name: str) -> str | None: ...


class SecretAccess:
    """Allowed-name lookups against a store, recording what was handed out. ``person`` is who
    the call acts for (None: no one); ``per_person`` the names each person holds their own of."""

    __slots__ = ("_store", "_allowed", "_injected", "_lock", "_person", "_per_person", "_connect")

    def __init__(
        self,
        store: SecretReader,
        allowed: Callable[[str], bool],
        *,
        person: str | None = None,
        per_person: Collection[str] = (),
        connect: Mapping[str, str] | None = None,
    ) -> None:
        self._store = store
        self._allowed = allowed
        self._injected: list[str] = []
        self._lock = threading.Lock()
        self._person = person
        self._per_person = frozenset(per_person)
        # name -> the command that connects a person's own value of it, when it is not a paste
        # (a built-in's login: `pincer auth setup google`); `--person WHO` is added to it.
        self._connect = dict(connect or {})

    @property
    def person(self) -> str | None:
        return self._person

    def is_per_person(self, name: str) -> bool:
        return name in self._per_person

    def unset_error(self, name: str, *, tool: str) -> SecretError:
        """What a call that needs ``name`` and finds no value is told: the command that sets it,
        for this call's person when the secret is per person."""
        if name not in self._per_person:
            return SecretError(f"{tool}: its credential is not set up: secret {name!r} is not set, so the call cannot run",
                               hint=f"set it with `pincer secrets set {name}`, then call again")  # fmt: skip
        if self._person is None:
            return SecretError(
                f"{tool}: secret {name!r} is per person and this call acts for no person "
                "(no person's token made it), so it cannot run",
                hint="call with a person's token (`pincer people token NAME`), or take the name out of "
                "[secrets] per_person in config.toml to share one value",
            )
        command = self._connect.get(name, f"pincer secrets set {name}")
        return SecretError(
            f"{tool}: {self._person} has no value of the per-person secret {name!r}, so the call cannot run",
            hint=f"let {self._person} connect theirs: `{command} --person {self._person}` (or on the dashboard's "
            "Credentials page), then call again",
        )

    def is_allowed(self, name: str) -> bool:
        return bool(self._allowed(name))

    def get(self, name: str) -> str:
        """The value of an allowed secret; SecretError when not allowed or not set."""
        if name not in self._per_person:
            self._check(name)
            return self._record(self._store.get(name))
        value = self.find(name)
        if value is None:
            raise self.unset_error(name, tool="this call")
        return value

    def find(self, name: str) -> str | None:
        """Like ``get`` but None when the secret is not set (for optional credentials). A
        per-person secret on a call that acts for no person is a SecretError, never None: an
        optional credential must not be skipped silently where a person's was meant."""
        self._check(name)
        if name in self._per_person and self._person is None:
            raise self.unset_error(name, tool="this call")
        value = self._lookup(name)
        return None if value is None else self._record(value)

    def has(self, name: str) -> bool:
        """Whether an allowed secret is set (for this call's person when it is per person);
        nothing is handed out or recorded."""
        if not self.is_allowed(name) or (name in self._per_person and self._person is None):
            return False
        return bool(self._lookup(name))

    def _lookup(self, name: str) -> str | None:
        if name not in self._per_person:
            return self._store.find(name)
        if self._person is None:  # both callers refuse a call of no person first; never the shared value
            raise self.unset_error(name, tool="this call")
        return self._store.find_for(self._person, name)

    def record(self, value: str) -> None:
        """Mark a value derived from a secret (e.g. ``Basic <base64>``) for redaction too."""
        if isinstance(value, str) and value:
            self._record(value)

    @property
    def injected(self) -> tuple[str, ...]:
        """Every value handed out or recorded during this call, in order, without repeats."""
        with self._lock:
            return tuple(dict.fromkeys(self._injected))

    def _check(self, name: str) -> None:
        if not self.is_allowed(name):
            raise SecretError(
                f"secret {name!r} is not allowed for this tool",
                hint="list it under secrets.allowed_names in the tool's capabilities "
                "(or in a credentials rule in config.toml)",
            )

    def _record(self, value: str) -> str:
        with self._lock:
            self._injected.append(value)
        return value

    def __repr__(self) -> str:
        return f"SecretAccess({len(self._injected)} values handed out)"


def per_person_refusal(secrets: object, name: str, *, tool: str) -> SecretError | None:
    """The error for a call that lacks ``name`` when ``name`` is per person on this call's
    ``secrets`` (a SecretAccess); None for a shared secret or another kind of access (the
    builder's test bench), whose callers say what is missing in their own words."""
    if isinstance(secrets, SecretAccess) and secrets.is_per_person(name):
        return secrets.unset_error(name, tool=tool)
    return None
