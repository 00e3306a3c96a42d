"""Keys, versions, fingerprints and the signed manifest (issue 15 item 1)."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.errors import AmbiguousKey, ManifestError, PincerError, UsageError
from pincer.hub.artifact import (
    ArtifactKey,
    ArtifactKind,
    ArtifactManifest,
    FileEntry,
    fingerprint,
    kind_of,
    parse_key,
    parse_spec,
    parse_version,
)


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [
        ("tools/github", ArtifactKind.TOOL, "github"),
        ("skills/code-review", ArtifactKind.SKILL, "code-review"),
        ("mcp-servers/notion", ArtifactKind.MCP_SERVER, "notion"),
        ("openapi/inventory", ArtifactKind.OPENAPI, "inventory"),
        ("scripts/word_count", ArtifactKind.SCRIPT, "word_count"),
        ("bundles/google", ArtifactKind.BUNDLE, "google"),
        ("channels/slack", ArtifactKind.CHANNEL, "slack"),
    ],
)
def test_keys_are_kind_slash_name(text: str, kind: ArtifactKind, name: str) -> None:
    key = parse_key(text)
    assert key == ArtifactKey(kind=kind, name=name)
    assert str(key) == text


def test_a_bare_name_of_one_kind_resolves_and_of_several_is_refused_with_the_candidates() -> None:
    assert parse_key("github", kinds={"github": {ArtifactKind.TOOL}}) == ArtifactKey(kind=ArtifactKind.TOOL, name="github")
    with pytest.raises(AmbiguousKey) as caught:
        parse_key("slack", kinds={"slack": {ArtifactKind.CHANNEL, ArtifactKind.TOOL}})
    assert "channels/slack" in caught.value.message and "tools/slack" in caught.value.message
    with pytest.raises(UsageError, match="bare name"):
        parse_key("nothing", kinds={})


@pytest.mark.parametrize("bad", ["tools/", "tools/../x", "nokind/x", "tools/a b", "tools/" + "x" * 65, "/x"])
def test_malformed_keys_are_refused(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_key(bad)


def test_spec_splits_version_or_tag() -> None:
    assert parse_spec("tools/github@0.2.5") == ("tools/github", "0.2.5")
    assert parse_spec("skills/x@latest") == ("skills/x", "latest")
    assert parse_spec("skills/x") == ("skills/x", None)
    with pytest.raises(UsageError):
        parse_spec("skills/x@")


def test_semver_precedence() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11",
               "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "10.0.0"]  # fmt: skip
    versions = [parse_version(v) for v in ordered]
    shuffled = versions[::2] + versions[1::2]
    assert sorted(shuffled) == versions
    assert parse_version("1.0.0+build.5") == parse_version("1.0.0")
    for bad in ("1.0", "01.0.0", "1.0.0-", "v1.0.0", "1.0.0-01"):
        with pytest.raises(UsageError):
            parse_version(bad)


def test_fingerprint_is_sha256_over_sorted_path_sha256_lines() -> None:
    files = {"b.txt": "2" * 64, "a.txt": "1" * 64}
    expected = hashlib.sha256(f"a.txt:{'1' * 64}\nb.txt:{'2' * 64}\n".encode()).hexdigest()
    assert fingerprint(files) == f"sha256:{expected}"
    assert fingerprint(dict(reversed(list(files.items())))) == fingerprint(files)


def _manifest(**changes: object) -> dict[str, object]:
    files = [{"path": "SKILL.md", "sha256": "a" * 64, "size": 10}]
    data: dict[str, object] = {"kind": "skill", "name": "x", "version": "1.0.0", "files": files,
                               "fingerprint": fingerprint({"SKILL.md": "a" * 64})}  # fmt: skip
    data.update(changes)
    return data


def test_a_manifest_whose_fingerprint_is_not_its_files_is_refused() -> None:
    assert ArtifactManifest.from_json(_manifest()).fingerprint.startswith("sha256:")
    with pytest.raises(ManifestError, match="fingerprint"):
        ArtifactManifest.from_json(_manifest(fingerprint="sha256:" + "0" * 64))


def test_signed_bytes_cover_identity_and_files_only() -> None:
    one = ArtifactManifest.from_json(_manifest(description="one"))
    two = ArtifactManifest.from_json(_manifest(description="two"))
    assert one.signed_bytes() == two.signed_bytes()
    body = json.loads(one.signed_bytes())
    assert sorted(body) == ["files", "fingerprint", "kind", "name", "version"]
    other = ArtifactManifest(kind=ArtifactKind.SKILL, name="x", version="1.0.1", fingerprint=one.fingerprint,
                             files=(FileEntry(path="SKILL.md", sha256="a" * 64, size=10),))  # fmt: skip
    assert other.signed_bytes() != one.signed_bytes()


def test_kinds_have_aliases() -> None:
    assert kind_of("tools") is kind_of("tool") is ArtifactKind.TOOL
    assert kind_of("mcp-servers") is kind_of("mcp_server") is ArtifactKind.MCP_SERVER
    with pytest.raises(UsageError, match="unknown artifact kind"):
        kind_of("widgets")


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(_json, st.fixed_dictionaries({"kind": st.sampled_from(["skill", "tool", "x"]), "name": st.text(max_size=8),
                                                     "version": st.text(max_size=8), "files": _json, "fingerprint": st.text(max_size=8)})))
def test_arbitrary_manifests_only_raise_manifest_errors(data: object) -> None:
    try:
        ArtifactManifest.from_json(data)
    except ManifestError:
        pass


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=80))
def test_arbitrary_keys_and_versions_only_raise_our_errors(text: str) -> None:
    for parse in (parse_key, parse_version, parse_spec):
        try:
            parse(text)
        except PincerError:
            pass
