"""Output size limit: an output whose JSON encoding passes ``max_bytes`` is cut, with a marker.

The size is that of the compact UTF-8 JSON encoding (what goes over the wire and into the
audit log). A string is cut to a prefix; any other value becomes the prefix of its JSON text (a
string), since half a JSON document cannot stay structured. Either way the result, encoded the
same way, fits in ``max_bytes`` and ends with a marker saying how many bytes (UTF-8, of the
string or of the JSON text) were cut.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from pincer.core.errors import ToolError, UsageError
from pincer.core.values import DEFAULT_MAX_OUTPUT_BYTES

logger = logging.getLogger(__name__)

__all__ = ["limit_output", "limit_result", "json_size", "DEFAULT_MAX_OUTPUT_BYTES", "MIN_OUTPUT_LIMIT_BYTES"]

MIN_OUTPUT_LIMIT_BYTES = 256  # room for the marker and a little of the output


# allow_nan=False: Python would write NaN and Infinity, which are not JSON (RFC 8259 section 6);
# a client's parser refuses the whole answer (a REST call answered 500), so such an output is
# the tool's error, said here, before it is counted or recorded as a success.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
NOT_JSON_NUMBER = "NaN or Infinity is not a JSON number; return null or a string for it"


def _encode(value: Any) -> str:
    return _ENCODER.encode(value)


def _not_json(exc: Exception) -> ToolError:
    reason = NOT_JSON_NUMBER if isinstance(exc, ValueError) and "Out of range float" in str(exc) else type(exc).__name__
    return ToolError(f"the tool output is not JSON-serialisable: {reason}")


def _size(text: str) -> int:
    return len(text.encode("utf-8", errors="surrogatepass"))


def json_size(value: Any) -> int:
    """Bytes of ``value``'s compact UTF-8 JSON encoding; ToolError when it has none."""
    try:
        return _size(_encode(value))
    except (ValueError, TypeError, RecursionError) as exc:
        raise _not_json(exc) from None


def _marker(cut: int, size: int, max_bytes: int) -> str:
    return f"\n[truncated: {cut} bytes cut; the output was {size} bytes, over the {max_bytes}-byte limit]"


def limit_output(value: Any, max_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> tuple[Any, bool, int]:
    """``(value, truncated, size)`` where ``size`` is the original JSON size in bytes.

    Within the limit ``value`` is returned as is. Past it, a string is returned that keeps as
    much of the output as fits and ends with the marker.
    """
    if not isinstance(max_bytes, int) or max_bytes < MIN_OUTPUT_LIMIT_BYTES:
        raise UsageError(f"the output limit must be at least {MIN_OUTPUT_LIMIT_BYTES} bytes, not {max_bytes!r}")
    try:
        encoded = _encode(value)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _not_json(exc) from None
    size = _size(encoded)
    if size <= max_bytes:
        return value, False, size
    text = value if isinstance(value, str) else encoded
    # The marker's numbers have at most as many digits as ``size``: reserve that much room.
    # The result's encoding is the kept part's (quotes included) plus the marker's less its quotes.
    room = max_bytes - (_size(_encode(_marker(size, size, max_bytes))) - 2)
    kept = text[: _longest_prefix(text, room)]
    cut = _size(text) - _size(kept)
    logger.debug("output of %d bytes cut to the %d-byte limit", size, max_bytes)
    return kept + _marker(cut, size, max_bytes), True, size


def _longest_prefix(text: str, budget: int) -> int:
    """The largest n such that the JSON encoding of ``text[:n]`` (quotes included) fits ``budget``."""
    low, high = 0, min(len(text), budget)  # every character costs at least one byte
    while low < high:
        middle = (low + high + 1) // 2
        if _size(_encode(text[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return low


def limit_result(
    value: Any, content: tuple[Mapping[str, Any], ...] | None, max_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
) -> tuple[Any, tuple[Mapping[str, Any], ...] | None, bool, int]:
    """``(value, content, truncated, size)``: the limit applied to everything a result carries.

    ``value`` is limited as by :func:`limit_output`. The MCP content blocks, which clients are
    shown instead of the value, share one budget of ``max_bytes``: blocks are kept in order while
    they fit, a text block that does not fit is cut with the marker, and any other block that
    does not fit (an image, a resource) is replaced by a text block saying what was dropped.
    ``size`` is the original size of both together."""
    value, truncated, size = limit_output(value, max_bytes)
    if not content:
        return value, content, truncated, size
    kept: list[Mapping[str, Any]] = []
    budget = max_bytes
    dropped = 0
    for block in content:
        block_size = json_size(block)
        size += block_size
        if dropped:
            dropped += 1
            continue
        if block_size <= budget:
            kept.append(block)
            budget -= block_size
            continue
        truncated = True
        text = block.get("text") if block.get("type") == "text" else None
        if isinstance(text, str) and budget - (block_size - json_size(text)) >= MIN_OUTPUT_LIMIT_BYTES:
            cut, _, _ = limit_output(text, budget - (block_size - json_size(text)))
            kept.append({**block, "text": cut})
            budget = 0
        else:
            dropped = 1
    if dropped:
        kept.append(
            {
                "type": "text",
                "text": f"[{dropped} content block(s) dropped: the result was over the {max_bytes}-byte output limit]",
            }
        )
    return value, tuple(kept), truncated, size
