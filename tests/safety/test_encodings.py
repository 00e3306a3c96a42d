"""The stable cores of a value's base64 and base32 encodings: what the scanner looks for when the
value sits at an unknown offset inside a longer encoded blob."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from pincer.safety.encodings import base32_cores, base64_cores


@given(data=st.binary(min_size=3, max_size=40), prefix=st.binary(max_size=7), suffix=st.binary(max_size=7))
def test_a_base64_core_is_inside_the_encoding_at_any_offset(data: bytes, prefix: bytes, suffix: bytes) -> None:
    """From three bytes on there is a core at each offset, and the one for the value's offset is
    in the encoding whatever surrounds it."""
    encoded = base64.b64encode(prefix + data + suffix).decode()
    cores = base64_cores(data)
    assert len(cores) == 3 and all(cores)
    assert cores[len(prefix) % 3] in encoded, (cores, encoded)


@given(data=st.binary(min_size=5, max_size=40), prefix=st.binary(max_size=9), suffix=st.binary(max_size=9))
def test_a_base32_core_is_inside_the_encoding_at_any_offset(data: bytes, prefix: bytes, suffix: bytes) -> None:
    encoded = base64.b32encode(prefix + data + suffix).decode()
    cores = base32_cores(data)
    assert len(cores) == 5 and all(cores)
    assert cores[len(prefix) % 5] in encoded, (cores, encoded)


def test_a_value_too_short_to_fill_a_character_at_some_offset_has_no_core_there() -> None:
    """One byte at offset 1 of a base64 triple shares every character with its neighbours: no core
    for that offset (an empty core would match anything)."""
    assert base64_cores(b"a") == [base64.b64encode(b"a").decode()[:1], base64.b64encode(b"\0\0a").decode()[3:4]]
    assert all(base32_cores(b"a")) and len(base32_cores(b"a")) < 5
