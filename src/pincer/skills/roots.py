"""Where skills come from, in which order, and the walk that finds them.

Roots, highest precedence first::

    <workspace>/skills              installed*  workspace
    <workspace>/.agents/skills      installed*  workspace-agents
    <workspace>/.claude/skills      installed*  workspace-claude
    ~/.agents/skills                trusted     home-agents
    ~/.claude/skills                trusted     home-claude
    $PINCER_HOME/skills             trusted     user
    $PINCER_HOME/installed/skills   installed   installed     (written by the hub)
    <pincer package>/skills/bundled trusted     bundled
    [skills] extra_dirs             trusted     extra

(*) An agent can write the workspace (``write_file``, scripts), so its roots are trusted only with
``[skills] trust_workspace = true`` (or a skill at a time, ``pincer skills approve NAME``).

A skill is a folder ``<root>/<name>/`` holding a ``SKILL.md`` (or ``skill.md``, which the Agent
Skills reference validator reads too; ``SKILL.md`` wins when both are there). A name found in a higher root
shadows the same name lower down, except that a name a *trusted* skill holds stays with it: an
installed (or untrusted workspace) skill of that name is shadowed instead, whatever its root's
place. The shadowed one is kept in the report with the reason. The
walk is bounded per root (candidates looked at, skills loaded) and per file (bytes), and every
limit that is reached is reported, never silently applied. Parsing is ``parser.parse_skill``;
this module only reads files, and it remembers what it parsed by (path, mtime, size), so a
reload re-reads only files that changed.
"""

from __future__ import annotations

import logging
import os
import stat as stat_module
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pincer.config import SkillsSettings
from pincer.core.errors import SkillError
from pincer.skills.model import Skill, Trust
from pincer.skills.parser import MAX_SKILL_FILE_BYTES, parse_skill

__all__ = [
    "user_home_dir",
    "Root",
    "WalkLimits",
    "LoadError",
    "Shadowed",
    "LimitHit",
    "Misplaced",
    "LoadReport",
    "SkillLoader",
    "default_roots",
    "BUNDLED_DIR",
    "WORKSPACE_ROOTS",
    "SKILL_FILE",
    "SKILL_FILES",
    "skill_file",
    "CAPABILITIES_FILE",
]

logger = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
# The names a skill's file may have, the first found wins: the reference validator (skills-ref)
# prefers SKILL.md and accepts skill.md.
SKILL_FILES = (SKILL_FILE, "skill.md")
CAPABILITIES_FILE = "capabilities.json"
MAX_CAPABILITIES_BYTES = 256 * 1024
BUNDLED_DIR = Path(__file__).with_name("bundled")
_SKILLS = SkillsSettings()  # [skills]'s defaults, written once in pincer.config
WORKSPACE_ROOTS = ("workspace", "workspace-agents", "workspace-claude")  # the labels of roots an agent can write


@dataclass(frozen=True, kw_only=True, slots=True)
class Root:
    label: str
    path: Path
    trust: Trust = Trust.TRUSTED
    is_claude: bool = False  # a .claude/skills root: bodies use Claude Code's substitutions

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "path": str(self.path), "trust": self.trust.value, "exists": self.path.is_dir()}


@dataclass(frozen=True, kw_only=True, slots=True)
class WalkLimits:
    """``[skills]`` max_candidates_per_root, max_loaded_per_root, max_file_bytes."""

    max_candidates_per_root: int = _SKILLS.max_candidates_per_root
    max_loaded_per_root: int = _SKILLS.max_loaded_per_root
    max_file_bytes: int = _SKILLS.max_file_bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadError:
    """A SKILL.md that could not be loaded; the others still are."""

    path: Path
    message: str
    line: int | None = None
    hint: str | None = None
    root: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "line": self.line, "message": self.message, "hint": self.hint, "root": self.root}

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.message}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Shadowed:
    skill: Skill
    by: Skill
    reason: str

    @property
    def lost_commands(self) -> tuple[str, ...]:
        """The ``command: /NAME`` triggers the shadowed skill declares and the winner does not:
        they are gone while it is shadowed."""
        kept = {t.value for t in self.by.triggers if t.kind == "command"}
        return tuple(t.value for t in self.skill.triggers if t.kind == "command" and t.value not in kept)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.skill.name, "path": str(self.skill.path), "root": self.skill.root, "shadowed_by": str(self.by.path),
                "reason": self.reason, "lost_commands": list(self.lost_commands)}  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class LimitHit:
    root: str
    limit: str  # the [skills] key
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"root": self.root, "limit": self.limit, "message": self.message}


@dataclass(frozen=True, kw_only=True, slots=True)
class Misplaced:
    """Skills where pincer (and Claude Code) do not look: a ``skill.md`` not named ``SKILL.md``,
    or a collection of skill folders copied one level too deep. Reported, never loaded: which
    folder the author meant as a root is theirs to say."""

    path: Path
    message: str
    hint: str
    root: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "message": self.message, "hint": self.hint, "root": self.root}

    def __str__(self) -> str:
        return f"{self.path} {self.message}: {self.hint}"


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadReport:
    skills: tuple[Skill, ...] = ()  # the winners, in precedence order
    shadowed: tuple[Shadowed, ...] = ()
    errors: tuple[LoadError, ...] = ()
    limits: tuple[LimitHit, ...] = ()
    misplaced: tuple[Misplaced, ...] = ()
    roots: tuple[Root, ...] = ()
    stamp: tuple[Any, ...] = field(default=(), compare=False)  # what the files looked like when read

    def by_name(self) -> dict[str, Skill]:
        return {s.name: s for s in self.skills}


def user_home_dir(environ: Mapping[str, str] | None) -> Path | None:
    """The user's home for the ``~/.agents`` and ``~/.claude`` roots: ``HOME`` of ``environ``
    (the Pincer's), of the process when it is empty or None."""
    raw = (environ or os.environ).get("HOME")
    return Path(raw) if raw else None


def default_roots(
    *,
    workspace: Path | None,
    home_dir: Path | None,
    pincer_home: Path | None,
    extra_dirs: Sequence[Path] = (),
    bundled: bool = True,
    trust_workspace: bool = False,
) -> tuple[Root, ...]:
    roots: list[Root] = []
    if workspace is not None:
        trust = Trust.TRUSTED if trust_workspace else Trust.INSTALLED
        roots += [
            Root(label="workspace", path=workspace / "skills", trust=trust),
            Root(label="workspace-agents", path=workspace / ".agents" / "skills", trust=trust),
            Root(label="workspace-claude", path=workspace / ".claude" / "skills", is_claude=True, trust=trust),
        ]
    if home_dir is not None:
        roots += [
            Root(label="home-agents", path=home_dir / ".agents" / "skills"),
            Root(label="home-claude", path=home_dir / ".claude" / "skills", is_claude=True),
        ]
    if pincer_home is not None:
        roots += [
            Root(label="user", path=pincer_home / "skills"),
            Root(label="installed", path=pincer_home / "installed" / "skills", trust=Trust.INSTALLED),
        ]
    if bundled:
        roots.append(Root(label="bundled", path=BUNDLED_DIR))
    for index, path in enumerate(extra_dirs):
        roots.append(Root(label=f"extra-{index + 1}", path=path))
    # The same folder named twice (a workspace inside $PINCER_HOME) is walked once, at its first place.
    seen: set[str] = set()
    unique = []
    for root in roots:
        key = os.path.normpath(os.path.abspath(root.path))
        if key not in seen:
            seen.add(key)
            unique.append(root)
    return tuple(unique)


_Key = tuple[str, str]  # (path, root label)
_Stamp = tuple[int, int, int, int]  # (mtime_ns, size, capabilities mtime_ns, capabilities size)


class SkillLoader:
    """Walks roots and parses what it finds, remembering parsed files by their stat."""

    def __init__(self, limits: WalkLimits | None = None) -> None:
        self.limits = limits or WalkLimits()
        self._cache: dict[_Key, tuple[_Stamp, Skill | LoadError]] = {}

    def load(
        self,
        roots: Iterable[Root],
        *,
        adjust: Callable[[Skill], Skill] | None = None,
        replaces: Callable[[Skill], bool] | None = None,
    ) -> LoadReport:
        """``adjust`` may change a parsed skill (its trust) before precedence is decided;
        ``replaces(skill)`` says a person let that lower-trust skill take a trusted one's name
        (``pincer install --replace``)."""
        roots = tuple(roots)
        winners: dict[str, Skill] = {}
        shadowed: list[Shadowed] = []
        errors: list[LoadError] = []
        limits: list[LimitHit] = []
        misplaced: list[Misplaced] = []
        stamp: list[Any] = []
        live: set[_Key] = set()
        for root in roots:
            loaded = 0
            candidates, hit = self._candidates(root, misplaced)
            if hit is not None:
                limits.append(hit)
            stamp.append((root.label, tuple(c[0] for c in candidates)))
            for folder, skill_path, skill_stat in candidates:
                if loaded >= self.limits.max_loaded_per_root:
                    limits.append(
                        LimitHit(
                            root=root.label,
                            limit="max_loaded_per_root",
                            message=f"{root.path}: {self.limits.max_loaded_per_root} skills loaded; the rest of this root is not "
                            "(raise [skills] max_loaded_per_root)",
                        )
                    )
                    break
                key = (skill_path, root.label)
                live.add(key)
                result, file_stamp = self._read(root, folder, skill_stat, key)
                stamp.append((key[0], file_stamp))
                if isinstance(result, LoadError):
                    errors.append(result)
                    continue
                loaded += 1
                if adjust is not None:
                    result = adjust(result)
                present = winners.get(result.name)
                if present is None:
                    winners[result.name] = result
                    continue
                if present.trust is not Trust.TRUSTED and result.trust is Trust.TRUSTED and not (replaces and replaces(present)):
                    # A trusted skill keeps its name: a lower-trust one higher up cannot take it
                    # (its body, its /command, its webhook trigger).
                    del winners[result.name]
                    winners[result.name] = result
                    why = (f"{result.name!r} is held by the trusted skill from {result.root} ({result.path}); "
                           f"{present.root} is {present.trust.value}")  # fmt: skip
                    shadowed.append(Shadowed(skill=present, by=result, reason=why))
                    continue
                why = (
                    f"another folder in the same root ({present.base_dir.name}) has the name {result.name!r}"
                    if present.root == result.root
                    else f"{result.name!r} from {present.root} ({present.path}) takes precedence over {result.root}"
                )
                shadowed.append(Shadowed(skill=result, by=present, reason=why))
        for key in list(self._cache):
            if key not in live:
                del self._cache[key]
        return LoadReport(
            skills=tuple(winners.values()),
            shadowed=tuple(shadowed),
            errors=tuple(errors),
            limits=tuple(limits),
            misplaced=tuple(misplaced),
            roots=roots,
            stamp=tuple(stamp),
        )

    def stamp(self, roots: Iterable[Root]) -> tuple[Any, ...]:
        """What ``load`` would see, cheaply (directory listings and stats, no reads)."""
        parts: list[Any] = []
        for root in roots:
            candidates, _ = self._candidates(root)
            parts.append((root.label, tuple(c[0] for c in candidates)))
            for folder, skill_path, skill_stat in candidates:
                parts.append((skill_path, _stamp(skill_stat, folder)))
        return tuple(parts)

    def _candidates(
        self, root: Root, misplaced: list[Misplaced] | None = None
    ) -> tuple[list[tuple[str, str, os.stat_result]], LimitHit | None]:
        """The skill folders of ``root``; folders that hold skills where no one looks go into
        ``misplaced`` when it is given."""
        try:
            entries = sorted(os.scandir(root.path), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return [], None
        except OSError as exc:
            logger.warning("cannot list skills root %s: %s", root.path, exc)
            return [], None
        found: list[tuple[str, str, os.stat_result]] = []
        hit: LimitHit | None = None
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if not entry.is_dir():
                    continue
            except OSError:
                continue
            located = _skill_file_stat(entry.path)
            if located is None:
                if misplaced is not None:
                    notice = self.look_closer(root, entry.path)
                    if notice is not None:
                        misplaced.append(notice)
                continue
            skill_path, skill_stat = located
            if len(found) >= self.limits.max_candidates_per_root:
                hit = LimitHit(
                    root=root.label,
                    limit="max_candidates_per_root",
                    message=f"{root.path} holds more than {self.limits.max_candidates_per_root} skill folders; only the "
                    "first ones (by name) are looked at (raise [skills] max_candidates_per_root)",
                )
                break
            found.append((entry.path, skill_path, skill_stat))
        return found, hit

    def look_closer(self, root: Root, folder: str) -> Misplaced | None:
        """A folder without SKILL.md: a skill file under another case, or skill folders one level
        down (a collection copied into the root whole). Bounded like a root's walk."""
        try:
            names = sorted(os.listdir(folder))[: self.limits.max_candidates_per_root]
        except OSError:
            return None
        for name in names:
            if name.lower() == SKILL_FILE.lower() and name not in SKILL_FILES and os.path.isfile(os.path.join(folder, name)):
                return Misplaced(
                    path=Path(folder) / name,
                    message=f"is named {name}, and only {' or '.join(SKILL_FILES)} is read (the names the Agent Skills "
                    "reference validator reads)",
                    hint=f"rename it to {SKILL_FILE}",
                    root=root.label,
                )
        nested = [n for n in names if not n.startswith(".") and skill_file(os.path.join(folder, n)) is not None]
        if not nested:
            return None
        count = f"{len(nested)} skill folder" + ("s" if len(nested) != 1 else "")
        return Misplaced(
            path=Path(folder),
            message=f"holds {count} one level down ({', '.join(nested[:3])}{', ...' if len(nested) > 3 else ''}), "
            "where no skill is looked for",
            hint=f"move them up into {root.path}, or add the folder as a root ([skills] extra_dirs = [\"{folder}\"])",
            root=root.label,
        )

    def _read(self, root: Root, folder: str, skill_stat: os.stat_result, key: _Key) -> tuple[Skill | LoadError, _Stamp]:
        file_stamp = _stamp(skill_stat, folder)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == file_stamp:
            return cached[1], file_stamp
        result = read_skill(
            Path(key[0]),
            root=root,
            max_bytes=self.limits.max_file_bytes,
            size=skill_stat.st_size,
            has_capabilities=file_stamp[3] >= 0,
        )
        self._cache[key] = (file_stamp, result)
        return result, file_stamp


def skill_file(folder: str | Path) -> Path | None:
    """The skill's file in ``folder`` (SKILL.md, else skill.md), or None."""
    located = _skill_file_stat(str(folder))
    return Path(located[0]) if located is not None else None


def _skill_file_stat(folder: str) -> tuple[str, os.stat_result] | None:
    for name in SKILL_FILES:
        path = os.path.join(folder, name)
        try:
            found = os.stat(path)
        except OSError:
            continue
        if stat_module.S_ISREG(found.st_mode):
            return path, found
    return None


def _stamp(skill_stat: os.stat_result, folder: str) -> _Stamp:
    try:
        caps = os.stat(os.path.join(folder, CAPABILITIES_FILE))
        caps_stamp = (caps.st_mtime_ns, caps.st_size)
    except OSError:
        caps_stamp = (0, -1)
    return (skill_stat.st_mtime_ns, skill_stat.st_size, *caps_stamp)


def read_skill(
    path: Path, *, root: Root, max_bytes: int = MAX_SKILL_FILE_BYTES, size: int | None = None, has_capabilities: bool = True
) -> Skill | LoadError:
    """Read and parse one SKILL.md; a failure comes back as a LoadError (never raised)."""
    try:
        if size is None:
            size = path.stat().st_size
        if size > max_bytes:
            raise SkillError(
                f"the file is {size:,} bytes, larger than the {max_bytes:,} byte limit for a SKILL.md",
                source=str(path),
                hint="move long reference material into files beside it, or raise [skills] max_file_bytes",
            )
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
        capabilities = _read_capabilities(path.parent / CAPABILITIES_FILE) if has_capabilities else None
        return parse_skill(
            data,
            path=path,
            root=root.label,
            trust=root.trust,
            max_bytes=max_bytes,
            capabilities_json=capabilities,
            claude_root=root.is_claude,
        )
    except SkillError as exc:
        return LoadError(path=path, message=exc.detail, line=exc.line, hint=exc.hint, root=root.label)
    except OSError as exc:
        return LoadError(path=path, message=f"cannot read the file: {exc.strerror}", root=root.label)


def _read_capabilities(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_CAPABILITIES_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_CAPABILITIES_BYTES:
        return b'"capabilities.json is larger than 256 KB"'
    return data
