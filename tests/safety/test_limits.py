"""Output size limit: within it untouched; past it cut to fit, with a marker counting the cut."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ToolError, UsageError
from pincer.safety.limits import DEFAULT_MAX_OUTPUT_BYTES, MIN_OUTPUT_LIMIT_BYTES, json_size, limit_output

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
