"""Whether a skill can be offered to a model here, and if not, exactly why.

Checked: ``requires.bins`` (each on PATH), ``requires.anyBins`` (one of them on PATH),
``requires.env`` (set and non-empty), ``requires.config`` (a dotted key present and truthy in
``[skills] config``), ``os`` (this platform named), ``requires.skills`` (loaded and eligible
themselves), and a skill's dependencies (``package.json``, ``requirements.txt``,
``pyproject.toml``) installed. OpenClaw's ``always: true`` skips the checks, as in OpenClaw.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pincer.skills.model import Skill

__all__ = ["Environment", "Eligibility", "check_eligibility", "check_all", "current_os"]

_OS_ALIASES = {"macos": "darwin", "osx": "darwin", "mac": "darwin", "windows": "win32", "win": "win32"}


def current_os() -> str:
    if sys.platform.startswith("linux"):
        return "linux"
    if sys.platform.startswith("freebsd"):
        return "freebsd"
    return sys.platform  # darwin, win32


@dataclass(frozen=True, kw_only=True, slots=True)
class Environment:
    """What eligibility is checked against; the service builds it from the real process."""

    path: str = ""
    env: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    os_name: str = "linux"
    # The reason a skill's dependencies are missing, or None when they are installed / it has none.
    deps_problem: Callable[[Skill], str | None] = lambda _skill: None
    _found: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def current(cls, *, config: Mapping[str, Any] | None = None, deps_problem: Callable[[Skill], str | None] | None = None) -> Environment:
        return cls(
            path=os.environ.get("PATH", os.defpath),
            env=dict(os.environ),
            config=dict(config or {}),
            os_name=current_os(),
            deps_problem=deps_problem or (lambda _skill: None),
        )

    def has_bin(self, name: str) -> bool:
        found = self._found.get(name)
        if found is None:
            found = self._found[name] = shutil.which(name, path=self.path) is not None
        return found

    def has_config(self, dotted: str) -> bool:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return node not in (None, False, "", [], {})


@dataclass(frozen=True, kw_only=True, slots=True)
class Eligibility:
    is_eligible: bool
    reasons: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons) if self.reasons else "eligible"

    def to_dict(self) -> dict[str, Any]:
        return {"eligible": self.is_eligible, "reasons": list(self.reasons)}


_ELIGIBLE = Eligibility(is_eligible=True)


def check_eligibility(skill: Skill, environment: Environment, *, available: Iterable[str] = ()) -> Eligibility:
    """``available``: the names of the other skills that are loaded and eligible."""
    reasons: list[str] = []
    deps = environment.deps_problem(skill)
    if deps is not None:
        reasons.append(deps)
    if skill.always:
        return Eligibility(is_eligible=not reasons, reasons=tuple(reasons))
    req = skill.requires
    if req.os:
        wanted = {_OS_ALIASES.get(o.lower(), o.lower()) for o in req.os}
        if environment.os_name not in wanted:
            reasons.append(f"runs only on {', '.join(sorted(wanted))} (this is {environment.os_name})")
    missing = [b for b in req.bins if not environment.has_bin(b)]
    if missing:
        reasons.append(f"needs {', '.join(missing)} on PATH")
    if req.any_bins and not any(environment.has_bin(b) for b in req.any_bins):
        reasons.append(f"needs one of {', '.join(req.any_bins)} on PATH")
    unset = [name for name in req.env if not environment.env.get(name)]
    if unset:
        reasons.append(f"needs the environment variable{'s' if len(unset) > 1 else ''} {', '.join(unset)}")
    absent = [key for key in req.config if not environment.has_config(key)]
    if absent:
        reasons.append(f"needs config {', '.join(absent)} (set it under [skills.config] in config.toml)")
    names = set(available)
    lacking = [name for name in req.skills if name not in names]
    if lacking:
        reasons.append(f"needs the skill{'s' if len(lacking) > 1 else ''} {', '.join(lacking)}, not loaded or not eligible")
    if not reasons:
        return _ELIGIBLE
    return Eligibility(is_eligible=False, reasons=tuple(reasons))


def check_all(skills: Iterable[Skill], environment: Environment) -> dict[str, Eligibility]:
    """Eligibility of every skill; ``requires.skills`` resolved to a fixed point (a skill whose
    required skill is ineligible is ineligible too, with that reason)."""
    skills = list(skills)
    results: dict[str, Eligibility] = {}
    available = {s.name for s in skills}
    for _ in range(len(skills) + 1):
        results = {s.name: check_eligibility(s, environment, available=available) for s in skills}
        now = {name for name, result in results.items() if result.is_eligible}
        if now == available:
            break
        available = now
    return results
