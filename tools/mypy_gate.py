"""mypy with a committed baseline that may only shrink.

Runs mypy over ``src/pincer`` (configured in pyproject.toml) and compares each error, keyed by
file, error code and message (line numbers move with every edit), with ``tools/mypy-baseline.txt``.
A new error fails the gate; an error that is gone is reported so the baseline can shrink
(``python tools/mypy_gate.py --update`` rewrites it, and refuses to let it grow).

Then runs ``mypy --strict`` over the typed seams (issue 22 item 1: the lower layers, the chain and
the packages the agent runs on; issue 40 item 2: the runtimes, canvas, hub, built-ins and builder),
which have no baseline: any strict error there fails the gate.
``--follow-imports=silent`` checks the modules they import for types but reports only theirs.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tools" / "mypy-baseline.txt"
STRICT = (
    "src/pincer/core",
    "src/pincer/policy",
    "src/pincer/safety",
    "src/pincer/store",
    "src/pincer/registry",
    "src/pincer/dispatch.py",
    "src/pincer/approver.py",
    "src/pincer/llm",
    "src/pincer/skills",
    "src/pincer/triggers",
    "src/pincer/runtimes",
    "src/pincer/canvas",
    "src/pincer/hub",
    "src/pincer/builtins",
    "src/pincer/builder",
)
_LINE_REF = re.compile(r"\bline \d+")
_LINE = re.compile(r"^(?P<path>[^:]+):\d+(?::\d+)?: error: (?P<message>.*?)\s+\[(?P<code>[a-z0-9-]+)\]$")


def current_errors(*extra: str) -> collections.Counter[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--no-pretty", "--show-error-codes", *extra],
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


def read_baseline() -> collections.Counter[str]:
    if not BASELINE.exists():
        return collections.Counter()
    lines = [line for line in BASELINE.read_text().splitlines() if line and not line.startswith("#")]
    return collections.Counter(lines)


def strict_errors() -> int:
    """The strict gate: every error counts (no baseline); each is printed, keyed as the baseline is."""
    errors = current_errors("--strict", "--follow-imports=silent", *STRICT)
    if errors:
        print(f"mypy --strict: {sum(errors.values())} errors in {', '.join(STRICT)}:", file=sys.stderr)
        for key in sorted(errors.elements()):
            print(f"  {key}", file=sys.stderr)
        print("  (run `.venv/bin/mypy --strict --follow-imports=silent PATH` for the line numbers)", file=sys.stderr)
        return 1
    print(f"mypy --strict: no errors in {len(STRICT)} packages and modules", file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if "--update" not in argv and strict_errors():
        return 1
    errors, baseline = current_errors(), read_baseline()
    new = errors - baseline
    gone = baseline - errors
    if "--update" in argv:
        if new and BASELINE.exists():
            print(f"refusing to grow the baseline by {sum(new.values())} errors; fix them:", file=sys.stderr)
            for key in sorted(new.elements()):
                print(f"  {key}", file=sys.stderr)
            return 1
        header = "# mypy errors accepted for now; this list may only shrink (tools/mypy_gate.py)\n"
        BASELINE.write_text(header + "".join(f"{key}\n" for key in sorted(errors.elements())))
        print(f"baseline: {sum(errors.values())} errors", file=sys.stderr)
        return 0
    if gone:
        print(
            f"mypy: {sum(gone.values())} baseline errors are fixed; shrink the baseline with "
            "`.venv/bin/python tools/mypy_gate.py --update`",
            file=sys.stderr,
        )
    if new:
        print(f"mypy: {sum(new.values())} new errors (not in tools/mypy-baseline.txt):", file=sys.stderr)
        for key in sorted(new.elements()):
            print(f"  {key}", file=sys.stderr)
        return 1
    print(f"mypy: no new errors ({sum(errors.values())} in the baseline)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
