"""Skills: SKILL.md in every dialect, read into one value, found in ordered roots, checked for
eligibility, selected for a message, listed in a catalog, rendered in a sandbox, and their code
served as governed tools. ``docs/skills.md`` is the reference.

The names below are imported on first use (PEP 562): a command that only walks the roots
(``pincer tools list``) does not pay for jinja2 and the renderer, or the selection index."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pincer.core.lazy import lazy_attributes

if TYPE_CHECKING:
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
    from pincer.skills.params import coerce_params
    from pincer.skills.parser import MAX_SKILL_FILE_BYTES, parse_skill
    from pincer.skills.render import Rendered, render_skill
    from pincer.skills.roots import LoadError, LoadReport, Root, SkillLoader, WalkLimits, default_roots
    from pincer.skills.selection import Selection, select
    from pincer.skills.trust import ToolAccess, tools_for_skill

_MODULE_OF = {
    **dict.fromkeys(("Catalog", "build_catalog"), "catalog"),
    **dict.fromkeys(("Eligibility", "Environment", "check_all", "check_eligibility"), "eligibility"),
    "SkillLibrary": "library",
    **dict.fromkeys(
        ("Activation", "Capability", "Dialect", "Field", "Issue", "Parameter", "ParamType", "Requires", "Skill"),
        "model",
    ),
    **dict.fromkeys(("Trigger", "Trust"), "model"),
    **dict.fromkeys(("MAX_SKILL_FILE_BYTES", "parse_skill"), "parser"),
    **dict.fromkeys(("Rendered", "render_skill"), "render"),
    "coerce_params": "params",
    **dict.fromkeys(("LoadError", "LoadReport", "Root", "SkillLoader", "WalkLimits", "default_roots"), "roots"),
    **dict.fromkeys(("Selection", "select"), "selection"),
    **dict.fromkeys(("ToolAccess", "tools_for_skill"), "trust"),
}

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


__getattr__ = lazy_attributes(__name__, globals(), {name: f"pincer.skills.{module}" for name, module in _MODULE_OF.items()})
