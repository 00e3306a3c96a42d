"""BodyFramer: where one request body ends (Content-Length, chunked), smuggling refused, and
arbitrary input only ever raising FramingError."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.safety.http_framing import MAX_CHUNK_LINE_BYTES, BodyFramer, FramingError


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


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"zz\r\nhi\r\n0\r\n\r\n", "bad chunk size"),
        (b"\r\n", "bad chunk size"),  # no size at all
        (b";ext=1\r\n", "bad chunk size"),
        (b"1" * 16 + b"\r\n", "bad chunk size"),  # more hex digits than any real body needs
        (b"+5\r\nhello\r\n", "bad chunk size"),
        (b"5" + b" " * MAX_CHUNK_LINE_BYTES, "chunk line too long"),  # a size line that never ends
        (b"0\r\n" + b"X-T: " + b"a" * 1_000 + b"\r\n", None),  # under the trailer limit: still reading
        (b"0\r\n" + (b"X-T: " + b"a" * 1_000 + b"\r\n") * 70, "trailers too large"),
    ],
)
def test_a_malformed_chunked_body_is_refused(data: bytes, message: str | None) -> None:
    framer = BodyFramer([b"Transfer-Encoding: chunked"])
    if message is None:
        assert framer.feed(data) == data and not framer.done
        return
    with pytest.raises(FramingError, match=message):
        framer.feed(data)


def chunked(chunks: list[bytes], trailers: list[bytes]) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks if c)
    return body + b"0\r\n" + b"".join(t + b"\r\n" for t in trailers) + b"\r\n"


@given(
    chunks=st.lists(st.binary(max_size=40), max_size=5),
    trailers=st.lists(st.from_regex(rb"\AX-[a-z]{1,8}: [a-z0-9]{0,10}\Z"), max_size=3),
    cuts=st.lists(st.integers(0, 400), max_size=6),
    after=st.binary(max_size=30),
)
def test_a_chunked_body_ends_exactly_where_it_ends_however_it_is_split(
    chunks: list[bytes], trailers: list[bytes], cuts: list[int], after: bytes
) -> None:
    """Fed in any pieces (a chunk's data, its size line or a trailer cut anywhere), the framer
    returns exactly the body, is done at its end, and returns nothing of what follows."""
    body = chunked(chunks, trailers)
    data = body + after
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    framer = BodyFramer([b"Transfer-Encoding: chunked"])
    out = b"".join(framer.feed(p) for p in pieces)
    assert out == body and framer.done


@given(length=st.integers(0, 300), cuts=st.lists(st.integers(0, 400), max_size=6))
def test_a_fixed_length_body_ends_at_its_length_however_it_is_split(length: int, cuts: list[int]) -> None:
    data = bytes(range(256)) * 2
    points = sorted({min(c, len(data)) for c in cuts})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    framer = BodyFramer([b"Content-Length: %d" % length])
    out = b"".join(framer.feed(p) for p in pieces)
    assert out == data[:length] and framer.done
