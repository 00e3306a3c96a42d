"""Every hint is true: each config key a hint names exists, with its section, and each command.

Newcomer item 4. Failed on main before the fixes: the http refusal hinted at
``allow_private_network`` (not a config key: it is ``[network] allow_private``) and the docker
hint named ``container_image`` without its section.

The walker reads every ``hint=`` string (and f-string) in ``src/pincer`` and checks:

- ``section.key`` and ``[section] key`` against the config schema (``pincer.config.ConfigFile``);
- a bare name that is a config key's leaf (``container_image``) must come with its section;
- a bare name shaped like a setting (``allow_*``, ``max_*``, ``*_timeout_s``...) must be a key;
- every `` `pincer ...` `` command against the real CLI: each word a subcommand while the
  command is a group, and each ``--flag`` an option of the command it reaches;
- every ``pip install 'pincer[NAME,...]'`` against pyproject.toml's extras, quoted (a shell such
  as zsh reads an unquoted ``[...]`` as a pattern).
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from pydantic import BaseModel
from typer import _click
from typer.core import TyperGroup

from pincer.cli.main import app
from pincer.config import ConfigFile
from pincer.core.extras import install_hint

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "pincer"
EXTRAS_OF_PYPROJECT = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# Names in hints that look like settings but are something else, each with what it is.
NOT_CONFIG = {
    "allowed_names": "a capabilities-file key (secrets.allowed_names)",
    "allowed_prefixes": "a capabilities-file key (workspace.allowed_prefixes)",
    "allow_inline_eval": "an exec-approvals.json key",
    "max_tokens": "a sampling parameter",
    "max_request_bytes": "a capabilities-file key (http.max_request_bytes)",
    "max_response_bytes": "a capabilities-file key (http.max_response_bytes)",
    "timeout_s": "an argument of the exec tool / an MCP server entry key",
    "timeout_secs": "a capabilities-file key (http.timeout_secs)",
    "max_invocations": "a [[grants]] key",
    "max_bytes": "an argument of read_file / [output] max_bytes",
    "ask_fallback": "an exec-approvals.json key",
    "allow_once": "an approval answer",
    "allow_always": "an approval answer",
    "connect_timeout_s": "an MCP server entry key (mcp-servers.json)",
}
# "audit.key", "config.toml": file names, not section.key
_FILE_EXTENSIONS = {"json", "toml", "yaml", "yml", "py", "key", "db", "lock", "wasm", "md", "token", "gz"}
SETTING_SHAPE = re.compile(r"\b(?:allow|max|use|enable|disable)_[a-z_]+\b|\b[a-z]+(?:_[a-z]+)*_(?:timeout_s|bytes)\b")


def _config_keys() -> dict[str, set[str]]:
    """leaf name -> the dotted paths it appears at (sections, lists of tables and maps included)."""
    leaves: dict[str, set[str]] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            path = f"{prefix}{name}"
            leaves.setdefault(name, set()).add(path)
            for inner in _models_in(field.annotation):
                walk(inner, path + ".")

    walk(ConfigFile, "")
    return leaves


def _models_in(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        yield from _models_in(arg)


def _hints() -> Iterator[tuple[str, str]]:
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            value = None
            if (isinstance(node, ast.keyword) and node.arg == "hint") or (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "hint" for t in node.targets)):
                value = node.value
            text = _text_of(value) if value is not None else ""
            if text:
                yield f"{path.relative_to(SRC)}:{value.lineno}", text


def _text_of(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text_of(node.left) + _text_of(node.right)
    if isinstance(node, ast.IfExp):
        return _text_of(node.body) + " " + _text_of(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "install_hint":
        # install_hint("web"): the text a person reads; a name filled in at run time is X
        (name,) = node.args
        return install_hint(name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else "X")
    return ""


HINTS = list(_hints())
LEAVES = _config_keys()
SECTIONS = {path.split(".")[0] for paths in LEAVES.values() for path in paths}


def test_the_walker_finds_the_hints() -> None:
    assert len(HINTS) > 200


def _config_problems(text: str) -> list[str]:
    from pincer.config import BUILTIN_SHARED, BUILTIN_TOOLS

    # [builtins.NAME] is one entry of the builtins table: its keys are builtins.KEY's.
    text = re.sub(rf"\bbuiltins\.(?:{'|'.join(BUILTIN_TOOLS + BUILTIN_SHARED)})\b", "builtins", text)
    text = re.sub(r"\[builtins\.[A-Za-z_]+\]", "[builtins]", text)  # a name filled in at run time (X)
    problems = []
    named: set[str] = set()
    for section, key in re.findall(r"\[+([a-z_.]+)\]+\s+([a-z_]+)", text):
        if key not in LEAVES:
            continue  # prose after a section name ("under [gateway] in config.toml")
        named.add(key)
        if f"{section}.{key}" not in LEAVES[key]:
            problems.append(f"[{section}] {key} is not a config key")
    for section in re.findall(r"\[+([a-z_.]+)\]+", text):
        # "set allow_remote = true under [gateway]": the section named anywhere in the hint
        named.update(leaf for leaf, paths in LEAVES.items() if f"{section}.{leaf}" in paths)
    # Dotted names in a hint about a capabilities file or a manifest are that file's keys.
    is_about_a_file = any(word in text for word in ("capabilities", "manifest"))
    for section, key in re.findall(r"(?<![-\w.])([a-z_]+)\.([a-z_]+)\b(?![.-])", text):
        if section in SECTIONS and not is_about_a_file and key not in _FILE_EXTENSIONS:
            named.add(key)
            paths = LEAVES.get(key, set())
            if f"{section}.{key}" not in paths and not any(p.startswith(f"{section}.") for p in paths):
                problems.append(f"{section}.{key} is not a config key")
    for word in set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text)) - named:
        if word in NOT_CONFIG:
            continue
        if word in LEAVES and not (LEAVES[word] & {word}):
            problems.append(f"{word} is named without its section ({', '.join(sorted(LEAVES[word]))})")
        elif word not in LEAVES and SETTING_SHAPE.fullmatch(word):
            problems.append(f"{word} looks like a setting but is no config key")
    return problems


def _cli_problems(text: str) -> list[str]:
    root = typer.main.get_command(app)
    problems = []
    for command in re.findall(r"`pincer ([^`]*)`", text):
        node: Any = root
        for word in command.split():
            if "/" in word:  # "install/remove": each alternative must exist
                word = word.split("/")[0]
            if word.startswith("--"):
                options = {opt for p in node.params for opt in getattr(p, "opts", [])}
                if word.split("=")[0] not in options:
                    problems.append(f"`pincer {command}`: {node.name} has no option {word}")
                continue
            if isinstance(node, TyperGroup):  # a group (typer vendors click: not click.Group)
                # get_command, not .commands: the root group imports its command modules lazily.
                sub = node.get_command(_click.Context(node), word)
                if sub is None:
                    if word.islower() and word.isalpha():
                        problems.append(f"`pincer {command}`: {node.name} has no subcommand {word!r}")
                    break
                node = sub
            else:
                break
    return problems


def _extra_problems(text: str) -> list[str]:
    """Each extra a ``pip install`` hint names is one of pyproject.toml's, in quotes."""
    problems = []
    for quote, names in re.findall(r"pip install (\S*?)pincer\[([^\]]*)\]", text):
        if quote != "'":
            problems.append(f"pincer[{names}] is not in single quotes (a shell reads [...] as a pattern)")
        unknown = [n for n in (n.strip() for n in names.split(",")) if n != "X" and n not in EXTRAS_OF_PYPROJECT]
        problems += [f"pincer[{n}] is not an extra of pyproject.toml" for n in unknown]
    return problems


@pytest.mark.parametrize(("where", "text"), HINTS, ids=[where for where, _ in HINTS])
def test_every_hint_names_real_keys_and_commands(where: str, text: str) -> None:
    problems = _config_problems(text) + _cli_problems(text) + _extra_problems(text)
    assert not problems, f"{where}: {text!r}: {problems}"


def test_the_walker_catches_the_hints_that_lied() -> None:
    assert _config_problems("set allow_private_network") == ["allow_private_network looks like a setting but is no config key"]
    assert _config_problems("set container_image") == ["container_image is named without its section (sandbox.container_image)"]
    assert _config_problems("set [network] allow_private = true") == []
    assert _config_problems("raise tools.timeout_s in config.toml") == []
    assert _cli_problems("run `pincer approvals nope ID`") == ["`pincer approvals nope ID`: approvals has no subcommand 'nope'"]
    assert _cli_problems("run `pincer approvals approve ID --always`") == []
    assert _extra_problems("pip install 'pincer[browser,nope]'") == ["pincer[nope] is not an extra of pyproject.toml"]
    assert _extra_problems("pip install pincer[web]") == ["pincer[web] is not in single quotes (a shell reads [...] as a pattern)"]
    assert _extra_problems("pip install 'pincer[wasm-build]' (componentize-py 0.25)") == []
    assert _extra_problems(install_hint("postgres")) == []


def test_the_walker_reads_the_extra_hints() -> None:
    """The pip install hints are read (runtimes/wasm/build.py's names pincer[wasm-build]), and an
    install_hint(...) hint as the text a person gets."""
    assert any("pip install 'pincer[wasm-build]'" in text for _, text in HINTS)
    assert any(text == "pip install 'pincer[X]'" for _, text in HINTS)  # doctor's, names filled in at run time


# -- markup: what is printed through rich reads as it was written --------------------------------

_RICH_TAG = re.compile(r"((\\*)\[([a-z#/@][^[]*?)])")


def _is_style_tag(tag: str) -> bool:
    from rich.errors import StyleSyntaxError
    from rich.style import Style

    name = tag[1:] if tag.startswith("/") else tag
    if not name:
        return True  # [/]
    try:
        Style.parse(name)
    except StyleSyntaxError:
        return False
    return True


def _rendered(markup: str) -> str:
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=100_000, highlight=False, color_system=None, emoji=False).print(markup)
    return out.getvalue().rstrip("\n")


@pytest.mark.parametrize(("where", "text"), HINTS, ids=[w for w, _ in HINTS])
def test_every_hint_survives_rendering(where: str, text: str) -> None:
    """Failed on main before this test for no hint (errors were escaped already); it keeps a hint
    naming ``[[hub.sources]]`` or ``[llm]`` from reaching the terminal as ``[]``."""
    from pincer.cli.common import error_markup

    [_, hint] = error_markup("m", text)
    assert _rendered(hint) == f"hint: {text}", where


def _printed_literals() -> Iterator[tuple[str, str]]:
    """The literal text of every ``stderr.print(...)``/``console.print(...)`` under ``cli/``."""
    for path in sorted((SRC / "cli").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "print"):
                continue
            owner = node.func.value
            if not (isinstance(owner, ast.Name) and owner.id in ("stderr", "console", "err")) or not node.args:
                continue
            if any(k.arg == "markup" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords):
                continue  # printed as plain text
            text = _text_of(node.args[0])
            if text:
                yield f"{path.relative_to(SRC)}:{node.lineno}", text


PRINTED = list(_printed_literals())


def test_the_print_walker_finds_the_messages() -> None:
    assert len(PRINTED) > 100


@pytest.mark.parametrize(("where", "text"), PRINTED, ids=[w for w, _ in PRINTED])
def test_no_printed_message_loses_text_as_markup(where: str, text: str) -> None:
    """Failed on main before this test: ``pincer hub token new`` printed ``token_secret =
    "hub_token" in its []``: ``[hub.sources]`` in the message was read as a rich style tag and
    dropped. Every ``[...]`` in a printed literal must be a real style (``[dim]``, ``[/]``) or
    be escaped (``\\[``)."""
    eaten = [m.group(0) for m in _RICH_TAG.finditer(text) if len(m.group(2)) % 2 == 0 and not _is_style_tag(m.group(3))]
    assert not eaten, f"{where}: {eaten} would vanish from {text!r}"
