"""A task group for tasks that serve one block and end with it.

anyio wraps whatever a task group's body raises in an exception group, so an error of the block
itself (a PincerError a caller turns into a message and an exit code, a TimeoutError it
translates) would come out as a group of one. :func:`block_task_group` cancels its tasks when the
block ends and lets one error out as itself, whoever raised it; two or more come out as their
group. Its tasks should handle their own errors, so that the one error is the block's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

__all__ = ["block_task_group"]


@asynccontextmanager
async def block_task_group() -> AsyncIterator[TaskGroup]:
    try:
        async with anyio.create_task_group() as group:
            try:
                yield group
            finally:
                group.cancel_scope.cancel()
    except BaseExceptionGroup as exc:
        if len(exc.exceptions) == 1:
            raise exc.exceptions[0] from None
        raise
