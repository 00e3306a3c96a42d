"""``--help`` as a user reads it, the lazy command table, and shell completion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer import _click

from pincer.cli.main import COMMANDS, app

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 60
BIN = Path(sys.executable).parent


def pincer(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    base.update({"PINCER_HOME": str(home), "COLUMNS": "100"}, **(env or {}))
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=base, timeout=CLI_TIMEOUT_S)


def test_root_help_lists_every_command_with_its_help(tmp_path: Path) -> None:
    result = pincer(tmp_path, "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # help wraps lines; compare word runs
    for name, entry in COMMANDS.items():
        assert f"{name} {entry.help}" in text, name


def test_the_table_help_is_the_help_of_the_command_it_loads() -> None:
    """main.py keeps each command's one-line help so listing imports nothing: it must not drift."""
    import typer.main

    root = typer.main.get_command(app)
    ctx = _click.Context(root)
    for name, entry in COMMANDS.items():
        command = root.get_command(ctx, name)
        assert command is not None, name
        first_line = (command.help or "").strip().splitlines()[0]
        assert first_line == entry.help, f"{name}: table says {entry.help!r}, the command says {first_line!r}"


@pytest.mark.parametrize(
    "argv",
    [(), ("tools", "call"), ("tools", "list"), ("serve",), ("wasm", "build"), ("audit", "list"), ("completion",)],
    ids=lambda argv: " ".join(argv) or "root",
)
def test_flags_show_as_flags(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """Failed on main before plain help: every flag rendered as `--json <bool>`, `--help <bool>`."""
    result = pincer(tmp_path, *argv, "--help")
    assert result.returncode == 0, result.stderr
    assert "<bool>" not in result.stdout
    assert "--help " in result.stdout and "Show this message and exit." in result.stdout


def test_serve_help_keeps_the_config_section_names(tmp_path: Path) -> None:
    """Failed on main before: rich markup ate `[gateway]`, leaving "(default:  host, 127.0.0.1)"."""
    text = " ".join(pincer(tmp_path, "serve", "--help").stdout.split())
    assert "(default: [gateway] host, 127.0.0.1)" in text
    assert "(default: [gateway] port, 8765; 0 picks one)" in text


def test_tools_call_help_shows_options_with_their_values(tmp_path: Path) -> None:
    text = " ".join(pincer(tmp_path, "tools", "call", "--help").stdout.split())
    assert "--args <str> Arguments as a JSON object. [default: {}]" in text
    assert "--json Write one JSON document to stdout." in text


def test_unknown_command_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    result = pincer(tmp_path, "tols")
    assert result.returncode == 2
    assert "tols" in result.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_is_printed(tmp_path: Path, shell: str) -> None:
    result = pincer(tmp_path, "completion", shell)
    assert result.returncode == 0, result.stderr
    assert f"_PINCER_COMPLETE=complete_{shell}" in result.stdout
    assert "# install:" in result.stderr  # how to use it, on stderr so `eval "$(...)"` stays clean
    as_json = pincer(tmp_path, "completion", shell, "--json")
    assert as_json.returncode == 0 and as_json.stdout.lstrip().startswith("{")


def test_completion_answers_through_the_lazy_group(tmp_path: Path) -> None:
    """The shell's call back: top-level names from the table, a group's subcommands from its module."""
    top = pincer(tmp_path, env={"_PINCER_COMPLETE": "complete_bash", "COMP_WORDS": "pincer to", "COMP_CWORD": "1"})
    assert top.stdout.split() == ["tools", "token"], top.stderr
    sub = pincer(tmp_path, env={"_PINCER_COMPLETE": "complete_bash", "COMP_WORDS": "pincer tools ", "COMP_CWORD": "2"})
    assert {"list", "show", "call", "install", "remove"} <= set(sub.stdout.split()), sub.stderr


@pytest.mark.skipif(shutil.which("bash") is None or not (BIN / "pincer").exists(), reason="needs bash and the pincer script")
def test_bash_completes_with_the_printed_script(tmp_path: Path) -> None:
    """The script as bash runs it: source it, complete `pincer ap`, read COMPREPLY."""
    script = pincer(tmp_path, "completion", "bash").stdout
    (tmp_path / "completion.bash").write_text(script)
    program = (
        f"source {tmp_path / 'completion.bash'}; COMP_WORDS=(pincer ap); COMP_CWORD=1; "
        '_pincer_completion pincer; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "PINCER_HOME": str(tmp_path)}
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["approvals"]
