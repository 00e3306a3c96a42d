"""The share of each part in a py-spy profile: inclusive percentages per function.

    .venv/bin/py-spy record --format raw -o samples.txt -- .venv/bin/python bench/agent.py
    .venv/bin/python bench/profile_shares.py samples.txt [--match pincer/] [--top 40]

``--format raw`` writes collapsed stacks (one line per distinct stack, its frames joined by ``;``,
then the sample count). A function's share is the fraction of samples with it anywhere on the stack,
counted once per sample; ``--match`` keeps the functions whose file path contains the text.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"(?P<name>.*) \((?P<path>.*?)(?::\d+)?\)$")


def shares(lines: list[str]) -> tuple[int, Counter[str]]:
    """Total samples, and per ``function (file)`` the samples it is on the stack of."""
    total = 0
    inclusive: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        total += int(count)
        seen: set[str] = set()
        for frame in stack.split(";"):
            found = _FRAME.match(frame)
            key = frame
            if found:
                path = found["path"].split("site-packages/")[-1].split("src/")[-1]
                key = f"{found['name']} ({path})"
            if key not in seen:
                seen.add(key)
                inclusive[key] += int(count)
    return total, inclusive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path)
    parser.add_argument("--match", default="", help="only functions whose file path contains this")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    total, inclusive = shares(args.samples.read_text().splitlines())
    print(f"{total} samples")
    shown = 0
    for key, count in inclusive.most_common():
        if args.match in key:
            print(f"{100 * count / max(total, 1):5.1f}%  {key}")
            shown += 1
            if shown >= args.top:
                break


if __name__ == "__main__":
    main()
