"""``SecretAccess``: one call's view of the secret store.

The dispatcher makes one per call with the tool's allowed-names rule (from its capabilities
manifest or config). Runtimes and credential injection ask it for values; every value it
hands out, and every value derived from one (a Basic auth header, a signed URL), is recorded so
the leak scanner redacts it from that call's output.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from pincer.core.errors import SecretError

logger = logging.getLogger(__name__)

__all__ = ["SecretAccess", "SecretReader"]


class SecretReader(Protocol):
    """What an access reads from: the store's two lookups (``SecretStore`` is one). A Protocol
    rather than the store's class, so that this module does not import the store that imports it."""

    def get(self, name: str) -> str: ...

    def find(self, name: str) -> str | None: ...


class SecretAccess:
    """Allowed-name lookups against a store, recording what was handed out."""

    __slots__ = ("_store", "_allowed", "_injected", "_lock")

    def __init__(self, store: SecretReader, allowed: Callable[[str], bool]) -> None:
        self._store = store
        self._allowed = allowed
        self._injected: list[str] = []
        self._lock = threading.Lock()

    def is_allowed(self, name: str) -> bool:
        return bool(self._allowed(name))

    def get(self, name: str) -> str:
        """The value of an allowed secret; SecretError when not allowed or not set."""
        self._check(name)
        return self._record(self._store.get(name))

    def find(self, name: str) -> str | None:
        """Like ``get`` but None when the secret is not set (for optional credentials)."""
        self._check(name)
        value = self._store.find(name)
        return None if value is None else self._record(value)

    def has(self, name: str) -> bool:
        """Whether an allowed secret is set; nothing is handed out or recorded."""
        return self.is_allowed(name) and bool(self._store.find(name))

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
