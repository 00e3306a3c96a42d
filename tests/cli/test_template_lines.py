"""``pincer init``'s template parses whichever commented key line is uncommented (issue 35).

Before: four examples wrote their key twice (``# url = url = "postgresql://..."``), so
uncommenting the line a user came for made config.toml unparsable; the browser's keys were shown
under ``[builtins.github]``, where they are refused.

A key of a table the template writes (``[store]``) is uncommented alone. A key of an example
table (``# [[jobs]]``, ``# [builtins.browser]``) cannot stand alone: it is uncommented with its
table's header and the lines the template marks ``(required)``, plus the first key of each
``(one of ...)`` group the key is not in (a job's schedule): what a person following the
comments does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pincer.config_check import check_config_file
from pincer.config_template import render_template

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 120
_KEY = re.compile(r"^# ([A-Za-z0-9_]+|\"[^\"]+\") = ")
_HEADER = re.compile(r"^(# )?\[")
_ONE_OF = re.compile(r"# \(one of ([a-z_, ]+)\)")
# A key whose value names another table: alone, it names one that is not there, and says so.
_NAMES_ANOTHER_TABLE = {"profile": "no profile named 'local'"}


def _comment(lines: list[str], at: int) -> str:
    """A key line with the aligned comment lines that continue it."""
    more = []
    for line in lines[at + 1 : at + 6]:
        if not line.startswith("#" + " " * 37 + " # "):
            break
        more.append(line)
    return " ".join([lines[at], *more])


def _variants(template: str) -> list[tuple[int, str, str]]:
    """(line number, the key's line, the whole file) for every commented key line."""
    lines = template.splitlines()
    found = []
    for at, line in enumerate(lines):
        key = _KEY.match(line)
        if key is None:
            continue
        head = max(i for i in range(at) if _HEADER.match(lines[i]))
        out = list(lines)
        out[at] = line[2:]
        if lines[head].startswith("# "):  # an example table: its header and what it needs
            out[head] = lines[head][2:]
            end = next((i for i in range(head + 1, len(lines)) if not lines[i] or _HEADER.match(lines[i])), len(lines))
            groups: dict[str, int] = {}  # a (one of ...) group -> its first member's line
            for i in range(head + 1, end):
                if not _KEY.match(lines[i]):
                    continue
                comment = _comment(lines, i)
                if "# (required)" in comment:
                    out[i] = lines[i][2:]
                if (group := _ONE_OF.search(comment)) is not None:
                    groups.setdefault(group.group(1), i)
            for members, first in groups.items():
                if key.group(1) not in members.split(", "):
                    out[first] = lines[first][2:]
        found.append((at + 1, line, "\n".join(out) + "\n"))
    return found


def test_every_commented_key_uncommented_makes_a_valid_config(tmp_path: Path) -> None:
    variants = _variants(render_template())
    assert len(variants) > 150  # every key of the schema is shown
    path = tmp_path / "config.toml"
    broken = []
    for number, line, text in variants:
        path.write_text(text)
        problems = check_config_file(path, home=tmp_path).problems
        name = _KEY.match(line).group(1)  # type: ignore[union-attr]
        if name in _NAMES_ANOTHER_TABLE and text.count("\n[llm.profiles") == 0:
            assert [p.message for p in problems] == [_NAMES_ANOTHER_TABLE[name]] and problems[0].hint, (line, problems)
            continue
        if problems:
            broken.append(f"line {number}: {line.strip()} -> {[(p.key, p.message) for p in problems]}")
    assert not broken, "\n".join(broken)


def test_the_store_and_cache_urls_uncommented_pass_pincer_config_check(tmp_path: Path) -> None:
    """Through the real CLI: the lines that were `# url = url = ...` on main."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")} | {"PINCER_HOME": str(tmp_path)}
    init = subprocess.run([*PINCER, "init"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert init.returncode == 0, init.stderr
    written = (tmp_path / "config.toml").read_text()
    out, section = [], ""
    for line in written.splitlines():
        section = line if line.startswith("[") else section
        out.append(line[2:] if section in ("[store]", "[cache]") and _KEY.match(line) else line)
    written = "\n".join(out) + "\n"
    (tmp_path / "config.toml").write_text(written)
    assert '\nurl = "postgresql://' in written and '\nurl = "redis://' in written
    done = subprocess.run([*PINCER, "config", "check"], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert "all settings files are valid" in done.stderr
