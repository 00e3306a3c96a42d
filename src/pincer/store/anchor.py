"""The audit log's anchor: what a home knows about its log, kept outside the database.

Whoever can write the database can set the chain's marker back to pending (``keyed_from``
NULL), re-chain every record with the public plain SHA-256 recipe, or wipe the log. The database
alone cannot tell such a log from one that was never keyed, and a pincer opening it would key it
afresh over the forgery. The anchor is a small JSON file beside the audit key, in the home
(``audit-anchor.json`` for the log in ``pincer.db``, ``audit-anchor-pg.json`` for the log in
PostgreSQL), created once: when the log is keyed, or the first time a pincer opens a log keyed
before anchors existed. Nothing rewrites it. It records the key's id, the chain's id (128 random
bits that the marker carries under its MAC, so a log begun again is another chain), the first
keyed record and the plain chain's value before it, under an HMAC with the audit key.

Where a home has an anchor, an open never keys a pending marker (it records on, unsigned, and
verify says why), and verify compares the database's marker with the anchor before anything else.
A home without one (new, or set up by copying only ``audit.key``) trusts the database once.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from pincer.core.errors import AuditChainBroken
from pincer.secrets.keys import create_once
from pincer.store.chain import ChainKey

logger = logging.getLogger(__name__)

__all__ = ["ANCHOR_FILE", "SHARED_ANCHOR_FILE", "AnchorFile", "ChainAnchor", "ChainMarker", "new_chain_id"]

ANCHOR_FILE = "audit-anchor.json"  # the log in pincer.db
SHARED_ANCHOR_FILE = "audit-anchor-pg.json"  # the log in the PostgreSQL store ([store] url)
ANCHOR_VERSION = 1
CHAIN_ID_BYTES = 16
MAX_ANCHOR_BYTES = 4096
_HEX = re.compile(r"[0-9a-f]+")
_RESTORE_HINT = (
    "someone who can write the database changed the log; verify against a checkpoint "
    "(`pincer audit verify --checkpoint FILE`) and restore the database from a backup"
)


def new_chain_id() -> str:
    return secrets.token_hex(CHAIN_ID_BYTES)


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainMarker:
    """The database's marker (the ``audit_chain`` row) as read; ``keyed_from`` 0 while pending."""

    keyed_from: int
    key_id: str
    plain_head: str
    mac: str
    head_keyed: bool = False
    chain_id: str | None = None

    @property
    def pending(self) -> bool:
        return self.keyed_from == 0

    def mac_holds(self, key: ChainKey) -> bool:
        expected = key.marker_mac(
            keyed_from=self.keyed_from, plain_head=self.plain_head, head_keyed=self.head_keyed, chain_id=self.chain_id
        )
        return key.matches(self.mac, expected)


@dataclass(frozen=True, kw_only=True, slots=True)
class ChainAnchor:
    """Where the home's log was keyed, as its anchor file says."""

    key_id: str
    chain_id: str
    keyed_from: int
    plain_head: str
    created_at: str

    def fields(self) -> dict[str, Any]:
        return {
            "version": ANCHOR_VERSION,
            "key_id": self.key_id,
            "chain_id": self.chain_id,
            "keyed_from": self.keyed_from,
            "plain_head": self.plain_head,
            "created_at": self.created_at,
        }


class AnchorFile:
    """The anchor of one audit log, at ``path`` (a file in the home, beside ``audit.key``)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"AnchorFile({str(self.path)!r})"

    def exists(self) -> bool:
        """Whether anything is at the path: a damaged anchor still says the log was keyed."""
        return os.path.lexists(self.path)

    def read(self, key: ChainKey) -> ChainAnchor | None:
        """The anchor; None when there is none. AuditChainBroken when it cannot be trusted:
        unreadable, not an anchor, written under another key, or altered."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._damaged(f"cannot be opened ({exc.strerror})") from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise self._damaged("is not a regular file")
            if info.st_mode & 0o022:
                raise self._damaged(f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})")
            data = os.read(fd, MAX_ANCHOR_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_ANCHOR_BYTES:
            raise self._damaged(f"is larger than {MAX_ANCHOR_BYTES} bytes")
        return self._parse(data, key)

    def _parse(self, data: bytes, key: ChainKey) -> ChainAnchor:
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise self._damaged("is not JSON") from None
        if not isinstance(raw, dict):
            raise self._damaged("is not a JSON object")
        fields = {name: raw.get(name) for name in ("version", "key_id", "chain_id", "keyed_from", "plain_head",
                                                    "created_at")}  # fmt: skip
        if fields["version"] != ANCHOR_VERSION or set(raw) != {*fields, "mac"}:
            raise self._damaged(f"is not a version {ANCHOR_VERSION} anchor")
        key_id, chain_id, keyed_from = fields["key_id"], fields["chain_id"], fields["keyed_from"]
        plain_head, created_at = fields["plain_head"], fields["created_at"]
        if not (_is_hex(key_id) and _is_hex(chain_id) and _is_hex(plain_head) and isinstance(created_at, str)
                and type(keyed_from) is int and keyed_from >= 1):  # fmt: skip
            raise self._damaged("holds a field that is not what an anchor holds")
        if key_id != key.key_id:
            raise AuditChainBroken(
                f"{self.path.name} was written under audit key {key_id}, not this key {key.key_id}",
                record_id=1,
                hint="verify with the audit key the log was written with (PINCER_AUDIT_KEY or audit.key)",
            )
        if not key.matches(raw["mac"], key.anchor_mac(fields)):
            raise self._damaged("was altered (its MAC does not match)")
        return ChainAnchor(key_id=key_id, chain_id=chain_id, keyed_from=keyed_from, plain_head=plain_head,
                           created_at=created_at)  # fmt: skip

    def _damaged(self, what: str) -> AuditChainBroken:
        return AuditChainBroken(
            f"the audit log's anchor {self.path} {what}, so where the log was keyed cannot be checked",
            record_id=1,
            hint="restore the anchor from a backup of PINCER_HOME; only remove it when the database "
            "was begun anew on purpose (then `pincer audit verify` anchors the new log)",
        )

    def settle(self, key: ChainKey, marker: ChainMarker | None) -> None:
        """After an open: anchor a keyed log that has no anchor yet (its marker's MAC must hold),
        or log what an existing anchor disagrees with (verify names it)."""
        try:
            anchor = self.read(key)
        except AuditChainBroken as exc:
            logger.error("%s; `pincer audit verify` will name it", exc.message)
            return
        if anchor is None:
            if marker is not None and not marker.pending and marker.chain_id and marker.mac_holds(key):
                self._write(key, marker)
            return
        self._log_disagreement(key, marker)

    def _log_disagreement(self, key: ChainKey, marker: ChainMarker | None) -> None:
        try:
            self.check(key, marker)
        except AuditChainBroken as exc:
            logger.error("%s; `pincer audit verify` will name it", exc.message)

    def _write(self, key: ChainKey, marker: ChainMarker) -> None:
        assert marker.chain_id is not None  # settle writes only a marker that has one
        anchor = ChainAnchor(
            key_id=key.key_id, chain_id=marker.chain_id, keyed_from=marker.keyed_from, plain_head=marker.plain_head,
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )  # fmt: skip
        fields = anchor.fields()
        data = json.dumps({**fields, "mac": key.anchor_mac(fields)}, indent=2) + "\n"
        try:
            created = create_once(self.path, data.encode("utf-8"), mode=0o600)
        except OSError as exc:
            # Recording goes on; the next open tries again. Until then nothing outside the
            # database says this log was keyed.
            logger.error("cannot write the audit log's anchor %s: %s", self.path, exc.strerror or exc)
            return
        if created:
            logger.info("anchored the audit log (key %s, keyed from record %d) in %s",
                        key.key_id, marker.keyed_from, self.path)  # fmt: skip
        else:  # another process on this home anchored it first: it must say the same
            self._log_disagreement(key, marker)

    def check(self, key: ChainKey, marker: ChainMarker | None) -> None:
        """Raise AuditChainBroken when the database's marker is not the one the anchor recorded."""
        anchor = self.read(key)
        if anchor is None:
            return
        said = (
            f"{self.path.name} says this log has been keyed under audit key {anchor.key_id} from record "
            f"{anchor.keyed_from} since {anchor.created_at}"
        )
        if marker is None:
            raise AuditChainBroken(f"the audit chain marker is missing from the database, but {said}",
                                   record_id=anchor.keyed_from, hint=_RESTORE_HINT)  # fmt: skip
        if marker.pending:
            raise AuditChainBroken(
                f"the database's audit chain marker says this log was never keyed, but {said}: its records "
                "were re-chained or removed without the key",
                record_id=anchor.keyed_from,
                hint=_RESTORE_HINT,
            )
        if marker.keyed_from != anchor.keyed_from:
            raise AuditChainBroken(
                f"the database's audit chain marker says the keyed chain begins at record {marker.keyed_from}, "
                f"but {said}: records were passed off as written before the key existed",
                record_id=min(marker.keyed_from, anchor.keyed_from),
                hint=_RESTORE_HINT,
            )
        if marker.key_id != anchor.key_id or marker.chain_id != anchor.chain_id:
            raise AuditChainBroken(
                f"the database holds an audit log begun again: its marker is not the one {said} (the log "
                "this home knew was wiped or replaced, and keyed afresh by a pincer without this anchor)",
                record_id=1,
                hint=_RESTORE_HINT,
            )
        if marker.plain_head != anchor.plain_head:
            raise AuditChainBroken(
                f"the records before {anchor.keyed_from} (written before the log was keyed) no longer end where "
                f"{self.path.name} says they did",
                record_id=max(anchor.keyed_from - 1, 1),
                hint=_RESTORE_HINT,
            )


def _is_hex(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and bool(_HEX.fullmatch(value))
