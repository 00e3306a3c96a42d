"""BodyFramer: where one request body ends (Content-Length, chunked), smuggling refused, and
arbitrary input only ever raising FramingError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.safety.http_framing import BodyFramer, FramingError


def frame(headers: list[bytes], data: bytes, split: int | None = None) -> tuple[bytes, bool]:
    framer = BodyFramer(headers)
    pieces = [data] if split is None else [data[:split], data[split:]]
    out = b"".join(framer.feed(p) for p in pieces)
    return out, framer.done


def test_content_length_stops_at_the_body() -> None:
    assert frame([b"Content-Length: 5"], b"helloGET http://evil/ HTTP/1.1\r\n\r\n") == (b"hello", True)
    assert frame([], b"GET http://evil/ HTTP/1.1\r\n\r\n") == (b"", True)


def test_chunked_stops_after_the_last_chunk_and_trailers() -> None:
    body = b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n"
    for split in (None, 1, 3, 9, len(body) - 1):
        assert frame([b"Transfer-Encoding: chunked"], body + b"GET http://evil/ HTTP/1.1\r\n\r\n", split) == (
            body,
            True,
        )


@pytest.mark.parametrize(
    "headers",
    [
        [b"Content-Length: 5", b"Content-Length: 6"],
        [b"Content-Length: 5", b"Transfer-Encoding: chunked"],
        [b"Transfer-Encoding: chunked, gzip"],
        [b"Content-Length: -1"],
    ],
)
def test_bodies_that_cannot_be_delimited_are_refused(headers: list[bytes]) -> None:
    with pytest.raises(FramingError):
        BodyFramer(headers)


def test_a_chunk_longer_than_its_size_is_refused() -> None:
    framer = BodyFramer([b"Transfer-Encoding: chunked"])
    with pytest.raises(FramingError):
        framer.feed(b"2\r\nhello\r\n")


@given(st.lists(st.binary(max_size=60), max_size=5), st.lists(st.binary(max_size=200), max_size=6))
def test_arbitrary_input_only_raises_framing_error(headers: list[bytes], pieces: list[bytes]) -> None:
    try:
        framer = BodyFramer(headers)
        total = b"".join(pieces)
        out = b"".join(framer.feed(p) for p in pieces)
    except FramingError:
        return
    assert total.startswith(out)  # never more than was given, never reordered
