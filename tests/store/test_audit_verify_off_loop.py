"""Verifying the audit chain never holds the event loop, and walks on from the last verify.

Before, "Verify chain" computed every record's HMAC inside the request handler, on the loop
(1.45 s at 50,000 records: every other request waited). The test watches the loop's own thread
with a profiler hook (``sys.setprofile`` covers only the thread that sets it) and asserts that not
one record's chain value was computed there during a verify, while the verify still walked every
record; no wall-clock time is measured. Both databases.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any

import anyio
import pytest

from pincer.core.errors import AuditChainBroken
from pincer.store import AuditLog
from pincer.store.audit import VERIFY_BATCH_ROWS, VerifyProgress
from pincer.store.chain import ChainKey
from tests.store.conftest import Backend
from tests.store.test_audit_archive import _fill

RECORDS = 2 * VERIFY_BATCH_ROWS + 500  # three batches


class LoopThreadHashes:
    """Counts record chain values computed on the thread that enters it (the event loop's)."""

    def __init__(self) -> None:
        self.on_loop = 0
        self._code = ChainKey.record_hash.__code__

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is self._code:
            self.on_loop += 1

    def __enter__(self) -> LoopThreadHashes:
        self._thread = threading.get_ident()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)


async def _verify_watched(audit: AuditLog, **kw: Any) -> tuple[Any, list[VerifyProgress], int]:
    """Verify while a task on the same loop samples the progress each turn it gets."""
    seen: list[VerifyProgress] = []
    turns = 0
    result: Any = None

    async def sample() -> None:
        nonlocal turns
        while True:
            await anyio.sleep(0)
            turns += 1
            running = audit.verifying
            if running is not None:
                seen.append(VerifyProgress(**running.to_dict()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        try:
            result = await audit.verify_chain(**kw)
        finally:
            tg.cancel_scope.cancel()
    return result, seen, turns


@pytest.mark.anyio
async def test_a_verify_computes_no_chain_value_on_the_event_loop_and_reports_progress(backend: Backend) -> None:
    audit = await backend.audit()
    await _fill(audit, RECORDS)
    with LoopThreadHashes() as probe:
        head, seen, _ = await _verify_watched(audit)
    assert head.records == RECORDS
    assert probe.on_loop == 0, f"{probe.on_loop} record HMACs were computed on the event loop's thread during a verify"
    checked = sorted({p.checked for p in seen})
    assert len(checked) >= 3 and checked[-1] <= RECORDS and all(p.full for p in seen)
    assert all(p.total == RECORDS for p in seen if p.checked)  # the head, read as the walk began
    assert audit.verifying is None


@pytest.mark.anyio
async def test_an_incremental_verify_walks_on_from_the_last_one_and_a_full_one_walks_everything(
    backend: Backend,
) -> None:
    audit = await backend.audit()
    await _fill(audit, RECORDS)
    assert (await audit.verify_chain()).records == RECORDS  # signs the 'verified' mark
    await _fill(audit, 10, first=RECORDS)
    head, seen, _ = await _verify_watched(audit, incremental=True)
    assert head.records == RECORDS + 10
    begun = [p for p in seen if p.checked]
    assert begun and all(p.start == RECORDS and not p.full for p in begun)  # only the 10 new ones walked
    # What an incremental verify trusts: the records before its mark. A full one checks them.
    backend.tamper("UPDATE audit SET reason = 'rewritten' WHERE id = 7")
    assert (await audit.verify_chain(incremental=True)).records == RECORDS + 10
    with pytest.raises(AuditChainBroken) as broken:
        await audit.verify_chain()
    assert broken.value.record_id == 7


@pytest.mark.anyio
async def test_a_moved_verified_mark_is_refused(backend: Backend) -> None:
    """Someone with write access moves the mark past records they rewrote: its MAC no longer
    holds, and an incremental verify says so instead of trusting it."""
    audit = await backend.audit()
    await _fill(audit, 50)
    await audit.verify_chain()
    backend.tamper("UPDATE audit SET reason = 'rewritten' WHERE id = 50")
    backend.tamper("UPDATE audit_marks SET last_id = 60 WHERE name = 'verified'")
    with pytest.raises(AuditChainBroken, match="'verified' mark was altered"):
        await audit.verify_chain(incremental=True)


@pytest.mark.anyio
async def test_a_verified_record_rewritten_in_place_is_caught_by_an_incremental_verify(backend: Backend) -> None:
    """The record a mark names is read again: rewriting exactly it (to hide an edit) is seen."""
    audit = await backend.audit()
    await _fill(audit, 50)
    await audit.verify_chain()
    backend.tamper("UPDATE audit SET hash = ? WHERE id = 50", ("f" * 64,))
    with pytest.raises(AuditChainBroken) as broken:
        await audit.verify_chain(incremental=True)
    assert broken.value.record_id == 50
