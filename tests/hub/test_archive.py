"""Deterministic archives and unpacking that trusts nothing (issue 15 items 1 and 6).

Every hostile archive is refused with a message naming the member, and the folder it was to
be unpacked into does not exist afterwards."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pincer.core.errors import ArchiveRefused, PayloadTooLarge
from pincer.hub.archive import ArchiveLimits, PackedFile, pack, pack_folder, unpack
from pincer.hub.artifact import fingerprint
from pincer.hub.layout import hash_folder


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], *, compress: bool = True) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue()) if compress else raw.getvalue()


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info, None


def test_same_content_same_bytes_same_fingerprint(tmp_path: Path) -> None:
    one = tmp_path / "one"
    two = tmp_path / "two"
    for folder, order in ((one, ("a.txt", "sub/b.txt")), (two, ("sub/b.txt", "a.txt"))):
        for rel in order:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_text(f"content of {rel}")
            time.sleep(0.01)  # different mtimes, different creation order
    os.utime(two / "a.txt", (1, 1))
    first, second = pack_folder(one), pack_folder(two)
    assert first == second
    assert fingerprint(unpack(first, tmp_path / "u1")) == fingerprint(hash_folder(one)) == fingerprint(unpack(second, tmp_path / "u2"))


def test_pack_keeps_the_executable_bit_only(tmp_path: Path) -> None:
    data = pack({"run.sh": PackedFile(data=b"#!/bin/sh\n", executable=True), "readme": b"hi"})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        modes = {m.name: (m.mode, m.mtime, m.uid, m.uname) for m in tar.getmembers()}
    assert modes == {"readme": (0o644, 0, 0, ""), "run.sh": (0o755, 0, 0, "")}
    assert gzip.decompress(data)  # a plain gzip stream
    assert data[4:8] == b"\0\0\0\0"  # gzip mtime 0


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ([_file("../evil.sh")], "climbs out"),
        ([_file("a/../../evil.sh")], "climbs out"),
        ([_file("/etc/cron.d/evil")], "absolute path"),
        ([_special("link", tarfile.SYMTYPE, "/etc/passwd")], "symlink"),
        ([_special("link", tarfile.SYMTYPE, "../../outside")], "symlink"),
        ([_file("a.txt"), _special("hard", tarfile.LNKTYPE, "a.txt")], "hard link"),
        ([_special("dev", tarfile.CHRTYPE)], "device file"),
        ([_special("disk", tarfile.BLKTYPE)], "device file"),
        ([_special("pipe", tarfile.FIFOTYPE)], "FIFO"),
        ([_file("a\\..\\..\\evil")], "unusable name"),
        ([_file("a.txt"), _file("a.txt")], "twice"),
        ([_file("a"), _file("a/b")], "under a file"),
    ],
    ids=["dotdot", "nested-dotdot", "absolute", "symlink-abs", "symlink-rel", "hardlink", "chardev", "blockdev", "fifo",
         "backslash", "duplicate", "file-then-dir"],
)
def test_hostile_members_refuse_the_whole_archive(tmp_path: Path, members: list, says: str) -> None:
    target = tmp_path / "into"
    with pytest.raises(ArchiveRefused, match=says):
        unpack(_tar(members), target)
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_zip_bomb_is_refused_after_reading_at_most_the_limit(tmp_path: Path) -> None:
    raw = io.BytesIO()
    size = 64 * 1024 * 1024
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("zeros")
        info.size = size
        tar.addfile(info, io.BytesIO(b"\0" * size))
    bomb = gzip.compress(raw.getvalue(), compresslevel=9)
    assert len(bomb) < 200_000  # 64 MiB of zeros in ~65 KB
    limits = ArchiveLimits(max_unpacked_bytes=1024 * 1024, max_file_bytes=64 * 1024 * 1024 * 2)
    with pytest.raises(ArchiveRefused, match="zip bomb"):
        unpack(bomb, tmp_path / "into", limits=limits)
    assert not (tmp_path / "into").exists()


def test_a_huge_header_is_cut_off_by_the_bound_on_the_inflated_stream(tmp_path: Path) -> None:
    """A pax header of 8 MiB (tarfile reads headers whole): no member size is ever checked for
    it, the bound on the inflated stream stops it."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info, data = _file("small", b"0123456789")
        info.pax_headers = {"comment": "A" * (8 * 1024 * 1024)}
        tar.addfile(info, io.BytesIO(data))
    limits = ArchiveLimits(max_unpacked_bytes=1024 * 1024, max_files=10)
    with pytest.raises(ArchiveRefused, match="zip bomb"):
        unpack(gzip.compress(raw.getvalue()), tmp_path / "into", limits=limits)
    assert not (tmp_path / "into").exists()


def test_too_many_files_and_too_large_archives(tmp_path: Path) -> None:
    many = _tar([_file(f"f{i}") for i in range(20)])
    with pytest.raises(PayloadTooLarge, match="more than 10 files"):
        unpack(many, tmp_path / "a", limits=ArchiveLimits(max_files=10))
    with pytest.raises(PayloadTooLarge, match="over the limit"):
        unpack(many, tmp_path / "b", limits=ArchiveLimits(max_archive_bytes=len(many) - 1))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_not_an_archive(tmp_path: Path) -> None:
    for data in (b"", b"not gzip at all", gzip.compress(b"not a tar")[:-4], gzip.compress(b"\0" * 1024)):
        with pytest.raises(ArchiveRefused):
            unpack(data, tmp_path / "x")
        assert not (tmp_path / "x").exists()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096), gz=st.booleans())
def test_arbitrary_bytes_only_raise_our_errors(tmp_path: Path, data: bytes, gz: bool) -> None:
    target = tmp_path / "into"
    try:
        unpack(gzip.compress(data) if gz else data, target)
    except (ArchiveRefused, PayloadTooLarge):
        assert not target.exists()
    else:
        import shutil

        shutil.rmtree(target)
