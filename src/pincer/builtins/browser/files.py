"""Files the browser touches: uploads read from the workspace, downloads kept in it.

An upload names paths relative to the workspace; each is checked and read by the workspace rules
of the file built-ins (:mod:`pincer.runtimes.native.workspace`: relative, no ``..``, no symlink
out, no file with a second name, none of pincer's own files, read through ``O_NOFOLLOW``), and
the *bytes* go to the page, so nothing outside the workspace (``/etc/passwd``, a hard link to
``secret.key``) can be named and nothing can be swapped in after the check.

A download is kept as ``downloads/NAME`` in the workspace when it is at most
``[builtins.browser] max_download_bytes``; a larger one, or one without a workspace, is deleted
and reported as blocked. The limit holds while a download runs, not only once it has finished
(a page can answer with a body that never ends, or a ``Content-Length`` that lies):
:func:`cut_when_over` watches the folder Chromium writes running downloads to and cancels the
download once the bytes there pass the limit, so all downloads in flight together never hold
much more than ``max_download_bytes`` on disk (one poll's worth of writing past it).
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from pincer.core.errors import ToolError, UsageError
from pincer.core.values import HostContext

__all__ = ["upload_payloads", "keep_download", "cut_when_over", "MAX_UPLOAD_FILES", "MAX_UPLOAD_BYTES"]

DOWNLOAD_POLL_S = 0.1  # how often a running download's bytes on disk are counted
MAX_UPLOAD_FILES = 20
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
DOWNLOAD_DIR = "downloads"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")


async def upload_payloads(host: HostContext, paths: Sequence[object]) -> list[dict[str, Any]]:
    """Playwright ``FilePayload``s for ``paths``, read from the call's workspace by the file tools'
    one opener; Denied/UsageError for a path outside it (or a file with a second name)."""
    from pincer.builtins.workspace_files import read_workspace_file

    if not paths or len(paths) > MAX_UPLOAD_FILES:
        raise UsageError(f"upload takes 1 to {MAX_UPLOAD_FILES} paths", hint='pass "paths": ["report.pdf"]')
    payloads = []
    for raw in paths:
        name, data = await read_workspace_file(
            host, raw, tool="browser", limit=MAX_UPLOAD_BYTES, refusal=f"the upload limit of {MAX_UPLOAD_BYTES} bytes",
            hint="upload a smaller file",
        )  # fmt: skip
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        payloads.append({"name": name, "mimeType": mime, "buffer": data})
    return payloads


def bytes_under(directory: Path) -> int:
    """The bytes of the files in ``directory`` (0 when it is not there yet)."""
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(directory):
            with contextlib.suppress(OSError):
                if entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_size
    return total


async def cut_when_over(download: Any, running: Path, max_bytes: int, cut: list[int]) -> None:
    """Count the bytes in ``running`` (Chromium's folder of running downloads) until they pass
    ``max_bytes``; then put the count in ``cut`` and cancel ``download``. Runs until cancelled when
    they never do: the caller cancels it once the download has finished."""
    while True:
        await anyio.sleep(DOWNLOAD_POLL_S)
        held = await anyio.to_thread.run_sync(bytes_under, running)
        if held > max_bytes:
            cut.append(held)  # before the cancel: the download's end wakes the caller at once
            await download.cancel()
            return


async def keep_download(
    download: Any, workspace: Path | None, max_bytes: int, running: Path | None = None, *, home: Path | None = None
) -> str:
    """Move a finished download into ``workspace/downloads``; returns what happened. With
    ``running`` (where Chromium writes it), the download is cancelled as soon as the bytes there
    pass ``max_bytes`` (:func:`cut_when_over`)."""
    from pincer.runtimes.native.workspace import resolve_path, write_bytes_atomic

    suggested = str(download.suggested_filename or "download")
    if workspace is None:
        await download.cancel()
        raise ToolError(f"download {suggested!r} refused: no workspace is configured ([workspace] path)")
    cut: list[int] = []
    async with anyio.create_task_group() as group:
        if running is not None:
            group.start_soon(cut_when_over, download, running, max_bytes, cut)
        failure = await download.failure()  # None once it finished; waits for it
        group.cancel_scope.cancel()
    if cut:
        with contextlib.suppress(Exception):
            await download.delete()
        raise ToolError(
            f"download {suggested!r} cancelled at {cut[0]} bytes: over [builtins.browser] max_download_bytes ({max_bytes})",
            hint="raise [builtins.browser] max_download_bytes in config.toml if the file is meant to be that large",
        )
    if failure is not None:
        raise ToolError(f"download {suggested!r} failed: {failure}")
    temp = await download.path()
    size = await anyio.to_thread.run_sync(os.path.getsize, temp) if temp else 0
    if size > max_bytes:
        await download.delete()
        raise ToolError(
            f"download {suggested!r} refused: {size} bytes is over [builtins.browser] max_download_bytes ({max_bytes})"
        )
    name = _UNSAFE_NAME.sub("_", os.path.basename(suggested)).strip(". ") or "download"
    target = resolve_path(workspace, f"{DOWNLOAD_DIR}/{name[:200]}", home=home)
    data = await anyio.to_thread.run_sync(lambda: Path(temp).read_bytes())
    await anyio.to_thread.run_sync(lambda: write_bytes_atomic(target, data, make_dirs=True))
    await download.delete()
    return f"saved {suggested!r} as {target.shown} ({size} bytes)"
