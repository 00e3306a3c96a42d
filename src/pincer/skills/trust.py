"""Trust: which tools an active skill may use.

- A *trusted* skill (workspace, home, ``$PINCER_HOME/skills``, ``extra_dirs``, pincer's bundled
  skills) may use the tools it names (``tools`` / ``allowed-tools``, names or ``*`` patterns;
  every tool when it names none), each still decided per call by the call chain.
- An *installed* skill (``$PINCER_HOME/installed/skills``: from the hub or an MCP server) is
  attenuated to read-only tools: those whose effects stay within ``read_filesystem`` and
  ``network`` (so nothing with ``external_write``, writes, deletes, code execution, secrets,
  spending). A grant that names the skill, ``[[grants]] tool = "skill:NAME"``, lifts that: the
  effects it allows or asks for (or all, with ``default``) are added to what the skill's tools
  may have, and the call chain still decides each call under the ordinary grants.
- A skill loaded from an MCP server has its ``allowed-tools`` ignored until a person approves
  them (``pincer skills approve NAME``); until then it names no tools and is attenuated as above.

This module is pure: specs and grants in, a verdict per tool out.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pincer.core.effects import EffectKind, Mode
from pincer.core.values import ToolSpec
from pincer.policy.grants import Grant
from pincer.skills.model import Skill, Trust

__all__ = ["ToolAccess", "READ_ONLY_EFFECTS", "skill_grant_pattern", "tools_for_skill"]

READ_ONLY_EFFECTS = frozenset({EffectKind.READ_FILESYSTEM, EffectKind.NETWORK})
_SKILL_PREFIX = "skill:"


def skill_grant_pattern(name: str) -> str:
    return _SKILL_PREFIX + name


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolAccess:
    allowed: tuple[str, ...]
    withheld: tuple[tuple[str, str], ...]  # (tool, why)
    attenuated: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": list(self.allowed),
            "withheld": [{"tool": t, "reason": r} for t, r in self.withheld],
            "attenuated": self.attenuated,
            "reason": self.reason,
        }


def _names(skill: Skill, specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    if not skill.tools:
        return list(specs)
    patterns = [p.lower() for p in skill.tools]
    return [s for s in specs if any(fnmatch.fnmatchcase(s.name.lower(), p) for p in patterns)]


def _skill_grant(skill: Skill, grants: Iterable[Grant]) -> Grant | None:
    subject = skill_grant_pattern(skill.name).lower()
    matching = [g for g in grants if g.tool.lower().startswith(_SKILL_PREFIX) and fnmatch.fnmatchcase(subject, g.tool.lower())]
    if not matching:
        return None
    return max(matching, key=lambda g: ("*" not in g.tool, len(g.tool)))


def tools_for_skill(skill: Skill, specs: Sequence[ToolSpec], grants: Iterable[Grant] = ()) -> ToolAccess:
    """The tools ``skill`` may use while active, and why the others are withheld."""
    candidates = _names(skill, specs)
    if skill.trust is Trust.TRUSTED:
        return ToolAccess(
            allowed=tuple(s.name for s in candidates),
            withheld=(),
            attenuated=False,
            reason=f"{skill.name} is trusted ({skill.root or 'local'} skill)",
        )
    extra: set[EffectKind] = set()
    grant = _skill_grant(skill, grants)
    if grant is not None:
        if grant.default in (Mode.ALLOW, Mode.ASK):
            extra = set(EffectKind)
        extra |= {effect for effect, mode in grant.effects.items() if mode in (Mode.ALLOW, Mode.ASK)}
        extra -= {effect for effect, mode in grant.effects.items() if mode is Mode.DENY}
    permitted = READ_ONLY_EFFECTS | extra
    allowed: list[str] = []
    withheld: list[tuple[str, str]] = []
    for spec in candidates:
        beyond = sorted(e.value for e in spec.effects if e not in permitted)
        if beyond:
            withheld.append(
                (
                    spec.name,
                    f"{skill.name} is an installed skill: {spec.name} has {', '.join(beyond)}, beyond read-only "
                    f'(a grant tool = "skill:{skill.name}" can allow it)',
                )
            )
        else:
            allowed.append(spec.name)
    reason = (
        f"{skill.name} is installed; attenuated to read-only tools"
        + (f", widened by grant {grant.id} for {', '.join(sorted(e.value for e in extra))}" if grant and extra else "")
    )
    return ToolAccess(allowed=tuple(allowed), withheld=tuple(withheld), attenuated=True, reason=reason)
