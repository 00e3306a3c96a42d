"""A record's fields encoded ahead of its chaining (off the event loop when large) hash exactly as
the record itself does: the chain an append writes is the chain a verify recomputes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.store.chain import ChainKey, encoded_fields

_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_VALUE = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8)
KEY = ChainKey(b"k" * 32)


@settings(max_examples=200)
@given(
    record_id=st.integers(min_value=1, max_value=2**62),
    values=st.lists(_VALUE, min_size=1, max_size=20).map(tuple),
    prev_hash=st.text(alphabet="0123456789abcdef", min_size=0, max_size=64),
)
def test_the_fields_encoded_ahead_hash_as_the_record_does(record_id: int, values: tuple[Any, ...], prev_hash: str) -> None:
    assert KEY.record_hash_of(record_id, encoded_fields(values), prev_hash) == KEY.record_hash(record_id, values, prev_hash)
