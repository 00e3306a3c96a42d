"""``pincer completion SHELL``: the shell completion script, to source from a shell's start-up file.

The script calls ``pincer`` back with ``_PINCER_COMPLETE`` set (typer's completion protocol);
:func:`pincer.cli.main.main` answers those calls.
"""

from __future__ import annotations

from enum import StrEnum

import typer

__all__ = ["Shell", "completion"]

PROG_NAME = "pincer"


class Shell(StrEnum):
    BASH = "bash"
    ZSH = "zsh"
    FISH = "fish"


_INSTALL = {
    Shell.BASH: 'eval "$(pincer completion bash)"   # in ~/.bashrc',
    Shell.ZSH: 'eval "$(pincer completion zsh)"    # in ~/.zshrc, after compinit',
    Shell.FISH: "pincer completion fish > ~/.config/fish/completions/pincer.fish",
}


def completion(
    shell: Shell = typer.Argument(..., help="bash, zsh or fish.", case_sensitive=False),
    as_json: bool = typer.Option(False, "--json", help="Write one JSON document to stdout."),
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    \b
    bash: eval "$(pincer completion bash)"   in ~/.bashrc
    zsh:  eval "$(pincer completion zsh)"    in ~/.zshrc, after compinit
    fish: pincer completion fish > ~/.config/fish/completions/pincer.fish
    """
    from typer._completion_shared import get_completion_script

    from pincer.cli.main import COMPLETE_VAR

    script = get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell.value)
    if as_json:
        from pincer.cli.common import emit_json

        emit_json({"shell": shell.value, "script": script, "install": _INSTALL[shell]})
        return
    typer.echo(script)
    typer.echo(f"# install: {_INSTALL[shell]}", err=True)
