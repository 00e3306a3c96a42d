"""Reading a file of the call's workspace for a built-in that sends it somewhere (a Telegram
photo, a Slack file, the browser's upload): the file tools' one opener
(:func:`pincer.runtimes.native.workspace.read_in_workspace`: no absolute path, no ``..``, no
symlink out of the workspace, no file with a second name, none of pincer's own files), and a
size limit checked before a byte is read into memory, so an oversized file is refused with the
tool's own limit in the message instead of being read and then rejected by the egress size rule."""

from __future__ import annotations

import functools

import anyio.to_thread

from pincer.core.errors import UsageError
from pincer.core.values import HostContext

__all__ = ["read_workspace_file"]


async def read_workspace_file(
    host: HostContext, raw: object, *, tool: str, limit: int, refusal: str, hint: str
) -> tuple[str, bytes]:
    """The file name and bytes of workspace file ``raw``; over ``limit`` bytes a UsageError that
    reads ``{tool}: {path!r} is N bytes, over {refusal}``."""
    from pincer.runtimes.native.workspace import read_in_workspace

    target, data, size = await anyio.to_thread.run_sync(functools.partial(read_in_workspace, host, raw, limit=limit))
    if size > limit:
        raise UsageError(f"{tool}: {target.shown!r} is {size} bytes, over {refusal}", hint=hint)
    return target.parts[-1], data
