"""Publisher keys, signatures, the trust store and pincer.lock (issue 15 items 4 and 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import ConfigError, SignatureRefused, UsageError
from pincer.hub.artifact import ArtifactKind, ArtifactManifest, FileEntry, fingerprint
from pincer.hub.lockfile import LockEntry, Lockfile, find_workspace_lock
from pincer.hub.signing import generate_key, key_id, parse_public_key, sign_manifest, verify_manifest
from pincer.hub.trust import TrustStore


def _manifest(version: str = "1.0.0", digest: str = "a" * 64) -> ArtifactManifest:
    return ArtifactManifest(kind=ArtifactKind.SKILL, name="x", version=version, fingerprint=fingerprint({"SKILL.md": digest}),
                            files=(FileEntry(path="SKILL.md", sha256=digest, size=3),))  # fmt: skip


def test_a_signature_verifies_only_for_its_manifest_and_key() -> None:
    key, other = generate_key(), generate_key()
    manifest = _manifest()
    signature = sign_manifest(manifest, key.private)
    verify_manifest(manifest, signature, key.public)
    with pytest.raises(SignatureRefused, match="does not verify"):
        verify_manifest(_manifest(version="1.0.1"), signature, key.public)
    with pytest.raises(SignatureRefused):
        verify_manifest(_manifest(digest="b" * 64), signature, key.public)
    with pytest.raises(SignatureRefused):
        verify_manifest(manifest, signature, other.public)
    with pytest.raises(SignatureRefused):
        verify_manifest(manifest, "not base64!", key.public)
    assert len(key_id(key.public)) == 16 and key.public.startswith("ed25519:")


@pytest.mark.parametrize("bad", ["", "ed25519:", "ed25519:abc", "rsa:AAAA", "ed25519:" + "A" * 40])
def test_malformed_public_keys_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_public_key(bad)


def test_trust_store_add_list_remove(tmp_path: Path) -> None:
    store = TrustStore(tmp_path)
    key = generate_key()
    added = store.add("alice", key.public)
    assert store.signer_of(key.public) == added
    with pytest.raises(UsageError, match="exists already"):
        store.add("alice", generate_key().public)
    with pytest.raises(UsageError, match="trusted already"):
        store.add("bob", key.public)
    assert [k.name for k in store.load()] == ["alice"]
    store.remove("alice")
    assert store.signer_of(key.public) is None
    with pytest.raises(UsageError, match="no trusted key"):
        store.remove("alice")


def _entry(name: str = "github", **changes: object) -> LockEntry:
    values: dict[str, object] = {"kind": ArtifactKind.TOOL, "name": name, "version": "0.2.5", "source": "local",
                                 "fingerprint": "sha256:" + "c" * 64}  # fmt: skip
    values.update(changes)
    return LockEntry(**values)  # type: ignore[arg-type]


def test_the_lock_round_trips_every_field(tmp_path: Path) -> None:
    lock = Lockfile(path=tmp_path / "pincer.lock")
    lock = lock.with_entry(_entry(signer="alice", signer_key="ed25519:x", pinned=True))
    lock = lock.with_entry(_entry("google", kind=ArtifactKind.BUNDLE, members=("tools/gmail",), allow_unsigned=True))
    lock.write()
    text = (tmp_path / "pincer.lock").read_text()
    assert 'key = "tools/github"' in text and "allow_unsigned = true" in text
    again = Lockfile.read(tmp_path / "pincer.lock")
    assert again.entries == lock.entries
    assert again.without(_entry().key).get(_entry().key) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[artifact]]\nkind = 'tool'\n", "name"),
        ("artifact = 3\n", "array of tables"),
        ("[[artifact]\n", "not valid TOML"),
        ("[[artifact]]\nkind = 'gizmo'\nname='a'\nversion='1.0.0'\nsource='s'\nfingerprint='f'\n", "unknown kind"),
        ("[[artifact]]\nkind='tool'\nname='a'\nversion='1.0.0'\nsource='s'\nfingerprint='f'\npinned='yes'\n", "pinned"),
        ("[[artifact]]\nkind='tool'\nname='a'\nversion='1.0.0'\nsource='s'\nfingerprint='f'\n" * 2, "listed twice"),
    ],
)
def test_a_broken_lock_names_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Lockfile.parse(text, path=tmp_path / "pincer.lock")


def test_unknown_keys_in_a_lock_are_ignored(tmp_path: Path) -> None:
    text = "lock_version = 1\nfuture = 'x'\n[[artifact]]\nkind='tool'\nname='a'\nversion='1.0.0'\nsource='s'\nfingerprint='f'\nnew_key = 1\n"
    assert Lockfile.parse(text, path=tmp_path / "x").entries[0].name == "a"


def test_the_workspace_lock_is_found_upwards_but_not_in_pincer_home(tmp_path: Path) -> None:
    project = tmp_path / "project" / "src" / "deep"
    project.mkdir(parents=True)
    assert find_workspace_lock(project) is None
    (tmp_path / "project" / "pincer.lock").write_text("")
    assert find_workspace_lock(project) == (tmp_path / "project" / "pincer.lock").resolve()
    assert find_workspace_lock(project, stop=[tmp_path / "project"]) is None


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_lock_text_only_raises_config_errors(text: str) -> None:
    try:
        Lockfile.parse(text, path=Path("pincer.lock"))
    except ConfigError:
        pass
