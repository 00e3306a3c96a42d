"""Which skills apply to a message: IronClaw's activation scoring under a token budget.

Per skill, over the lowercased message:

- each keyword: +10 as a whole word (or phrase), else +5 as a substring; at most 30 in all;
- each tag: +3 as a whole word; at most 15;
- each regex pattern that matches: +20; at most 40;
- any exclude keyword present as a whole word vetoes the skill (score 0).

A skill without activation keywords is matched on its name instead (``gh-issues`` as the word
``gh-issues`` or the phrase ``gh issues``), scored like a keyword. Skills scoring above 0 are
taken best first (ties by name) while they fit: at most ``max_skills`` of them and at most
``max_tokens`` tokens together, a skill costing its body's estimated tokens (4 characters a
token) but never more than its ``max_context_tokens``. A skill that does not fit is passed
over, and the next one is tried. Patterns see at most the first ``MAX_MESSAGE_CHARS``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pincer.skills.model import Skill

__all__ = ["Selection", "select", "estimate_tokens", "KEYWORD_CAP", "TAG_CAP", "PATTERN_CAP", "MAX_MESSAGE_CHARS"]

WHOLE_WORD = 10
SUBSTRING = 5
KEYWORD_CAP = 30
TAG = 3
TAG_CAP = 15
PATTERN = 20
PATTERN_CAP = 40
MAX_MESSAGE_CHARS = 4_000
CHARS_PER_TOKEN = 4
_WORD = re.compile(r"[a-z0-9][a-z0-9_'+.#-]*")


@dataclass(frozen=True, kw_only=True, slots=True)
class Selection:
    skill: Skill
    score: int
    tokens: int
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.skill.name,
            "score": self.score,
            "tokens": self.tokens,
            "reasons": list(self.reasons),
            "path": str(self.skill.path),
        }


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class _Matcher:
    keywords: tuple[tuple[str, bool], ...]  # (keyword, is_phrase)
    excludes: tuple[tuple[str, bool], ...]
    tags: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    tokens: int


_MATCHERS: dict[tuple[str, str, str], _Matcher] = {}


def _matcher(skill: Skill) -> _Matcher:
    key = (skill.content_hash, skill.name, str(skill.path))
    found = _MATCHERS.get(key)
    if found is not None:
        return found
    activation = skill.activation
    words = activation.keywords
    if not words:
        name = skill.name.lower()
        words = (name, name.replace("-", " ").replace("_", " ")) if ("-" in name or "_" in name) else (name,)
    patterns = []
    for pattern in activation.patterns:
        try:
            patterns.append(re.compile(pattern, re.IGNORECASE))
        except re.error:
            continue
    matcher = _Matcher(
        keywords=tuple((w, " " in w) for w in dict.fromkeys(w.lower().strip() for w in words) if w),
        excludes=tuple((w, " " in w) for w in (e.lower().strip() for e in activation.exclude_keywords) if w),
        tags=tuple(t.lower() for t in activation.tags),
        patterns=tuple(patterns),
        tokens=min(estimate_tokens(skill.body), activation.max_context_tokens),
    )
    if len(_MATCHERS) > 65_536:
        _MATCHERS.clear()
    _MATCHERS[key] = matcher
    return matcher


def _is_whole(word: str, is_phrase: bool, words: frozenset[str], padded: str) -> bool:
    if is_phrase:
        return f" {word} " in padded
    return word in words


def score(skill: Skill, message: str) -> tuple[int, tuple[str, ...]]:
    """The score of one skill for one message, with what scored."""
    return _score(_matcher(skill), *_prepare(message))


def _prepare(message: str) -> tuple[str, frozenset[str], str]:
    lowered = message[:MAX_MESSAGE_CHARS].lower()
    found = _WORD.findall(lowered)
    words = frozenset(found) | frozenset(w.rstrip(".'") for w in found)
    padded = " " + " ".join(found) + " "
    return lowered, words, padded


def _score(m: _Matcher, lowered: str, words: frozenset[str], padded: str) -> tuple[int, tuple[str, ...]]:
    for word, is_phrase in m.excludes:
        if _is_whole(word, is_phrase, words, padded):
            return 0, (f"excluded by {word!r}",)
    reasons: list[str] = []
    keyword_score = 0
    for word, is_phrase in m.keywords:
        if _is_whole(word, is_phrase, words, padded):
            keyword_score += WHOLE_WORD
            reasons.append(f"keyword {word!r} +{WHOLE_WORD}")
        elif word in lowered:
            keyword_score += SUBSTRING
            reasons.append(f"keyword {word!r} (substring) +{SUBSTRING}")
    tag_score = 0
    for tag in m.tags:
        if tag in words or (" " in tag and f" {tag} " in padded):
            tag_score += TAG
            reasons.append(f"tag {tag!r} +{TAG}")
    pattern_score = 0
    for pattern in m.patterns:
        if pattern.search(lowered):
            pattern_score += PATTERN
            reasons.append(f"pattern {pattern.pattern!r} +{PATTERN}")
    total = min(keyword_score, KEYWORD_CAP) + min(tag_score, TAG_CAP) + min(pattern_score, PATTERN_CAP)
    return total, tuple(reasons)


def select(message: str, skills: Iterable[Skill], *, max_skills: int = 3, max_tokens: int = 6000) -> list[Selection]:
    """The skills for ``message``, best first, within the count and token budgets."""
    prepared = _prepare(message)
    scored: list[tuple[int, str, Skill, tuple[str, ...], int]] = []
    for skill in skills:
        m = _matcher(skill)
        value, reasons = _score(m, *prepared)
        if value > 0:
            scored.append((-value, skill.name, skill, reasons, m.tokens))
    scored.sort(key=lambda row: (row[0], row[1]))
    chosen: list[Selection] = []
    budget = max_tokens
    for negative, _name, skill, reasons, tokens in scored:
        if len(chosen) >= max_skills:
            break
        if tokens > budget:
            continue
        budget -= tokens
        chosen.append(Selection(skill=skill, score=-negative, tokens=tokens, reasons=reasons))
    return chosen


def selectable(skills: Sequence[Skill], eligible: set[str]) -> list[Skill]:
    """The skills ``select`` may choose: eligible and model-invocable."""
    return [s for s in skills if s.name in eligible and s.model_invocable]
