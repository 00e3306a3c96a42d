"""A skill's dependencies: ``package.json`` (npm) and ``requirements.txt`` / ``pyproject.toml`` (pip).

They are installed once, into the skill's own folder under ``$PINCER_HOME``
(``skill-deps/NAME/``: ``node_modules/`` and ``python/``), never into the skill's source folder,
which may be a read-only checkout or a shared workspace. The install runs in the script
sandbox with lifecycle scripts off (``npm install --ignore-scripts``; ``pip install
--only-binary :all:``, so no package's build code runs) and the network limited to the
package registry's host through the sandbox's allowlist proxy. A stamp records the digest of
the dependency files; when they change, the skill is ineligible until ``pincer skills deps
NAME`` installs again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pincer.config import SkillsSettings
from pincer.core.errors import SkillError, ToolError
from pincer.core.values import HostContext
from pincer.runtimes.script.manifest import parse_manifest
from pincer.skills.model import Skill

if TYPE_CHECKING:
    from pincer.runtimes.script.settings import ScriptSettings

__all__ = [
    "DepsResult",
    "dependency_files",
    "deps_dir",
    "deps_problem",
    "install_deps",
    "DEPS_INSTALL_TIMEOUT_S",
    "NPM_FILES",
    "PIP_FILES",
]

logger = logging.getLogger(__name__)

_SKILLS = SkillsSettings()  # [skills] npm_registry and pip_index's defaults
DEPS_INSTALL_TIMEOUT_S = 300.0
DEPS_FOLDER = "skill-deps"
STAMP_FILE = ".pincer-deps.json"
NPM_FILES = ("package.json", "package-lock.json", "npm-shrinkwrap.json")
PIP_FILES = ("requirements.txt", "pyproject.toml")
MAX_DEPENDENCY_FILE_BYTES = 1024 * 1024
_DEPENDENCY_NAMES = frozenset((*NPM_FILES, *PIP_FILES))
_MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class DepsResult:
    skill: str
    managers: tuple[str, ...]
    path: Path
    digest: str
    log: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"skill": self.skill, "managers": list(self.managers), "path": str(self.path), "digest": self.digest}


def dependency_files(skill: Skill) -> dict[str, bytes]:
    """The dependency manifests beside the SKILL.md, by file name."""
    found: dict[str, bytes] = {}
    try:
        present = set(os.listdir(skill.base_dir)) & _DEPENDENCY_NAMES  # one syscall for the usual "none"
    except OSError:
        return found
    for name in (*NPM_FILES, *PIP_FILES):
        if name not in present:
            continue
        path = skill.base_dir / name
        try:
            if path.is_file() and path.stat().st_size <= MAX_DEPENDENCY_FILE_BYTES:
                found[name] = path.read_bytes()
        except OSError:
            continue
    if "pyproject.toml" in found and not _pyproject_requirements(found["pyproject.toml"]):
        del found["pyproject.toml"]  # a pyproject without [project] dependencies needs nothing installed
    return found


def _digest(files: Mapping[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()


def deps_dir(home: Path, skill: Skill) -> Path:
    return home / DEPS_FOLDER / skill.name


def deps_problem(home: Path, skill: Skill) -> str | None:
    """Why the skill's dependencies are not usable, or None (installed, or none needed)."""
    files = dependency_files(skill)
    if not files:
        return None
    which = ", ".join(sorted(n for n in files if n in ("package.json", "requirements.txt", "pyproject.toml")))
    try:
        stamp = json.loads((deps_dir(home, skill) / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return f"dependencies ({which}) are not installed: run `pincer skills deps {skill.name}`"
    if not isinstance(stamp, dict) or stamp.get("digest") != _digest(files):
        return f"dependencies ({which}) changed since they were installed: run `pincer skills deps {skill.name}`"
    return None


def _pyproject_requirements(data: bytes) -> list[str]:
    try:
        project = tomllib.loads(data.decode("utf-8")).get("project", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    deps = project.get("dependencies", []) if isinstance(project, dict) else []
    return [d for d in deps if isinstance(d, str) and d.strip()] if isinstance(deps, list) else []


def _registry_hosts(url: str, *, what: str) -> tuple[str, ...]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SkillError(f"{what} {url!r} is not an http(s) URL", source="config.toml", hint=f"set [skills] {what}")
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    hosts = [host]
    if parts.hostname == "pypi.org":
        hosts.append("files.pythonhosted.org")  # where PyPI's index points for the files themselves
    return tuple(hosts)


async def install_deps(
    skill: Skill,
    *,
    home: Path,
    script_settings: ScriptSettings,
    npm_registry: str = _SKILLS.npm_registry,
    pip_index: str = _SKILLS.pip_index,
    allow_private_network: bool = False,
    timeout_s: float = DEPS_INSTALL_TIMEOUT_S,
) -> DepsResult:
    """Install the skill's dependencies in the sandbox and move them into place."""
    from pincer.runtimes.script.runtime import ScriptRuntime

    files = dependency_files(skill)
    if not files:
        raise SkillError(
            f"skill {skill.name!r} declares no dependencies (no package.json, requirements.txt or pyproject.toml "
            "with [project] dependencies)",
            source=str(skill.path),
        )
    stage = Path(tempfile.mkdtemp(prefix="skill-deps-", dir=_scratch(script_settings)))
    logs: list[str] = []
    managers: list[str] = []
    try:
        _write_stage(stage, files)
        _hand_to_sandbox(stage, script_settings)
        runs: list[tuple[str, list[str], tuple[str, ...], dict[str, str]]] = []
        if "package.json" in files:
            runs.append(("npm", _npm_command(npm_registry), _registry_hosts(npm_registry, what="npm_registry"), {
                "npm_config_userconfig": "/work/.npmrc", **_system_ca("NODE_EXTRA_CA_CERTS"),
                "npm_config_update_notifier": "false", "npm_config_cache": "/work/.npm",
            }))  # fmt: skip
        if "requirements.txt" in files or "pyproject.toml" in files:
            runs.append(("pip", _pip_command(pip_index), _registry_hosts(pip_index, what="pip_index"), {
                "PIP_CONFIG_FILE": "/dev/null", "PYTHONNOUSERSITE": "1", "PIP_NO_INPUT": "1",
                "PIP_BREAK_SYSTEM_PACKAGES": "1", **_system_ca("PIP_CERT"),
            }))  # fmt: skip
        for manager, command, hosts, env in runs:
            manifest = parse_manifest(
                {
                    "name": f"skill-deps-{manager}",
                    "description": f"install {manager} dependencies of skill {skill.name}",
                    "command": command,
                    "sandbox": {
                        "network": "allowlist",
                        "allow_hosts": list(hosts),
                        "mounts": [{"source": str(stage), "target": "/deps", "mode": "rw"}],
                        "env": env,
                    },
                    "limits": {
                        "timeout_s": timeout_s, "cpu_s": int(timeout_s), "memory_mb": 2048, "pids": 512,
                        "file_size_mb": 512, "tmp_size_mb": 512, "output_bytes": 4 * _MIB,
                    },
                },
                source=f"skill {skill.name} dependencies",
            )  # fmt: skip
            runtime = ScriptRuntime([manifest], script_settings, include_exec=False)
            spec = runtime.tools()[0]
            # An install is pincer's own work, not a caller's: the session is a sandboxed one.
            host = HostContext(
                session="skill-deps",
                tool=spec.name,
                network_hosts=hosts,
                allow_private_network=allow_private_network,
                timeout_s=timeout_s,
                max_output_bytes=4 * _MIB,
            )
            output = await runtime.invoke(spec, {}, host)
            value = output.value if isinstance(output.value, dict) else {}
            tail = (str(value.get("stderr", "")) + str(value.get("stdout", "")))[-4000:]
            logs.append(f"{manager}: {tail}")
            if output.is_error:
                refused = [e for e in value.get("network", []) if isinstance(e, dict) and not e.get("allowed")]
                more = f"; refused destinations: {refused}" if refused else ""
                raise ToolError(
                    f"installing the {manager} dependencies of skill {skill.name!r} failed (exit {value.get('exit_code')}): "
                    f"{tail[-800:].strip()}{more}",
                    hint=f"fix the skill's dependency files, or the registry in [skills] {'npm_registry' if manager == 'npm' else 'pip_index'}",
                )
            managers.append(manager)
        digest = _digest(files)
        (stage / STAMP_FILE).write_text(
            json.dumps({"digest": digest, "managers": managers, "installed_at": time.time(), "skill": skill.name})
        )
        target = deps_dir(home, skill)
        _replace_dir(stage, target)
        return DepsResult(skill=skill.name, managers=tuple(managers), path=target, digest=digest, log="\n".join(logs))
    finally:
        shutil.rmtree(stage, ignore_errors=True)


SYSTEM_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def _system_ca(variable: str) -> dict[str, str]:
    """Trust the system's CA bundle (bound read-only into the sandbox) besides the tool's own, as
    the host does: a registry behind a corporate TLS proxy works in the sandbox too."""
    return {variable: SYSTEM_CA_BUNDLE} if os.path.isfile(SYSTEM_CA_BUNDLE) else {}


def _write_stage(stage: Path, files: Mapping[str, bytes]) -> None:
    """The dependency files the sandbox installs from; a pyproject's dependencies become requirements."""
    requirements: list[bytes] = []
    for name, data in files.items():
        if name == "pyproject.toml":
            requirements.append("\n".join(_pyproject_requirements(data)).encode())
        elif name == "requirements.txt":
            requirements.append(data)
        else:
            (stage / name).write_bytes(data)
    if requirements:
        (stage / "requirements.txt").write_bytes(b"\n".join(requirements) + b"\n")


def _npm_command(registry: str) -> list[str]:
    return [
        "/usr/bin/npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev",
        "--prefix", "/deps", "--registry", registry,
    ]  # fmt: skip


def _pip_command(index: str) -> list[str]:
    command = [
        "/usr/bin/python3", "-m", "pip", "install", "--only-binary", ":all:", "--no-cache-dir",
        "--disable-pip-version-check", "--target", "/deps/python", "--index-url", index,
    ]  # fmt: skip
    parts = urlsplit(index)
    if parts.scheme == "http" and parts.hostname:
        command += ["--trusted-host", parts.hostname]
    return [*command, "-r", "/deps/requirements.txt"]


def _scratch(script_settings: ScriptSettings) -> Path:
    root = script_settings.scratch()
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    return root


def _hand_to_sandbox(stage: Path, script_settings: ScriptSettings) -> None:
    """The sandbox uid writes the install: the stage must be its own (pincer may run as root)."""
    os.chmod(stage, 0o755)
    if os.geteuid() == 0:
        for dirpath, _dirs, filenames in os.walk(stage):
            os.chown(dirpath, script_settings.sandbox_uid, script_settings.sandbox_gid)
            for name in filenames:
                os.chown(os.path.join(dirpath, name), script_settings.sandbox_uid, script_settings.sandbox_gid)


def _replace_dir(source: Path, target: Path) -> None:
    """Copy ``source`` to ``target`` beside it, then swap: a crash leaves the old one or the new."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    old = target.with_name(f".{target.name}.old")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial, symlinks=True)
    if os.geteuid() == 0:
        # Owned by the sandbox uid inside the stage; pincer's home keeps root's own files.
        for dirpath, _dirs, filenames in os.walk(partial):
            os.chown(dirpath, 0, 0)
            for name in filenames:
                os.lchown(os.path.join(dirpath, name), 0, 0)
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    partial.rename(target)
    shutil.rmtree(old, ignore_errors=True)
