"""People and their tokens on both backends: one gateway makes them, another knows them; a token
is kept by its sha256 only, works until revoked or expired, and stops with its person."""

from __future__ import annotations

import hashlib

import anyio
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


# The refusals themselves are in test_people_refusals.py; these are what they leave out.


async def test_a_disabled_admin_is_no_admin_to_keep(backend: Backend) -> None:
    """A person whose status is not active counts for nothing: the one active admin is the last."""
    people, _ = await _stores(backend)
    await people.add("ann", roles=parse_roles(["admin"]), email=None, by="setup", now=1.0)
    await people.add("old", roles=parse_roles(["admin"]), email=None, by="setup", now=1.0)
    await (await backend.db()).execute(Sql("UPDATE people SET status = 'disabled' WHERE name = 'old'"))
    with pytest.raises(UsageError, match="'ann' is the last admin"):
        await people.remove("ann")


async def test_two_admins_removing_each_other_at_once_leave_one(backend: Backend) -> None:
    """On two gateways at the same moment: each sees the other still there unless the change runs
    one at a time, and then nobody could manage people."""
    first, second = await _stores(backend)
    await first.add("ann", roles=parse_roles(["admin"]), email=None, by="setup", now=1.0)
    await first.add("bo", roles=parse_roles(["admin"]), email=None, by="setup", now=1.0)
    refused: list[str] = []

    async def remove(store: PeopleStore, name: str) -> None:
        try:
            await store.remove(name)
        except UsageError as exc:
            refused.append(exc.message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(remove, first, "bo")
        tg.start_soon(remove, second, "ann")
    assert len(refused) == 1 and "is the last admin" in refused[0]
    assert len(await first.all()) == 1  # neither both gone nor both kept


async def test_revoking_a_token_nobody_made_says_so(backend: Backend) -> None:
    people, _ = await _stores(backend)
    with pytest.raises(UsageError, match="no live token 'pt_0000'") as info:
        await people.revoke("pt_0000", now=1.0)
    assert "pincer people tokens" in (info.value.hint or "")


async def test_a_disabled_persons_token_and_a_sign_ins_digest_are_checked_alike(backend: Backend) -> None:
    people, other = await _stores(backend)
    await people.add("dee", roles=parse_roles(["viewer"]), email="Dee@Example.test", by="cli:op", now=1.0)
    made = await people.new_token("dee", now=2.0)
    digest = hashlib.sha256(made.value.encode()).hexdigest()
    found = await other.holder_of_digest(digest, now=3.0)
    assert found is not None and found[0].name == "dee"
    assert await other.holder_of_digest("0" * 64, now=3.0) is None
    by_email = await other.by_email("dee@EXAMPLE.test")
    assert by_email is not None and by_email.name == "dee" and await other.by_email("nobody@example.test") is None
    await (await backend.db()).execute(Sql("UPDATE people SET status = 'disabled' WHERE name = 'dee'"))
    assert await other.holder(made.value, now=4.0) is None
    assert await other.holder_of_digest(digest, now=4.0) is None
