"""The plan's output schema is read and checked by the one JSON Schema validator (core/schema.py,
jsonschema-rs with formats), as every other schema in pincer is: before issue 40 the builder used
python ``jsonschema`` (draft 2020-12 only, formats unchecked), so a schema the chain accepts was
ignored and an output the chain would refuse passed."""

from __future__ import annotations

from pincer.builder.testbench import CaseResult, _conforms
from pincer.builder.vetting import output_schema_of
from pincer.core.schema import schema_problem

EMAIL_OUT = {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}, "required": ["to"]}
# Draft 7's tuple form of items: not a 2020-12 schema, a valid one under the draft it names.
PAIR_OUT = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "items": [{"type": "string"}, {"type": "integer"}]}


def _passed(output: object) -> CaseResult:
    return CaseResult(label="test 1", ok=True, args={}, output=output)


def test_an_output_that_breaks_a_format_of_the_planned_schema_fails_the_case() -> None:
    """Failed before: python jsonschema checks no format unless asked, so "nobody" passed as an email."""
    assert _conforms(_passed({"to": "ada@example.com"}), EMAIL_OUT).ok
    failed = _conforms(_passed({"to": "nobody"}), EMAIL_OUT)
    assert not failed.ok and failed.problem.startswith("the output does not match the plan's output schema at to:")


def test_a_schema_under_the_draft_it_names_is_checked_not_ignored() -> None:
    """Failed before: the builder read every output schema as draft 2020-12, found the tuple
    ``items`` invalid there and checked nothing, though the chain validates it under draft 7."""
    assert schema_problem(PAIR_OUT) is None
    assert output_schema_of(PAIR_OUT) == PAIR_OUT
    assert _conforms(_passed(["a", 1]), PAIR_OUT).ok
    assert not _conforms(_passed([1, "a"]), PAIR_OUT).ok


def test_what_is_not_a_schema_is_a_description_and_is_not_checked() -> None:
    assert output_schema_of("a list of issues") is None
    assert output_schema_of({"type": "strng"}) is None  # schema words, but not a valid schema
    assert output_schema_of({"note": "free text"}) is None
    assert _conforms(_passed({"anything": 1}), None).ok
    failed_earlier = CaseResult(label="test 2", ok=False, args={}, output={"to": "nobody"}, problem="expected more")
    assert _conforms(failed_earlier, EMAIL_OUT) is failed_earlier
