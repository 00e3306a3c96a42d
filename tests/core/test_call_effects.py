"""Effects per call: the argument that decides, the fail-closed fallback, the policy hash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.effects import EffectKind as E
from pincer.core.effects import RuntimeKind
from pincer.core.values import CallEffects, ToolSpec
from pincer.runtimes.native.builtins import http_request

READ = frozenset({E.NETWORK})
WRITE = frozenset({E.NETWORK, E.EXTERNAL_WRITE})


def _spec(call_effects: CallEffects | None) -> ToolSpec:
    return ToolSpec(
        name="t", description="t", input_schema={"type": "object"}, effects=WRITE,
        runtime=RuntimeKind.NATIVE, side_effecting=True, source="test", call_effects=call_effects,
    )  # fmt: skip


ACTIONS = CallEffects(arg="action", table={"get_repo": READ, "create_issue": WRITE})


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"action": "get_repo"}, READ),
        ({"action": "create_issue"}, WRITE),
        ({"action": "made_up"}, WRITE),  # not in the table: the tool's whole set
        ({}, WRITE),  # absent, no default
        ({"action": ["get_repo"]}, WRITE),  # not a string
        ({"action": "GET_REPO"}, WRITE),  # case matters unless casefold
        ("not a mapping", WRITE),
        (None, WRITE),
    ],
)
def test_the_deciding_argument_selects_a_row_and_anything_else_gets_every_effect(args, expected) -> None:
    assert _spec(ACTIONS).effects_for(args) == expected


def test_http_methods_fold_case_and_an_absent_method_is_the_schema_default() -> None:
    spec = http_request.spec
    assert spec.effects_for({"url": "https://a.example"}) == READ
    for method in ("GET", "get", "Head", "OPTIONS"):
        assert spec.effects_for({"method": method}) == READ
    for method in ("POST", "put", "Patch", "DELETE", "PROPFIND", "", "GET "):
        assert spec.effects_for({"method": method}) == WRITE, method
    assert E.EXTERNAL_WRITE in spec.effects  # listings show what a call may do at most


def test_a_row_never_widens_past_what_the_tool_declares() -> None:
    wide = CallEffects(arg="action", table={"x": frozenset({E.NETWORK, E.FINANCIAL})})
    assert _spec(wide).effects_for({"action": "x"}) == READ


def test_call_effects_are_in_the_policy_hash_and_absent_ones_leave_old_hashes_alone() -> None:
    plain, with_table = _spec(None), _spec(ACTIONS)
    other = _spec(CallEffects(arg="action", table={"get_repo": WRITE, "create_issue": WRITE}))
    assert len({plain.policy_hash, with_table.policy_hash, other.policy_hash}) == 3
    assert plain.definition_hash == with_table.definition_hash  # what an agent sees is the same


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c), max_leaves=8))
def test_arbitrary_arguments_give_a_subset_of_the_declared_effects(args) -> None:
    for spec in (_spec(ACTIONS), http_request.spec):
        assert spec.effects_for(args) <= spec.effects
        assert spec.effects_for({"action": args, "method": args}) <= spec.effects
