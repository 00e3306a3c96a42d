"""The option parser and its tables: value forms, clusters, and failing closed on what it does not know."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.policy.command_analysis import analyze_argv
from pincer.policy.command_options import (
    INTERPRETER_OPTIONS,
    SHELL_OPTIONS,
    WRAPPER_OPTIONS,
    OptionTable,
    parse_options,
)
from pincer.policy.shell_words import split_shell

TABLES = {**WRAPPER_OPTIONS, **SHELL_OPTIONS, **INTERPRETER_OPTIONS}


def parsed(table: str, line: str) -> tuple[list[tuple[str, str | None]], int, str | None]:
    words = line.split()
    result = parse_options(table, TABLES[table], words)
    return [(o.key, o.value) for o in result.options], result.end, result.problem


@pytest.mark.parametrize(
    ("table", "line", "options", "end"),
    [
        ("nice", "-n 10 ls", [("-n", "10")], 2),
        ("nice", "-n10 ls", [("-n", "10")], 1),
        ("nice", "--adjustment=10 ls", [("-n", "10")], 1),
        ("nice", "--adjustment 10 ls", [("-n", "10")], 2),
        ("nice", "-10 ls", [("-n", "10")], 1),
        ("nice", "--10 ls", [("-n", "-10")], 1),
        ("env", "-iu HOME -- ls", [("-i", None), ("-u", "HOME")], 3),
        ("env", "-u -i ls", [("-u", "-i")], 2),  # a value is the next word, whatever it looks like
        ("env", "--default-signal ls", [("--default-signal", None)], 1),  # optional: only with "="
        ("env", "--default-signal=INT ls", [("--default-signal", "INT")], 1),
        ("env", "- ls", [], 0),  # a lone "-" is env's operand, not an option
        ("xargs", "-i ls", [("-i", None)], 1),
        ("xargs", "-iX ls", [("-i", "X")], 1),
        ("xargs", "--replace ls", [("-i", None)], 1),
        ("xargs", "--max-lines ls", [("-l", None)], 1),
        ("xargs", "-0n1 ls", [("-0", None), ("-n", "1")], 1),
        ("exec", "-la NAME ls", [("-l", None), ("-a", "NAME")], 2),
        ("timeout", "-s KILL -k1 5 ls", [("-s", "KILL"), ("-k", "1")], 3),
        ("bash", "-oc pipefail ls", [("-o", "pipefail"), ("-c", None)], 2),
        ("bash", "+O extglob -c ls", [("-O", "extglob"), ("-c", None)], 3),
        ("bash", "-norc --rcfile x -c ls", [("--norc", None), ("--rcfile", "x"), ("-c", None)], 4),
        ("bash", "- ls", [], 1),  # a lone "-" ends a shell's options
        ("python", "-uc code -x", [("-u", None), ("-c", "code")], 2),  # -c ends python's options
        ("python", "-Wignore -Xdev x.py", [("-W", "ignore"), ("-X", "dev")], 2),
        ("perl", "-lane code", [("-l", None), ("-a", None), ("-n", None), ("-e", "code")], 2),
        ("perl", "-l0e code", [("-l", "0"), ("-e", "code")], 2),
        ("perl", "-pi.bak x.pl", [("-p", None), ("-i", ".bak")], 1),
        ("node", "--max_old_space_size=10 --no-warnings x.js", [("--max-old-space-size", "10"), ("--warnings", None)], 2),
    ],
)
def test_value_forms(table: str, line: str, options: list[tuple[str, str | None]], end: int) -> None:
    assert parsed(table, line) == (options, end, None)


@pytest.mark.parametrize(
    ("table", "line", "problem"),
    [
        ("nice", "--frob ls", "not in the analyser's option table"),
        ("nice", "--adj=5 ls", "not in the analyser's option table"),  # getopt abbreviations are not guessed
        ("timeout", "-f 5 ls", "'-f'"),
        ("timeout", "--foreground=yes 5 ls", "not in the analyser's option table"),  # a flag has no value
        ("stdbuf", "-o", "needs a value"),
        ("bash", "-e --norc -c ls", "not in the analyser's option table"),  # bash reads long options first
        ("bash", "--rcfile=x -c ls", "not in the analyser's option table"),
        ("bash", "-o", "needs a value"),
        ("unbuffer", "-- ls", "not in the analyser's option table"),
    ],
)
def test_what_the_table_does_not_know_is_a_problem(table: str, line: str, problem: str) -> None:
    _, _, found = parsed(table, line)
    assert found is not None and problem in found


def test_every_table_knows_its_own_meanings() -> None:
    """A meaning (refused, inline, runs nothing) listed for an option the table cannot parse would
    silently never apply."""
    for name, table in TABLES.items():
        known = {f"-{c}" for c in table.flags + table.values + table.next_word + "".join(table.attached)}
        known |= {table.key(n) for n in table.long_flags | table.long_values | table.long_attached}
        for key in (*table.refused, *table.inline, *table.runs_nothing, *table.script_options, *table.ends_options):
            assert key in known, (name, key)


words = st.lists(st.sampled_from(["-", "--", "-c", "-e", "+c", "-o", "x", "ls", "-n5", "--a=b", "--", "-Z", "+"]) | st.text(max_size=6), max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(TABLES)), words)
def test_parser_is_total(name: str, args: list[str]) -> None:
    result = parse_options(name, TABLES[name], args)
    assert 0 <= result.end <= len(args)
    assert result.problem is None or isinstance(result.problem, str)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*TABLES, "ls", "xargs", "exec", "-a", "-c", "-e", "{}", "-I{}", "--"]) | st.text(max_size=5), max_size=10))
def test_argv_analysis_is_total(argv: list[str]) -> None:
    for segment in analyze_argv(argv, lambda word: (f"/usr/bin/{word.rsplit('/', 1)[-1]}",) if word else ()):
        assert segment.problem is None or isinstance(segment.problem, str)


def test_a_table_is_a_value() -> None:
    table = OptionTable(flags="a")
    with pytest.raises(AttributeError):
        table.flags = "b"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("line", "expands"),
    [("xargs -I{} x", [False, False, False]), ("echo {a,b}", [False, True]), ("echo {}x", [False, False]),
     ("echo '{a,b}'", [False, False]), ("echo {1..3}", [False, True]), ("echo a{b", [False, True])],
)  # fmt: skip
def test_brace_words(line: str, expands: list[bool]) -> None:
    """Only "{}" alone is known not to brace-expand; any other unquoted "{" might."""
    assert [getattr(t, "expands", None) for t in split_shell(line)] == expands
