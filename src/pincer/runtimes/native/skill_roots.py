"""Writes into a skill root ask, whatever the grant, and are remembered.

A skill is instructions later runs carry out. A run that reads a poisoned page and writes
``skills/code-review/SKILL.md`` in the workspace would leave instructions behind for the next
run; so ``write_file`` into any skill root (the workspace's ``skills``, ``.agents/skills`` and
``.claude/skills``, and every other root pincer reads, when the workspace reaches it) asks a
person in the chain's one approval step, naming the skill root, even where a grant allows
writes. A write that was let through is recorded in ``$PINCER_HOME/skill-writes.json``; the
skill library treats a skill whose folder is listed there as untrusted until a person approves
it (``pincer skills approve NAME``).

Paths are compared resolved (symlinks followed as far as they exist) and case-folded, so
``Skills/`` on a case-insensitive disk or a symlink into a root is caught as well.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pincer.core.effects import EffectKind
from pincer.core.errors import PincerError
from pincer.core.values import HostContext, RuntimeAsk
from pincer.store.skill_writes import folder_key, record_write

__all__ = ["SkillRootGuard"]

_key = folder_key


class LabelledRoot(Protocol):
    """A skill root as the skills library lists it (``pincer.skills.roots.Root``)."""

    @property
    def label(self) -> str: ...

    @property
    def path(self) -> Path: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillRootGuard:
    """``roots``: (label, path) of every skill root; ``home``: where the record of writes is kept."""

    roots: tuple[tuple[str, Path], ...]
    home: Path | None = None

    @classmethod
    def from_roots(cls, roots: Sequence[LabelledRoot], home: Path | None) -> SkillRootGuard:
        return cls(roots=tuple((r.label, Path(r.path)) for r in roots), home=home)

    def root_of(self, target: str) -> tuple[str, Path, str | None] | None:
        """The skill root ``target`` lies in (or is), and the skill folder's name under it."""
        key = _key(target)
        for label, path in self.roots:
            root = _key(str(path))
            if key == root:
                return label, path, None
            if key.startswith(root + os.sep):
                return label, path, key[len(root) + 1 :].split(os.sep)[0]
        return None

    def _target(self, args: Mapping[str, Any], host: HostContext) -> str | None:
        from pincer.runtimes.native import workspace

        try:
            return workspace.resolve_path(host.workspace, args.get("path"), home=host.home).absolute
        except PincerError:  # a bad path is refused by the call itself, with its own message
            return None

    def preflight(self, tool: str) -> Callable[[Mapping[str, Any], HostContext], Awaitable[RuntimeAsk | None]]:
        async def check(args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
            target = self._target(args, host)
            found = self.root_of(target) if target is not None else None
            if found is None:
                return None
            label, path, name = found
            return RuntimeAsk(
                reason=f"{tool} writes into the skill root {path} ({label}): a skill there is instructions later runs "
                "carry out, so this asks whatever the grant; a skill a run writes stays untrusted until "
                f"`pincer skills approve {name or 'NAME'}`",
                effects=(EffectKind.WRITE_FILESYSTEM.value,),
                detail={"skill_root": str(path), "skill": name},
            )

        return check

    def record(self, target: str, *, session: str, tool: str) -> None:
        """Remember that a run wrote into a skill folder (after the write happened)."""
        found = self.root_of(target)
        if found is None or self.home is None or found[2] is None:
            return
        record_write(self.home, found[1] / found[2], session=session, tool=tool)
