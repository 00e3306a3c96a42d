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
