"""Which skills apply to a message: IronClaw's activation scoring under a token budget.

Per skill, over the lowercased message:

- each keyword: +10 as a whole word (or phrase), else +5 as a substring; at most 30 in all;
- each tag: +3 as a whole word; at most 15;
- each regex pattern that matches: +20; at most 40;
- its name and description against the message (BM25, see ``wording``): up to +8, below one
  whole keyword, and only when two distinct words of the message are in them;
- any exclude keyword present as a whole word vetoes the skill (score 0).

A whole word is one not preceded or followed by a letter, a digit or ``_``. A skill without
activation keywords is matched on its name instead (``gh-issues`` as the word ``gh-issues`` or
the phrase ``gh issues``), scored like a keyword. All terms of all skills are found in one pass
over the message (an Aho-Corasick automaton built once per set of skills), so selection costs
little more than the message's length plus the skills that declare regex patterns. Skills scoring above 0 are
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

from ahocorasick_rs import AhoCorasick, MatchKind

from pincer.config import SkillsSettings
from pincer.skills.model import Skill
from pincer.skills.wording import DescriptionIndex

__all__ = ["Selection", "select", "estimate_tokens", "KEYWORD_CAP", "TAG_CAP", "PATTERN_CAP", "DESCRIPTION_CAP", "MAX_MESSAGE_CHARS"]

_SKILLS = SkillsSettings()  # [skills]'s defaults, written once in pincer.config
WHOLE_WORD = 10
SUBSTRING = 5
KEYWORD_CAP = 30
TAG = 3
TAG_CAP = 15
PATTERN = 20
PATTERN_CAP = 40
DESCRIPTION_CAP = 8  # below one whole-word keyword: what an author declared outweighs what we guess
MAX_MESSAGE_CHARS = 4_000
CHARS_PER_TOKEN = 4


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


@dataclass(frozen=True, kw_only=True, slots=True)
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


def score(skill: Skill, message: str) -> tuple[int, tuple[str, ...]]:
    """The score of one skill for one message, with what scored."""
    scored = _index((skill,)).scores(message)
    return scored.get(0, (0, ()))


_KEYWORD, _TAG, _EXCLUDE = 0, 1, 2


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


class _Index:
    """Every term of a set of skills in one automaton: term -> [(skill, role)]."""

    def __init__(self, skills: Sequence[Skill]) -> None:
        self.skills = tuple(skills)
        self.matchers = [_matcher(s) for s in self.skills]
        terms: dict[str, list[tuple[int, int]]] = {}
        for index, m in enumerate(self.matchers):
            for word, _ in m.keywords:
                terms.setdefault(word, []).append((index, _KEYWORD))
            for tag in m.tags:
                terms.setdefault(tag, []).append((index, _TAG))
            for word, _ in m.excludes:
                terms.setdefault(word, []).append((index, _EXCLUDE))
        self.terms = list(terms)
        self.owners = [terms[t] for t in self.terms]
        self.automaton = AhoCorasick(self.terms, matchkind=MatchKind.Standard) if self.terms else None
        self.with_patterns = [i for i, m in enumerate(self.matchers) if m.patterns]
        # The name counts once: a skill without keywords is already matched on it.
        self.descriptions = DescriptionIndex(
            [(f"{s.name.replace('-', ' ').replace('_', ' ')} " if s.activation.keywords else "") + s.description for s in self.skills]
        )

    def scores(self, message: str) -> dict[int, tuple[int, tuple[str, ...]]]:
        lowered = message[:MAX_MESSAGE_CHARS].lower()
        whole: dict[int, bool] = {}  # term index -> seen as a whole word (else only as a substring)
        if self.automaton is not None:
            for term, start, end in self.automaton.find_matches_as_indexes(lowered, overlapping=True):
                if whole.get(term):
                    continue
                is_whole = (start == 0 or not _is_word_char(lowered[start - 1])) and (
                    end == len(lowered) or not _is_word_char(lowered[end])
                )
                whole[term] = is_whole or whole.get(term, False)
        vetoed: dict[int, str] = {}
        keyword_score: dict[int, int] = {}
        tag_score: dict[int, int] = {}
        reasons: dict[int, list[str]] = {}
        for term, is_whole in whole.items():
            text = self.terms[term]
            for skill, role in self.owners[term]:
                if role == _EXCLUDE:
                    if is_whole:
                        vetoed.setdefault(skill, text)
                elif role == _KEYWORD:
                    gained = WHOLE_WORD if is_whole else SUBSTRING
                    keyword_score[skill] = keyword_score.get(skill, 0) + gained
                    reasons.setdefault(skill, []).append(
                        f"keyword {text!r} +{gained}" if is_whole else f"keyword {text!r} (substring) +{gained}"
                    )
                elif is_whole:
                    tag_score[skill] = tag_score.get(skill, 0) + TAG
                    reasons.setdefault(skill, []).append(f"tag {text!r} +{TAG}")
        pattern_score: dict[int, int] = {}
        for skill in self.with_patterns:
            if skill in vetoed:
                continue
            for pattern in self.matchers[skill].patterns:
                if pattern.search(lowered):
                    pattern_score[skill] = pattern_score.get(skill, 0) + PATTERN
                    reasons.setdefault(skill, []).append(f"pattern {pattern.pattern!r} +{PATTERN}")
        description_score: dict[int, int] = {}
        for skill, (value, shared) in self.descriptions.scores(lowered).items():
            if skill in vetoed:
                continue
            description_score[skill] = min(DESCRIPTION_CAP, math.ceil(value))
            reasons.setdefault(skill, []).append(f"description {', '.join(shared)} +{description_score[skill]}")
        result: dict[int, tuple[int, tuple[str, ...]]] = {}
        for skill, word in vetoed.items():
            result[skill] = (0, (f"excluded by {word!r}",))
        for skill in set(keyword_score) | set(tag_score) | set(pattern_score) | set(description_score):
            if skill in vetoed:
                continue
            total = (
                min(keyword_score.get(skill, 0), KEYWORD_CAP)
                + min(tag_score.get(skill, 0), TAG_CAP)
                + min(pattern_score.get(skill, 0), PATTERN_CAP)
                + description_score.get(skill, 0)
            )
            result[skill] = (total, tuple(_ordered(reasons.get(skill, []))))
        return result


def _ordered(reasons: list[str]) -> list[str]:
    order = {"keyword": 0, "tag": 1, "pattern": 2, "description": 3}
    return sorted(reasons, key=lambda r: (order.get(r.split(" ", 1)[0], 3), r))


_INDEXES: dict[tuple[int, ...], tuple[tuple[Skill, ...], _Index]] = {}


def _index(skills: Sequence[Skill]) -> _Index:
    key = tuple(id(s) for s in skills)
    found = _INDEXES.get(key)
    if found is not None and len(found[0]) == len(skills) and all(a is b for a, b in zip(found[0], skills, strict=True)):
        return found[1]
    index = _Index(skills)
    if len(_INDEXES) > 32:
        _INDEXES.clear()
    _INDEXES[key] = (index.skills, index)
    return index


def select(
    message: str, skills: Iterable[Skill], *, max_skills: int = _SKILLS.max_selected, max_tokens: int = _SKILLS.max_selected_tokens
) -> list[Selection]:
    """The skills for ``message``, best first, within the count and token budgets."""
    index = _index(tuple(skills))
    scored = [
        (-value, index.skills[i].name, i, reasons)
        for i, (value, reasons) in index.scores(message).items()
        if value > 0
    ]
    scored.sort(key=lambda row: (row[0], row[1]))
    chosen: list[Selection] = []
    budget = max_tokens
    for negative, _name, i, reasons in scored:
        if len(chosen) >= max_skills:
            break
        tokens = index.matchers[i].tokens
        if tokens > budget:
            continue
        budget -= tokens
        chosen.append(Selection(skill=index.skills[i], score=-negative, tokens=tokens, reasons=reasons))
    return chosen


def selectable(skills: Sequence[Skill], eligible: set[str]) -> list[Skill]:
    """The skills ``select`` may choose: eligible and model-invocable."""
    return [s for s in skills if s.name in eligible and s.model_invocable]
