"""ed25519 publisher keys and signatures over artifact manifests.

A public key is written ``ed25519:<base64 of the 32 raw bytes>``; its key id is the first 16 hex
digits of the SHA-256 of those bytes. The private half lives in the secret store only (``pincer
hub keygen`` puts it there, ``pincer hub publish`` reads it there): never in argv, never in a
file in clear. A signature is the base64 of ed25519 over :meth:`ArtifactManifest.signed_bytes`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from pincer.config import HubSettings
from pincer.core.errors import SecretError, SignatureRefused, UsageError
from pincer.hub.artifact import ArtifactManifest

__all__ = [
    "KeyPair",
    "generate_key",
    "load_private_key",
    "public_key_text",
    "parse_public_key",
    "key_id",
    "sign_manifest",
    "verify_manifest",
    "DEFAULT_KEY_SECRET",
]

DEFAULT_KEY_SECRET = HubSettings().signing_key  # [hub] signing_key's default
_PREFIX = "ed25519:"


@dataclass(frozen=True, kw_only=True, slots=True)
class KeyPair:
    private: str  # base64 of the 32-byte seed: for the secret store only
    public: str  # ed25519:<base64>


def generate_key() -> KeyPair:
    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return KeyPair(private=base64.b64encode(seed).decode("ascii"), public=public_key_text(key.public_key()))


def load_private_key(text: str) -> Ed25519PrivateKey:
    try:
        seed = base64.b64decode(text.strip(), validate=True)
        if len(seed) != 32:
            raise ValueError("not 32 bytes")
        return Ed25519PrivateKey.from_private_bytes(seed)
    except (ValueError, binascii.Error):
        raise SecretError(
            "the signing key in the secret store is not an ed25519 key", hint="make a new one with `pincer hub keygen --force`"
        ) from None


def public_key_text(key: Ed25519PublicKey) -> str:
    return _PREFIX + base64.b64encode(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).decode("ascii")


def public_of(private: str) -> str:
    return public_key_text(load_private_key(private).public_key())


def parse_public_key(text: object) -> Ed25519PublicKey:
    """``ed25519:<base64>`` -> the key; UsageError for anything else."""
    if not isinstance(text, str) or not text.startswith(_PREFIX):
        raise UsageError(f"{str(text)[:80]!r} is not a public key", hint="a public key reads ed25519:<base64>, as `pincer hub keygen` prints it")
    try:
        raw = base64.b64decode(text[len(_PREFIX):].strip(), validate=True)
        if len(raw) != 32:
            raise ValueError("not 32 bytes")
        return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, binascii.Error):
        raise UsageError(f"{text[:80]!r} is not an ed25519 public key", hint="copy it whole from `pincer hub keygen`") from None


def key_id(public: str) -> str:
    key = parse_public_key(public)
    return hashlib.sha256(key.public_bytes(Encoding.Raw, PublicFormat.Raw)).hexdigest()[:16]


def sign_manifest(manifest: ArtifactManifest, private: str) -> str:
    return base64.b64encode(load_private_key(private).sign(manifest.signed_bytes())).decode("ascii")


def verify_manifest(manifest: ArtifactManifest, signature: object, public: str) -> None:
    """Raise SignatureRefused unless ``signature`` is ``public``'s over the manifest."""
    key = parse_public_key(public)
    try:
        if not isinstance(signature, str):
            raise ValueError("no signature")
        raw = base64.b64decode(signature, validate=True)
        key.verify(raw, manifest.signed_bytes())
    except (ValueError, binascii.Error, InvalidSignature):
        raise SignatureRefused(
            f"the signature of {manifest.key}@{manifest.version} does not verify with key {key_id(public)}: "
            "the artifact or its manifest was changed after signing, or signed by another key",
            hint="do not install it; ask its publisher, or pass --allow-unsigned to install it anyway (recorded)",
        ) from None
