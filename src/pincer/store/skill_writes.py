"""``$PINCER_HOME/skill-writes.json``: the skill folders agent runs have written into.

The file tools record a write into a skill root here (``runtimes/native/skill_roots.py``); the
skill library reads it and treats a skill whose folder is listed as untrusted until a person
approves that SKILL.md (``pincer skills approve NAME``). Keys are resolved, case-folded paths.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pincer.store.jsonfile import locked, read_json, write_json_atomic

__all__ = ["SKILL_WRITES_FILE", "folder_key", "written_folders", "record_write"]

SKILL_WRITES_FILE = "skill-writes.json"


def folder_key(path: str | Path) -> str:
    """A path as the record keys it: resolved (symlinks followed as far as they exist), case-folded."""
    return os.path.normcase(os.path.realpath(path)).casefold()


def written_folders(home: Path) -> dict[str, Mapping[str, Any]]:
    """The skill folders runs have written into, by :func:`folder_key`."""
    data = read_json(home / SKILL_WRITES_FILE, default={})
    return {str(k): v for k, v in data.items() if isinstance(v, Mapping)} if isinstance(data, dict) else {}


def record_write(home: Path, folder: str | Path, *, session: str, tool: str) -> None:
    path = home / SKILL_WRITES_FILE
    with locked(path):
        data = dict(written_folders(home))
        data[folder_key(folder)] = {"session": session, "tool": tool, "at": time.time()}
        write_json_atomic(path, data)
