"""Sign and register a built tool: a signed artifact installed through the hub's lifecycle.

The files (the shared runner as ``NAME.wasm``, ``NAME.py``, ``NAME.built.json``,
``NAME.capabilities.json``) are signed with this home's publisher key and installed by
:class:`pincer.hub.installer.Hub` from a one-artifact source named ``builder``: staging, the
install-time scanner, one rename, an entry in ``pincer.lock``, the audit record. So ``pincer
verify`` and the start-time integrity check cover a built tool like any other, and a running
``pincer serve`` picks it up through its watcher.

The key: ``[hub] signing_key``'s entry of the secret store (``pincer hub keygen``); when the
home has none, the builder makes one (``builder_signing_key``). Either way the home trusts the key
it signs with (as ``builder``, or ``self`` for the publisher key): it is this home's own key, and
only this home's secret store holds it. Without that, a home with a publisher key built every
stage and then refused to install what it had signed itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pincer.core.errors import ArtifactNotFound, SecretError
from pincer.hub.artifact import ArtifactKey, ArtifactKind, ArtifactManifest, FileEntry, fingerprint
from pincer.hub.sources import DOWNLOAD_TIMEOUT_S, CatalogEntry, Resolved, describe_capabilities

__all__ = ["BuildSource", "register_tool", "signing_key", "BUILDER_KEY_SECRET", "BUILDER_SIGNER", "SOURCE_NAME"]

SOURCE_NAME = "builder"
BUILDER_KEY_SECRET = "builder_signing_key"
BUILDER_SIGNER = "builder"
PUBLISHER_SIGNER = "self"  # the name this home trusts its own publisher key under


@dataclass(frozen=True, kw_only=True, slots=True)
class _Artifact:
    key: ArtifactKey
    version: str
    files: Mapping[str, bytes]
    manifest: ArtifactManifest
    signature: str
    public_key: str
    description: str


class BuildSource:
    """A catalog source holding exactly the one artifact a build made."""

    name = SOURCE_NAME

    def __init__(self, artifact: _Artifact) -> None:
        self._artifact = artifact

    def entries(self) -> list[CatalogEntry]:
        return []

    def search(self, query: str, *, kind: ArtifactKind | None, limit: int) -> list[CatalogEntry] | None:
        return []

    def versions(self, key: ArtifactKey) -> list[str]:
        return [self._artifact.version] if key == self._artifact.key else []

    def resolve(self, key: ArtifactKey, wanted: str | None) -> Resolved:
        a = self._artifact
        if key != a.key or wanted not in (None, a.version):
            raise ArtifactNotFound(f"the build made {a.key}@{a.version}, not {key}@{wanted}", hint="`pincer installed` lists what is installed")
        caps = a.files.get(f"{key.name}.capabilities.json")
        return Resolved(
            key=key, version=a.version, source=SOURCE_NAME, files=dict(a.files), manifest=a.manifest,
            signature=a.signature, public_key=a.public_key, publisher="pincer build", description=a.description,
            requested=describe_capabilities(json.loads(caps)) if caps else {},
        )  # fmt: skip

    def fetch(self, resolved: Resolved, *, max_bytes: int, progress: Any = None, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> bytes:
        raise ArtifactNotFound("a build's artifact has no archive", hint="it is installed from its files")


def signing_key(home: Path, secrets: Any, key_secret: str) -> tuple[str, str]:
    """(private, public) of this home's publisher key; made and trusted as ``builder`` if absent."""
    from pincer.hub.signing import generate_key, public_of
    from pincer.hub.trust import TrustStore

    trust = TrustStore(home)
    for name in (key_secret, BUILDER_KEY_SECRET):
        try:
            private = secrets.get(name)
        except SecretError:
            private = None
        if private:
            public = public_of(str(private))
            _trust_own(trust, public, BUILDER_SIGNER if name == BUILDER_KEY_SECRET else PUBLISHER_SIGNER)
            return str(private), public
    pair = generate_key()
    secrets.set(BUILDER_KEY_SECRET, pair.private)
    _trust_own(trust, pair.public, BUILDER_SIGNER)
    return pair.private, pair.public


def _trust_own(trust: Any, public: str, name: str) -> None:
    """Trust this home's own key (once), as ``name`` or, when that name is another key's, as
    ``name-KEYID``."""
    from pincer.hub.signing import key_id

    if trust.signer_of(public) is not None:
        return
    taken = {k.name for k in trust.load()}
    trust.add(name if name not in taken else f"{name}-{key_id(public)[:8]}", public)


def register_tool(
    home: Path, *, name: str, version: str, files: Mapping[str, bytes], description: str, secrets: Any,
    key_secret: str, audit: Any = None, hub_settings: Any = None,
) -> Any:  # fmt: skip
    """Sign ``files`` and install them as ``tools/NAME@version``; returns the hub's InstallResult."""
    from pincer.hub.catalog import Catalog
    from pincer.hub.installer import Hub, InstallOptions
    from pincer.hub.signing import sign_manifest

    key = ArtifactKey(kind=ArtifactKind.TOOL, name=name)
    entries = tuple(
        FileEntry(path=path, sha256=hashlib.sha256(data).hexdigest(), size=len(data)) for path, data in sorted(files.items())
    )
    manifest = ArtifactManifest(
        kind=ArtifactKind.TOOL, name=name, version=version, fingerprint=fingerprint({e.path: e.sha256 for e in entries}),
        files=entries, description=description[:500],
    )  # fmt: skip
    private, public = signing_key(home, secrets, key_secret)
    artifact = _Artifact(key=key, version=version, files=files, manifest=manifest, signature=sign_manifest(manifest, private),
                         public_key=public, description=description)  # fmt: skip
    hub = Hub(home, catalog=Catalog([BuildSource(artifact)]), audit=audit)
    results = hub.install(f"{key}@{version}", InstallOptions(source=SOURCE_NAME))
    return results[0]
