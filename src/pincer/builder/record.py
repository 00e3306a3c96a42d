"""``$PINCER_HOME/builds/NAME/``: what each stage of a build produced, for ``pincer builds``.

    build.json            the report: stages with their times, iterations, tests, tokens, cost
    plan.json             the accepted plan (with what was dropped)
    source.py tests.json  the last iteration's code and tests
    capabilities.json     what the tool was installed with
    log.txt               one line per stage and per failure
    iterations/N/         source.py, tests.json, result.json of every submit_code

Written as the build goes (each file atomically); a new build of the same name replaces the
folder's contents but keeps counting (``sequence``, which makes the installed version 0.1.N).
"""

from __future__ import annotations

import difflib
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

from pincer.core.errors import UsageError
from pincer.store.jsonfile import write_bytes_atomic

__all__ = ["BuildRecord", "builds_dir", "list_builds", "read_build", "iteration_diffs"]


def builds_dir(home: Path) -> Path:
    return Path(home) / "builds"


class BuildRecord:
    def __init__(self, home: Path, name: str) -> None:
        self.folder = builds_dir(home) / name
        previous = read_build(home, name, missing_ok=True) or {}
        self.sequence = int(previous.get("sequence", 0)) + 1
        if self.folder.exists():
            shutil.rmtree(self.folder / "iterations", ignore_errors=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._log: list[str] = []

    def write(self, relative: str, data: Any) -> None:
        text = data if isinstance(data, str) else json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(path, text.encode("utf-8"))

    def log(self, line: str) -> None:
        self._log.append(line)
        self.write("log.txt", "\n".join(self._log) + "\n")


def read_build(home: Path, name: str, *, missing_ok: bool = False) -> dict[str, Any] | None:
    path = builds_dir(home) / name / "build.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise UsageError(f"no build named {name!r} is recorded", hint=f"the recorded builds are the folders of {builds_dir(home)}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read: {exc}", hint="build the tool anew; the record is rewritten") from None
    return data if isinstance(data, dict) else {}


def list_builds(home: Path) -> list[dict[str, Any]]:
    folder = builds_dir(home)
    found = []
    for child in sorted(folder.iterdir()) if folder.is_dir() else []:
        data = read_build(home, child.name, missing_ok=True)
        if data:
            found.append({k: data.get(k) for k in ("name", "ok", "version", "iterations", "seconds", "tests_passed",
                                                   "tests_total", "finished_at", "description")})  # fmt: skip
    return found


def iteration_diffs(home: Path, name: str) -> list[str]:
    """Unified diffs of source.py between consecutive iterations."""
    folder = builds_dir(home) / name / "iterations"
    numbers = sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []
    diffs = []
    for a, b in itertools.pairwise(numbers):
        try:
            old = (folder / str(a) / "source.py").read_text(encoding="utf-8").splitlines(keepends=True)
            new = (folder / str(b) / "source.py").read_text(encoding="utf-8").splitlines(keepends=True)
        except OSError:
            continue
        diffs.append("".join(difflib.unified_diff(old, new, f"iteration {a}", f"iteration {b}")))
    return diffs
