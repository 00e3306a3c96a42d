"""Reading a file of the call's workspace for a built-in that sends it somewhere (a Telegram
photo, a Slack file): the file tools' rules (no absolute path, no ``..``, no symlink out of the
workspace), and a size limit checked before a byte is read into memory, so an oversized file is
refused with the tool's own limit in the message instead of being read and then rejected by the
egress size rule."""

from __future__ import annotations

import functools

import anyio.to_thread

from pincer.builtins.api import ApiClient
from pincer.core.errors import UsageError

__all__ = ["read_workspace_file"]


async def read_workspace_file(api: ApiClient, raw: object, *, limit: int, refusal: str, hint: str) -> tuple[str, bytes]:
    """The file name and bytes of workspace file ``raw``; over ``limit`` bytes a UsageError that
    reads ``{tool}: {path!r} is N bytes, over {refusal}``."""
    from pincer.runtimes.native.workspace import read_bytes, resolve_path

    target = resolve_path(api.host.workspace, raw)
    data, size = await anyio.to_thread.run_sync(functools.partial(read_bytes, target, offset=0, limit=limit))
    if size > limit:
        raise UsageError(f"{api.tool}: {target.shown!r} is {size} bytes, over {refusal}", hint=hint)
    return target.parts[-1], data
