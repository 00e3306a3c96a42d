"""Helpers shared by the script runtime tests."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from pincer.runtimes.script import ScriptToolManifest, parse_manifest

SANDBOX_UID = 65534


def manifest(**overrides: Any) -> ScriptToolManifest:
    data: dict[str, Any] = {
        "name": "t",
        "description": "test tool",
        "command": ["/bin/sh", "-c", "{script}"],
        "input_schema": {"type": "object", "properties": {"script": {"type": "string"}}, "required": ["script"]},
    }
    data.update(overrides)
    return parse_manifest(data, source="test")


def marker() -> str:
    """A unique token to find a test's processes in /proc afterwards."""
    return uuid.uuid4().hex


def processes_with(token: str) -> list[int]:
    """Host pids whose command line mentions ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


def sandbox_owned_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path
