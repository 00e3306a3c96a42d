"""A skill's code as tools: each declared capability that has code becomes ``{skill}.{capability}``.

The tools run in the script runtime's sandbox like any script tool, and every call goes through
the one call chain (grants, validation, approval, audit). Inside the sandbox the skill's files
are at ``/skill`` (read-only), its installed dependencies at ``/skill-deps`` (``NODE_PATH`` and
``PYTHONPATH`` point there) and the scratch working directory is ``/work``.

A capability's command is its declared argv template (``capabilities.json`` or the frontmatter's
``capabilities``; ``{baseDir}`` means ``/skill``), or found by convention: a file named after the
capability in ``scripts/`` or ``src/`` (``.py`` runs with python3, ``.js``/``.mjs``/``.cjs`` with
node, ``.sh`` with sh), given each input as ``--NAME=VALUE`` (lists and objects as JSON; absent
optional inputs are left out). A capability with no code registers no tool (a warning says so);
so does a skill without code.

The sandbox uid cannot read into ``$PINCER_HOME`` or a private workspace, so the skill's files and
dependencies are copied once per content into a read-only view under the scratch root.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import PincerError
from pincer.runtimes.script.manifest import ScriptToolManifest, parse_manifest
from pincer.skills.deps import deps_dir
from pincer.skills.files import is_shared_link
from pincer.skills.model import Capability, Issue, Skill

__all__ = ["SkillToolPlan", "plan_skill_tools", "skill_tool_name", "stage_view", "SKILL_MOUNT", "DEPS_MOUNT"]

logger = logging.getLogger(__name__)

SKILL_MOUNT = "/skill"
DEPS_MOUNT = "/skill-deps"
_CODE_DIRS = ("scripts", "src")
_INTERPRETERS = {
    ".py": ("/usr/bin/python3",),
    ".js": ("/usr/bin/node",),
    ".mjs": ("/usr/bin/node",),
    ".cjs": ("/usr/bin/node",),
    ".sh": ("/bin/sh",),
}
_TOOL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
_VIEW_SKIP = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv"})
_MAX_VIEW_BYTES = 64 * 1024 * 1024


def skill_tool_name(skill: str, capability: str, separator: str = ".") -> str:
    return f"{skill}{separator}{capability}"


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillToolPlan:
    """What a skill's capabilities become: manifests to run, and warnings for the rest."""

    skill: str
    manifests: tuple[ScriptToolManifest, ...]
    warnings: tuple[Issue, ...]


def _code_for(skill: Skill, capability: Capability) -> Path | None:
    stems = {capability.name, capability.name.replace("_", "-"), capability.name.replace("-", "_")}
    for folder in _CODE_DIRS:
        base = skill.base_dir / folder
        if not base.is_dir():
            continue
        for stem in sorted(stems):
            for suffix in (*_INTERPRETERS, ""):
                candidate = base / f"{stem}{suffix}"
                if candidate.is_file():
                    return candidate
    return None


def _schema(capability: Capability) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    for field in capability.inputs:
        entry: dict[str, Any] = {"type": field.type.value}
        if field.description:
            entry["description"] = field.description
        properties[field.name] = entry
    required = [f.name for f in capability.inputs if f.required]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def plan_skill_tools(skill: Skill, *, view: Path, separator: str = ".", has_deps: bool = False) -> SkillToolPlan:
    """The manifests for a skill's capabilities, run against the staged ``view`` folder."""
    warnings: list[Issue] = []
    manifests: list[ScriptToolManifest] = []
    for capability in skill.capabilities:
        name = skill_tool_name(skill.name, capability.name, separator)
        key = f"capabilities.{capability.name}"
        if not _TOOL_NAME.match(name):
            warnings.append(Issue(key=key, message=f"{name!r} cannot be a tool name (a letter first, at most 64 characters); no tool"))
            continue
        if capability.command:
            command = [c.replace("{baseDir}", SKILL_MOUNT) for c in capability.command]
        else:
            code = _code_for(skill, capability)
            if code is None:
                warnings.append(
                    Issue(key=key, message=f"no code for it in scripts/ or src/ and no command declared; no tool {name!r}")
                )
                continue
            inside = f"{SKILL_MOUNT}/{code.relative_to(skill.base_dir).as_posix()}"
            command = [*_INTERPRETERS.get(code.suffix, ()), inside]
            for field in capability.inputs:
                command.append(f"--{field.name}={{{field.name}}}")
        env = {"SKILL_DIR": SKILL_MOUNT, "PYTHONDONTWRITEBYTECODE": "1"}
        mounts = [{"source": str(view / "skill"), "target": SKILL_MOUNT, "mode": "ro"}]
        if has_deps:
            env["NODE_PATH"] = f"{DEPS_MOUNT}/node_modules"
            env["PYTHONPATH"] = f"{DEPS_MOUNT}/python"
            mounts.append({"source": str(view / "deps"), "target": DEPS_MOUNT, "mode": "ro"})
        sandbox: dict[str, Any] = {"network": capability.network, "mounts": mounts, "env": env}
        if capability.network == "allowlist":
            sandbox["allow_hosts"] = list(capability.allow_hosts)
        data: dict[str, Any] = {
            "name": name,
            "description": capability.description or f"{capability.name} from skill {skill.name}",
            "command": command,
            "input_schema": _schema(capability),
            "effects": list(capability.effects),
            "side_effecting": bool(capability.effects) and capability.effects != ("read_filesystem",),
            "sandbox": sandbox,
        }
        if capability.timeout_s is not None:
            data["limits"] = {"timeout_s": capability.timeout_s}
        try:
            manifests.append(parse_manifest(data, source=f"skill {skill.name} ({skill.path})"))
        except PincerError as exc:
            warnings.append(Issue(key=key, message=f"cannot become a tool: {exc.message}"))
    return SkillToolPlan(skill=skill.name, manifests=tuple(manifests), warnings=tuple(warnings))


def stage_view(skill: Skill, *, home: Path, scratch: Path) -> tuple[Path, bool]:
    """A read-only copy of the skill's files (and installed dependencies) the sandbox uid can
    read, one per content; returns (view folder, whether dependencies are in it)."""
    deps = deps_dir(home, skill)
    has_deps = deps.is_dir()
    key = hashlib.sha256(
        "\0".join([skill.content_hash, str(skill.base_dir), _tree_stamp(skill.base_dir), _tree_stamp(deps) if has_deps else ""]).encode()
    ).hexdigest()[:16]
    views = scratch / "skill-views"
    view = views / f"{skill.name}-{key}"
    if view.is_dir():
        return view, has_deps
    views.mkdir(parents=True, exist_ok=True)
    for path in (scratch, views):
        os.chmod(path, 0o711)
    partial = views / f".{view.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    _copy(skill.base_dir, partial / "skill")
    if has_deps:
        shutil.copytree(deps, partial / "deps", symlinks=True)
    for dirpath, dirnames, filenames in os.walk(partial):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                mode = os.stat(full).st_mode
                os.chmod(full, 0o755 if mode & 0o111 else 0o644)
        del dirnames
    partial.rename(view)
    for old in views.iterdir():
        if old.name.startswith(f"{skill.name}-") and old != view:
            shutil.rmtree(old, ignore_errors=True)
    return view, has_deps


def _tree_stamp(folder: Path) -> str:
    parts: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _VIEW_SKIP)
        for name in sorted(filenames):
            try:
                st = os.stat(os.path.join(dirpath, name))
            except OSError:
                continue
            parts.append(f"{dirpath}/{name}:{st.st_mtime_ns}:{st.st_size}")
        if len(parts) > 20_000:
            break
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _copy(source: Path, target: Path) -> None:
    total = 0

    inside = os.path.realpath(source)

    def escapes(path: str) -> bool:
        # A symlink to a file outside the skill (~/.ssh/id_rsa), or a second hard link to one
        # (config.toml), must not be copied into a view the sandbox uid can read.
        if os.path.islink(path) and not os.path.realpath(path).startswith(inside + os.sep):
            return True
        try:
            return is_shared_link(path, os.stat(path))
        except OSError:
            return True

    def ignore(directory: str, names: Sequence[str]) -> list[str]:
        nonlocal total
        skipped = [
            n for n in names if n in _VIEW_SKIP or n.startswith(".") or escapes(os.path.join(directory, n))
        ]
        for name in names:
            if name not in skipped:
                try:
                    total += os.lstat(os.path.join(directory, name)).st_size
                except OSError:
                    continue
        if total > _MAX_VIEW_BYTES:
            raise PincerError(
                f"the skill folder {source} holds more than {_MAX_VIEW_BYTES // (1024 * 1024)} MiB",
                hint="keep large data out of skill folders",
            )
        return skipped

    shutil.copytree(source, target, symlinks=False, ignore=ignore, ignore_dangling_symlinks=True)
