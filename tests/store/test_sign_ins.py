"""Dashboard sign-ins on both backends: what one connection (one gateway) writes, another reads;
ended and surplus sign-ins are pruned; the store never holds the cookie itself."""

from __future__ import annotations

import pytest

from pincer.store.sign_ins import SignIn, sign_in_key
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


def _sign_in(created: float, last_used: float | None = None) -> SignIn:
    return SignIn(token_digest="d" * 64, csrf="c" * 43, created=created, last_used=created if last_used is None else last_used)


async def test_a_sign_in_written_by_one_gateway_is_read_and_ended_by_another(backend: Backend) -> None:
    mine, other = await backend.sign_ins(), await backend.sign_ins()
    key = sign_in_key("cookie-value")
    assert key != "cookie-value" and len(key) == 64
    await mine.add(key, _sign_in(100.0))
    assert await other.get(key) == _sign_in(100.0)
    await other.touch(key, 150.0)
    await other.touch(key, 120.0)  # a late, older use never moves the clock back
    assert await mine.get(key) == _sign_in(100.0, 150.0)
    await other.remove(key)
    assert await mine.get(key) is None and await mine.get(sign_in_key("never-given")) is None


async def test_pruning_forgets_ended_sign_ins_and_keeps_the_most_recently_used(backend: Backend) -> None:
    store = await backend.sign_ins()
    for n in range(6):
        await store.add(f"k{n}", _sign_in(created=100.0 + n, last_used=200.0 + n))
    await store.add("old", _sign_in(created=10.0, last_used=300.0))  # past its whole lifetime
    await store.add("idle", _sign_in(created=150.0, last_used=50.0))  # idle too long
    await store.prune(created_before=90.0, used_before=100.0, keep=3)
    assert [k for k in ("k0", "k1", "k2", "k3", "k4", "k5", "old", "idle") if await store.get(k)] == ["k3", "k4", "k5"]
