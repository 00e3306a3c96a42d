"""pincer.core.process_compat reaches anyio's and asyncio's private process internals; this
fails by name when an upgrade moves them (see that module's docstring for what to do)."""

from __future__ import annotations

import gc
import sys
import warnings

import anyio
import pytest

from pincer.core.process_compat import close_transport

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the internal is asyncio's; on trio there is no transport to close


async def test_the_transport_behind_an_anyio_process_is_where_close_transport_looks() -> None:
    process = await anyio.open_process([sys.executable, "-c", "pass"])
    with anyio.fail_after(30):  # a python that does nothing exits
        await process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()
    assert close_transport(process), "anyio's Process no longer holds _process._transport: update process_compat"
    del process
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        gc.collect()  # a transport left open warns here


async def test_a_process_without_the_internal_is_reported_not_closed() -> None:
    class Elsewhere:
        _process = None

    assert close_transport(Elsewhere()) is False  # type: ignore[arg-type]
