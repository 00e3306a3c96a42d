"""Archive segments of the audit log: records that left the database, signed and verifiable.

``pincer audit archive DIR`` writes the oldest records into segment files before they leave the
database, one file per up to :data:`SEGMENT_RECORDS` records::

    audit-000000000001-000000010000.jsonl
    {"format": "pincer-audit-segment/1", "first_id": 1, "last_id": 10000, "prev_hash": "<value of
     record 0: the genesis>", "last_hash": "<value of record 10000>", "records": 10000,
     "key_id": "<16 hex>", "body_sha256": "<of the lines below>", "created_at": "...",
     "signature": "hmac-sha256:<64 hex>"}
    [1, 1733558400.0, "main", ...]            one line per record: the row as the chain hashed it
    ...

The header names the chain head the segment continues from (``prev_hash``) and the one it ends
at; its signature is an HMAC under the audit key (as the chain's own values are), over every
header field and the digest of the records. Each record still carries its own chain value, so
``pincer audit verify --archive DIR`` walks the archive and then the database as one chain: an
altered, reordered or missing record, a missing or reordered segment, or an archive that ends
before the database's signed ``archived`` mark is a broken chain.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import AuditChainBroken
from pincer.store.chain import GENESIS_HASH, ChainKey
from pincer.store.chain_walk import HASH_AT

__all__ = ["SEGMENT_FORMAT", "SEGMENT_RECORDS", "Segment", "read_archive", "write_segment"]

SEGMENT_FORMAT = "pincer-audit-segment/1"
SEGMENT_RECORDS = 10_000
MAX_HEADER_BYTES = 64 * 1024
_NAME = re.compile(r"^audit-(\d{12})-(\d{12})\.jsonl$")
_SIGNATURE_PREFIX = "hmac-sha256:"
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_HINT = "restore the archive directory from its copy; `pincer audit archive DIR` writes segments"


@dataclass(frozen=True, kw_only=True, slots=True)
class Segment:
    """One segment file, its header checked (signature and body digest); rows read on demand."""

    path: Path
    first_id: int
    last_id: int
    prev_hash: str
    last_hash: str

    def rows_between(self, after_id: int, upto: int) -> list[list[Any]]:
        """Its records with ``after_id`` < id <= ``upto`` (read on a worker thread)."""
        return [row for row in self.rows() if after_id < row[0] <= upto]

    def rows(self) -> Iterator[list[Any]]:
        with self.path.open("rb") as file:
            file.readline()
            for line in file:
                yield json.loads(line)


def segment_name(first_id: int, last_id: int) -> str:
    return f"audit-{first_id:012d}-{last_id:012d}.jsonl"


def _signed(key: ChainKey, fields: dict[str, Any]) -> str:
    return _SIGNATURE_PREFIX + key.segment_mac(fields)


def write_segment(directory: Path, key: ChainKey, rows: Sequence[Sequence[Any]], *, prev_hash: str, now: float) -> Path:
    """Write ``rows`` (consecutive records, as read from the database) as one segment, durably:
    a temporary file, fsynced, renamed into place, the directory fsynced. Runs on a worker thread."""
    body = b"".join(_COMPACT(list(row)).encode() + b"\n" for row in rows)
    first_id, last_id = int(rows[0][0]), int(rows[-1][0])
    fields = {
        "format": SEGMENT_FORMAT, "first_id": first_id, "last_id": last_id, "prev_hash": prev_hash,
        "last_hash": str(rows[-1][HASH_AT]), "records": len(rows), "key_id": key.key_id,
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "created_at": dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }  # fmt: skip
    header = _COMPACT({**fields, "signature": _signed(key, fields)}).encode() + b"\n"
    path = directory / segment_name(first_id, last_id)
    partial = path.with_suffix(".jsonl.partial")
    with partial.open("wb") as file:
        file.write(header + body)
        file.flush()
        os.fsync(file.fileno())
    partial.replace(path)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return path


def read_archive(directory: Path, key: ChainKey) -> list[Segment]:
    """The segments in ``directory``, oldest first, each header's signature and body digest
    checked and the segments checked to follow one another from record 1 without a gap or an
    overlap. Raises AuditChainBroken naming what is wrong. Runs on a worker thread."""
    if not directory.is_dir():
        raise AuditChainBroken(f"the audit archive {directory} is not a directory", record_id=1,
                               hint="pass the DIR `pincer audit archive DIR` wrote")  # fmt: skip
    segments = sorted((_read_segment(path, key) for path in directory.iterdir() if _NAME.match(path.name)),
                      key=lambda s: s.first_id)  # fmt: skip
    expected_id, expected_prev = 1, GENESIS_HASH
    for segment in segments:
        if segment.first_id != expected_id:
            what = "missing" if segment.first_id > expected_id else "overlapping the one before"
            raise AuditChainBroken(
                f"the audit archive's segment of records {expected_id} to {segment.first_id - 1} is {what} "
                f"(the next segment, {segment.path.name}, begins at record {segment.first_id})"
                if segment.first_id > expected_id
                else f"the audit archive's segment {segment.path.name} is {what}",
                record_id=expected_id,
                hint=_HINT,
            )
        if segment.prev_hash != expected_prev:
            raise AuditChainBroken(
                f"the audit archive's segment {segment.path.name} does not continue from the segment before it "
                "(the chain head it names differs)",
                record_id=segment.first_id,
                hint=_HINT,
            )
        expected_id, expected_prev = segment.last_id + 1, segment.last_hash
    return segments


def _read_segment(path: Path, key: ChainKey) -> Segment:
    broken = f"the audit archive's segment {path.name}"
    hasher = hashlib.sha256()
    with path.open("rb") as file:
        line = file.readline(MAX_HEADER_BYTES + 1)
        for chunk in iter(lambda: file.read(1 << 20), b""):
            hasher.update(chunk)
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != SEGMENT_FORMAT:
        raise AuditChainBroken(f"{broken} has no {SEGMENT_FORMAT} header", record_id=1, hint=_HINT)
    fields = {k: v for k, v in header.items() if k != "signature"}
    first_id, last_id = fields.get("first_id"), fields.get("last_id")
    record = first_id if type(first_id) is int and first_id >= 1 else 1
    if header.get("key_id") != key.key_id:
        raise AuditChainBroken(f"{broken} was signed with audit key {header.get('key_id')}, not {key.key_id}",
                               record_id=record, hint="verify with the audit key the log was written with")  # fmt: skip
    if not key.matches(header.get("signature"), _signed(key, fields)):
        raise AuditChainBroken(f"{broken}'s header was altered (its signature does not match)", record_id=record,
                               hint=_HINT)  # fmt: skip
    if hasher.hexdigest() != fields.get("body_sha256"):
        raise AuditChainBroken(f"{broken}'s records were altered, added or removed (their digest differs from "
                               "the signed one)", record_id=record, hint=_HINT)  # fmt: skip
    if type(first_id) is not int or type(last_id) is not int or not 1 <= first_id <= last_id:
        raise AuditChainBroken(f"{broken}'s header names no records", record_id=record, hint=_HINT)
    return Segment(path=path, first_id=first_id, last_id=last_id, prev_hash=str(fields["prev_hash"]),
                   last_hash=str(fields["last_hash"]))  # fmt: skip
