"""``find_tools``: the best-matching tools for a query, over names, descriptions and schemas.

A session with dozens of MCP servers has hundreds of tools; sending every definition costs tens
of thousands of tokens a turn. Past ``[agent] max_tool_definitions`` the model is given
``find_tools`` (this ranking) and ``load_tools`` instead. The ranking is BM25 over words: a tool's
name counts three times, its description once, its parameters' names and descriptions half.
Words are split at punctuation and camelCase (``getIssue`` -> get, issue) and lowercased.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ToolIndex", "SearchHit", "words", "one_line"]

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_K1, _B = 1.2, 0.75
_NAME_WEIGHT, _DESCRIPTION_WEIGHT, _SCHEMA_WEIGHT = 3.0, 1.0, 0.5
_ONE_LINE_CHARS = 160


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def one_line(description: str) -> str:
    """The first sentence (or line) of a description, bounded."""
    text = " ".join(description.split())
    match = re.search(r"(?<=[.!?])\s", text)
    first = text[: match.start()] if match else text
    return first if len(first) <= _ONE_LINE_CHARS else first[: _ONE_LINE_CHARS - 3] + "..."


def _schema_text(schema: Mapping[str, Any], depth: int = 0) -> Iterable[str]:
    if depth > 4 or not isinstance(schema, Mapping):
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            yield str(name)
            if isinstance(sub, Mapping):
                if isinstance(sub.get("description"), str):
                    yield sub["description"]
                yield from _schema_text(sub, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _schema_text(items, depth + 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchHit:
    name: str
    description: str
    score: float


class ToolIndex:
    """Built once per run over the tools it may offer: (name, description, input schema)."""

    def __init__(self, tools: Sequence[tuple[str, str, Mapping[str, Any]]]) -> None:
        self._names = [name for name, _, _ in tools]
        self._descriptions = [description for _, description, _ in tools]
        self._weights: list[dict[str, float]] = []
        for name, description, schema in tools:
            counts: dict[str, float] = defaultdict(float)
            for word in words(name):
                counts[word] += _NAME_WEIGHT
            for word in words(description):
                counts[word] += _DESCRIPTION_WEIGHT
            for part in _schema_text(schema):
                for word in words(part):
                    counts[word] += _SCHEMA_WEIGHT
            self._weights.append(dict(counts))
        self._lengths = [sum(c.values()) for c in self._weights]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 1.0
        frequency: Counter[str] = Counter()
        for counts in self._weights:
            frequency.update(counts.keys())
        total = len(self._weights)
        self._idf = {w: math.log(1 + (total - n + 0.5) / (n + 0.5)) for w, n in frequency.items()}

    def search(self, query: str, limit: int = 8) -> list[SearchHit]:
        terms = set(words(query))
        hits: list[SearchHit] = []
        for i, counts in enumerate(self._weights):
            score = 0.0
            norm = _K1 * (1 - _B + _B * self._lengths[i] / self._average)
            for term in terms:
                tf = counts.get(term)
                if tf:
                    score += self._idf[term] * tf * (_K1 + 1) / (tf + norm)
            if score > 0:
                hits.append(SearchHit(name=self._names[i], description=one_line(self._descriptions[i]), score=score))
        hits.sort(key=lambda h: (-h.score, h.name))
        return hits[:limit]
