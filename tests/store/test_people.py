"""People and their tokens on both backends: one gateway makes them, another knows them; a token
is kept by its sha256 only, works until revoked or expired, and stops with its person."""

from __future__ import annotations

import hashlib

import pytest

from pincer.core.errors import UsageError
from pincer.policy.roles import parse_roles
from pincer.store.people import PeopleStore
from pincer.store.sql import Sql
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


async def _stores(backend: Backend) -> tuple[PeopleStore, PeopleStore]:
    return PeopleStore(await backend.db()), PeopleStore(await backend.db())


async def test_a_person_made_on_one_gateway_is_known_on_another(backend: Backend) -> None:
    mine, other = await _stores(backend)
    await mine.add("alice", roles=parse_roles(["approver:tool=github_*", "viewer"]), email="a@example.test", by="cli:op", now=10.0)
    alice = await other.get("alice")
    assert alice is not None and alice.roles.written() == ["approver:tool=github_*", "viewer"]
    assert alice.email == "a@example.test" and alice.created_by == "cli:op"
    with pytest.raises(UsageError, match="a person already"):
        await other.add("alice", roles=parse_roles(["viewer"]), email=None, by="cli:op", now=11.0)
    with pytest.raises(UsageError, match="needs a role"):
        await other.add("bob", roles=parse_roles([]), email=None, by="cli:op", now=11.0)
    assert [p.name for p in await other.all()] == ["alice"]


async def test_a_token_is_stored_by_its_sha256_and_is_its_persons_until_revoked(backend: Backend) -> None:
    mine, other = await _stores(backend)
    await mine.add("alice", roles=parse_roles(["viewer"]), email=None, by="cli:op", now=10.0)
    made = await mine.new_token("alice", now=20.0)
    assert made.value.startswith("pcp_") and made.value not in repr(made)
    rows = await (await backend.db()).fetch_all(Sql("SELECT digest FROM person_tokens"))
    assert [tuple(r) for r in rows] == [(hashlib.sha256(made.value.encode()).hexdigest(),)]
    found = await other.holder(made.value, now=30.0)
    assert found is not None and found[0].name == "alice" and found[1].id == made.token.id
    assert (await other.tokens("alice"))[0].last_used == 30.0
    assert await other.holder(made.value + "x", now=30.0) is None
    assert await other.holder("pcr_" + made.value[4:], now=30.0) is None
    await other.revoke(made.token.id, now=40.0)
    assert await mine.holder(made.value, now=41.0) is None
    with pytest.raises(UsageError, match="no live token"):
        await mine.revoke(made.token.id, now=42.0)


async def test_an_expired_token_and_a_removed_persons_token_are_no_ones(backend: Backend) -> None:
    mine, other = await _stores(backend)
    await mine.add("bob", roles=parse_roles(["operator"]), email=None, by="cli:op", now=10.0)
    short = await mine.new_token("bob", now=20.0, expires_at=100.0)
    lasting = await mine.new_token("bob", now=20.0)
    assert await other.holder(short.value, now=99.0) is not None
    assert await other.holder(short.value, now=100.0) is None
    with pytest.raises(UsageError, match="expire before"):
        await mine.new_token("bob", now=200.0, expires_at=150.0)
    assert await mine.remove("bob") == 2
    assert await other.holder(lasting.value, now=30.0) is None and await other.tokens("bob") == []
    with pytest.raises(UsageError, match="no person named"):
        await mine.new_token("bob", now=300.0)
