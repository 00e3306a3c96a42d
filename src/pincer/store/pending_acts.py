"""Acts a CLI command did while the shared store could not take their record yet.

The first steps of a PostgreSQL home come before its schema exists: ``pincer secrets set
pg_password`` must store the password that ``pincer db upgrade`` then connects with. Such an
act took effect, so its record must not be lost, and it cannot be written to a log that does
not exist yet. It waits here, in ``acts-pending.json`` under PINCER_HOME (0600, replaced
atomically, under a lock of its own), and ``pincer db upgrade`` appends it to the audit log it
has just made, in the order the acts happened, then removes the file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pincer.core.errors import StoreError
from pincer.store.audit import AuditEntry
from pincer.store.jsonfile import flocked, write_json_atomic

__all__ = ["PENDING_ACTS_FILE", "hold", "draining"]

PENDING_ACTS_FILE = "acts-pending.json"


def _path(home: Path) -> Path:
    return home / PENDING_ACTS_FILE


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise StoreError(
            f"cannot read the acts waiting for the store ({path}): {exc}",
            hint=f"move {path.name} aside and run `pincer db upgrade`; the acts in it then stay unrecorded",
        ) from exc
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise StoreError(f"{path} is not a list of audit entries", hint=f"move {path.name} aside and run `pincer db upgrade`")
    return data


def _entry(item: dict[str, Any]) -> AuditEntry:
    names = {f.name for f in dataclasses.fields(AuditEntry)}
    values = {k: v for k, v in item.items() if k in names}
    values["effects"] = tuple(values.get("effects") or ())
    return AuditEntry(**values)


def hold(home: Path, entries: Sequence[AuditEntry]) -> None:
    """Keep ``entries`` until the store can take them (after what is already waiting)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = _path(home)
    with flocked(path.with_name(path.name + ".lock")):
        waiting = _read(path)
        waiting.extend({**dataclasses.asdict(e), "effects": list(e.effects)} for e in entries)
        write_json_atomic(path, waiting)


@contextlib.contextmanager
def draining(home: Path) -> Iterator[list[AuditEntry]]:
    """The acts waiting, in order; the file goes only when the block ends without an error (so a
    failed append leaves them waiting for the next ``pincer db upgrade``)."""
    path = _path(home)
    with flocked(home / (PENDING_ACTS_FILE + ".lock")) if home.is_dir() else contextlib.nullcontext():
        entries = [_entry(item) for item in _read(path)]
        yield entries
        if entries:
            path.unlink(missing_ok=True)
