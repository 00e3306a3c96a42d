"""The values of the audit chain: a keyed HMAC-SHA256 chain, and the plain one it replaced.

Each record's chain value covers its id, every field and the previous record's value. Under
the audit key (kept outside the database) nobody without the key can compute the value of an
edited, inserted or reordered record. Logs written before the key existed carry the plain
SHA-256 chain up to the record the *marker* names; the marker (one row in ``audit_chain``) is
itself an HMAC under the key over where the keyed chain begins and the plain chain's last
value, so records after it cannot be passed off as plain ones, nor the plain ones edited.

Each MAC input starts with its own label, so a record's value can never be replayed as a
marker's or a checkpoint's.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from pincer.core.errors import StoreError

__all__ = ["GENESIS_HASH", "ChainKey", "plain_chain_hash"]

GENESIS_HASH = "0" * 64
KEY_BYTES = 32
KEY_ID_HEX_CHARS = 16

_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_CANONICAL = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode
_RECORD_LABEL = b"pincer audit record v2\n"
_MARKER_LABEL = b"pincer audit marker v2\n"
_CHECKPOINT_LABEL = b"pincer audit checkpoint v1\n"
_HEAD_LABEL = b"pincer audit head v1\n"
_KEY_ID_LABEL = b"pincer audit key id\n"
_ANCHOR_LABEL = b"pincer audit anchor v1\n"
_MARK_LABEL = b"pincer audit mark v1\n"
_SEGMENT_LABEL = b"pincer audit segment v1\n"


def _payload(record_id: int, values: tuple[Any, ...], prev_hash: str) -> bytes:
    return _COMPACT([record_id, prev_hash, *values]).encode()


def encoded_fields(values: tuple[Any, ...]) -> bytes:
    """What follows a record's id and previous hash in its chain payload (``values`` not empty):
    encoded once, before the record is chained (off the event loop for a large record), so
    ``ChainKey.record_hash_of`` hashes the same bytes ``record_hash`` would."""
    return _COMPACT(list(values)).encode()[1:]


def plain_chain_hash(record_id: int, values: tuple[Any, ...], prev_hash: str) -> str:
    """The chain value of a record written before its log was keyed (anyone can compute it)."""
    return hashlib.sha256(_payload(record_id, values, prev_hash)).hexdigest()


class ChainKey:
    """The audit key and the MACs made with it. ``key_id`` names the key without revealing it."""

    __slots__ = ("_key", "_inner", "_outer", "key_id")

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise StoreError(
                f"the audit key must be {KEY_BYTES} bytes", hint="pass the bytes load_or_create_key(home, ...) returns"
            )
        self._key = key
        # HMAC (RFC 2104) with both padded-key states hashed once: a record then costs two
        # sha256 copies, ~1.5 us here, against ~4.5 us for hmac.digest (OpenSSL sets up per call).
        block = key.ljust(hashlib.sha256().block_size, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self.key_id = hmac.digest(key, _KEY_ID_LABEL, "sha256").hex()[:KEY_ID_HEX_CHARS]

    def __repr__(self) -> str:
        return f"ChainKey(key_id={self.key_id!r})"

    def record_hash(self, record_id: int, values: tuple[Any, ...], prev_hash: str) -> str:
        inner = self._inner.copy()
        inner.update(_RECORD_LABEL)
        inner.update(_payload(record_id, values, prev_hash))
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def record_hash_of(self, record_id: int, fields: bytes, prev_hash: str) -> str:
        """``record_hash`` of the values whose ``encoded_fields`` are ``fields``."""
        inner = self._inner.copy()
        inner.update(_RECORD_LABEL)
        inner.update(f"[{record_id},{_COMPACT(prev_hash)},".encode())
        inner.update(fields)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def marker_mac(
        self, *, keyed_from: int, plain_head: str, head_keyed: bool = False, chain_id: str | None = None
    ) -> str:
        """``head_keyed``: the log's head carries a MAC too (schema 5 on); ``chain_id``: the log's
        own random id, which its anchor outside the database names (store/anchor.py). A marker
        written before either has the same MAC as ever, so neither can be dropped without the key."""
        fields: dict[str, Any] = {"keyed_from": keyed_from, "key_id": self.key_id, "plain_head": plain_head}
        if head_keyed:
            fields["head_keyed"] = True
        if chain_id is not None:
            fields["chain_id"] = chain_id
        return hmac.digest(self._key, _MARKER_LABEL + _CANONICAL(fields).encode(), "sha256").hex()

    def anchor_mac(self, fields: dict[str, Any]) -> str:
        return hmac.digest(self._key, _ANCHOR_LABEL + _CANONICAL(fields).encode(), "sha256").hex()

    def head_mac(self, *, last_id: int, last_hash: str) -> str:
        """The MAC of the log's head: its last record (ids run from 1, so also the record count)
        and that record's chain value. Cutting the tail, or wiping the log, needs the key."""
        body = _CANONICAL({"records": last_id, "last_id": last_id, "last_hash": last_hash, "key_id": self.key_id})
        inner = self._inner.copy()  # once per commit: the precomputed HMAC states, as for records
        inner.update(_HEAD_LABEL)
        inner.update(body.encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def mark_mac(self, *, name: str, last_id: int, last_hash: str) -> str:
        """The MAC of a mark in ``audit_marks`` (where a verify ended, where the archived records
        end): its name, record and that record's chain value."""
        fields = {"mark": name, "last_id": last_id, "last_hash": last_hash, "key_id": self.key_id}
        return hmac.digest(self._key, _MARK_LABEL + _CANONICAL(fields).encode(), "sha256").hex()

    def segment_mac(self, fields: dict[str, Any]) -> str:
        """The signature of an archive segment's header (store/audit_archive.py)."""
        return hmac.digest(self._key, _SEGMENT_LABEL + _CANONICAL(fields).encode(), "sha256").hex()

    def checkpoint_mac(self, fields: dict[str, Any]) -> str:
        return hmac.digest(self._key, _CHECKPOINT_LABEL + _CANONICAL(fields).encode(), "sha256").hex()

    def matches(self, mac: object, expected: str) -> bool:
        return isinstance(mac, str) and hmac.compare_digest(mac.encode(), expected.encode())
