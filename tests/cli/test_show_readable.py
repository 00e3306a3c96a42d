"""``pincer approvals show`` and ``pincer runs show`` are readable and still honest (second-hour
item 5): the real CLI as subprocesses, a real approval and a real run against the local model
server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pincer.core.display import MAX_BLANK_LINES, MAX_INDENT_CHARS, MAX_INLINE_RUN, honest_block, honest_json
from pincer.demo.model_server import Turn, serve_models
from tests.cli.pending import wait_for_pending
from tests.cli.test_run_cli import CLI_TIMEOUT_S, PINCER, _env, _home, pincer

CONTENT = "# Notes\n\n- first\n    - nested\nx = 1" + " " * 600 + "rm -rf ~\n\u202eevil"


def test_approvals_show_prints_line_breaks_and_indentation_as_themselves(tmp_path: Path) -> None:
    """Failed before the fix: pincer's own JSON indentation and every line break were shown as
    ``⟨5 whitespace characters⟩`` / ``⟨U+000A⟩``."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[approvals]\ntimeout_s = 60\n")
    args = json.dumps({"path": "notes.md", "content": CONTENT})
    call = subprocess.Popen([*PINCER, "tools", "call", "write_file", "--args", args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(home))  # fmt: skip
    try:
        listed = wait_for_pending(home, call, lambda h: pincer(h, "approvals", "list", "--json"))
        shown = pincer(home, "approvals", "show", listed[0]["id"])
    finally:
        call.kill()
        call.communicate(timeout=CLI_TIMEOUT_S)
    assert shown.returncode == 0, shown.stderr
    text = shown.stderr
    assert 'arguments:\n{\n  "path": "notes.md",\n  "content": "# Notes\\n\\n- first\\n    - nested\\nx = 1⟨600 spaces⟩rm -rf ~' in text
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩evil" in text and "\u202e" not in text
    assert "⟨U+000A⟩" not in text and "whitespace characters⟩" not in text


def test_runs_show_prints_a_message_on_its_lines(tmp_path: Path) -> None:
    """Failed before the fix: a message's line breaks and indentation were markers on one line."""
    with serve_models([Turn(text=CONTENT)]) as server:
        home = _home(tmp_path, server)
        ran = pincer(home, "run", "release-notes", "-p", "version=1", "--json")
        assert ran.returncode == 0, ran.stderr
        run_id = json.loads(ran.stdout)["id"]
    shown = pincer(home, "runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    assert "assistant: \n      # Notes\n\n      - first\n          - nested\n      x = 1⟨600 spaces⟩rm -rf ~\n" in shown.stderr
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩evil" in shown.stderr and "⟨U+000A⟩" not in shown.stderr


def test_what_hides_text_stays_marked_in_a_block() -> None:
    shown = honest_block("a\n" + "\n" * 50 + " " * (MAX_INDENT_CHARS + 1) + "b\tc" + "\t" * (MAX_INLINE_RUN + 1) + "d\u200b")
    assert shown == f"a\n⟨50 blank lines⟩\n⟨{MAX_INDENT_CHARS + 1} spaces⟩b\tc⟨{MAX_INLINE_RUN + 1} whitespace characters⟩d⟨U+200B ZERO WIDTH SPACE⟩"


@given(st.text(max_size=400))
def test_a_block_never_shows_an_invisible_character_a_long_run_or_a_pile_of_blank_lines(text: str) -> None:
    import re
    import unicodedata

    shown = honest_block(text)
    for line in shown.split("\n"):
        body = line.lstrip(" ")
        assert len(line) - len(body) <= 4 * MAX_INDENT_CHARS  # indentation kept (a tab shown as 4 spaces)
        assert not re.search(r"\s{" + str(MAX_INLINE_RUN + 1) + ",}", body)
        assert all(ch == "\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") for ch in body)
    assert "\n" * (MAX_BLANK_LINES + 2) not in shown


@given(st.recursive(st.text(max_size=40), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8))
def test_indented_json_reads_back_as_the_honest_value(value: object) -> None:
    assert json.loads(honest_json(value, indent=2)) == json.loads(honest_json(value))
