"""``pincer.lock``: every installed artifact of every kind, in TOML.

    # pincer.lock: what pincer install put here. Written by pincer; check it in next to a project.
    lock_version = 1

    [[artifact]]
    key = "tools/github"
    kind = "tool"
    name = "github"
    version = "0.2.5"
    source = "local"
    fingerprint = "sha256:..."
    signer = "alice"                 # the trust-store name of the key that signed it ("" unsigned)
    signer_key = "ed25519:..."
    allow_unsigned = false           # true: installed with --allow-unsigned (and audited so)
    pinned = false                   # pincer pin: update leaves it alone
    members = []                     # a bundle: the keys it installed

``$PINCER_HOME/pincer.lock`` is the home's own; a ``pincer.lock`` next to a project (found in
the current folder or a parent) is a workspace lock that ``pincer install`` with no argument
installs exactly. Writes are atomic (temp file + rename); reads refuse a file that does not
parse, naming the line, and ignore keys they do not know.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pincer.core.errors import ConfigError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, kind_of

__all__ = ["LockEntry", "Lockfile", "LOCK_FILENAME", "find_workspace_lock", "MAX_LOCK_BYTES"]

LOCK_FILENAME = "pincer.lock"
LOCK_VERSION = 1
MAX_LOCK_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class LockEntry:
    kind: ArtifactKind
    name: str
    version: str
    source: str
    fingerprint: str
    signer: str = ""
    signer_key: str = ""
    allow_unsigned: bool = False
    pinned: bool = False
    members: tuple[str, ...] = ()

    @property
    def key(self) -> ArtifactKey:
        return ArtifactKey(kind=self.kind, name=self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": str(self.key),
            "kind": self.kind.value,
            "name": self.name,
            "version": self.version,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "signer": self.signer,
            "signer_key": self.signer_key,
            "allow_unsigned": self.allow_unsigned,
            "pinned": self.pinned,
            "members": list(self.members),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Lockfile:
    path: Path
    entries: tuple[LockEntry, ...] = field(default_factory=tuple)

    @classmethod
    def read(cls, path: Path) -> Lockfile:
        """The lock at ``path``; an absent file is an empty lock."""
        path = Path(path)
        try:
            if path.stat().st_size > MAX_LOCK_BYTES:
                raise ConfigError(f"{path} is larger than {MAX_LOCK_BYTES:,} bytes", hint="is this the right file?")
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path=path)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read {path}: {exc}", hint="check the file; `pincer installed` lists what is installed") from None
        return cls.parse(text, path=path)

    @classmethod
    def parse(cls, text: str, *, path: Path) -> Lockfile:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}", hint="restore it from version control, or run `pincer verify --fix`") from None
        raw = data.get("artifact", [])
        if not isinstance(raw, list):
            raise ConfigError(f"{path}: artifact must be an array of tables ([[artifact]])", hint="restore the file")
        entries = []
        seen: set[ArtifactKey] = set()
        for index, item in enumerate(raw):
            entry = _entry(item, where=f"{path}: artifact.{index}")
            if entry.key in seen:
                raise ConfigError(f"{path}: {entry.key} is listed twice", hint="remove one of the two [[artifact]] tables")
            seen.add(entry.key)
            entries.append(entry)
        return cls(path=path, entries=tuple(entries))

    def get(self, key: ArtifactKey) -> LockEntry | None:
        return next((e for e in self.entries if e.key == key), None)

    def with_entry(self, entry: LockEntry) -> Lockfile:
        kept = [e for e in self.entries if e.key != entry.key]
        return replace(self, entries=tuple(sorted([*kept, entry], key=lambda e: str(e.key))))

    def without(self, key: ArtifactKey) -> Lockfile:
        return replace(self, entries=tuple(e for e in self.entries if e.key != key))

    def render(self) -> str:
        lines = [
            "# pincer.lock: every artifact pincer installed here, with the fingerprint it had.",
            "# Written by pincer (install, update, rollback, pin, remove); check it in next to a project",
            "# and `pincer install` with no argument installs exactly this.",
            f"lock_version = {LOCK_VERSION}",
        ]
        for entry in self.entries:
            lines += ["", "[[artifact]]"]
            for name, value in entry.to_json().items():
                lines.append(f"{name} = {_toml(value)}")
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        from pincer.store.jsonfile import write_bytes_atomic

        write_bytes_atomic(self.path, self.render().encode("utf-8"), mode=0o644)


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # TOML basic strings use JSON's escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _entry(item: Any, *, where: str) -> LockEntry:
    if not isinstance(item, dict):
        raise ConfigError(f"{where} is not a table", hint="restore the file")

    def text(name: str, *, required: bool = True) -> str:
        value = item.get(name, "")
        if not isinstance(value, str) or (required and not value):
            raise ConfigError(f"{where}.{name}: expected a non-empty string", hint="restore the file or reinstall the artifact")
        return value

    try:
        kind = kind_of(text("kind"))
    except Exception:  # noqa: BLE001 - kind_of raises UsageError; here it is a broken file
        raise ConfigError(f"{where}.kind: unknown kind {item.get('kind')!r}", hint="restore the file") from None
    members = item.get("members", [])
    if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
        raise ConfigError(f"{where}.members: expected a list of keys", hint="restore the file")
    for flag in ("allow_unsigned", "pinned"):
        if not isinstance(item.get(flag, False), bool):
            raise ConfigError(f"{where}.{flag}: expected true or false", hint="restore the file")
    return LockEntry(
        kind=kind,
        name=text("name"),
        version=text("version"),
        source=text("source"),
        fingerprint=text("fingerprint"),
        signer=text("signer", required=False),
        signer_key=text("signer_key", required=False),
        allow_unsigned=bool(item.get("allow_unsigned", False)),
        pinned=bool(item.get("pinned", False)),
        members=tuple(members),
    )


def find_workspace_lock(start: Path, *, stop: Iterable[Path] = ()) -> Path | None:
    """The nearest ``pincer.lock`` in ``start`` or a parent of it, not counting ``stop`` folders
    (PINCER_HOME, whose lock is the home's own)."""
    stops = {Path(p).resolve() for p in stop}
    for folder in (start.resolve(), *start.resolve().parents):
        if folder in stops:
            continue
        candidate = folder / LOCK_FILENAME
        if candidate.is_file():
            return candidate
    return None
