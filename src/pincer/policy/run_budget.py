"""The budgets of an agent run: turns, tool calls, tokens, cost, wall clock.

Pure: :class:`RunBudgets` says the limits, :func:`first_exceeded` which one the usage so far has
spent (checked before each turn, and after it before any of its tool calls run), so a run stops
cleanly with status ``budget_exceeded`` and the name of the budget. The wall-clock deadline is
enforced by the loop's cancel scope; its name is ``deadline``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Protocol

from pincer.core.errors import UsageError

__all__ = ["RunBudgets", "BUDGET_NAMES", "first_exceeded", "would_exceed_tool_calls"]

# The names a run's budgets go by: in RunRequest.budgets, `pincer run --budget NAME=VALUE`,
# REST {"budgets": {...}}, and a budget_exceeded run's ``stop``.
BUDGET_NAMES = ("turns", "tool_calls", "input_tokens", "output_tokens", "cost_usd", "deadline_s")


class BudgetSettings(Protocol):
    """What :meth:`RunBudgets.from_settings` reads of ``[agent]`` (``pincer.config.AgentSettings``
    is one; config reads its defaults from here, so this floor names only what it reads)."""

    @property
    def max_turns(self) -> int: ...
    @property
    def max_tool_calls(self) -> int: ...
    @property
    def max_input_tokens(self) -> int: ...
    @property
    def max_output_tokens(self) -> int: ...
    @property
    def max_cost_usd(self) -> float | None: ...
    @property
    def deadline_s(self) -> float: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class RunBudgets:
    turns: int = 20
    tool_calls: int = 50
    input_tokens: int = 500_000
    output_tokens: int = 50_000
    cost_usd: float | None = None  # None: no cost budget
    deadline_s: float = 600.0

    @classmethod
    def from_settings(cls, agent: BudgetSettings) -> RunBudgets:
        """The ``[agent]`` defaults."""
        return cls(
            turns=agent.max_turns,
            tool_calls=agent.max_tool_calls,
            input_tokens=agent.max_input_tokens,
            output_tokens=agent.max_output_tokens,
            cost_usd=agent.max_cost_usd,
            deadline_s=agent.deadline_s,
        )

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> RunBudgets:
        """These budgets with some replaced; an unknown name or a value that is not a positive
        number is a UsageError naming it."""
        if not overrides:
            return self
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in BUDGET_NAMES:
                raise UsageError(
                    f"unknown budget {name!r}", hint=f"budgets are {', '.join(BUDGET_NAMES)}, e.g. turns=5"
                )
            number = _number(name, value)
            integral = name in ("turns", "tool_calls", "input_tokens", "output_tokens")
            if integral and number != int(number):
                raise UsageError(f"budget {name} must be a whole number, got {value!r}", hint=f"e.g. {name}=10")
            if number < 0 or (number == 0 and name != "tool_calls"):
                raise UsageError(f"budget {name} must be positive, got {value!r}", hint=f"e.g. {name}=10")
            changes[name] = int(number) if integral else float(number)
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise UsageError(f"budget {name} must be a number, got {value!r}", hint=f"e.g. {name}=10")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"budget {name} must be a number, got {value!r}", hint=f"e.g. {name}=10") from None
    if not math.isfinite(number) or number > 1e12:
        raise UsageError(f"budget {name} must be a finite number, got {value!r}", hint=f"e.g. {name}=10")
    return number


def first_exceeded(
    budgets: RunBudgets,
    *,
    turns: int,
    input_tokens: int,
    output_tokens: int,
    cost_usd: float | None,
    about_to_start_turn: bool,
) -> str | None:
    """The name of the first budget the usage has spent, or None. Before a turn, ``turns``
    counts the turns done (one more is about to start); after one, the tokens and cost it added
    are counted as well."""
    if about_to_start_turn and turns >= budgets.turns:
        return "turns"
    if input_tokens > budgets.input_tokens or (about_to_start_turn and input_tokens >= budgets.input_tokens):
        return "input_tokens"
    if output_tokens > budgets.output_tokens or (about_to_start_turn and output_tokens >= budgets.output_tokens):
        return "output_tokens"
    limit = budgets.cost_usd
    if limit is not None and cost_usd is not None and (cost_usd > limit or (about_to_start_turn and cost_usd >= limit)):
        return "cost_usd"
    return None


def would_exceed_tool_calls(budgets: RunBudgets, *, done: int, requested: int) -> bool:
    """Whether running ``requested`` more calls would take the run past its tool-call budget."""
    return done + requested > budgets.tool_calls
