"""block_task_group: the block's own error comes out as itself, and the block's tasks end with it."""

from __future__ import annotations

import anyio
import pytest

from pincer.core.errors import ToolError
from pincer.core.tasks import block_task_group

pytestmark = pytest.mark.anyio


async def test_the_blocks_own_error_is_not_wrapped_in_a_group() -> None:
    """A plain task group would raise ExceptionGroup([ToolError]); callers translate the error itself."""
    with pytest.raises(ToolError, match="the block's own"):
        async with block_task_group() as group:
            group.start_soon(anyio.sleep_forever)
            raise ToolError("the block's own")


async def test_the_blocks_tasks_are_cancelled_when_it_ends() -> None:
    ended = anyio.Event()

    async def serve() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()

    with anyio.fail_after(10):  # bounds a group that never cancelled its task
        async with block_task_group() as group:
            group.start_soon(serve)
    assert ended.is_set()


async def test_one_error_comes_out_as_itself_whoever_raised_it_and_two_as_their_group() -> None:
    async def fail(message: str) -> None:
        raise ValueError(message)

    with pytest.raises(ValueError, match="the task's"):
        async with block_task_group() as group:
            group.start_soon(fail, "the task's")
            await anyio.sleep_forever()  # cancelled by the task's failure
    with pytest.raises(ExceptionGroup) as caught:
        async with block_task_group() as group:
            group.start_soon(fail, "one")
            group.start_soon(fail, "two")
            await anyio.sleep_forever()
    assert sorted(str(e) for e in caught.value.exceptions) == ["one", "two"]
