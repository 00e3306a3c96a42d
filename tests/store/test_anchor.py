"""The audit log's anchor file (store/anchor.py): read only when whole and signed under this key;
anything else is AuditChainBroken naming the file, never another exception and never an anchor."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import AuditChainBroken
from pincer.store.anchor import MAX_ANCHOR_BYTES, AnchorFile, ChainMarker, new_chain_id
from pincer.store.chain import GENESIS_HASH, ChainKey

KEY = ChainKey(b"a" * 32)


def _marker(key: ChainKey = KEY, *, keyed_from: int = 1) -> ChainMarker:
    chain_id = new_chain_id()
    mac = key.marker_mac(keyed_from=keyed_from, plain_head=GENESIS_HASH, head_keyed=True, chain_id=chain_id)
    return ChainMarker(keyed_from=keyed_from, key_id=key.key_id, plain_head=GENESIS_HASH, mac=mac, head_keyed=True,
                       chain_id=chain_id)  # fmt: skip


def _anchored(tmp_path: Path) -> tuple[AnchorFile, ChainMarker]:
    anchor, marker = AnchorFile(tmp_path / "audit-anchor.json"), _marker()
    anchor.settle(KEY, marker)
    return anchor, marker


def test_settle_writes_once_and_the_anchor_reads_back(tmp_path: Path) -> None:
    anchor, marker = _anchored(tmp_path)
    written = anchor.path.read_bytes()
    read = anchor.read(KEY)
    assert read is not None and read.chain_id == marker.chain_id and read.keyed_from == 1
    anchor.settle(KEY, _marker())  # another marker: logged, never written over
    assert anchor.path.read_bytes() == written
    anchor.check(KEY, marker)


def test_a_marker_whose_mac_does_not_hold_is_never_anchored(tmp_path: Path) -> None:
    anchor = AnchorFile(tmp_path / "audit-anchor.json")
    marker = _marker()
    forged = ChainMarker(keyed_from=marker.keyed_from, key_id=marker.key_id, plain_head=marker.plain_head,
                         mac="0" * 64, head_keyed=True, chain_id=marker.chain_id)  # fmt: skip
    anchor.settle(KEY, forged)
    anchor.settle(KEY, ChainMarker(keyed_from=0, key_id="", plain_head="", mac=""))
    assert not anchor.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [("keyed_from", 2), ("chain_id", "ab" * 16), ("plain_head", "1" * 64), ("created_at", "2000-01-01T00:00:00Z")],
)
def test_an_edited_field_breaks_the_anchors_mac(tmp_path: Path, field: str, value: object) -> None:
    anchor, _ = _anchored(tmp_path)
    data = json.loads(anchor.path.read_text())
    anchor.path.write_text(json.dumps({**data, field: value}))
    with pytest.raises(AuditChainBroken, match="was altered"):
        anchor.read(KEY)


def test_an_anchor_of_another_key_names_both_keys(tmp_path: Path) -> None:
    anchor, _ = _anchored(tmp_path)
    other = ChainKey(b"b" * 32)
    with pytest.raises(AuditChainBroken, match=f"under audit key {KEY.key_id}, not this key {other.key_id}"):
        anchor.read(other)


def test_a_symlink_or_a_group_writable_anchor_is_refused(tmp_path: Path) -> None:
    anchor, _ = _anchored(tmp_path)
    link = AnchorFile(tmp_path / "link.json")
    os.symlink(anchor.path, link.path)
    with pytest.raises(AuditChainBroken, match="cannot be opened"):
        link.read(KEY)
    anchor.path.chmod(0o620)
    with pytest.raises(AuditChainBroken, match="writable by group or others"):
        anchor.read(KEY)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(
    st.binary(max_size=5000),
    st.dictionaries(st.sampled_from(["version", "key_id", "chain_id", "keyed_from", "plain_head", "created_at", "mac"]),
                    st.one_of(st.none(), st.integers(), st.text(max_size=70), st.booleans()))
    .map(lambda d: json.dumps(d).encode()),
))  # fmt: skip
def test_whatever_the_file_holds_it_is_an_anchor_signed_under_this_key_or_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "any-anchor.json"
    path.unlink(missing_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
    try:
        found = AnchorFile(path).read(KEY)
    except AuditChainBroken as exc:
        assert "any-anchor.json" in exc.message
    else:
        raise AssertionError(f"an unsigned file was read as an anchor: {found}")


# -- the database's marker against the anchor: what each disagreement says -----------------------


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda m: None, "the audit chain marker is missing from the database"),
        (lambda m: dataclasses.replace(m, keyed_from=0), "says this log was never keyed"),
        (lambda m: dataclasses.replace(m, keyed_from=5), "passed off as written before the key existed"),
        (lambda m: dataclasses.replace(m, chain_id=new_chain_id()), "an audit log begun again"),
        (lambda m: dataclasses.replace(m, plain_head="1" * 64), "no longer end where audit-anchor.json says"),
    ],
    ids=["no-marker", "pending", "keyed-later", "begun-again", "plain-head"],
)
def test_a_marker_that_disagrees_with_the_anchor_is_named_and_only_logged_on_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: Callable[[ChainMarker], ChainMarker | None], said: str
) -> None:
    anchor, marker = _anchored(tmp_path)
    swapped = change(marker)
    with pytest.raises(AuditChainBroken, match=said) as info:
        anchor.check(KEY, swapped)
    assert "restore" in (info.value.hint or "")
    with caplog.at_level(logging.ERROR, logger="pincer.store.anchor"):
        anchor.settle(KEY, swapped)  # an open goes on; `pincer audit verify` names it
    assert said in caplog.text and "pincer audit verify" in caplog.text


def test_an_anchor_that_is_a_directory_too_large_or_no_object_is_refused_and_an_open_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = AnchorFile(tmp_path / "dir-anchor.json")
    folder.path.mkdir(mode=0o700)
    with pytest.raises(AuditChainBroken, match="is not a regular file"):
        folder.read(KEY)
    with caplog.at_level(logging.ERROR, logger="pincer.store.anchor"):
        folder.settle(KEY, _marker())
    assert "is not a regular file" in caplog.text and folder.path.is_dir()
    for name, data, said in (("big.json", b" " * (MAX_ANCHOR_BYTES + 1), f"larger than {MAX_ANCHOR_BYTES} bytes"),
                             ("list.json", b"[1, 2]", "is not a JSON object")):  # fmt: skip
        path = tmp_path / name
        path.write_bytes(data)
        path.chmod(0o600)
        with pytest.raises(AuditChainBroken, match=said):
            AnchorFile(path).read(KEY)
    assert repr(folder) == f"AnchorFile({str(folder.path)!r})"


def test_an_anchor_that_cannot_be_written_is_logged_and_tried_again_at_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # /proc takes no new files, even from root: a home on a file system that refuses the write
    anchor = AnchorFile(Path("/proc/self/audit-anchor.json"))
    with caplog.at_level(logging.ERROR, logger="pincer.store.anchor"):
        anchor.settle(KEY, _marker())
    assert "cannot write the audit log's anchor" in caplog.text and not anchor.exists()
