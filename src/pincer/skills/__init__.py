"""Skills: SKILL.md in every dialect, read into one value, found in ordered roots, checked for
eligibility, selected for a message, listed in a catalog, rendered in a sandbox, and their code
served as governed tools. ``docs/skills.md`` is the reference."""

from pincer.skills.catalog import Catalog, build_catalog
from pincer.skills.eligibility import Eligibility, Environment, check_all, check_eligibility
from pincer.skills.library import SkillLibrary
from pincer.skills.model import (
    Activation,
    Capability,
    Dialect,
    Field,
    Issue,
    Parameter,
    ParamType,
    Requires,
    Skill,
    Trigger,
    Trust,
)
from pincer.skills.parser import MAX_SKILL_FILE_BYTES, parse_skill
from pincer.skills.render import Rendered, coerce_params, render_skill
from pincer.skills.roots import LoadError, LoadReport, Root, SkillLoader, WalkLimits, default_roots
from pincer.skills.selection import Selection, select
from pincer.skills.trust import ToolAccess, tools_for_skill

__all__ = [
    "Skill",
    "Dialect",
    "Trust",
    "Parameter",
    "ParamType",
    "Trigger",
    "Activation",
    "Requires",
    "Field",
    "Capability",
    "Issue",
    "parse_skill",
    "MAX_SKILL_FILE_BYTES",
    "Root",
    "WalkLimits",
    "LoadError",
    "LoadReport",
    "SkillLoader",
    "default_roots",
    "SkillLibrary",
    "Environment",
    "Eligibility",
    "check_eligibility",
    "check_all",
    "Selection",
    "select",
    "Catalog",
    "build_catalog",
    "Rendered",
    "render_skill",
    "coerce_params",
    "ToolAccess",
    "tools_for_skill",
]
