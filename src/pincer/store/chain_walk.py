"""One walk along the audit chain, a batch of records at a time (store/audit.py verifies with it).

Kept apart from the audit log so a worker process can import it cheaply: a gateway's verify
computes the chain values in a worker process (:func:`check_batch`), so a walk of 100,000
records neither runs on the event loop nor holds its GIL.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pincer.core.errors import AuditChainBroken
from pincer.store.chain import GENESIS_HASH, ChainKey, plain_chain_hash

__all__ = ["ChainWalk", "HASH_AT", "RECORD_FIELDS", "check_batch", "hashed", "plain_records_altered"]

RECORD_FIELDS = (
    "ts", "session", "caller", "tool", "kind", "decision", "reason", "grant_id", "outcome",
    "error_code", "error", "args", "effects", "duration_ms", "usage", "idempotency_key",
    "cached", "approval_id",
)  # fmt: skip
# Where a record's row (id, the fields, prev_hash, hash, run_id, person, approved_by; an archive
# segment written before person and approved_by ends at run_id) holds its chain value.
HASH_AT = 1 + len(RECORD_FIELDS) + 1


def hashed(
    values: tuple[Any, ...], run_id: str | None, person: str | None = None, approved_by: str | None = None
) -> tuple[Any, ...]:
    """What a record's chain value covers: its fields, its run id when it has one, and who (the
    person, the approver) when a record names them. A record that names no one is covered as
    before these columns came, so the records written then still verify."""
    if person is None and approved_by is None:
        return values if run_id is None else (*values, run_id)
    return (*values, run_id, {"person": person, "approved_by": approved_by})


class ChainWalk:
    """The state of one walk along the chain, advanced a batch of rows at a time (on a worker
    thread: nothing else touches it meanwhile). Raises AuditChainBroken at the first fault."""

    __slots__ = ("_key", "keyed_from", "plain_head", "prev", "count")

    def __init__(self, *, key: ChainKey, keyed_from: int, plain_head: str) -> None:
        self._key = key
        self.keyed_from = keyed_from
        self.plain_head = plain_head
        self.prev = GENESIS_HASH
        self.count = 0

    def resume(self, last_id: int, last_hash: str) -> None:
        """Go on after record ``last_id``, whose chain value is ``last_hash`` (a signed mark)."""
        self.count, self.prev = last_id, last_hash

    def check(self, batch: Sequence[Sequence[Any]]) -> None:
        keyed_from, prev, expected_id = self.keyed_from, self.prev, self.count + 1
        for row in batch:
            record_id = row[0]
            # After the fields: prev_hash, hash, run_id, then person and approved_by (store/audit.py's
            # columns; an archive segment written before them ends at run_id).
            stored_prev, stored_hash, run_id, *who = row[1 + len(RECORD_FIELDS) :]
            person, approved_by = (who + [None, None])[:2]
            values = hashed(tuple(row[1 : 1 + len(RECORD_FIELDS)]), run_id, person, approved_by)
            if record_id != expected_id:
                raise AuditChainBroken(
                    f"audit record {expected_id} is missing (next present is {record_id})",
                    record_id=expected_id,
                    hint="a record was deleted; the log cannot be trusted from this point",
                )
            if record_id == keyed_from and prev != self.plain_head:
                raise plain_records_altered(keyed_from)
            if stored_prev != prev:
                raise AuditChainBroken(
                    f"audit record {record_id} does not follow record {record_id - 1} (previous hash differs)",
                    record_id=record_id,
                    hint="records were deleted, reordered or rewritten before this one",
                )
            if record_id < keyed_from:
                expected = plain_chain_hash(record_id, values, prev)
            else:
                expected = self._key.record_hash(record_id, values, prev)
            if not self._key.matches(stored_hash, expected):
                raise AuditChainBroken(
                    f"audit record {record_id} was altered (its hash does not match its content)",
                    record_id=record_id,
                )
            prev, expected_id = stored_hash, expected_id + 1
            self.prev, self.count = prev, record_id

    def finish(self) -> None:
        """After the last batch: the log is no shorter than when it was keyed."""
        if self.count < self.keyed_from - 1:
            raise AuditChainBroken(
                f"the audit log ends at record {self.count}, but {self.keyed_from - 1} records were there when it was keyed",
                record_id=self.count + 1,
                hint="records were removed from the end of the log",
            )
        if self.count == self.keyed_from - 1 and self.prev != self.plain_head:
            raise plain_records_altered(self.keyed_from)


def plain_records_altered(keyed_from: int) -> AuditChainBroken:
    return AuditChainBroken(
        f"the records before {keyed_from} (written before the log was keyed) were altered: they no longer "
        "end where the marker says",
        record_id=max(keyed_from - 1, 1),
        hint="the log cannot be trusted; verify against a checkpoint and restore pincer.db from a backup",
    )


_NICER = 10  # a verify is background work: on a busy machine the gateway's own calls go first
_niced = False


def _yield_the_cpu() -> None:
    """Lower this worker process's CPU priority once (only pincer's verify uses worker processes)."""
    global _niced
    if not _niced:
        _niced = True
        try:
            os.nice(_NICER)
        except OSError:  # not permitted here: the walk runs at the gateway's priority
            pass


def check_batch(
    key: bytes, keyed_from: int, plain_head: str, last_id: int, last_hash: str, rows: Sequence[Sequence[Any]]
) -> tuple[str, int, str | None]:
    """Walk ``rows`` on from record ``last_id`` (in a worker process): ``("ok", count, prev)``, or
    ``("broken", record_id, message + NUL + hint)``; an exception's own arguments do not survive
    pickling, so the parent makes the AuditChainBroken again."""
    _yield_the_cpu()
    walk = ChainWalk(key=ChainKey(key), keyed_from=keyed_from, plain_head=plain_head)
    walk.resume(last_id, last_hash)
    try:
        walk.check(rows)
    except AuditChainBroken as exc:
        return "broken", exc.record_id, f"{exc.message}\0{exc.hint or ''}"
    return "ok", walk.count, walk.prev
