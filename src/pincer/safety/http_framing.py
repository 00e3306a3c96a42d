"""Where one HTTP/1.1 request body ends, for the egress proxy (:mod:`pincer.safety.egress_proxy`,
the script sandbox's and the browser's), which forwards exactly one request per connection.

A proxy that pipes a client's bytes to the upstream it checked for the *first* request would hand
every later request on a kept-alive connection — meant for any host, with its cookies — to that
upstream unchecked. So the proxy forwards the first request's head and exactly its body, as
:class:`BodyFramer` delimits it (``Content-Length`` or ``chunked``, RFC 9112 section 6), and drops
anything after it. Pure: bytes in, bytes out, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["BodyFramer", "FramingError", "MAX_CHUNK_LINE_BYTES", "MAX_TRAILER_BYTES"]

MAX_CHUNK_LINE_BYTES = 4096
MAX_TRAILER_BYTES = 64 * 1024
_HEX = frozenset(b"0123456789abcdefABCDEF")


class FramingError(ValueError):
    """A request whose body cannot be delimited (conflicting lengths, a malformed chunk)."""


class BodyFramer:
    """Feed the bytes after a request head; :meth:`feed` returns the part that belongs to the body
    and sets :attr:`done` once the body is complete (anything after it is not returned)."""

    def __init__(self, headers: Iterable[bytes]) -> None:
        lengths: set[int] = set()
        chunked = False
        for header in headers:
            name, sep, value = header.partition(b":")
            if not sep:
                continue
            key, text = name.strip().lower(), value.strip()
            if key == b"transfer-encoding":
                codings = [c.strip().lower() for c in text.split(b",")]
                if codings[-1:] != [b"chunked"]:
                    raise FramingError("a Transfer-Encoding whose last coding is not chunked cannot be delimited")
                chunked = True
            elif key == b"content-length":
                if not (text.isdigit() and len(text) <= 15):
                    raise FramingError("bad Content-Length")
                lengths.add(int(text))
        if len(lengths) > 1 or (chunked and lengths):
            raise FramingError("conflicting body lengths (request smuggling)")
        self.chunked = chunked
        self._left = 0 if chunked else next(iter(lengths), 0)
        self._state = "size" if chunked else "fixed"
        self._line = b""
        self._trailer = 0
        self.done = not chunked and self._left == 0

    def feed(self, data: bytes) -> bytes:
        if self.done or not data:
            return b""
        if not self.chunked:
            take = data[: self._left]
            self._left -= len(take)
            self.done = self._left == 0
            return take
        out = bytearray()
        i = 0
        while i < len(data) and not self.done:
            if self._state == "data":
                take = data[i : i + self._left]
                out += take
                i += len(take)
                self._left -= len(take)
                if self._left == 0:
                    self._state = "data_end"
                continue
            end = data.find(b"\n", i)
            piece = data[i : end + 1] if end >= 0 else data[i:]
            out += piece
            i += len(piece)
            self._line += piece
            if len(self._line) > MAX_CHUNK_LINE_BYTES:
                raise FramingError("chunk line too long")
            if end < 0:
                break
            line, self._line = self._line, b""
            self._line_done(line)
        return bytes(out)

    def _line_done(self, line: bytes) -> None:
        stripped = line.rstrip(b"\r\n")
        if self._state == "size":
            size_text = stripped.split(b";", 1)[0].strip()
            if not size_text or len(size_text) > 15 or any(c not in _HEX for c in size_text):
                raise FramingError("bad chunk size")
            self._left = int(size_text, 16)
            self._state = "data" if self._left else "trailer"
        elif self._state == "data_end":
            if stripped:
                raise FramingError("chunk data longer than its size")
            self._state = "size"
        else:  # trailer lines until the empty one
            if not stripped:
                self.done = True
                return
            self._trailer += len(line)
            if self._trailer > MAX_TRAILER_BYTES:
                raise FramingError("trailers too large")
