"""A long run that decodes to bytes which are not text costs the scanner a byte-level pass, not a
Python pass per character.

Found by CI's slowest tests: a tool output of 5,000,000 ``x`` (tests/adversarial/
test_chain_attacks.py) spent 75 s in the leak scanner under the profiler, and a 5 MB Drive upload
(its base64 argument) 50 s, on the event loop. Each alignment of the base64 run decoded to bytes
that are not UTF-8, kept as one surrogate each (``surrogateescape``), and the normal form of
non-ASCII text is a Python pass (safety/normalising.py). A surrogate cannot be part of a secret
and the normal form drops it, as it drops a space: the decoded pieces now hold a space in its
place, one character for one byte as before, so every find maps back to the same encoded span."""

from __future__ import annotations

import base64
import os

from hypothesis import given
from hypothesis import strategies as st

from pincer.safety.encoded_runs import encoded_runs
from pincer.safety.normalising import normalise
from pincer.safety.scanner import LeakScanner

SECRET = "tok-9f2c7a41d3b8e605"


def test_a_run_of_one_letter_decodes_to_ascii() -> None:
    runs = encoded_runs("x" * 100_000)
    assert runs is not None and runs.text.isascii()


def test_base64_of_random_bytes_decodes_without_a_surrogate() -> None:
    runs = encoded_runs(base64.b64encode(os.urandom(300_000)).decode("ascii"))
    assert runs is not None
    # Valid multi-byte UTF-8 still occurs by chance in random bytes (about 3% of the characters)
    # and stays as it was; every byte that is not UTF-8 is a space.
    assert not any(0xDC80 <= ord(ch) < 0xDD00 for ch in runs.text)


@given(st.binary(max_size=64), st.binary(max_size=64))
def test_a_secret_between_binary_bytes_is_still_found_where_it_was_encoded(before: bytes, after: bytes) -> None:
    blob = base64.b64encode(before + SECRET.encode() + after).decode("ascii")
    scanner = LeakScanner([SECRET])
    redacted, count = scanner.scan_text(f"upload {blob} done")
    assert count >= 1 and blob not in redacted
    assert redacted.startswith("upload ") and redacted.endswith(" done")


def test_the_normal_form_drops_a_surrogate_as_it_drops_a_space() -> None:
    assert normalise("ab\udcc7cd") == normalise("ab cd") == "abcd"
