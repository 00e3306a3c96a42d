"""Run budgets: overrides by name are checked; the first spent budget is named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.policy.run_budget import BUDGET_NAMES, RunBudgets, first_exceeded, would_exceed_tool_calls


def test_overrides_replace_by_name_and_refuse_what_is_not_a_budget() -> None:
    budgets = RunBudgets().with_overrides({"turns": "5", "cost_usd": 0.25, "tool_calls": 0})
    assert (budgets.turns, budgets.cost_usd, budgets.tool_calls) == (5, 0.25, 0)
    for bad, word in [({"turn": 1}, "unknown budget"), ({"turns": -1}, "positive"), ({"turns": 1.5}, "whole"),
                      ({"deadline_s": "soon"}, "number"), ({"turns": True}, "number"), ({"cost_usd": float("inf")}, "finite"),
                      ({"deadline_s": 0}, "positive")]:  # fmt: skip
        with pytest.raises(UsageError) as info:
            RunBudgets().with_overrides(bad)
        assert word in info.value.message


@given(st.dictionaries(st.sampled_from([*BUDGET_NAMES, "other"]), st.one_of(st.integers(), st.floats(), st.text(), st.none(), st.booleans())))
def test_any_override_either_applies_or_raises_our_error(overrides: dict) -> None:
    try:
        RunBudgets().with_overrides(overrides)
    except UsageError:
        pass


def test_the_first_spent_budget_is_named() -> None:
    budgets = RunBudgets(turns=2, input_tokens=100, output_tokens=50, cost_usd=1.0)
    kwargs = {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    assert first_exceeded(budgets, turns=2, about_to_start_turn=True, **kwargs) == "turns"
    assert first_exceeded(budgets, turns=2, about_to_start_turn=False, **kwargs) is None
    assert first_exceeded(budgets, turns=0, about_to_start_turn=False, **{**kwargs, "input_tokens": 101}) == "input_tokens"
    assert first_exceeded(budgets, turns=0, about_to_start_turn=True, **{**kwargs, "output_tokens": 50}) == "output_tokens"
    assert first_exceeded(budgets, turns=0, about_to_start_turn=False, **{**kwargs, "cost_usd": 1.5}) == "cost_usd"
    assert first_exceeded(RunBudgets(), turns=0, about_to_start_turn=False, **{**kwargs, "cost_usd": None}) is None
    assert would_exceed_tool_calls(RunBudgets(tool_calls=3), done=2, requested=2)
    assert not would_exceed_tool_calls(RunBudgets(tool_calls=3), done=1, requested=2)
