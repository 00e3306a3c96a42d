"""Limits, each proven with a real process: memory, wall clock with tree kill, fork storm, CPU,
file size, output caps."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

from pincer.core.errors import ToolTimeout
from pincer.core.values import HostContext
from pincer.runtimes.script import Limits, ScriptRuntime
from pincer.runtimes.script.cgroups import detect_cgroups
from pincer.runtimes.script.process import disk_usage

from .helpers import marker, processes_with

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
SETTLE_S = 0.5  # after a kill, how long the kernel may take to reap a tree before we look


def needs_cgroups() -> pytest.MarkDecorator:
    support = detect_cgroups()
    return pytest.mark.skipif(not support.is_usable, reason=f"no usable cgroups here: {support.reason}")


@needs_cgroups()
async def test_memory_hog_is_killed_and_reported(run_exec) -> None:
    out = await run_exec(
        "/usr/bin/python3 -c \"x = b'x' * (512 * 1024 * 1024); print('survived')\"",
        limits=Limits(memory_bytes=64 * MIB, timeout_s=20),
    )
    assert out.is_error
    assert out.usage["killed_by"] == "memory"
    assert "killed: memory limit of 64 MB reached (limits.memory_mb)" in out.value
    assert "survived" not in out.value
    assert out.usage["oom_kills"] >= 1


async def test_timeout_kills_the_whole_tree_with_setsid_grandchild(run_exec) -> None:
    token = marker()
    # The grandchild leaves the session and the process group: only the namespace/cgroup reach it.
    script = f"setsid sh -c 'sleep 100; echo {token}' & sleep 100; echo {token}"
    with pytest.raises(ToolTimeout) as caught:
        await run_exec(script, limits=Limits(timeout_s=1.0))
    assert "whole process tree was killed" in caught.value.message
    await _settle()
    assert processes_with(token) == []


async def test_background_children_do_not_outlive_the_run(run_exec) -> None:
    token = marker()
    out = await run_exec(f"setsid sh -c 'sleep 100; echo {token}' & nohup sleep 100 & echo started {token}")
    assert out.value["stdout"].startswith("started")
    await _settle()
    assert processes_with(token) == []


@needs_cgroups()
async def test_fork_storm_is_contained(run_exec) -> None:
    token = marker()
    # The main shell stays alive (exec needs no fork) while the storm runs into the pids limit.
    storm = f"f() {{ f | f & }}; f; exec sleep 2 # {token}"
    out = await run_exec(storm, limits=Limits(pids=32, timeout_s=20.0))
    assert out.usage["pids_limit_hits"] > 0
    await _settle()
    assert processes_with(token) == []


@needs_cgroups()
async def test_pids_limit_refuses_forks(run_exec) -> None:
    spawner = (
        "import subprocess\n"
        "ok = []\n"
        "for _ in range(40):\n"
        "    try: ok.append(subprocess.Popen(['sleep', '5']))\n"
        "    except OSError: pass\n"
        "print('spawned', len(ok))\n"
        "[p.kill() for p in ok]\n"
    )
    out = await run_exec(f"/usr/bin/python3 -c \"{spawner}\"", limits=Limits(pids=16, timeout_s=10))
    spawned = int(out.value["stdout"].split()[1])
    assert spawned < 16
    assert out.usage["pids_limit_hits"] > 0


async def test_cpu_time_limit(run_exec) -> None:
    out = await run_exec("while :; do :; done", limits=Limits(cpu_s=1, timeout_s=20))
    assert out.usage["killed_by"] == "cpu"
    assert "CPU time limit of 1 s reached (limits.cpu_s)" in out.value


async def test_file_size_limit(run_exec) -> None:
    out = await run_exec(
        "head -c 3000000 /dev/zero > /work/big; echo rc=$?; wc -c < /work/big",
        limits=Limits(file_size_bytes=1 * MIB),
    )
    lines = out.value["stdout"].split()
    assert lines[0] != "rc=0"
    assert int(lines[1]) == MIB


async def test_stdout_and_stderr_are_capped_and_marked(run_exec) -> None:
    out = await run_exec(
        "head -c 300000 /dev/zero | tr '\\0' a; head -c 5000 /dev/zero | tr '\\0' b >&2",
        limits=Limits(output_bytes=100_000),
    )
    assert out.value["stdout_truncated"] is True
    assert out.value["stdout"].startswith("a" * 100_000)
    assert "output truncated, 200000 more bytes" in out.value["stdout"]
    assert out.value["stderr_truncated"] is False
    assert out.value["stderr"] == "b" * 5000


async def test_default_output_cap_is_one_mebibyte() -> None:
    assert Limits().output_bytes == MIB


async def test_exit_status_and_signal_are_reported(run_exec) -> None:
    out = await run_exec("echo partial; exit 3")
    assert (out.usage["exit_code"], out.usage["signal"], out.is_error) == (3, None, True)
    # A failure is text for people and models, never a dict's repr.
    assert out.value == "exec failed (bwrap sandbox): exit status 3\n--- stdout ---\npartial"
    out = await run_exec("kill -TERM $$")
    assert out.usage["signal"] == 15 and out.value.startswith("exec failed (bwrap sandbox): killed by signal 15")


async def _settle() -> None:
    import anyio

    await anyio.sleep(SETTLE_S)


@needs_cgroups()
def test_stale_run_groups_are_swept() -> None:
    from pincer.runtimes.script.cgroups import RunCgroup, sweep_stale

    support = detect_cgroups()
    group = RunCgroup(support, memory_bytes=64 * MIB, pids_max=8)
    for fd in group.join_fds():
        os.close(fd)
    group._fds = []
    assert all(d.exists() for d in group.dirs)
    sweep_stale(support, older_than_s=3600)
    assert all(d.exists() for d in group.dirs)  # too young: it may be another pincer's, starting
    two_hours_ago = time.time() - 7200
    for d in group.dirs:
        os.utime(d, (two_hours_ago, two_hours_ago))
    assert sweep_stale(support, older_than_s=3600) >= len(group.dirs)
    assert not any(d.exists() for d in group.dirs)


def test_disk_usage_stops_early_and_counts_too_many_entries_as_full(tmp_path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"x" * 10_000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "g").write_bytes(b"y" * 10_000)
    (tmp_path / "link").symlink_to("/usr")  # not followed
    total = disk_usage(tmp_path, stop_above=10**9)
    assert 60_000 <= total < 200_000
    assert disk_usage(tmp_path, stop_above=15_000) > 15_000  # stopped once past the bound
    assert disk_usage(tmp_path, stop_above=10**9, max_entries=3) > 10**9  # too many to walk: full


async def test_watched_workdir_caps_each_file_at_the_bound(settings) -> None:
    """Where the workdir is watched rather than a tmpfs (the host backend), RLIMIT_FSIZE is lowered
    to the bound, so one file cannot outgrow it between two measurements."""
    on_host = replace(settings, main_session_on_host=True, workdir_max_bytes=4 * MIB)
    runtime = ScriptRuntime([], on_host)
    spec = next(s for s in runtime.tools() if s.name == "exec")
    out = await runtime.invoke(
        spec, {"command": "head -c 10000000 /dev/zero > big; wc -c < big"}, HostContext(session="main", tool="exec")
    )
    assert out.value["stdout"] == f"{4 * MIB}\n", out.value
