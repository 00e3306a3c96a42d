"""Hardening items 18-20: percent-encoded leaks, a keyless audit chain, unauthenticated floods.

Each test here failed on main before the fix its docstring names.
"""

from __future__ import annotations

import pytest

from pincer.safety.scanner import LeakScanner

SECRET = "tr0ub4dor-Horse-8-battery"


def _percent(text: str, case: str) -> str:
    """Every byte of ``text`` as an escape, hex digits in ``case`` (upper | lower | mixed)."""
    escapes = [f"%{byte:02X}" for byte in text.encode()]
    if case == "lower":
        escapes = [e.lower() for e in escapes]
    elif case == "mixed":
        escapes = [e.lower() if i % 2 else e for i, e in enumerate(escapes)]
    return "".join(escapes)


# -- 18: the leak scanner and fully percent-encoded values --------------------------------------


@pytest.mark.parametrize("case", ["upper", "lower", "mixed"])
def test_a_fully_percent_encoded_secret_is_redacted(case: str) -> None:
    """Failed on main before percent-decoding: ``%73%6B%2D...`` (every character escaped, as
    ``encodeURIComponent`` never does but an attacker may) passed the scanner in any case."""
    encoded = _percent(SECRET, case)
    text = f"GET /collect?q={encoded}&n=1 HTTP/1.1"
    output, count = LeakScanner([SECRET]).scan_text(text)
    assert count == 1
    assert output == "GET /collect?q=[REDACTED:secret_url]&n=1 HTTP/1.1"


def test_a_partly_encoded_secret_with_plus_for_space_is_redacted() -> None:
    """Failed on main before percent-decoding: a value with some characters escaped (here the
    letters, in mixed case) and its spaces written as ``+`` was not one of the known forms."""
    secret = "correct horse battery staple"
    encoded = "%63orrect+h%6Frse+%62attery+staple"
    output, count = LeakScanner([secret]).scan_text(f"form: pw={encoded}; done")
    assert (output, count) == ("form: pw=[REDACTED:secret_url]; done", 1)


def test_a_percent_encoded_credential_shape_is_redacted() -> None:
    """Failed on main before percent-decoding: shapes (a GitHub token here) were matched only on
    the raw text, so escaping the underscore hid a token no store holds."""
    token = "ghp_" + "a1B2" * 9
    encoded = token.replace("_", "%5f")
    output, count = LeakScanner([]).scan_text(f"url=https://x.example/?t={encoded}")
    assert count == 1 and "a1B2a1B2" not in output and "[REDACTED:github_token]" in output
