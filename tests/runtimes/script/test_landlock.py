"""The Landlock + seccomp + rlimits backend, forced with ``backend = "landlock"``, proven with real
processes. Landlock missing on a machine is a failure with a message, never a skip."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pincer.core.errors import RuntimeUnavailable, ToolTimeout
from pincer.core.values import HostContext, ToolOutput
from pincer.runtimes.script import Limits, ScriptRuntime, ScriptSettings
from pincer.runtimes.script.backends import LandlockBackend
from pincer.runtimes.script.cgroups import RunCgroup, detect_cgroups
from pincer.runtimes.script.detect import BackendSelector, landlock_abi, probe_all, probe_landlock
from pincer.runtimes.script.process import RunRequest, execute
from pincer.runtimes.script.seccomp import deny_list_bpf
from pincer.runtimes.script.workdir import new_workdir, remove_workdir

from .conftest import FULL
from .helpers import SANDBOX_UID, manifest, marker, processes_with

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
SETTLE_S = 0.5  # after a kill, how long the kernel may take to reap a tree before we look
OUTSIDE_SLEEP_S = 30


@pytest.fixture(autouse=True)
def require_landlock() -> None:
    abi = landlock_abi()
    if abi < 1:
        pytest.fail(
            "Landlock is not available in this kernel: the landlock backend cannot be tested here "
            "(needs Linux 5.13+ with landlock in the lsm= boot list)"
        )


@pytest.fixture
def ll_settings(public_dir: Path) -> ScriptSettings:
    return ScriptSettings(scratch_root=public_dir / "scratch", exec_policy=FULL, backend="landlock")


async def run_exec(settings: ScriptSettings, command: str, *, limits: Limits | None = None) -> ToolOutput:
    chosen = settings if limits is None else replace(settings, exec_limits=limits)
    runtime = ScriptRuntime([], chosen)
    spec = next(s for s in runtime.tools() if s.name == "exec")
    return await runtime.invoke(spec, {"command": command}, HostContext(session="agent", tool="exec"))


async def run_tool(settings: ScriptSettings, script: str, **overrides: Any) -> ToolOutput:
    runtime = ScriptRuntime([manifest(**overrides)], settings, include_exec=False)
    return await runtime.invoke(runtime.tools()[0], {"script": script}, HostContext(session="agent", tool="t"))


def test_forced_landlock_is_selected_and_reported(ll_settings: ScriptSettings) -> None:
    BackendSelector.forget()
    backend = BackendSelector(ll_settings).select()
    assert isinstance(backend, LandlockBackend)
    report = probe_landlock(ll_settings)
    assert report.available, report.reason
    assert report.version == f"Landlock ABI {landlock_abi()}"
    doctor = probe_all(ll_settings)
    assert doctor["selected"] == "landlock"
    row = next(b for b in doctor["backends"] if b["name"] == "landlock+seccomp")
    assert row["available"] and row["smoke_ms"] is not None
    BackendSelector.forget()


def test_auto_falls_back_to_landlock_when_bwrap_fails(public_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pincer.runtimes.script import detect

    broken = public_dir / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr(detect, "bwrap_candidates", lambda settings: [("configured", broken)])
    BackendSelector.forget()
    try:
        settings = ScriptSettings(scratch_root=public_dir / "scratch")
        assert isinstance(BackendSelector(settings).select(), LandlockBackend)
        doctor = probe_all(settings)
        assert doctor["selected"] == "landlock"
        bwrap_row = next(b for b in doctor["backends"] if b["name"].startswith("bwrap"))
        assert not bwrap_row["available"] and "No permissions to create new namespace" in bwrap_row["reason"]
    finally:
        BackendSelector.forget()


async def test_writes_outside_the_workdir_fail(ll_settings: ScriptSettings, public_dir: Path) -> None:
    # World-writable places: only Landlock stands between the sandbox uid and them.
    open_dir = public_dir / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    token = marker()
    targets = [f"/tmp/pincer-{token}", f"{open_dir}/x", f"/usr/pincer-{token}", f"/etc/pincer-{token}", f"/pincer-{token}"]
    script = (
        f"for p in {' '.join(targets)}; do "
        "  if echo x > $p 2>/dev/null; then echo WROTE $p; else echo REFUSED $p; fi; done; "
        'echo ok > inside && cat "$HOME/inside"; echo tmp > "$TMPDIR/t" && cat "$TMPDIR/t"; pwd'
    )
    out = await run_exec(ll_settings, script)
    lines = out.value["stdout"].splitlines()
    assert "WROTE" not in out.value["stdout"]
    assert lines.count("REFUSED " + targets[0]) == 1 and sum(line.startswith("REFUSED") for line in lines) == len(targets)
    assert lines[-3:-1] == ["ok", "tmp"]
    assert lines[-1].startswith(str(ll_settings.scratch()))  # the real scratch path: no /work without a mount namespace
    for path in targets:
        assert not Path(path).exists()
    # The private tmp dir and the workdir are gone with the run.
    assert not [p for p in ll_settings.scratch().iterdir() if p.name.startswith(("tmp-", "run-"))]


async def test_root_owned_0600_file_cannot_be_read(ll_settings: ScriptSettings, public_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test creates a root-owned file and must run as root (it does on this project's machines)")
    secret_dir = public_dir / "rootonly"
    secret_dir.mkdir()
    os.chmod(secret_dir, 0o755)
    secret = secret_dir / "key"
    secret.write_text("TOP-SECRET")
    os.chmod(secret, 0o600)
    readable = public_dir / "readable.txt"  # world-readable but outside every allowed path
    readable.write_text("OUTSIDE")
    os.chmod(readable, 0o644)
    mount = {"source": str(secret_dir), "target": str(secret_dir), "mode": "ro"}
    out = await run_tool(ll_settings, f"id -u; cat {secret}; cat {readable}; true", sandbox={"mounts": [mount]})
    assert "TOP-SECRET" not in out.value["stdout"] and "OUTSIDE" not in out.value["stdout"]
    assert out.value["stdout"].splitlines()[0] == str(SANDBOX_UID)
    assert out.value["stderr"].count("Permission denied") == 2


async def test_connect_to_host_loopback_fails(ll_settings: ScriptSettings, loopback_listener) -> None:
    port, accepted = loopback_listener
    probe = f"import socket; s=socket.create_connection(('127.0.0.1',{port}),timeout=1); print('CONNECTED')"
    out = await run_exec(ll_settings, f'/usr/bin/python3 -c "{probe}"')
    assert out.is_error
    assert "CONNECTED" not in out.value
    assert "Operation not permitted" in out.value
    # network = "host" reaches the same listener: the refusal above is the sandbox's doing.
    out = await run_tool(ll_settings, f'/usr/bin/python3 -c "{probe}"', sandbox={"network": "host"})
    assert out.value["stdout"] == "CONNECTED\n", out.value["stderr"]
    threading.Event().wait(0.2)
    assert accepted == [True]


def test_landlock_alone_refuses_tcp_connect(ll_settings: ScriptSettings, loopback_listener) -> None:
    """Without the seccomp socket rule, Landlock's TCP restriction (ABI 4+) still refuses the connect."""
    if landlock_abi() < 4:
        pytest.fail(f"Landlock ABI {landlock_abi()} cannot restrict TCP; this test needs ABI 4+")
    port, accepted = loopback_listener
    backend = BackendSelector(ll_settings).select()
    assert isinstance(backend, LandlockBackend)
    workdir = new_workdir(ll_settings.scratch(), uid=ll_settings.sandbox_uid, gid=ll_settings.sandbox_gid)
    limits = Limits(timeout_s=10)
    probe = f"import socket; s=socket.socket(); s.connect(('127.0.0.1',{port})); print('CONNECTED')"
    try:
        launch = backend.launch(RunRequest(argv=("/usr/bin/python3", "-c", probe), workdir=workdir, limits=limits))
        config = json.loads(launch.argv[5])
        assert config["deny_net"] is True
        config["bpf"] = deny_list_bpf(deny_inet=False).hex()
        weaker = replace(launch, argv=(*launch.argv[:5], json.dumps(config), *launch.argv[6:]))
        result = execute(weaker, limits, None)
    finally:
        remove_workdir(workdir)
    assert b"CONNECTED" not in result.stdout
    assert b"PermissionError" in result.stderr and b"Permission denied" in result.stderr  # Landlock answers EACCES
    assert accepted == []


async def test_host_environment_secret_is_invisible(ll_settings: ScriptSettings, monkeypatch) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv("PINCER_TEST_SECRET", secret)
    # No pid namespace: pincer's own /proc entry is visible, its environment must not be.
    out = await run_exec(
        ll_settings,
        f"env; echo ---; tr '\\0' '\\n' < /proc/self/environ; echo ---; tr '\\0' '\\n' < /proc/{os.getpid()}/environ; true",
    )
    assert secret not in out.value["stdout"] and "PINCER_TEST_SECRET" not in out.value["stdout"]
    env_lines = out.value["stdout"].split("---")[0].split()
    assert {line.split("=", 1)[0] for line in env_lines} <= {"PATH", "HOME", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"}
    assert "Permission denied" in out.value["stderr"]


async def test_cannot_signal_a_same_uid_process_outside(ll_settings: ScriptSettings) -> None:
    """No pid namespace, so Landlock's signal scope (ABI 6+) is what keeps other runs safe."""
    if landlock_abi() < 6:
        pytest.fail(f"Landlock ABI {landlock_abi()} has no signal scoping; this test needs ABI 6+")
    uid = SANDBOX_UID if os.geteuid() == 0 else os.geteuid()
    outside = subprocess.Popen(
        ["/bin/sleep", str(OUTSIDE_SLEEP_S)], user=uid, group=uid if os.geteuid() == 0 else None
    )
    try:
        out = await run_exec(ll_settings, f"kill -TERM {outside.pid}; echo rc=$?")
        assert out.value["stdout"] == "rc=1\n"
        assert "Operation not permitted" in out.value["stderr"]
        assert outside.poll() is None
    finally:
        outside.send_signal(signal.SIGKILL)
        outside.wait()


async def test_timeout_kills_a_setsid_grandchild(ll_settings: ScriptSettings) -> None:
    token = marker()
    script = f"setsid sh -c 'sleep 100; echo {token}' & sleep 100; echo {token}"
    with pytest.raises(ToolTimeout) as caught:
        await run_exec(ll_settings, script, limits=Limits(timeout_s=1.0))
    assert "whole process tree was killed" in caught.value.message
    threading.Event().wait(SETTLE_S)
    assert processes_with(token) == []


async def test_memory_hog_is_killed(ll_settings: ScriptSettings) -> None:
    support = detect_cgroups()
    if not support.is_usable:
        pytest.fail(f"no usable cgroups here ({support.reason}): the memory limit cannot be proven")
    out = await run_exec(
        ll_settings,
        "/usr/bin/python3 -c \"x = b'x' * (512 * 1024 * 1024); print('survived')\"",
        limits=Limits(memory_bytes=64 * MIB, timeout_s=20),
    )
    assert out.is_error
    assert out.usage["killed_by"] == "memory"
    assert "survived" not in out.value
    assert out.usage["oom_kills"] >= 1 and out.usage["backend"] == "landlock"


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).ptrace(0,0,0,0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(250, 0, 0, 0, 0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).unshare(0x10000000), ctypes.get_errno())", "-1 1"),
    ],
    ids=["ptrace", "keyctl", "userns"],
)
async def test_seccomp_deny_list(ll_settings: ScriptSettings, probe: str, expected: str) -> None:
    out = await run_exec(ll_settings, f'/usr/bin/python3 -c "{probe}"')
    assert out.value["stdout"].strip() == expected, out.value["stderr"]


async def test_limits_nofile_and_no_new_privs(ll_settings: ScriptSettings) -> None:
    out = await run_exec(ll_settings, "ulimit -n; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status")
    lines = out.value["stdout"].split()
    assert lines == ["1024", "NoNewPrivs:", "1", "Seccomp:", "2"], out.value["stderr"]


async def test_allowlist_network_and_remapped_mounts_are_refused(ll_settings: ScriptSettings, public_dir: Path) -> None:
    with pytest.raises(RuntimeUnavailable) as caught:
        await run_tool(ll_settings, "true", sandbox={"network": "allowlist", "allow_hosts": ["example.com"]})
    assert "only available with the bwrap backend" in caught.value.message
    with pytest.raises(RuntimeUnavailable) as caught:
        await run_tool(ll_settings, "true", sandbox={"mounts": [{"source": str(public_dir), "target": "/data"}]})
    assert "no mount namespace" in caught.value.message and "target equal to its source" in (caught.value.hint or "")
    assert not [p for p in ll_settings.scratch().iterdir() if p.name.startswith(("tmp-", "run-"))]


def test_launcher_refuses_to_run_unrestricted(ll_settings: ScriptSettings) -> None:
    """A step that fails stops the launch: the command is never exec'd half-restricted."""
    backend = BackendSelector(ll_settings).select()
    assert isinstance(backend, LandlockBackend)
    workdir = new_workdir(ll_settings.scratch(), uid=ll_settings.sandbox_uid, gid=ll_settings.sandbox_gid)
    limits = Limits(timeout_s=10)
    try:
        launch = backend.launch(RunRequest(argv=("/bin/echo", "RAN"), workdir=workdir, limits=limits))
        config = json.loads(launch.argv[5])
        config["bpf"] = "00"  # not a whole sock_filter: the kernel refuses the program
        broken = replace(launch, argv=(*launch.argv[:5], json.dumps(config), *launch.argv[6:]))
        support = detect_cgroups()
        cgroup = RunCgroup(support, memory_bytes=limits.memory_bytes, pids_max=limits.pids) if support.is_usable else None
        try:
            result = execute(broken, limits, cgroup)
        finally:
            if cgroup is not None:
                cgroup.close()
    finally:
        remove_workdir(workdir)
    assert result.exit_code == 126
    assert b"RAN" not in result.stdout
    assert b"pincer-landlock: seccomp filter" in result.stderr
