"""The hub's commit journal: what a lifecycle step changes on disk, undone from one record list.

Before each change to the home (a folder made, a version renamed into the store, a link swapped,
a file put aside, an entry file, ``state.json`` or ``pincer.lock`` rewritten) the step appends
the record that undoes it to ``$PINCER_HOME/.hub-journal.jsonl`` and fsyncs it; then it makes
the change. When every change is made, a ``commit`` record follows. So the journal always
covers what is on disk:

- a step that fails in the process undoes its records in reverse (:meth:`Journal.rollback`);
- a process that died mid-step (SIGKILL, OOM, power loss after the fsync) leaves the journal,
  and the next lifecycle step replays it under the home's lock before it starts
  (:func:`recover`): without a ``commit`` record it is rolled back, with one rolled forward (the
  files put aside are deleted). The disk is then as before the step or as after it.

Every undo record is idempotent (restoring what is already restored does nothing), so a replay
that is itself killed is replayed again. A last line cut short by a death is ignored: its record
was written before its change, so that change never started.

``PINCER_TEST_HUB_CRASH_AFTER=N`` (a test seam, read only when set) makes the process
``os._exit(CRASH_EXIT_CODE)`` once ``N`` records are written and their changes made, before
the next record (``N`` = all of them, ``commit`` included: before the files put aside are
deleted): the tests kill a real install at every step this way.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["JOURNAL_FILE", "CRASH_AFTER_ENV", "CRASH_EXIT_CODE", "Journal", "recover"]

logger = logging.getLogger(__name__)

JOURNAL_FILE = ".hub-journal.jsonl"
CRASH_AFTER_ENV = "PINCER_TEST_HUB_CRASH_AFTER"
CRASH_EXIT_CODE = 86

Record = dict[str, Any]


class Journal:
    """The records of one lifecycle step, on disk as they are made. Open from the first change
    to :meth:`finish` (or :meth:`rollback`); a home has at most one (steps hold its lock)."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / JOURNAL_FILE
        self.records: list[Record] = []
        self.trash: list[Path] = []  # deleted once committed (files put aside: a rollback restores them)
        crash = os.environ.get(CRASH_AFTER_ENV)
        self._crash_after = int(crash) if crash and crash.isdigit() else None

    # -- what a step records before each change ------------------------------------------

    def removes(self, path: Path) -> None:
        """``path`` is about to be made (a folder, a link, a file that was not there)."""
        self._append({"op": "remove", "path": str(path)})

    def restores_link(self, path: Path, target: str) -> None:
        """The link ``path`` (now pointing at ``target``) is about to be replaced."""
        self._append({"op": "link", "path": str(path), "target": target})

    def moves_back(self, moved: Path, original: Path) -> None:
        """``original`` is about to be renamed to ``moved`` (put aside until the step ends)."""
        self._append({"op": "rename", "from": str(moved), "to": str(original)})
        self.trash.append(moved)

    def deletes_at_end(self, path: Path) -> None:
        """``path`` goes when the step commits (here or in a replay that rolls forward), not before."""
        self.trash.append(path)

    def restores_file(self, path: Path) -> None:
        """The file ``path`` is about to be rewritten (or written: then it is removed again)."""
        if path.is_file():
            mode = path.stat().st_mode & 0o777
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            self._append({"op": "bytes", "path": str(path), "data": data, "mode": mode})
        else:
            self._append({"op": "remove", "path": str(path)})

    def removes_new_dirs(self, path: Path) -> None:
        """``path`` is about to be made with its missing parents (``mkdir -p``)."""
        made = []
        current = path
        while not current.exists():
            made.append(current)
            current = current.parent
        for folder in reversed(made):  # outermost first: replayed in reverse, innermost goes first
            self.removes(folder)

    # -- the end ---------------------------------------------------------------------------

    def commit(self, *, prune: Iterable[tuple[str, str]] = ()) -> None:
        """Every change is made: from here a replay rolls forward. ``prune``: (kind, name) of
        the artifacts whose old versions the end of the step removes."""
        self._append({"op": "commit", "trash": [str(p) for p in self.trash], "prune": [list(k) for k in prune]})

    def finish(self) -> None:
        """After the commit: delete what was put aside, then the journal."""
        self._maybe_crash()
        _drop(self.trash)
        self.trash.clear()
        self.records.clear()
        self.path.unlink(missing_ok=True)

    def rollback(self) -> None:
        """Undo every recorded change, newest first, and delete the journal."""
        _undo(self.records)
        self.records.clear()
        self.trash.clear()
        self.path.unlink(missing_ok=True)

    def _append(self, record: Record) -> None:
        self._maybe_crash()
        line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        if not self.records:
            _fsync_dir(self.path.parent)  # the journal's own name must survive before any change
        self.records.append(record)

    def _maybe_crash(self) -> None:
        # Called before record N+1 (and before the end): by then the change of record N is made.
        if self._crash_after is not None and len(self.records) == self._crash_after:
            os._exit(CRASH_EXIT_CODE)


def recover(home: Path, *, prune: Callable[[str, str], None]) -> str | None:
    """Replay a journal a dead process left in ``home``: "rolled back", "rolled forward", or
    None when there is none. Call it holding the home's lock (so no live step owns it).
    ``prune(kind, name)`` removes an artifact's old versions, as the step would have."""
    path = Path(home) / JOURNAL_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            break  # cut short by the death: its change never started
        if isinstance(record, dict):
            records.append(record)
    commit = next((r for r in records if r.get("op") == "commit"), None)
    if commit is None:
        _undo(records)
        outcome = "rolled back"
    else:
        _drop(Path(p) for p in commit.get("trash", ()))
        for kind, name in commit.get("prune", ()):
            prune(str(kind), str(name))
        outcome = "rolled forward"
    path.unlink(missing_ok=True)
    logger.warning("a hub step that did not finish (the process died) was %s", outcome)
    return outcome


def _undo(records: list[Record]) -> None:
    for record in reversed(records):
        try:
            _undo_one(record)
        except OSError:  # one failed undo must not stop the others
            logger.exception("undoing a hub step's change failed: %s", record.get("op"))


def _undo_one(record: Mapping[str, Any]) -> None:
    from pincer.store.jsonfile import write_bytes_atomic

    op = record.get("op")
    if op == "remove":
        _remove(Path(record["path"]))
    elif op == "link":
        path = Path(record["path"])
        if os.path.islink(path) and os.readlink(path) == record["target"]:
            return
        temp = path.with_name(f".{path.name}.restore.link")
        _remove(temp)
        os.symlink(record["target"], temp)
        os.replace(temp, path)
    elif op == "rename":
        moved, original = Path(record["from"]), Path(record["to"])
        if os.path.lexists(moved):
            _remove(original)
            os.rename(moved, original)
    elif op == "bytes":
        path = Path(record["path"])
        data = base64.b64decode(record["data"])
        if not (path.is_file() and path.read_bytes() == data):
            write_bytes_atomic(path, data, mode=int(record.get("mode", 0o600)))


def _remove(path: Path) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.unlink(path)


def _drop(paths: Iterable[Path]) -> None:
    for path in paths:
        _remove(path)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
