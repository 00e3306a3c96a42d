"""read_file / write_file / list_dir, confined to a real workspace directory under tmp_path."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest

from pincer.core.errors import Denied, ToolError, UsageError
from pincer.core.values import HostContext
from pincer.runtimes.native import workspace
from pincer.runtimes.native.builtins import builtin_runtime

pytestmark = pytest.mark.anyio


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace and, beside it, a directory with a secret file the tools must never reach."""
    ws = tmp_path / "workspace"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    return ws, outside


async def call(ws: Path | None, name: str, args: dict[str, Any], **host: Any) -> Any:
    runtime = builtin_runtime()
    spec = next(s for s in runtime.tools() if s.name == name)
    context = HostContext(session="main", tool=name, workspace=ws, **host)
    return (await runtime.invoke(spec, args, context)).value


async def test_write_read_list_round_trip(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    written = await call(ws, "write_file", {"path": "notes/today.md", "content": "héllo"})
    assert written == {"path": "notes/today.md", "bytes_written": 6}
    assert (ws / "notes" / "today.md").read_text() == "héllo"
    read = await call(ws, "read_file", {"path": "./notes//today.md"})
    assert read == {
        "path": "notes/today.md", "size": 6, "offset": 0, "content": "héllo", "encoding": "utf-8", "truncated": False,
    }  # fmt: skip
    (ws / "notes" / "sub").mkdir()
    os.symlink("today.md", ws / "notes" / "link.md")
    listing = await call(ws, "list_dir", {"path": "notes"})
    assert listing["entries"] == [
        {"name": "link.md", "type": "symlink", "size": None},
        {"name": "sub", "type": "dir", "size": None},
        {"name": "today.md", "type": "file", "size": 6},
    ]
    assert (await call(ws, "list_dir", {}))["entries"] == [{"name": "notes", "type": "dir", "size": None}]


async def test_overwrite_is_atomic_and_leaves_no_temp_files(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    target = ws / "f.txt"
    target.write_text("old")
    target.chmod(0o600)
    await call(ws, "write_file", {"path": "f.txt", "content": "new"})
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o600
    assert sorted(p.name for p in ws.iterdir()) == ["f.txt"]


async def test_binary_content_goes_both_ways_as_base64(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    data = bytes(range(256))
    await call(ws, "write_file", {"path": "b.bin", "content": base64.b64encode(data).decode(), "encoding": "base64"})
    assert (ws / "b.bin").read_bytes() == data
    read = await call(ws, "read_file", {"path": "b.bin"})
    assert read["encoding"] == "base64" and base64.b64decode(read["content"]) == data
    with pytest.raises(UsageError, match="not valid base64"):
        await call(ws, "write_file", {"path": "c.bin", "content": "!!", "encoding": "base64"})
    assert not (ws / "c.bin").exists()


async def test_reads_are_bounded(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    (ws / "big.txt").write_text("0123456789" * 100)
    part = await call(ws, "read_file", {"path": "big.txt", "offset": 10, "max_bytes": 5})
    assert part["content"] == "01234" and part["truncated"] and part["size"] == 1000
    limited = await call(ws, "read_file", {"path": "big.txt"}, max_output_bytes=100)
    assert len(limited["content"]) == 100 and limited["truncated"]
    (ws / "utf8.txt").write_text("é" * 10)  # two bytes each: a cut inside one must not turn into base64
    cut = await call(ws, "read_file", {"path": "utf8.txt", "max_bytes": 5})
    assert cut["encoding"] == "utf-8" and cut["content"] == "éé"


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("../outside/secret.txt", Denied, "'..' is not allowed"),
        ("notes/../../outside/secret.txt", Denied, "'..' is not allowed"),
        ("a/..", Denied, "'..' is not allowed"),
        ("/etc/passwd", Denied, "absolute path"),
        ("~/x", Denied, "absolute path"),
        ("", UsageError, "workspace itself"),
        ("a\x00b", UsageError, "NUL"),
        ("x" * 300, UsageError, "255 bytes"),
    ],
)
async def test_paths_outside_or_malformed_are_refused(
    layout: tuple[Path, Path], path: str, error: type[Exception], message: str
) -> None:
    ws, _ = layout
    for tool_name, args in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"})):
        with pytest.raises(error, match=message) as info:
            await call(ws, tool_name, args)
        assert info.value.hint  # type: ignore[attr-defined]
    assert sorted(os.listdir(ws)) == []


async def test_symlinks_that_escape_are_refused(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    os.symlink(outside, ws / "door")  # a directory link out
    os.symlink(outside / "secret.txt", ws / "secret-link")  # a file link out
    os.symlink(outside / "new.txt", ws / "dangling")  # a link to a file that does not exist yet
    for tool_name, args in [
        ("read_file", {"path": "door/secret.txt"}),
        ("read_file", {"path": "secret-link"}),
        ("write_file", {"path": "door/secret.txt", "content": "pwned"}),
        ("write_file", {"path": "secret-link", "content": "pwned"}),
        ("write_file", {"path": "dangling", "content": "pwned"}),
        ("write_file", {"path": "door/deeper/new.txt", "content": "pwned"}),
        ("list_dir", {"path": "door"}),
    ]:
        with pytest.raises(Denied, match="outside the workspace through a symlink"):
            await call(ws, tool_name, args)
    assert (outside / "secret.txt").read_text() == "top secret"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_symlinks_inside_the_workspace_are_followed(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    (ws / "real").mkdir()
    (ws / "real" / "f.txt").write_text("inside")
    os.symlink("real", ws / "alias")
    os.symlink("real/f.txt", ws / "f-link")
    assert (await call(ws, "read_file", {"path": "alias/f.txt"}))["content"] == "inside"
    await call(ws, "write_file", {"path": "f-link", "content": "changed"})
    assert (ws / "real" / "f.txt").read_text() == "changed" and (ws / "f-link").is_symlink()


async def test_a_directory_swapped_for_a_symlink_after_the_check_is_refused(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("harmless")
    checked = workspace.resolve_path(ws, "sub/secret.txt", home=None)
    (ws / "sub" / "secret.txt").unlink()
    (ws / "sub").rmdir()
    os.symlink(outside, ws / "sub")  # the race: the tree changes between check and open
    with pytest.raises(Denied, match="symlink appeared"):
        workspace.read_bytes(checked, offset=0, limit=100)
    with pytest.raises(Denied, match="symlink appeared"):
        workspace.write_bytes_atomic(checked, b"pwned", make_dirs=False)
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_a_file_swapped_for_a_symlink_after_the_check_is_refused(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    (ws / "f.txt").write_text("harmless")
    checked = workspace.resolve_path(ws, "f.txt", home=None)
    (ws / "f.txt").unlink()
    os.symlink(outside / "secret.txt", ws / "f.txt")
    with pytest.raises(Denied, match="symlink appeared"):
        workspace.read_bytes(checked, offset=0, limit=100)


async def test_other_failures_are_clear(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    (ws / "dir").mkdir()
    os.mkfifo(ws / "pipe")
    (ws / "file").write_text("x")
    cases = [
        ("read_file", {"path": "missing.txt"}, "no such file"),
        ("read_file", {"path": "dir"}, "is a directory"),
        ("read_file", {"path": "pipe"}, "not a regular file"),  # and does not hang waiting for a writer
        ("read_file", {"path": "file/below"}, "not a directory"),
        ("write_file", {"path": "dir", "content": "x"}, "is a directory"),
        ("write_file", {"path": "pipe", "content": "x"}, "not a regular file"),
        ("write_file", {"path": "new/f.txt", "content": "x", "make_dirs": False}, "no such file"),
        ("list_dir", {"path": "missing"}, "no such file"),
        ("list_dir", {"path": "file"}, "not a directory"),
    ]
    for tool_name, args, message in cases:
        with pytest.raises(ToolError, match=message):
            await call(ws, tool_name, args)
    with pytest.raises(UsageError, match="offset"):
        await call(ws, "read_file", {"path": "file", "offset": -1})
    with pytest.raises(UsageError, match="max_bytes"):
        await call(ws, "read_file", {"path": "file", "max_bytes": 0})
    assert sorted(os.listdir(ws)) == ["dir", "file", "pipe"]


async def test_no_workspace_means_no_file_tools() -> None:
    with pytest.raises(Denied, match="no workspace") as info:
        await call(None, "read_file", {"path": "a"})
    assert "config.toml" in (info.value.hint or "")


async def test_a_missing_workspace_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        await call(tmp_path / "nope", "list_dir", {})


async def test_a_target_swapped_for_a_symlink_before_the_write_is_refused(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    checked = workspace.resolve_path(ws, "new.txt", home=None)
    os.symlink(outside / "secret.txt", ws / "new.txt")
    with pytest.raises(Denied, match="symlink appeared"):
        workspace.write_bytes_atomic(checked, b"pwned", make_dirs=False)
    assert (outside / "secret.txt").read_text() == "top secret"
