"""Rendering: parameters validated and coerced, templates in Jinja2's sandbox (escapes refused,
loops bounded, never a hang), {baseDir} and Claude Code's argument substitutions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import ArgumentsInvalid, SkillError
from pincer.skills import coerce_params, parse_skill, render_skill
from pincer.skills.params import parse_param_pairs

HEAD = """---
name: demo
description: d
parameters:
  - {name: path, type: string, required: true}
  - {name: count, type: integer, default: 2}
  - {name: ratio, type: number}
  - {name: strict, type: boolean, default: false}
  - {name: files, type: array}
  - {name: options, type: object}
  - {name: mode, type: string, enum: [fast, deep], default: fast}
---
"""


def make(body: str, head: str = HEAD, path: str = "/skills/demo/SKILL.md"):
    return parse_skill((head + body).encode(), path=Path(path))


def test_tera_style_templates_render() -> None:
    body = (
        "{{ path | upper }} {{ files | join(', ') }} {{ files | length }} {{ files | first }}/{{ files | last }} "
        "[{{ '  x  ' | trim }}] {{ missing | default('none') }} {{ path | lower }}\n"
        "{% if strict %}strict{% else %}lenient{% endif %} {% for f in files %}<{{ f }}>{% endfor %} "
        "{% for i in range(count) %}{{ i }}{% endfor %} {{ mode }}"
    )
    text = render_skill(make(body), {"path": "Src", "files": ["a", "b"], "count": "3"}).text
    assert text == "SRC a, b 2 a/b [x] none src\nlenient <a><b> 012 fast"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"path": "p", "count": "7"}, {"count": 7}),
        ({"path": "p", "ratio": "0.5"}, {"ratio": 0.5}),
        ({"path": "p", "ratio": "3"}, {"ratio": 3}),
        ({"path": "p", "strict": "yes"}, {"strict": True}),
        ({"path": "p", "strict": "off"}, {"strict": False}),
        ({"path": "p", "files": "a, b"}, {"files": ["a", "b"]}),
        ({"path": "p", "files": '["x", 1]'}, {"files": ["x", 1]}),
        ({"path": "p", "options": '{"k": 1}'}, {"options": {"k": 1}}),
        ({"path": 5}, {"path": "5"}),
        ({"path": "p"}, {"count": 2, "strict": False, "mode": "fast"}),
    ],
)
def test_parameters_are_coerced_and_defaults_applied(given: dict, expected: dict) -> None:
    values = coerce_params(make(""), given)
    for key, value in expected.items():
        assert values[key] == value and type(values[key]) is type(value)


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ({}, "needs parameter 'path' (string)"),
        ({"path": "p", "count": "many"}, "'count' of skill 'demo' must be an integer"),
        ({"path": "p", "count": True}, "must be an integer"),
        ({"path": "p", "ratio": "inf"}, "finite number"),
        ({"path": "p", "strict": "perhaps"}, "must be true or false"),
        ({"path": "p", "options": "[1]"}, "must be a JSON object"),
        ({"path": "p", "mode": "slow"}, "must be one of 'fast', 'deep'"),
        ({"path": "p", "colour": "red"}, "has no parameter 'colour'"),
        ({"path": {"a": 1}}, "must be text"),
    ],
)
def test_bad_parameters_are_refused_with_a_clear_error(given: dict, needle: str) -> None:
    with pytest.raises(ArgumentsInvalid) as caught:
        coerce_params(make(""), given)
    assert needle in caught.value.message and caught.value.hint


def test_cli_pairs() -> None:
    assert parse_param_pairs(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(ArgumentsInvalid, match="KEY=VALUE"):
        parse_param_pairs(["novalue"])


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("{{ ''.__class__.__mro__ }}", "outside the sandbox"),
        ("{{ path.__class__.__base__.__subclasses__() }}", "outside the sandbox"),
        ("{{ files.__len__() }}", "outside the sandbox"),
        ("{{ path.format.__globals__ }}", "outside the sandbox"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "past 10,000 iterations"),
        ("{% for i in range(10**9) %}x{% endfor %}", r"exponent|range\(\) of 1,000,000,000 items|past 10,000"),
        ("{{ 'a' * 100000000 }}", "repetition"),
        ("{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('a') }}", "cannot use macro tags"),
        ("{% include 'other.md' %}", "cannot use include tags"),
        ("{% if %}", "syntax error"),
        ("{{ nope + 1 }}", "failed"),
        ("{{ ratio }}", "parameter 'ratio', which has no value"),
    ],
)
def test_templates_that_escape_or_run_away_fail_clearly(body: str, needle: str) -> None:
    import re

    with pytest.raises(SkillError) as caught:
        render_skill(make(body), {"path": "p", "files": ["a"]})
    assert re.search(needle, caught.value.message), caught.value.message
    assert "/skills/demo/SKILL.md" in caught.value.message


def test_a_syntax_error_names_the_line_of_the_file() -> None:
    with pytest.raises(SkillError) as caught:
        render_skill(make("line one\nline two {% if %}\n"), {"path": "p"})
    assert caught.value.line == HEAD.count("\n") + 2


def test_base_dir_and_claude_substitutions() -> None:
    openclaw = make("Run {baseDir}/run.sh with awk '{print $1}'", head="---\nname: demo\ndescription: d\nmetadata: {openclaw: {emoji: x}}\n---\n")
    assert render_skill(openclaw).text == "Run /skills/demo/run.sh with awk '{print $1}'"
    assert render_skill(openclaw, arguments="now").text.endswith("\n\nARGUMENTS: now\n")
    claude = make(
        "Fix $ARGUMENTS[0] then $1; all: $ARGUMENTS; named $issue; dir ${CLAUDE_SKILL_DIR}; keep $HOME",
        head="---\nname: demo\ndescription: d\narguments: [issue, branch]\n---\n",
    )
    text = render_skill(claude, {"issue": "42", "branch": "main"}).text
    assert text == "Fix 42 then main; all: 42 main; named 42; dir /skills/demo; keep $HOME"
    plain = make("No placeholders here.", head="---\nname: demo\ndescription: d\nargument-hint: '[x]'\n---\n")
    assert render_skill(plain, arguments="one two").text == "No placeholders here.\n\nARGUMENTS: one two\n"


def test_other_dialects_bodies_are_not_templates() -> None:
    openclaw = make("docker ps --format '{{.Names}}'", head="---\nname: demo\ndescription: d\nhomepage: https://x\n---\n")
    assert render_skill(openclaw).text == "docker ps --format '{{.Names}}'"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("{}%#()[]|.'\"_ abcdefrngmo+*~-=!0123456789\n")), max_size=120))
def test_arbitrary_templates_render_or_raise_our_error(body: str) -> None:
    try:
        render_skill(make(body), {"path": "p", "files": ["a", "b"]})
    except SkillError:
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["path", "count", "ratio", "strict", "files", "options", "mode", "other"]),
        st.one_of(st.text(max_size=20), st.integers(), st.floats(), st.booleans(), st.none(), st.lists(st.integers(), max_size=3)),
        max_size=6,
    )
)
def test_arbitrary_parameters_coerce_or_raise_invalid_arguments(given: dict) -> None:
    try:
        values = coerce_params(make(""), given)
    except ArgumentsInvalid:
        return
    assert set(values) <= {"path", "count", "ratio", "strict", "files", "options", "mode"}
