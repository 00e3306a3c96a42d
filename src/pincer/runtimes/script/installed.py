"""Script tools installed under ``$PINCER_HOME/tools/script/`` and the exec approvals file.

``exec-approvals.json`` is OpenClaw's file as it is (or a flat policy); allow-always answers are
written back to it atomically, so they survive a restart.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from pincer.core.errors import PincerError, UsageError
from pincer.policy.exec_approvals import ExecApprovalPolicy
from pincer.runtimes.script.manifest import ScriptToolManifest, load_manifest
from pincer.store.jsonfile import locked, read_json, write_json_atomic

logger = logging.getLogger(__name__)

__all__ = [
    "script_dir",
    "installed_manifests",
    "install_manifest",
    "remove_manifest",
    "load_exec_policy",
    "save_exec_policy",
    "EXEC_APPROVALS_FILE",
]

EXEC_APPROVALS_FILE = "exec-approvals.json"
_SUFFIXES = (".toml", ".json")


def script_dir(home: Path) -> Path:
    return home / "tools" / "script"


def installed_manifests(home: Path) -> list[ScriptToolManifest]:
    """Every installed manifest; a broken one is skipped with a warning rather than stopping pincer."""
    manifests: list[ScriptToolManifest] = []
    folder = script_dir(home)
    if not folder.is_dir():
        return manifests
    for path in sorted(folder.iterdir()):
        if path.suffix not in _SUFFIXES:
            continue
        try:
            manifests.append(load_manifest(path))
        except PincerError as exc:
            logger.warning("skipping script tool %s: %s", path, exc)
    return manifests


def install_manifest(home: Path, source: Path) -> ScriptToolManifest:
    """Validate a manifest and copy it in; the name must not be taken by another script tool."""
    if source.suffix not in _SUFFIXES:
        raise UsageError(f"{source} is not a script tool manifest", hint="use a .toml or .json manifest")
    manifest = load_manifest(source)
    folder = script_dir(home)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{manifest.name}{source.suffix}"
    for existing in folder.iterdir():
        if existing.stem == manifest.name and existing != target:
            raise UsageError(
                f"a script tool named {manifest.name!r} is already installed ({existing.name})",
                hint=f"`pincer tools remove {manifest.name}` first",
            )
    # Copy beside the target and rename: a crash leaves the old file or the new one.
    partial = folder / f".{manifest.name}{source.suffix}.partial"
    shutil.copyfile(source, partial)
    partial.replace(target)
    return manifest


def remove_manifest(home: Path, name: str) -> bool:
    removed = False
    for suffix in _SUFFIXES:
        path = script_dir(home) / f"{name}{suffix}"
        if path.is_file():
            path.unlink()
            removed = True
    return removed


def load_exec_policy(home: Path) -> ExecApprovalPolicy:
    data = read_json(home / EXEC_APPROVALS_FILE, default=None)
    if data is None:
        return ExecApprovalPolicy()
    return ExecApprovalPolicy.from_json(data, source=str(home / EXEC_APPROVALS_FILE))


def save_exec_policy(home: Path, policy: ExecApprovalPolicy) -> None:
    path = home / EXEC_APPROVALS_FILE
    with locked(path):
        write_json_atomic(path, policy.to_json())
