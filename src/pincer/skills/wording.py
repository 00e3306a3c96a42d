"""A message against skills' names and descriptions: Okapi BM25 over a few words each.

Claude Code's model picks a skill by reading its description; keyword selection never read it,
so "create an MCP server for the Stripe API" found nothing although mcp-builder's description
says exactly that. This is the small, deterministic stand-in: words are lowercased, stop words
dropped, and a light suffix strip makes "servers"/"server" and "creating"/"create" one word.
A skill counts only when at least ``MIN_SHARED_WORDS`` distinct words of the message are in its
name or description, so one common word ("file") selects nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["DescriptionIndex", "words", "MIN_SHARED_WORDS"]

K1 = 1.2
B = 0.75
MIN_SHARED_WORDS = 2

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "can", "do", "does", "for", "from", "has", "have", "how",
        "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "so", "than", "that",
        "the", "their", "them", "then", "there", "these", "this", "to", "use", "used", "uses", "using", "via", "was", "we",
        "what", "when", "where", "which", "while", "who", "will", "with", "without", "you", "your",
    }
)  # fmt: skip
_SUFFIXES = ("ing", "ies", "es", "ed", "s", "e")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            return stem + "y" if suffix == "ies" else stem
    return word


def words(text: str) -> list[str]:
    """The words BM25 compares: lowercased, no stop words, suffixes stripped."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


class DescriptionIndex:
    """BM25 over one document per skill (its name and description)."""

    def __init__(self, documents: Sequence[str]) -> None:
        self._counts = [Counter(words(d)) for d in documents]
        self._lengths = [sum(c.values()) for c in self._counts]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        total = len(self._counts)
        frequency: Counter[str] = Counter()
        for counts in self._counts:
            frequency.update(counts.keys())
        self._idf = {w: math.log((total - n + 0.5) / (n + 0.5) + 1) for w, n in frequency.items()}

    def scores(self, message: str) -> dict[int, tuple[float, tuple[str, ...]]]:
        """document index -> (BM25 score, the shared words), for documents sharing at least
        ``MIN_SHARED_WORDS`` distinct words with ``message``."""
        said: dict[str, str] = {}  # stem -> the word as the message has it, for the reasons
        for word in _WORD.findall(message.lower()):
            if word not in _STOP and len(word) > 1:
                said.setdefault(_stem(word), word)
        query = [w for w in said if w in self._idf]
        if len(query) < MIN_SHARED_WORDS:
            return {}
        result: dict[int, tuple[float, tuple[str, ...]]] = {}
        for index, counts in enumerate(self._counts):
            shared = [w for w in query if w in counts]
            if len(shared) < MIN_SHARED_WORDS:
                continue
            norm = K1 * (1 - B + B * self._lengths[index] / (self._average or 1.0))
            value = sum(self._idf[w] * counts[w] * (K1 + 1) / (counts[w] + norm) for w in shared)
            result[index] = (value, tuple(said[w] for w in shared))
        return result
