"""Slash commands: arguments by position or name, typed by the skill's parameters; an unknown
command lists the known ones; arbitrary text only raises our errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ArgumentsInvalid, CommandNotFound, PincerError
from pincer.skills.parser import parse_skill
from pincer.triggers.commands import command_table, parse_command


def _skill(tmp_path: Path, name: str, frontmatter: str) -> object:
    folder = tmp_path / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "SKILL.md"
    path.write_text(f"---\nname: {name}\ndescription: {name}\n{frontmatter}---\nbody\n")
    return parse_skill(path.read_bytes(), path=path)


@pytest.fixture
def table(tmp_path: Path) -> dict[str, object]:
    review = _skill(
        tmp_path, "review",
        "parameters:\n  - {name: path, type: string, required: true}\n"
        "  - {name: focus, type: string, default: all, enum: [all, security]}\n"
        "  - {name: depth, type: integer, default: 1}\n"
        "triggers:\n  - command: /review\n",
    )  # fmt: skip
    summarize = _skill(
        tmp_path, "summarize", "parameters:\n  - {name: url, type: string, required: true}\n  - {name: note, type: string}\n"
        "triggers:\n  - command: summarize\n",
    )  # fmt: skip
    free = _skill(tmp_path, "ask", "triggers:\n  - command: /ask\n")
    shadow = _skill(tmp_path, "review-too", "triggers:\n  - command: /review\n")
    return command_table([review, summarize, free, shadow])  # type: ignore[list-item]


def test_positional_and_named_arguments_are_typed(table: dict[str, object]) -> None:
    call = parse_command("/review src/app.py security", table)  # type: ignore[arg-type]
    assert call.skill.name == "review" and dict(call.params) == {"path": "src/app.py", "focus": "security", "depth": 1}
    named = parse_command('/review depth=3 "src/my file.py"', table)  # type: ignore[arg-type]
    assert dict(named.params) == {"path": "src/my file.py", "focus": "all", "depth": 3}
    assert named.arguments == 'depth=3 "src/my file.py"'
    # words past the last text parameter join it
    joined = parse_command("/summarize https://example.com in three short points", table)  # type: ignore[arg-type]
    assert dict(joined.params) == {"url": "https://example.com", "note": "in three short points"}
    free = parse_command("/ask what changed yesterday?", table)  # type: ignore[arg-type]
    assert dict(free.params) == {} and free.arguments == "what changed yesterday?"


def test_the_first_skill_keeps_a_command(table: dict[str, object]) -> None:
    assert table["/review"].name == "review"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "error", "says"),
    [
        ("/review", ArgumentsInvalid, "needs parameter 'path'"),
        ("/review a.py loudly", ArgumentsInvalid, "must be one of"),
        ("/review a.py all deep", ArgumentsInvalid, "must be an integer"),
        ("/review a.py all 1 extra", ArgumentsInvalid, "takes 3 arguments"),
        ('/review "a.py', ArgumentsInvalid, "quotation"),
        ("review a.py", ArgumentsInvalid, "is not a command"),
    ],
)
def test_bad_arguments_say_what_to_fix(table: dict[str, object], text: str, error: type, says: str) -> None:
    with pytest.raises(error) as info:
        parse_command(text, table)  # type: ignore[arg-type]
    assert says in info.value.message and info.value.hint


def test_an_unknown_command_lists_the_known_ones(table: dict[str, object]) -> None:
    with pytest.raises(CommandNotFound) as info:
        parse_command("/deploy now", table)  # type: ignore[arg-type]
    assert "/ask, /review, /summarize" in info.value.message and "pincer triggers list" in (info.value.hint or "")


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=120))
def test_arbitrary_text_only_raises_our_errors(text: str) -> None:
    from pincer.skills.model import Parameter, ParamType, Skill, Trigger

    skill = Skill(
        name="s", description="s", path=Path("/x/SKILL.md"), base_dir=Path("/x"), dialect="pincer", body="",  # type: ignore[arg-type]
        content_hash="h", triggers=(Trigger(kind="command", value="/s"),),
        parameters=(Parameter(name="a", type=ParamType.INTEGER, required=True), Parameter(name="b", type=ParamType.ARRAY)),
    )  # fmt: skip
    try:
        parse_command(text, command_table([skill]))
        parse_command("/s " + text, command_table([skill]))
    except PincerError:
        pass
