"""``mypy --strict`` over all of ``src/pincer``, with no baseline: any error fails the gate.

Issue 40 item 2: strict types on every floor, the gateway and the CLI included. The files and
the other settings are in pyproject.toml's ``[tool.mypy]`` (``strict = true`` there too, so a
plain ``mypy`` in an editor says what this gate says). Each error is printed keyed by file,
error code and message, then how to get the line numbers.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "src/pincer"
_LINE_REF = re.compile(r"\bline \d+")
_LINE = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<message>.*?)\s+\[(?P<code>[a-z0-9-]+)\]$")


def current_errors() -> collections.Counter[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--no-pretty", "--show-error-codes", TARGET],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    errors: collections.Counter[str] = collections.Counter()
    for line in proc.stdout.splitlines():
        match = _LINE.match(line.strip())
        if match:
            message = _LINE_REF.sub("line N", match["message"])  # "already defined on line 236"
            errors[f"{match['path']}: [{match['code']}] {message}"] += 1
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and not errors):
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"mypy failed to run (exit {proc.returncode})")
    return errors


def main() -> int:
    errors = current_errors()
    if errors:
        print(f"mypy --strict: {sum(errors.values())} errors in {TARGET}:", file=sys.stderr)
        for key in sorted(errors.elements()):
            print(f"  {key}", file=sys.stderr)
        print(f"  (run `.venv/bin/mypy --strict {TARGET}` for the line numbers)", file=sys.stderr)
        return 1
    print(f"mypy --strict: no errors in {TARGET}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
