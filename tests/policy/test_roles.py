"""Roles as written, and what each lets a person do (policy/roles.py): the rule every path asks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.policy.roles import PersonAct, RoleKind, parse_role, parse_roles


def test_an_approver_of_github_answers_github_and_not_exec() -> None:
    roles = parse_roles(["approver:tool=github_*"])
    assert roles.may_answer(tool="github_create_issue", effects=["network"], session="main")
    assert not roles.may_answer(tool="exec", effects=["spawn_process"], session="main")
    assert not roles.may(PersonAct.OPERATE) and roles.may(PersonAct.READ)


def test_an_effect_scope_covers_a_call_only_when_it_holds_every_effect() -> None:
    roles = parse_roles(["approver:effect=network,effect=read_filesystem"])
    assert roles.may_answer(tool="web_fetch", effects=["network"], session="s")
    assert not roles.may_answer(tool="x", effects=["network", "execute_code"], session="s")


def test_scope_keys_narrow_each_other_and_roles_widen() -> None:
    one = parse_roles(["approver:tool=github_*,session=ops-*"])
    assert one.may_answer(tool="github_x", effects=[], session="ops-1")
    assert not one.may_answer(tool="github_x", effects=[], session="main")
    two = parse_roles(["approver:tool=github_*", "approver:session=main"])
    assert two.may_answer(tool="exec", effects=[], session="main")


def test_only_admin_manages_people_and_operators_do_not_answer() -> None:
    assert parse_roles(["admin"]).may(PersonAct.MANAGE_PEOPLE)
    assert parse_roles(["admin"]).may_answer(tool="exec", effects=["spawn_process"], session="x")
    operator = parse_roles(["operator"])
    assert operator.may(PersonAct.OPERATE) and not operator.may(PersonAct.MANAGE_PEOPLE)
    assert not operator.answers_any() and not operator.may_answer(tool="t", effects=[], session="main")
    assert not parse_roles(["viewer"]).may_answer(tool="t", effects=[], session="main")


@pytest.mark.parametrize(
    ("text", "wrong"),
    [("owner", "unknown role"), ("viewer:tool=x", "takes no scope"), ("approver:tool", "not a scope part"),
     ("approver:colour=red", "not a scope part"), ("approver:effect=teleport", "unknown effect"), ("", "not a role"),
     ("approver:tool=a b", "not a scope part")],
)  # fmt: skip
def test_a_wrong_role_is_refused_with_what_was_wrong(text: str, wrong: str) -> None:
    with pytest.raises(UsageError, match=wrong):
        parse_role(text)


_GLOB = st.text(alphabet="abcxyz_*?-", min_size=1, max_size=8)
_ROLE = st.one_of(
    st.sampled_from([k.value for k in RoleKind]),
    st.builds(lambda t, s: f"approver:tool={t},session={s}", _GLOB, _GLOB),
    st.builds(lambda e: f"approver:effect={e}", st.sampled_from(["network", "execute_code", "use_secret"])),
)


@given(_ROLE)
def test_a_role_written_back_parses_to_itself(text: str) -> None:
    role = parse_role(text)
    assert parse_role(str(role)) == role


@given(st.text(max_size=80))
def test_any_text_is_a_role_or_a_usage_error(text: str) -> None:
    try:
        role = parse_role(text)
    except UsageError as exc:
        assert exc.hint
    else:
        assert parse_role(str(role)) == role


_GLOBS = st.sampled_from(["github_*", "github_x", "git*", "g?t", "exec", "*", "a?", "a*", "ops-*", "ops-1", "main"])
_EFFECT_NAMES = st.sampled_from(["network", "read_filesystem", "execute_code", "write_filesystem"])


@st.composite
def _roles(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["viewer", "approver", "operator", "admin"]))
    if kind != "approver":
        return kind
    parts = [f"tool={g}" for g in draw(st.lists(_GLOBS, max_size=2))]
    parts += [f"effect={e}" for e in draw(st.lists(_EFFECT_NAMES, max_size=2))]
    parts += [f"session={g}" for g in draw(st.lists(_GLOBS, max_size=2))]
    return kind + (":" + ",".join(parts) if parts else "")


@given(held=_roles(), asked=_roles(), tool=_GLOBS, session=_GLOBS, effects=st.lists(_EFFECT_NAMES, max_size=3))
def test_a_role_covers_another_only_when_it_answers_and_may_all_the_other_does(
    held: str, asked: str, tool: str, session: str, effects: list[str]
) -> None:
    """A token may carry only roles its person covers: covering must never widen what it may do."""
    outer, inner = parse_role(held), parse_role(asked)
    if outer.covers(inner):
        if inner.answers(tool=tool, effects=effects, session=session):
            assert outer.answers(tool=tool, effects=effects, session=session), (held, asked, tool, effects, session)
        assert parse_roles([asked]).may(PersonAct.OPERATE) <= parse_roles([held]).may(PersonAct.OPERATE)
        assert parse_roles([asked]).may(PersonAct.MANAGE_PEOPLE) <= parse_roles([held]).may(PersonAct.MANAGE_PEOPLE)


def test_a_token_keeps_only_the_roles_its_person_still_covers() -> None:
    held = parse_roles(["approver:tool=github_*", "viewer"])
    assert held.covers(parse_role("approver:tool=github_issue")) and held.covers(parse_role("viewer"))
    assert not held.covers(parse_role("approver")) and not held.covers(parse_role("approver:tool=*"))
    assert not held.covers(parse_role("operator")) and not held.covers(parse_role("admin"))
    scoped = parse_roles(["approver:tool=github_issue", "operator"])
    assert scoped.within(held).written() == ["approver:tool=github_issue"]
    assert scoped.within(parse_roles(["admin"])).written() == scoped.written()
