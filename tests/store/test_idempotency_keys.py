"""Idempotency keys (store/idempotency.py), on both backends: a key that is no key is refused
with what to use; a claim left by a process that died is taken over at once, not after its
lease; an expired result runs again; a duplicate cancelled while it waits leaves the slot usable."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.store.idempotency import MAX_KEY_LENGTH, args_digest, check_key
from tests.store.conftest import Backend
from tests.store.test_approvals_gone import _dead_waiter

WAIT_S = 30  # a duplicate waiting on a claim held in this process


@pytest.mark.parametrize(
    ("key", "said"),
    [("", "must be 1 to"), ("k" * (MAX_KEY_LENGTH + 1), "must be 1 to"), ("a\nb", "control characters")],
)
def test_a_key_that_is_no_key_is_refused_with_what_to_use(key: str, said: str) -> None:
    with pytest.raises(UsageError, match=said) as info:
        check_key(key)
    assert info.value.hint in ("use a UUID or a short hash of the request", "use printable characters only")
    assert key[:8] not in info.value.message or not key  # the key itself is not echoed back


@given(st.text(max_size=MAX_KEY_LENGTH + 20))
def test_any_key_is_accepted_or_refused_with_a_usage_error(key: str) -> None:
    printable = 0 < len(key) <= MAX_KEY_LENGTH and all(ord(ch) >= 32 for ch in key)
    try:
        check_key(key)
    except UsageError:
        assert not printable
    else:
        assert printable


@pytest.mark.anyio
async def test_a_claim_left_by_a_process_that_died_is_taken_over_at_once(backend: Backend) -> None:
    store = await backend.idempotency()
    assert await store.claim("main", "http", "k1")
    backend.tamper("UPDATE idempotency SET claimed_by = ? WHERE key = ?", (_dead_waiter(), "k1"))
    other = await backend.idempotency()
    with anyio.fail_after(WAIT_S):  # its lease is minutes away: only its owner's death frees it
        assert await other.claim("main", "http", "k1")


@pytest.mark.anyio
async def test_an_expired_result_runs_again(backend: Backend) -> None:
    store = await backend.idempotency()
    digest = args_digest({"url": "https://x.test"})
    assert await store.claim("main", "http", "k2")
    await store.store("main", "http", "k2", digest, {"content": "first"})
    assert await store.lookup("main", "http", "k2", digest) == {"content": "first"}
    backend.tamper("UPDATE idempotency SET expires_at = 0 WHERE key = ?", ("k2",))
    other = await backend.idempotency()
    assert await other.lookup("main", "http", "k2", digest) is None
    assert await other.claim("main", "http", "k2")  # runs again, under this caller


@pytest.mark.anyio
async def test_a_duplicate_cancelled_while_it_waits_leaves_the_key_to_the_next(backend: Backend) -> None:
    store = await backend.idempotency()
    assert await store.claim("main", "http", "k3")  # this process runs it (its own claim)
    other = await backend.idempotency()  # another gateway's duplicate waits on it
    with anyio.move_on_after(0.2) as waited:
        await other.claim("main", "http", "k3")
    assert waited.cancelled_caught  # still waiting: the claim's owner lives
    await store.release("main", "http", "k3")
    with anyio.fail_after(WAIT_S):
        assert await other.claim("main", "http", "k3")  # the cancelled wait left nothing behind
