"""The trust store: whose signatures an install accepts (``pincer hub trust add NAME PUBKEY``).

``$PINCER_HOME/hub/trust.json``: ``{"keys": [{"name", "public_key", "key_id", "added_at"}]}``.
A signer is shown by the name given here; a key not listed here is untrusted, and an artifact it
signed is refused unless ``--allow-unsigned``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import ConfigError, UsageError
from pincer.hub.artifact import check_name
from pincer.store.jsonfile import locked, read_json, write_json_atomic

__all__ = ["TrustedKey", "TrustStore", "TRUST_FILE"]

TRUST_FILE = Path("hub") / "trust.json"


@dataclass(frozen=True, kw_only=True, slots=True)
class TrustedKey:
    name: str
    public_key: str
    key_id: str
    added_at: float

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "public_key": self.public_key, "key_id": self.key_id, "added_at": self.added_at}


class TrustStore:
    def __init__(self, home: Path) -> None:
        self.path = Path(home) / TRUST_FILE

    def load(self) -> list[TrustedKey]:
        data = read_json(self.path, default=None) or {"keys": []}
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, list):
            raise ConfigError(f"{self.path}: expected {{'keys': [...]}}", hint="remove the file and add the keys again")
        found = []
        for index, item in enumerate(keys):
            try:
                found.append(
                    TrustedKey(
                        name=str(item["name"]),
                        public_key=str(item["public_key"]),
                        key_id=str(item["key_id"]),
                        added_at=float(item.get("added_at", 0)),
                    )
                )
            except (KeyError, TypeError, ValueError):
                raise ConfigError(f"{self.path}: keys.{index} is malformed", hint="`pincer hub trust rm` it and add it again") from None
        return found

    def signer_of(self, public_key: str) -> TrustedKey | None:
        """The trusted key with this public key, or None."""
        return next((k for k in self.load() if k.public_key == public_key), None)

    def add(self, name: str, public_key: str) -> TrustedKey:
        from pincer.hub.signing import key_id

        check_name(name, source="signer name")
        entry = TrustedKey(name=name, public_key=public_key.strip(), key_id=key_id(public_key.strip()), added_at=time.time())
        with locked(self.path):
            keys = self.load()
            if any(k.name == name for k in keys):
                raise UsageError(f"a trusted key named {name!r} exists already", hint=f"`pincer hub trust rm {name}` first")
            if any(k.public_key == entry.public_key for k in keys):
                other = next(k.name for k in keys if k.public_key == entry.public_key)
                raise UsageError(f"that key is trusted already, as {other!r}", hint="`pincer hub trust list` shows the keys")
            keys.append(entry)
            self._write(keys)
        return entry

    def remove(self, name: str) -> TrustedKey:
        with locked(self.path):
            keys = self.load()
            for index, key in enumerate(keys):
                if key.name == name:
                    del keys[index]
                    self._write(keys)
                    return key
        raise UsageError(f"no trusted key named {name!r}", hint="`pincer hub trust list` shows the keys")

    def _write(self, keys: list[TrustedKey]) -> None:
        write_json_atomic(self.path, {"keys": [k.to_json() for k in keys]})
