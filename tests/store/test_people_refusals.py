"""What the people store refuses, on both backends, and what it leaves behind when it does: a
role change or removal of nobody, the last admin's demotion or removal, a token scoped beyond its
person's roles, an expiry that is no time at all. Each refusal names what to do; none writes."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.policy.roles import parse_roles
from pincer.store.people import PeopleStore, check_person_name, parse_expiry
from pincer.store.sql import Sql
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


async def test_the_last_admin_can_be_neither_demoted_nor_removed_and_nobody_is_nobody(backend: Backend) -> None:
    people = PeopleStore(await backend.db())
    await people.add("root", roles=parse_roles(["admin"]), email=None, by="cli:op", now=1.0)
    with pytest.raises(UsageError, match="last admin and stays one") as demoted:
        await people.set_roles("root", parse_roles(["viewer"]))
    assert "pincer people add NAME --admin" in (demoted.value.hint or "")
    with pytest.raises(UsageError, match="last admin and cannot be removed"):
        await people.remove("root")
    with pytest.raises(UsageError, match="needs a role"):
        await people.set_roles("root", parse_roles([]))
    for act in (people.set_roles("ghost", parse_roles(["viewer"])), people.remove("ghost")):
        with pytest.raises(UsageError, match="no person named 'ghost'") as nobody:
            await act
        assert "pincer people list" in (nobody.value.hint or "")
    root = await people.get("root")
    assert root is not None and root.roles.written() == ["admin"]  # every refusal left the row alone
    # With a second admin, the first may step down, and then be removed.
    await people.add("ada", roles=parse_roles(["admin"]), email=None, by="cli:op", now=2.0)
    await people.set_roles("root", parse_roles(["viewer"]))
    assert await people.remove("root") == 0
    assert [p.name for p in await people.all()] == ["ada"]


async def test_a_token_may_be_scoped_only_to_roles_its_person_holds(backend: Backend) -> None:
    people = PeopleStore(await backend.db())
    await people.add("vic", roles=parse_roles(["viewer"]), email=None, by="cli:op", now=1.0)
    with pytest.raises(UsageError, match="does not hold the role") as beyond:
        await people.new_token("vic", now=2.0, roles=parse_roles(["operator"]))
    assert "viewer" in (beyond.value.hint or "")
    with pytest.raises(UsageError, match=r"\(none given\)"):
        await people.new_token("vic", now=2.0, roles=parse_roles([]))
    assert await people.tokens("vic") == []  # nothing made by a refusal
    scoped = await people.new_token("vic", now=3.0, roles=parse_roles(["viewer"]))
    assert scoped.token.roles is not None and scoped.token.roles.written() == ["viewer"]
    assert [t.id for t in await people.tokens()] == [scoped.token.id]
    assert (await people.token(scoped.token.id)) is not None and await people.token("pt_nothing") is None


async def test_a_disabled_persons_token_is_no_ones(backend: Backend) -> None:
    db = await backend.db()
    people = PeopleStore(db)
    await people.add("dee", roles=parse_roles(["viewer"]), email="Dee@Example.test", by="cli:op", now=1.0)
    made = await people.new_token("dee", now=2.0)
    assert await people.holder(made.value, now=3.0) is not None
    found = await people.by_email("dee@example.test")
    assert found is not None and found.name == "dee"
    await db.execute(Sql("UPDATE people SET status = 'disabled' WHERE name = :name"), {"name": "dee"})
    assert await people.holder(made.value, now=4.0) is None
    assert await people.holder_of_digest("0" * 64, now=4.0) is None


def test_an_expiry_is_a_duration_a_date_or_never() -> None:
    assert parse_expiry(None, now=100.0) is None and parse_expiry("never", now=100.0) is None
    assert parse_expiry("90m", now=100.0) == 100.0 + 90 * 60
    assert parse_expiry(" 2w ", now=0.0) == 2 * 604_800
    assert parse_expiry("2027-01-31", now=0.0) == dt.datetime(2027, 1, 31, tzinfo=dt.UTC).timestamp()
    with pytest.raises(UsageError, match="no time at all"):
        parse_expiry("0d", now=0.0)
    with pytest.raises(UsageError, match="neither a duration nor a date") as bad:
        parse_expiry("tomorrow-ish", now=0.0)
    assert "--expires" in (bad.value.hint or "")


@given(st.text(max_size=5_000))
def test_parse_expiry_answers_any_text_with_a_time_or_a_usage_error(text: str) -> None:
    try:
        when = parse_expiry(text, now=1_000.0)
    except UsageError as exc:
        assert "--expires" in (exc.hint or "") and len(exc.args[0]) < 200
    else:
        assert when is None or isinstance(when, float)


@given(st.text(max_size=5_000))
def test_a_persons_name_is_checked_and_a_bad_one_never_echoed_whole(name: str) -> None:
    try:
        assert check_person_name(name) == name
    except UsageError as exc:
        assert len(exc.args[0]) < 400 and "pincer people" not in exc.args[0]  # 70 characters of it at most
        assert "a person's name is" in (exc.hint or "")
