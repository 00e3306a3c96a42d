"""Audit checkpoints: a signed statement of how long the log was and how it ended.

    {"format": "pincer-audit-checkpoint/1", "records": 57, "last_id": 57,
     "last_hash": "<the chain value of record 57>", "keyed_from": 1, "key_id": "<16 hex>",
     "created_at": "2026-12-01T08:40:00.123456Z", "signature": "hmac-sha256:<64 hex>"}

Shipped somewhere the database's writers cannot reach, a checkpoint turns what the chain alone
cannot see (a deleted tail, a deleted or emptied database, a log passed off as written before
the key existed) into a verification failure. The signature is an HMAC under the audit key:
whoever verifies the chain needs that key anyway, so a key pair of its own would let nobody
verify more. Unknown keys are ignored (they are not signed); everything signed is checked
strictly, and any problem is a :class:`~pincer.core.errors.CheckpointInvalid`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from typing import Any

from pincer.core.errors import CheckpointInvalid
from pincer.store.chain import KEY_ID_HEX_CHARS, ChainKey

__all__ = ["AuditCheckpoint", "CHECKPOINT_FORMAT", "MAX_CHECKPOINT_BYTES", "sign_checkpoint"]

CHECKPOINT_FORMAT = "pincer-audit-checkpoint/1"
MAX_CHECKPOINT_BYTES = 64 * 1024
_SIGNATURE_PREFIX = "hmac-sha256:"
_HEX64 = re.compile(r"[0-9a-f]{64}")
_KEY_ID = re.compile(rf"[0-9a-f]{{{KEY_ID_HEX_CHARS}}}")
_MADE_BY = "make one with `pincer audit checkpoint -o FILE`"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AuditCheckpoint:
    records: int
    last_id: int
    last_hash: str
    keyed_from: int
    key_id: str
    created_at: str  # ISO 8601, UTC
    signature: str

    def signed_fields(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "records": self.records,
            "last_id": self.last_id,
            "last_hash": self.last_hash,
            "keyed_from": self.keyed_from,
            "key_id": self.key_id,
            "created_at": self.created_at,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self.signed_fields(), "signature": self.signature}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    def check_signature(self, key: ChainKey) -> None:
        """Raise CheckpointInvalid unless ``key`` signed exactly these fields."""
        if self.key_id != key.key_id:
            raise CheckpointInvalid(
                f"the checkpoint was signed with audit key {self.key_id}, but this pincer's audit key is {key.key_id}",
                hint="set PINCER_AUDIT_KEY (or $PINCER_HOME/audit.key) to the key the log was written with",
            )
        expected = _SIGNATURE_PREFIX + key.checkpoint_mac(self.signed_fields())
        if not key.matches(self.signature, expected):
            raise CheckpointInvalid(
                "the checkpoint's signature does not match its contents: it was altered after it was made",
                hint=f"use the checkpoint file as `pincer audit checkpoint` wrote it, or {_MADE_BY}",
            )

    @classmethod
    def from_text(cls, text: str | bytes, *, source: str = "the checkpoint") -> AuditCheckpoint:
        """Parse a checkpoint (bare, or as ``{"checkpoint": {...}}`` the way ``--json`` prints it)."""
        if len(text) > MAX_CHECKPOINT_BYTES:
            raise CheckpointInvalid(f"{source} is larger than {MAX_CHECKPOINT_BYTES} bytes", hint=_MADE_BY)
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            raise CheckpointInvalid(f"{source} is not JSON", hint=_MADE_BY) from None
        if isinstance(data, dict) and isinstance(data.get("checkpoint"), dict):
            data = data["checkpoint"]
        if not isinstance(data, dict):
            raise CheckpointInvalid(f"{source} is not a JSON object", hint=_MADE_BY)
        if data.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointInvalid(f"{source} is not a {CHECKPOINT_FORMAT} document (its 'format')", hint=_MADE_BY)
        records = _count(data, "records", source, minimum=0)
        last_id = _count(data, "last_id", source, minimum=0)
        keyed_from = _count(data, "keyed_from", source, minimum=1)
        last_hash = _text(data, "last_hash", source, _HEX64)
        key_id = _text(data, "key_id", source, _KEY_ID)
        signature = data.get("signature")
        if not isinstance(signature, str) or not signature.startswith(_SIGNATURE_PREFIX):
            raise CheckpointInvalid(
                f"{source}: 'signature' must be '{_SIGNATURE_PREFIX}<64 hex digits>'", hint=_MADE_BY
            )
        created_at = data.get("created_at")
        if not isinstance(created_at, str) or _parse_time(created_at) is None:
            raise CheckpointInvalid(f"{source}: 'created_at' must be an ISO 8601 time", hint=_MADE_BY)
        if records != last_id:
            raise CheckpointInvalid(
                f"{source}: 'records' and 'last_id' differ (ids run from 1 without gaps)", hint=_MADE_BY
            )
        return cls(
            records=records,
            last_id=last_id,
            last_hash=last_hash,
            keyed_from=keyed_from,
            key_id=key_id,
            created_at=created_at,
            signature=signature,
        )


def sign_checkpoint(key: ChainKey, *, records: int, last_hash: str, keyed_from: int, now: float) -> AuditCheckpoint:
    created = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    unsigned = AuditCheckpoint(
        records=records,
        last_id=records,
        last_hash=last_hash,
        keyed_from=keyed_from,
        key_id=key.key_id,
        created_at=created,
        signature="",
    )
    signature = _SIGNATURE_PREFIX + key.checkpoint_mac(unsigned.signed_fields())
    return dataclasses.replace(unsigned, signature=signature)


def _count(data: dict[str, Any], name: str, source: str, *, minimum: int) -> int:
    value = data.get(name)
    if type(value) is not int or value < minimum:
        raise CheckpointInvalid(f"{source}: {name!r} must be an integer of at least {minimum}", hint=_MADE_BY)
    return value


def _text(data: dict[str, Any], name: str, source: str, pattern: re.Pattern[str]) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise CheckpointInvalid(f"{source}: {name!r} must be lower-case hex of the right length", hint=_MADE_BY)
    return value


def _parse_time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None
