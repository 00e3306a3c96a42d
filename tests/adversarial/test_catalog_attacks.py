"""Red team, catalog poisoning: a hostile source among the user's ``[[hub.sources]]``.

A remote hub that ranks its own entries above everyone's, sends rows that are not artifact
names or numbers, a registry folder whose artifact URLs point out of the folder or at a device
that never ends, and FTS5 syntax through ``pincer search``. Real stand-in servers on
127.0.0.1:0, real registry folders under tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import PincerError
from pincer.hub.artifact import ArtifactKey, ArtifactKind
from pincer.hub.catalog import Catalog
from pincer.hub.ironclaw import IronClawSource
from pincer.hub.remote import RemoteSource
from tests.hub.conftest import route_server

FETCH_TIMEOUT_S = 60.0
MAX_BYTES = 1024 * 1024


def _row(name: str, **extra: Any) -> dict[str, Any]:
    return {"key": f"tools/{name}", "kind": "tool", "name": name, "version": "1.0.0", "description": f"{name} things", **extra}


@pytest.fixture
def registry(corpus: Path, tmp_path: Path) -> Path:
    target = tmp_path / "registry"
    shutil.copytree(corpus / "ironclaw-v0.29.1" / "registry", target)
    return target


def test_a_hostile_hub_cannot_outrank_other_sources_by_the_score_it_claims(registry: Path) -> None:
    """Failed on main before remote rows were scored here: a hub answered every search with
    ``score: 1e300`` and its look-alike ``github-helper`` came before the user's own registry's
    exact ``github`` (the merge sorted by whatever score a source claimed), and rows that did
    not match the query at all were listed too."""
    with route_server() as (url, routes):
        routes.json("/api/v1/search", {"query": "github", "items": [
            _row("github-helper", score=1e300, keywords=["github"]),
            _row("totally-unrelated", score=1e300, description="buy now"),
        ]})  # fmt: skip
        catalog = Catalog([IronClawSource("ironclaw", registry), RemoteSource("hostile", url)])
        try:
            found = catalog.search("github", limit=10)
        finally:
            catalog.close()
    keys = [(e.source, e.name) for e in found]
    assert keys[0] == ("ironclaw", "github"), keys
    assert ("hostile", "github-helper") in keys and ("hostile", "totally-unrelated") not in keys
    assert all(e.score < 1e6 for e in found)


@pytest.mark.parametrize(
    "row",
    [
        _row("ok", stars=float("inf")),
        _row("ok", downloads=1e999),
        _row("ok", score=float("nan")),
        _row("../../etc/passwd"),
        _row("evil\x1b[2J\x1b[1;1Hgithub"),
        _row("x" * 10_000),
        {**_row("ok"), "kind": "../tools"},
        {**_row("ok"), "version": "1.0.0\n\x1b[31mtrusted"},
    ],
)
def test_a_hostile_hubs_malformed_rows_are_skipped_not_shown_or_raised(row: dict[str, Any]) -> None:
    """Failed on main before remote rows were checked like names: ``stars: Infinity``
    escaped ``pincer search`` as an OverflowError, and a name or version carrying terminal
    escapes, traversal or 10,000 characters was listed as it came."""
    with route_server() as (url, routes):
        routes.json("/api/v1/search", {"query": "ok", "items": [row, _row("okay")]})
        found = RemoteSource("hostile", url).search("ok", kind=None, limit=10)
    assert [e.name for e in found if e.name != "okay"] in ([], ["ok"])
    for entry in found:
        assert entry.name in ("ok", "okay") and entry.version == "1.0.0" and entry.stars < 2**63


def _point_github_at(registry: Path, url: str, sha256: str = "0" * 64) -> None:
    path = registry / "tools" / "github.json"
    entry = json.loads(path.read_text())
    entry["artifacts"]["wasm32-wasip2"] = {"url": url, "sha256": sha256}
    path.write_text(json.dumps(entry))


def _fetch_github(registry: Path) -> bytes:
    source = IronClawSource("hostile", registry)
    resolved = source.resolve(ArtifactKey(kind=ArtifactKind.TOOL, name="github"), None)
    return source.fetch(resolved, max_bytes=MAX_BYTES, timeout_s=FETCH_TIMEOUT_S)


def test_a_registry_entrys_relative_url_stays_inside_the_registry_folder(registry: Path, tmp_path: Path) -> None:
    """Failed on main before relative URLs were held to the folder: ``../../outside`` (what
    docs and the error call "paths inside the registry folder") read any file the user can."""
    outside = tmp_path / "outside.tar.gz"
    outside.write_bytes(b"not the registry's")
    _point_github_at(registry, "../../outside.tar.gz")
    with pytest.raises(PincerError) as caught:
        _fetch_github(registry)
    assert "inside the registry folder" in caught.value.message and caught.value.hint


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_a_registry_entry_pointing_at_a_device_or_a_fifo_is_refused_not_read_forever(registry: Path, tmp_path: Path,
                                                                                   target: str) -> None:  # fmt: skip
    """Failed on main before local artifact files had to be regular files: ``file:///dev/zero``
    has size 0, passed the size check and was read until memory ran out; a FIFO blocked the
    install forever."""
    if target == "fifo":
        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        target = str(fifo)
    _point_github_at(registry, f"file://{target}")
    outcome: list[object] = []

    def fetch() -> None:
        try:
            outcome.append(_fetch_github(registry))
        except PincerError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    thread.join(FETCH_TIMEOUT_S)
    if thread.is_alive() and target != "/dev/zero":
        with open(target, "wb"):  # let the blocked reader go before failing
            pass
    assert not thread.is_alive(), f"fetching {target} did not end within {FETCH_TIMEOUT_S} s"
    assert len(outcome) == 1 and isinstance(outcome[0], PincerError), outcome
    assert "not a regular file" in outcome[0].message and outcome[0].hint


def test_a_registry_entry_may_still_point_at_a_regular_file_inside_it(registry: Path) -> None:
    """Held with the fixes: a relative path inside the folder and a file:// URL of a regular
    file still read (the sha256 and signature checks that follow decide the rest)."""
    (registry / "archives").mkdir()
    (registry / "archives" / "github.tar.gz").write_bytes(b"bytes")
    _point_github_at(registry, "archives/github.tar.gz")
    assert _fetch_github(registry) == b"bytes"
    _point_github_at(registry, (registry / "archives" / "github.tar.gz").as_uri())
    assert _fetch_github(registry) == b"bytes"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(['"', "*", "NEAR(", ")", "AND", "OR", "NOT", "^", ":", "name:", "{", "}", "-", "+", "'"]),
             max_size=40).map(" ".join),
))  # fmt: skip
def test_fts5_syntax_in_a_search_query_is_only_ever_words(registry: Path, query: str) -> None:
    """Held: whatever the query, search returns entries or nothing (quotes, NEAR, column
    filters and operators are quoted as words, never parsed as FTS5 syntax)."""
    catalog = Catalog([IronClawSource("ironclaw", registry)])
    try:
        found = catalog.search(query, limit=5)
    finally:
        catalog.close()
    assert all(e.source == "ironclaw" for e in found)


def test_a_hostile_hub_claiming_a_trusted_signer_is_shown_as_a_claim(registry: Path, tmp_path: Path) -> None:
    """Failed on main before this test (the second red team's finding, left open by it): search
    rows carry no signature, yet a hub that put a trusted publisher's public key on its row was
    listed as signed by that publisher's trust-store name. A listing can only repeat what a
    source claims; the install verifies the signature, and only then is the name the signer's."""
    from pincer.hub.catalog import with_signer_names
    from pincer.hub.signing import generate_key
    from pincer.hub.trust import TrustStore

    alice = generate_key()
    trust = TrustStore(tmp_path / "home")
    trust.add("alice", alice.public)
    with route_server() as (url, routes):
        routes.json("/api/v1/search", {"query": "stealer", "items": [_row("stealer", public_key=alice.public)]})
        catalog = Catalog([RemoteSource("hostile", url)])
        try:
            found = catalog.search("stealer", limit=10)
        finally:
            catalog.close()
    [entry] = with_signer_names(found, trust)
    assert entry.signer != "alice" and entry.signer.startswith("alice") and "claimed" in entry.signer
