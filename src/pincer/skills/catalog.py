"""The catalog a model sees: progressive disclosure of the skill library.

An ``<available_skills>`` block lists name, description and location of each eligible,
model-invocable skill (in precedence order), bounded in count and characters. When skills do
not fit, a visible ``<note>`` says how many were left out and which settings raise the bounds.
A skill's instructions are not in the catalog: the model reads them on demand with the built-in
``skill`` tool (``{"name": ...}``), so it never needs the whole library in its prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from pincer.config import SkillsSettings
from pincer.skills.model import Skill

__all__ = ["Catalog", "build_catalog", "CATALOG_MAX_SKILLS", "CATALOG_MAX_CHARS"]

CATALOG_MAX_SKILLS = SkillsSettings().catalog_max_skills  # [skills]'s defaults
CATALOG_MAX_CHARS = SkillsSettings().catalog_max_chars
_OPEN = "<available_skills>\n"
_CLOSE = "</available_skills>\n"
_NOTE_RESERVE = 400  # room kept for the truncation note


@dataclass(frozen=True, kw_only=True, slots=True)
class Catalog:
    text: str
    included: tuple[str, ...]
    omitted: tuple[str, ...]

    @property
    def is_truncated(self) -> bool:
        return bool(self.omitted)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "included": list(self.included), "omitted": list(self.omitted)}


def _entry(skill: Skill) -> str:
    return (
        "<skill>\n"
        f"<name>{escape(skill.name)}</name>\n"
        f"<description>{escape(skill.description)}</description>\n"
        f"<location>{escape(str(skill.path))}</location>\n"
        "</skill>\n"
    )


def build_catalog(
    skills: Iterable[Skill], *, max_skills: int = CATALOG_MAX_SKILLS, max_chars: int = CATALOG_MAX_CHARS
) -> Catalog:
    """``skills``: the eligible, model-invocable ones, in precedence order."""
    included: list[str] = []
    omitted: list[str] = []
    parts = [_OPEN]
    size = len(_OPEN) + len(_CLOSE)
    for skill in skills:
        entry = _entry(skill)
        if omitted or len(included) >= max_skills or size + len(entry) + _NOTE_RESERVE > max_chars:
            omitted.append(skill.name)
            continue
        parts.append(entry)
        size += len(entry)
        included.append(skill.name)
    if omitted:
        parts.append(
            f"<note>{len(omitted)} more skill{'s are' if len(omitted) > 1 else ' is'} not listed: the catalog holds at "
            f"most {max_skills} skills and {max_chars:,} characters ([skills] catalog_max_skills, catalog_max_chars). "
            "Call the skill tool with a name to read any skill.</note>\n"
        )
    parts.append(_CLOSE)
    return Catalog(text="".join(parts), included=tuple(included), omitted=tuple(omitted))
