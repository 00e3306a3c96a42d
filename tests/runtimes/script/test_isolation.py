"""Isolation properties of the sandbox, each proven with a real process on this machine."""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from pincer.core.errors import ConfigError
from pincer.core.values import HostContext
from pincer.runtimes.script import ScriptRuntime

from .helpers import SANDBOX_UID, manifest, sandbox_owned_dir

pytestmark = pytest.mark.anyio



async def test_connect_to_host_loopback_fails(run_exec, loopback_listener) -> None:
    port, accepted = loopback_listener
    probe = f"import socket; s=socket.create_connection(('127.0.0.1',{port}),timeout=1); print('CONNECTED')"
    out = await run_exec(f'/usr/bin/python3 -c "{probe}"')
    assert out.is_error
    assert "CONNECTED" not in out.value
    assert "Connection refused" in out.value or "unreachable" in out.value
    # And from the host itself the listener is reachable: the refusal is the sandbox's doing.
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    threading.Event().wait(0.2)
    assert accepted == [True]


async def test_no_network_interfaces_but_loopback(run_exec) -> None:
    out = await run_exec("cat /proc/net/dev")
    names = {line.split(":")[0].strip() for line in out.value["stdout"].splitlines() if ":" in line}
    assert names == {"lo"}


async def test_writes_outside_the_workdir_fail(run_exec) -> None:
    script = (
        "for p in /usr/pincer-x /etc/pincer-x /pincer-x /bin/pincer-x /proc/pincer-x; do "
        "  if echo x > $p 2>/dev/null; then echo WROTE $p; else echo REFUSED $p; fi; done; "
        "echo ok > /work/inside && cat /work/inside; echo tmp > /tmp/t && cat /tmp/t"
    )
    out = await run_exec(script)
    assert "WROTE" not in out.value["stdout"]
    assert out.value["stdout"].count("REFUSED") == 5
    assert out.value["stdout"].endswith("ok\ntmp\n")
    for path in ("/usr/pincer-x", "/etc/pincer-x", "/pincer-x"):
        assert not Path(path).exists()


async def test_tmp_is_size_bounded(settings) -> None:
    runtime = ScriptRuntime([manifest(limits={"tmp_size_mb": 1})], settings)
    spec = runtime.tools()[0]
    out = await runtime.invoke(
        spec, {"script": "head -c 3000000 /dev/zero > /tmp/big; echo rc=$?; wc -c < /tmp/big"},
        HostContext(session="agent", tool="t"),
    )  # fmt: skip
    lines = out.value["stdout"].split()
    assert lines[0] == "rc=1"
    assert int(lines[1]) <= 1024 * 1024
    assert "No space left" in out.value["stderr"]


async def test_host_environment_secret_is_invisible(run_exec, monkeypatch) -> None:
    secret = "s3cr3t-" + os.urandom(8).hex()
    monkeypatch.setenv("PINCER_TEST_SECRET", secret)
    out = await run_exec("env; echo ---; tr '\\0' '\\n' < /proc/1/environ; echo ---; tr '\\0' '\\n' < /proc/self/environ")
    assert out.value["exit_code"] == 0, out.value["stderr"]
    assert secret not in out.value["stdout"]
    assert "PINCER_TEST_SECRET" not in out.value["stdout"]
    env_lines = out.value["stdout"].split("---")[0].split()
    assert {line.split("=", 1)[0] for line in env_lines} <= {"PATH", "HOME", "PWD", "SHLVL", "_", "OLDPWD"}


async def test_declared_environment_only(settings, monkeypatch) -> None:
    monkeypatch.setenv("LEAKY", "host-value")
    tool = manifest(sandbox={"env": {"GREETING": "hello"}})
    runtime = ScriptRuntime([tool], settings)
    out = await runtime.invoke(runtime.tools()[0], {"script": "echo $GREETING-$LEAKY"}, HostContext(session="a", tool="t"))
    assert out.value["stdout"] == "hello-\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a root-owned file needs root")
async def test_root_owned_0600_file_cannot_be_read(settings, public_dir: Path) -> None:
    secret_dir = public_dir / "rootonly"
    secret_dir.mkdir()
    os.chmod(secret_dir, 0o755)
    secret = secret_dir / "key"
    secret.write_text("TOP-SECRET")
    os.chmod(secret, 0o600)
    tool = manifest(sandbox={"mounts": [{"source": str(secret_dir), "target": "/data", "mode": "ro"}]})
    runtime = ScriptRuntime([tool], settings)
    out = await runtime.invoke(
        runtime.tools()[0], {"script": "id -u; ls -ln /data; cat /data/key; true"}, HostContext(session="a", tool="t")
    )
    assert "TOP-SECRET" not in out.value["stdout"]
    assert "Permission denied" in out.value["stderr"]
    assert out.value["stdout"].splitlines()[0] == str(SANDBOX_UID)


async def test_runs_as_unprivileged_host_uid(run_exec) -> None:
    token = os.urandom(6).hex()
    out = await run_exec(f"sleep 30 & echo {token} > /dev/null; cat /proc/$!/status | grep -E '^(Uid|CapEff)'; kill $!")
    lines = dict(line.split(":", 1) for line in out.value["stdout"].splitlines())
    assert lines["Uid"].split()[0] == str(SANDBOX_UID if os.geteuid() == 0 else os.geteuid())
    assert int(lines["CapEff"].strip(), 16) == 0


async def test_new_pid_namespace(run_exec) -> None:
    out = await run_exec("echo $$; ls /proc | grep -E '^[0-9]+$' | wc -l")
    pid, count = out.value["stdout"].split()
    assert int(pid) < 10
    assert int(count) < 10  # only the sandbox's own processes are visible


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).ptrace(0,0,0,0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(250, 0, 0, 0, 0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(321, 0, 0, 0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(425, 1, 0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(298, 0, 0, 0, 0, 0), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).ioctl(0, 0x5412, b'x'), ctypes.get_errno())", "-1 1"),
        ("import ctypes; print(ctypes.CDLL(None, use_errno=True).unshare(0x10000000), ctypes.get_errno())", "-1 1"),
    ],
    ids=["ptrace", "keyctl", "bpf", "io_uring_setup", "perf_event_open", "TIOCSTI", "userns"],
)
async def test_seccomp_deny_list(run_exec, probe: str, expected: str) -> None:
    # EPERM (1) is the filter's answer; without it these calls succeed or fail with EFAULT/ENOTTY.
    out = await run_exec(f'/usr/bin/python3 -c "{probe}"')
    assert out.value["stdout"].strip() == expected, out.value["stderr"]


async def test_workspace_is_mounted_at_work(settings, public_dir: Path) -> None:
    workspace = sandbox_owned_dir(public_dir / "ws")
    (workspace / "in.txt").write_text("one two three\n")
    tool = manifest(
        name="wc",
        command=["/usr/bin/wc", "-w", "--", "{path}"],
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    runtime = ScriptRuntime([tool], replace(settings, use_workspace=True))
    out = await runtime.invoke(runtime.tools()[0], {"path": "in.txt"}, HostContext(session="a", tool="wc", workspace=workspace))
    assert out.value["stdout"] == "3 in.txt\n"
    # An argument is one argv element, never shell text.
    out = await runtime.invoke(
        runtime.tools()[0], {"path": "in.txt; touch /work/pwned"}, HostContext(session="a", tool="wc", workspace=workspace)
    )
    assert out.is_error and "No such file" in out.value
    assert not (workspace / "pwned").exists()


async def test_an_unreachable_workspace_is_a_clear_error(settings, public_dir: Path) -> None:
    """As root the sandbox runs as its own uid, which must reach the workspace by path; the default
    one sits in the private $PINCER_HOME. Say so, naming the key, instead of a bwrap error."""
    if os.geteuid() != 0:
        pytest.fail("the uid drop that makes this matter happens only for root (it does on this project's machines)")
    private = public_dir / "home"
    private.mkdir(mode=0o700)
    workspace = sandbox_owned_dir(private / "workspace")
    runtime = ScriptRuntime([], replace(settings, use_workspace=True))
    spec = next(s for s in runtime.tools() if s.name == "exec")
    with pytest.raises(ConfigError) as caught:
        await runtime.invoke(spec, {"command": "true"}, HostContext(session="a", tool="exec", workspace=workspace))
    assert f"cannot reach the workspace {workspace}: {private} is mode 0700" in caught.value.message
    assert "[workspace] path" in (caught.value.hint or "")
