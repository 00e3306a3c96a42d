"""Files the browser touches: uploads read from the workspace, downloads kept in it.

An upload names paths relative to the workspace; each is checked and read by the workspace rules
of the file built-ins (:mod:`pincer.runtimes.native.workspace`: relative, no ``..``, no symlink
out, read through ``O_NOFOLLOW``), and the *bytes* go to the page, so nothing outside the
workspace (``/etc/passwd``) can be named and nothing can be swapped in after the check.

A download is kept as ``downloads/NAME`` in the workspace when it is at most
``[builtins.browser] max_download_bytes``; a larger one, or one without a workspace, is deleted
and reported as blocked.
"""

from __future__ import annotations

import functools
import mimetypes
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread

from pincer.core.errors import ToolError, UsageError

__all__ = ["upload_payloads", "keep_download", "MAX_UPLOAD_FILES", "MAX_UPLOAD_BYTES"]

MAX_UPLOAD_FILES = 20
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
DOWNLOAD_DIR = "downloads"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._ -]+")


async def upload_payloads(workspace: Path | None, paths: Sequence[object]) -> list[dict[str, Any]]:
    """Playwright ``FilePayload``s for ``paths`` (read from the workspace); Denied/UsageError for
    a path outside it."""
    from pincer.runtimes.native.workspace import read_bytes, resolve_path

    if not paths or len(paths) > MAX_UPLOAD_FILES:
        raise UsageError(f"upload takes 1 to {MAX_UPLOAD_FILES} paths", hint='pass "paths": ["report.pdf"]')
    payloads = []
    for raw in paths:
        target = resolve_path(workspace, raw)
        data, size = await anyio.to_thread.run_sync(
            functools.partial(read_bytes, target, offset=0, limit=MAX_UPLOAD_BYTES)
        )
        if size > MAX_UPLOAD_BYTES:
            raise ToolError(f"{target.shown!r} is larger than {MAX_UPLOAD_BYTES} bytes", hint="upload a smaller file")
        name = target.parts[-1]
        mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
        payloads.append({"name": name, "mimeType": mime, "buffer": data})
    return payloads


async def keep_download(download: Any, workspace: Path | None, max_bytes: int) -> str:
    """Move a finished download into ``workspace/downloads``; returns what happened."""
    from pincer.runtimes.native.workspace import resolve_path, write_bytes_atomic

    suggested = str(download.suggested_filename or "download")
    if workspace is None:
        await download.cancel()
        raise ToolError(f"download {suggested!r} refused: no workspace is configured ([workspace] path)")
    temp = await download.path()
    size = await anyio.to_thread.run_sync(os.path.getsize, temp) if temp else 0
    if size > max_bytes:
        await download.delete()
        raise ToolError(
            f"download {suggested!r} refused: {size} bytes is over [builtins.browser] max_download_bytes ({max_bytes})"
        )
    name = _UNSAFE_NAME.sub("_", os.path.basename(suggested)).strip(". ") or "download"
    target = resolve_path(workspace, f"{DOWNLOAD_DIR}/{name[:200]}")
    data = await anyio.to_thread.run_sync(lambda: Path(temp).read_bytes())
    await anyio.to_thread.run_sync(lambda: write_bytes_atomic(target, data, make_dirs=True))
    await download.delete()
    return f"saved {suggested!r} as {target.shown} ({size} bytes)"
