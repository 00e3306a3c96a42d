"""What a run costs: a price table per model, USD per million tokens.

The built-in table covers well-known models at their published list prices (late 2025; providers
change them, so ``[agent.prices.MODEL]`` in config.toml overrides any entry or adds one). A model
is found by its exact name, else by the longest table name it starts with, so dated releases
(``claude-sonnet-4-5-20250929``, ``gpt-4o-2024-08-06``) find their family. A model with no price
costs ``None``: its runs count tokens only, and a run with a cost budget refuses to start.
"""

from __future__ import annotations

from collections.abc import Mapping

from pincer.config import Price
from pincer.llm.messages import TokenUsage

__all__ = ["DEFAULT_PRICES", "find_price", "cost_of"]

_P = Price
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o-mini": _P(input_per_mtok=0.15, output_per_mtok=0.60, cached_input_per_mtok=0.075),
    "gpt-4o": _P(input_per_mtok=2.50, output_per_mtok=10.00, cached_input_per_mtok=1.25),
    "gpt-4.1-nano": _P(input_per_mtok=0.10, output_per_mtok=0.40, cached_input_per_mtok=0.025),
    "gpt-4.1-mini": _P(input_per_mtok=0.40, output_per_mtok=1.60, cached_input_per_mtok=0.10),
    "gpt-4.1": _P(input_per_mtok=2.00, output_per_mtok=8.00, cached_input_per_mtok=0.50),
    "gpt-5-nano": _P(input_per_mtok=0.05, output_per_mtok=0.40, cached_input_per_mtok=0.005),
    "gpt-5-mini": _P(input_per_mtok=0.25, output_per_mtok=2.00, cached_input_per_mtok=0.025),
    "gpt-5": _P(input_per_mtok=1.25, output_per_mtok=10.00, cached_input_per_mtok=0.125),
    "o4-mini": _P(input_per_mtok=1.10, output_per_mtok=4.40, cached_input_per_mtok=0.275),
    "o3": _P(input_per_mtok=2.00, output_per_mtok=8.00, cached_input_per_mtok=0.50),
    "claude-3-5-haiku": _P(input_per_mtok=0.80, output_per_mtok=4.00, cached_input_per_mtok=0.08),
    "claude-haiku-4-5": _P(input_per_mtok=1.00, output_per_mtok=5.00, cached_input_per_mtok=0.10),
    "claude-3-7-sonnet": _P(input_per_mtok=3.00, output_per_mtok=15.00, cached_input_per_mtok=0.30),
    "claude-sonnet-4": _P(input_per_mtok=3.00, output_per_mtok=15.00, cached_input_per_mtok=0.30),
    "claude-opus-4-5": _P(input_per_mtok=5.00, output_per_mtok=25.00, cached_input_per_mtok=0.50),
    "claude-opus-4": _P(input_per_mtok=15.00, output_per_mtok=75.00, cached_input_per_mtok=1.50),
}


def find_price(model: str, configured: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: config.toml's table first, then the built-in one."""
    for table in (configured or {}, DEFAULT_PRICES):
        if model in table:
            return table[model]
        prefixes = [name for name in table if model.startswith(name)]
        if prefixes:
            return table[max(prefixes, key=len)]
    return None


def cost_of(usage: TokenUsage, price: Price | None) -> float | None:
    """USD for ``usage``; cached input tokens at the cached price (else the input price)."""
    if price is None:
        return None
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    cached_price = price.cached_input_per_mtok if price.cached_input_per_mtok is not None else price.input_per_mtok
    total = (
        (usage.input_tokens - cached) * price.input_per_mtok
        + cached * cached_price
        + usage.output_tokens * price.output_per_mtok
    )
    return total / 1_000_000
