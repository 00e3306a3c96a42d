"""The builder's parsers of model answers: arbitrary input only ever raises their own errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.builder.code import CodeInvalid, check_source, parse_submission
from pincer.builder.plan import Allowance, PlanInvalid, parse_plan
from pincer.core.errors import BuildRefused

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
KEYS = ["name", "description", "input_schema", "hosts", "secrets", "effects", "output", "source", "tests", "fixtures"]
ANSWERS = st.dictionaries(st.sampled_from(KEYS), JSON, max_size=8) | JSON


@settings(max_examples=300, deadline=None)
@given(ANSWERS)
def test_a_plan_answer_parses_or_raises_plan_invalid_or_build_refused(answer: Any) -> None:
    try:
        parse_plan(answer, Allowance(hosts=frozenset({"api.example.com"}), secrets=frozenset({"k"})))
    except (PlanInvalid, BuildRefused):
        pass


@settings(max_examples=300, deadline=None)
@given(ANSWERS)
def test_a_code_answer_parses_or_raises_code_invalid(answer: Any) -> None:
    try:
        parse_submission(answer)
    except CodeInvalid:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | st.sampled_from(["\x00", "(" * 500 + ")" * 500, "import os\n", "def f(:\n"]))
def test_check_source_only_raises_code_invalid(source: str) -> None:
    try:
        check_source(source)
    except CodeInvalid:
        pass


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("import os\nfrom pincer_guest import Tool, tool\n", "does not provide"),
        ("import json\n", "must import tool"),
        ("from pincer_guest import tool\n@tool(description='d', schema={})\ndef a(p): ...\n"
         "@tool(description='d', schema={})\ndef b(p): ...\n", "exactly one"),
        ("def broken(:\n", "does not parse"),
    ],
)
def test_check_source_names_the_problem(source: str, says: str) -> None:
    with pytest.raises(CodeInvalid, match=says):
        check_source(source)
