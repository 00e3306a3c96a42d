"""A process's row on a shared store (store/instances.py) and the rule for another's owner
(store/owners.py), on both backends: a gateway on another machine is alive while it beats, dead
once stopped, unknown (so alive: the timeouts decide) when it never registered; a heartbeat that
meets the store away logs and beats again; an exited process not yet reaped is dead."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time

import anyio
import pytest

import pincer.store.instances as instances_module
from pincer.core.errors import StoreError
from pincer.store.instances import Instances, LiveInstance, instance_tag
from pincer.store.owners import Owners, is_process_alive, process_token
from pincer.store.sql import Sql
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


async def test_another_machines_gateway_is_alive_while_it_beats_and_dead_once_stopped(backend: Backend) -> None:
    here = Instances(await backend.db(), host="here", home="/srv/here")
    there = Instances(await backend.db(), host="there", home="/srv/there")
    await here.register()
    await there.register()
    await there.serving("http://127.0.0.1:8700")
    assert await here.owners.is_alive(there.owners.token)
    live = await Instances.live(await backend.db())
    assert {(i.host, i.kind, i.home, i.url) for i in live} == {
        ("here", "command", "/srv/here", None), ("there", "gateway", "/srv/there", "http://127.0.0.1:8700"),
    }  # fmt: skip
    assert str(live[0]) == f"{live[0].host}/pid {os.getpid()}"
    await there.stop()
    # a process that has not asked about `there` before reads the stopped row (no cached answer)
    later = Instances(await backend.db(), host="elsewhere")
    assert await later.owners.is_alive(there.owners.token) is False
    assert [i.host for i in await Instances.live(await backend.db())] == ["here"]


async def test_an_owner_that_never_registered_or_named_no_host_is_left_to_the_timeouts(backend: Backend) -> None:
    here = Instances(await backend.db(), host="here")
    assert await here.owners.is_alive("far-away/4242:1") is True  # no row: a pincer from before instances
    assert await here.owners.is_alive(None) is True
    # a token from before hosts were named is this machine's: its process decides
    assert await here.owners.is_alive(process_token()) is True and here.owners.is_local(process_token())
    assert not here.owners.is_local("there/1:2")
    # and a rule with no remote lookup (SQLite's: one machine) cannot tell another host's
    assert await Owners("here").is_alive("there/1:2") is True


async def test_stale_tags_are_the_stopped_ones_among_those_asked(backend: Backend) -> None:
    db = await backend.db()
    running, stopped = Instances(db, host="a"), Instances(db, host="b")
    await running.register()
    await stopped.register()
    await stopped.stop()
    assert await running.stale_tags([]) == set()
    asked = [running.tag, stopped.tag, instance_tag("never/1:1")]
    assert await running.stale_tags(asked) == {stopped.tag}
    assert len(running.tag) == 24 and running.tag != stopped.tag


async def test_a_heartbeat_that_meets_the_store_away_logs_and_beats_again(
    backend: Backend, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(instances_module, "INSTANCE_HEARTBEAT_S", 0.01)
    db = await backend.db()
    mine = Instances(db, host="here")
    await mine.register()
    await db.aclose()  # the store is away from here on
    with pytest.raises(StoreError, match="closed"):
        await db.fetch_all(Sql("SELECT 1"))
    caplog.set_level(logging.INFO, logger="pincer.store.instances")
    async with anyio.create_task_group() as tg:
        tg.start_soon(mine.heartbeat)
        with anyio.fail_after(30):  # waiting for two failed beats: the loop outlived the first
            while sum("instance heartbeat failed" in r.getMessage() for r in caplog.records) < 2:
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    await mine.stop()  # closing with the store away: said, not raised
    assert any("could not mark this instance stopped" in r.getMessage() for r in caplog.records)


def test_an_exited_process_not_yet_reaped_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    token = process_token(child.pid)
    try:
        _wait_for_zombie(child.pid)
        assert is_process_alive(token) is False  # kill(pid, 0) still succeeds on it
    finally:
        child.wait(timeout=30)
    assert is_process_alive(token) is False


def _wait_for_zombie(pid: int) -> None:
    deadline = time.monotonic() + 30  # waiting for the child to exit (its parent reaps it later)
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", "rb") as fh:
            if fh.read().rpartition(b")")[2].split()[0] == b"Z":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not exit within 30 s")


@pytest.mark.parametrize("token", ["", "not-a-pid", "not-a-pid:123"])
def test_a_process_token_nobody_can_read_counts_as_alive(token: str) -> None:
    assert is_process_alive(token) is True


def test_a_live_instance_reads_as_host_and_pid() -> None:
    assert str(LiveInstance(host="h", pid=7, kind=None, home=None, url=None)) == "h/pid 7"


async def test_an_owners_row_is_read_at_most_once_a_while_and_the_memory_of_them_is_bounded(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each claim checked would be a read of the store: a gateway asks about one owner at most once
    per _LOOKUP_CACHE_S (held long here, so the test never depends on the clock), and forgets
    every answer once it holds more than _SEEN_MAX."""
    monkeypatch.setattr(instances_module, "_LOOKUP_CACHE_S", 3_600.0)
    monkeypatch.setattr(instances_module, "_SEEN_MAX", 2)
    db = await backend.db()
    here, there = Instances(db, host="here"), Instances(db, host="there")
    await there.register()
    assert await here.owners.is_alive(there.owners.token) is True
    await there.stop()
    assert await here.owners.is_alive(there.owners.token) is True  # the answer read before
    for other in ("x/1:1", "y/1:1", "z/1:1"):  # more owners asked about than _SEEN_MAX: all forgotten
        await here.owners.is_alive(other)
    assert await here.owners.is_alive(there.owners.token) is False  # read again: stopped
