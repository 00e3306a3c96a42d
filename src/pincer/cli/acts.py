"""A CLI command's act (core/acts.py) recorded in the audit log of PINCER_HOME's store.

Who: the CLI is the operating-system user it runs as, ``cli:<user>``, read from the process's
uid (an environment variable would let a caller name anyone). The record is written after the
act took effect, by the command that did it; a record that cannot be written fails the command
(exit 1), so an act is never left unrecorded in silence. One exception: a shared (PostgreSQL)
store without its schema yet cannot take a record, and some acts must come first (the store's
password is a secret ``pincer db upgrade`` needs): their records wait in PINCER_HOME
(store/pending_acts.py) and ``pincer db upgrade`` writes them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pincer.core.acts import ActKind, Actor

if TYPE_CHECKING:
    from pincer.store.audit import AuditEntry

__all__ = ["cli_actor", "record_act", "record_entries"]


def cli_actor() -> Actor:
    return Actor(channel="cli", principal=_user_name())


def _user_name() -> str:
    import pwd

    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (a container's): named by its number
        return f"uid{uid}"


def record_act(home: Path, kind: ActKind, *, subject: str, outcome: str, reason: str, args: Any = None,
               approval_id: str | None = None) -> int | None:  # fmt: skip
    """Append the act's one record (``store/acts.py``) to ``home``'s audit log; its id (None while
    it waits for the store's schema)."""
    from pincer.store.acts import act_entry

    entry = act_entry(kind, actor=cli_actor(), subject=subject, outcome=outcome, reason=reason, args=args,
                      approval_id=approval_id)  # fmt: skip
    ids = record_entries(home, [entry])
    return ids[0] if ids else None


def record_entries(home: Path, entries: Sequence[AuditEntry]) -> list[int]:
    """Append ``entries`` (acts of :func:`cli_actor`) to ``home``'s audit log, in order; their
    ids (none while they wait for a shared store's schema: then a note says so). From a command's
    synchronous code; a command that runs an event loop already records from a thread of its own
    (the log's database is opened and closed for the records)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(_record, home, entries)
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(anyio.run, _record, home, entries).result()


async def _record(home: Path, entries: Sequence[AuditEntry]) -> list[int]:
    from pincer.cli.common import audit_key, secret_key
    from pincer.cli.console import stderr
    from pincer.config import load_config
    from pincer.core.errors import SchemaBehind
    from pincer.service import home_audit_log
    from pincer.store.pending_acts import hold

    config = load_config(home)
    # The secret store is opened only for the PostgreSQL password, never made for a record.
    key = secret_key(home) if config.store.password_secret is not None else None
    try:
        async with home_audit_log(config, audit_key=audit_key(home), secret_key=key) as audit:
            return [await audit.append(entry, gather=False) for entry in entries]
    except SchemaBehind:
        hold(home, entries)
        stderr.print("note: the shared store has no pincer schema yet; this act is recorded in its audit log by `pincer db upgrade`")
        return []
