"""The forms a secret value takes when a tool echoes it: raw, URL- and JSON-escaped, hex, base64.

Base64 is the subtle one: inside a longer blob the value may start at any byte offset, and
the characters at its edges then mix in bits of its neighbours. For each of the three offsets
modulo 3 the characters that depend on the value alone form a *stable core*; finding any of
the three cores (in the standard or the url-safe alphabet) finds the value wherever it sits,
padded or not. The one or two edge characters outside the core carry at most 4 bits of the
value each; the scanner widens its redaction over them.
"""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import quote, quote_plus

__all__ = ["encoded_forms", "base64_cores", "RAW", "HEX", "BASE64", "URL", "JSON_ESCAPED"]

RAW = "secret"
URL = "secret_url"
JSON_ESCAPED = "secret_json"
HEX = "secret_hex"
BASE64 = "secret_base64"

_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def base64_cores(data: bytes) -> list[str]:
    """The stable core of ``data`` encoded at each of the three byte offsets (standard alphabet)."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(b"\x00" * offset + data).decode("ascii")
        first = -(-8 * offset // 6)  # first character made only of the value's bits
        end = 8 * (offset + len(data)) // 6  # one past the last such character
        if end > first:
            cores.append(encoded[first:end])
    return cores


def encoded_forms(value: str, *, min_length: int) -> dict[str, str]:
    """Every form of ``value`` to redact, mapped to its kind (``RAW`` first).

    The raw value and its URL/JSON escapes (never shorter than the value, differing only where
    it has special characters) are always included. Hex and base64 only when the value has at
    least ``min_length`` characters: a short value's encodings are a few characters that occur
    by chance in ordinary output (the base64 core of a 2-byte value is 2 characters).
    """
    forms: dict[str, str] = {value: RAW}

    def add(form: str, kind: str) -> None:
        if form and form not in forms:
            forms[form] = kind

    for quoted in (
        quote(value, safe="", errors="surrogatepass"),
        quote(value, errors="surrogatepass"),
        quote_plus(value, errors="surrogatepass"),
        quote_plus(value, safe="/", errors="surrogatepass"),
    ):
        add(quoted, URL)
        add(_ESCAPE.sub(lambda m: m.group(0).lower(), quoted), URL)
    add(json.dumps(value)[1:-1], JSON_ESCAPED)
    add(json.dumps(value, ensure_ascii=False)[1:-1], JSON_ESCAPED)
    if len(value) >= min_length:
        data = value.encode("utf-8", errors="surrogatepass")
        add(data.hex(), HEX)
        add(data.hex().upper(), HEX)
        for core in base64_cores(data):
            add(core, BASE64)
            add(core.replace("+", "-").replace("/", "_"), BASE64)
    return forms
