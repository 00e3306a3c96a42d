"""Output size limit: within it untouched; past it cut to fit, with a marker counting the cut."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ToolError, UsageError
from pincer.safety.limits import (
    DEFAULT_MAX_OUTPUT_BYTES,
    MIN_OUTPUT_LIMIT_BYTES,
    json_size,
    limit_output,
    limit_result,
)

MARKER = re.compile(r"\n\[truncated: (\d+) bytes cut; the output was (\d+) bytes, over the (\d+)-byte limit\]$")


def encoded_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def test_small_output_passes_untouched() -> None:
    value = {"items": [1, 2, 3], "text": "héllo"}
    out, truncated, size = limit_output(value)
    assert out is value and not truncated and size == encoded_size(value)


def test_default_limit_is_100_000_bytes() -> None:
    assert DEFAULT_MAX_OUTPUT_BYTES == 100_000
    exact = "x" * (100_000 - 2)  # the two quotes make it exactly the limit
    assert limit_output(exact) == (exact, False, 100_000)
    out, truncated, size = limit_output(exact + "x")
    assert truncated and size == 100_001 and encoded_size(out) <= 100_000


def test_long_string_keeps_a_prefix_and_says_how_much_was_cut() -> None:
    text = "ä" * 200_000  # 2 bytes each in UTF-8
    out, truncated, size = limit_output(text, 1_000)
    assert truncated and size == 400_002
    match = MARKER.search(out)
    assert match and int(match[2]) == size and int(match[3]) == 1_000
    kept = out[: match.start()]
    assert text.startswith(kept) and len(kept) > 400
    assert int(match[1]) == 400_000 - len(kept.encode())
    assert encoded_size(out) <= 1_000


def test_structured_output_becomes_its_json_text_prefix() -> None:
    value = {"rows": [{"id": i, "name": f"row {i}"} for i in range(5_000)]}
    out, truncated, size = limit_output(value, 2_000)
    assert truncated and isinstance(out, str) and size == encoded_size(value)
    match = MARKER.search(out)
    assert match
    full = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert full.startswith(out[: match.start()])
    assert int(match[1]) == len(full.encode()) - len(out[: match.start()].encode())
    assert encoded_size(out) <= 2_000


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()),
    lambda children: st.one_of(
        st.lists(children, max_size=6), st.dictionaries(st.text(max_size=10), children, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(json_values, st.text(max_size=3_000)), max_bytes=st.integers(MIN_OUTPUT_LIMIT_BYTES, 1_500))
def test_result_always_fits_and_reports_the_original_size(value: Any, max_bytes: int) -> None:
    out, truncated, size = limit_output(value, max_bytes)
    assert size == encoded_size(value) == json_size(value)
    assert truncated == (size > max_bytes)
    if truncated:
        assert encoded_size(out) <= max_bytes
        match = MARKER.search(out)
        assert match and int(match[2]) == size
        source = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        kept = out[: match.start()]
        assert source.startswith(kept)
        assert int(match[1]) == len(source.encode()) - len(kept.encode())
    else:
        assert out is value


def test_escapes_count_towards_the_limit() -> None:
    text = '"\\\n' * 1_000  # each character costs two bytes once JSON-escaped
    out, truncated, _ = limit_output(text, 300)
    assert truncated and encoded_size(out) <= 300


def test_unserialisable_output_is_a_tool_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ToolError, match="not JSON-serialisable"):
        limit_output(cyclic)


@pytest.mark.parametrize("limit", [0, -1, MIN_OUTPUT_LIMIT_BYTES - 1, 1.5, "100"])
def test_too_small_a_limit_is_a_usage_error(limit: Any) -> None:
    with pytest.raises(UsageError, match="at least"):
        limit_output("x", limit)


# -- limit_result: the value and the MCP content blocks ----------------------------------------------

DROPPED = re.compile(r"^\[(\d+) content block\(s\) dropped: the result was over the (\d+)-byte output limit\]$")


def test_a_result_without_content_is_the_value_alone() -> None:
    assert limit_result({"a": 1}, None, 1_000) == ({"a": 1}, None, False, 7)
    assert limit_result("x", (), 1_000) == ("x", (), False, 3)


def test_blocks_that_fit_pass_untouched_and_count_towards_the_size() -> None:
    blocks = ({"type": "text", "text": "hello"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"})
    value, content, truncated, size = limit_result("v", blocks, 1_000)
    assert (value, content, truncated) == ("v", blocks, False)
    assert size == encoded_size("v") + sum(encoded_size(b) for b in blocks)


def test_a_text_block_over_the_budget_is_cut_with_the_marker_and_the_rest_dropped() -> None:
    first = {"type": "text", "text": "a" * 300}
    long = {"type": "text", "text": "ü" * 2_000, "annotations": {"audience": ["user"]}}
    image = {"type": "image", "data": "A" * 50, "mimeType": "image/png"}
    value, content, truncated, size = limit_result("v", (first, long, image), 1_000)
    assert value == "v" and truncated
    assert size == encoded_size("v") + encoded_size(first) + encoded_size(long) + encoded_size(image)
    assert content is not None and len(content) == 3
    assert content[0] == first
    cut = content[1]
    assert cut["annotations"] == long["annotations"] and cut["type"] == "text"  # the block keeps its other keys
    match = MARKER.search(cut["text"])
    assert match and int(match[3]) == 1_000 - encoded_size(first) - (encoded_size(long) - encoded_size(long["text"]))
    assert long["text"].startswith(cut["text"][: match.start()])
    assert encoded_size(first) + encoded_size(cut) <= 1_000
    dropped = DROPPED.match(content[2]["text"])
    assert content[2]["type"] == "text" and dropped and dropped.groups() == ("1", "1000")


def test_a_block_that_cannot_be_cut_is_replaced_by_a_note_counting_every_block_dropped() -> None:
    """An image never fits half; nor does a text block when too little budget is left to be worth a
    cut (under the minimum limit): it and every block after it are dropped and counted."""
    image = {"type": "image", "data": "A" * 2_000, "mimeType": "image/png"}
    small = {"type": "text", "text": "after"}
    _, content, truncated, _ = limit_result(None, (image, small, small), 1_000)
    assert truncated and content is not None and len(content) == 1
    dropped = DROPPED.match(content[0]["text"])
    assert dropped and dropped.groups() == ("3", "1000")

    filler = {"type": "text", "text": "f" * (1_000 - 100)}
    text = {"type": "text", "text": "t" * 500}
    _, content, truncated, _ = limit_result(None, (filler, text), 1_000)
    assert truncated and content is not None and content[0] == filler
    dropped = DROPPED.match(content[1]["text"])
    assert dropped and dropped.groups() == ("1", "1000")


def test_the_value_is_limited_on_its_own_budget() -> None:
    value, content, truncated, size = limit_result("x" * 2_000, ({"type": "text", "text": "ok"},), 1_000)
    assert truncated and MARKER.search(value) and content == ({"type": "text", "text": "ok"},)
    assert size == 2_002 + encoded_size({"type": "text", "text": "ok"})


def test_an_unserialisable_block_is_a_tool_error() -> None:
    cyclic: dict[str, Any] = {"type": "resource"}
    cyclic["resource"] = cyclic
    with pytest.raises(ToolError, match="not JSON-serialisable"):
        limit_result("v", ({"type": "text", "text": "ok"}, cyclic), 1_000)


blocks = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=1_500)),
        st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.text("A", max_size=1_500)),
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(content=blocks, max_bytes=st.integers(MIN_OUTPUT_LIMIT_BYTES, 2_000))
def test_content_keeps_its_order_and_only_the_last_kept_block_is_ever_cut(
    content: list[dict[str, str]], max_bytes: int
) -> None:
    _, kept, truncated, size = limit_result("v", tuple(content), max_bytes)
    assert size == encoded_size("v") + sum(encoded_size(b) for b in content)
    total = sum(encoded_size(b) for b in content)
    assert truncated == (total > max_bytes)
    if not content:
        assert kept == ()
        return
    assert kept is not None
    body = list(kept)
    note = DROPPED.match(body[-1]["text"]) if body and body[-1]["type"] == "text" else None
    if note:
        body.pop()
    # What is kept is a prefix of the blocks, the last one possibly cut, within the budget.
    assert sum(encoded_size(b) for b in body) <= max_bytes
    for index, block in enumerate(body):
        if block == content[index]:
            continue
        assert index == len(body) - 1 and block["type"] == "text" and MARKER.search(block["text"])
    dropped = len(content) - len(body)
    assert (int(note[1]) if note else 0) == dropped
