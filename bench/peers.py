"""The same MCP upstream behind pincer and behind the gateways people install instead.

One upstream, ``mcp-server-time`` over stdio (this venv's binary), behind:

* pincer        ``pincer serve`` with its whole chain on: session policy, a grant, argument
                validation, the leak scan, an audit record committed to SQLite per call;
                bearer token; the server pinned by ``pincer mcp add`` and started by pincer's MCP
                runtime at the first call (FastMCP's proxy starts its own at the first call too);
* contextforge  IBM's ContextForge gateway (PyPI ``mcp-contextforge-gateway``), installed by
                this script into its own venv under ``.cache/peers/`` with python3.12; run
                with its documented defaults (SQLite) plus only what it needs to work here
                (generated secrets, an admin email, ``SSRF_ALLOW_LOCALHOST`` for the loopback
                upstream, ``RATE_LIMITING_ENABLED=false`` instead of 100 calls/min); it cannot
                spawn stdio servers, so its own bridge ``mcpgateway.translate`` runs the
                upstream and exposes it over streamable HTTP; a JWT bearer token;
* fastmcp       a FastMCP proxy server over streamable HTTP (uvicorn), no auth;
* pincer-lean   pincer as above with ``[tools] mcp_lean_calls = true``: ``tools/call`` to the
                upstream speaks JSON-RPC itself instead of through the SDK's client session
                (``runtimes/mcp/lean.py``); in the same run as ``pincer``, so the two compare.

Each is driven by the same load: the official SDK client (``mcp.Client`` over streamable
HTTP) calling ``get_current_time``, with 1 and 32 concurrent clients, in the 2026-07-28 era
(where the peer speaks it) and the 2025-11-25 handshake era. Cells are interleaved across the
peers in rounds and each figure is the median over the rounds: calls/s, p50/p95 latency, and
the resident memory (RSS) of the server's whole process tree (its upstream included).

    .venv/bin/python bench/peers.py [--seconds 5] [--rounds 3] [--peers pincer,pincer-lean,contextforge,fastmcp]

Each cell also shows the 1-minute load average read at its end (the machine is shared).

Run by hand (``make bench`` does); never from ``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _procs import cpu_s, pss_kib, rss_kib
from _stats import percentile

REPO = Path(__file__).resolve().parents[1]
PEERS_DIR = REPO / ".cache" / "peers"
CONTEXTFORGE_VENV = PEERS_DIR / "contextforge"
CONTEXTFORGE_PACKAGE = "mcp-contextforge-gateway==1.1.0"
TIME_SERVER = str(Path(sys.executable).with_name("mcp-server-time"))
PINCER = str(Path(sys.executable).with_name("pincer"))
ARGS = {"timezone": "UTC"}
CONCURRENCY = (1, 32)
MODERN, LEGACY = "2026-07-28", "2025-11-25"
MODES = {MODERN: "auto", LEGACY: "legacy"}
INSTALL_TIMEOUT_S = 1_800.0
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 15.0
CALL_TIMEOUT_S = 120.0
HTTP_TIMEOUT_S = 30.0
WARMUP_CALLS = 5  # per client; the first call after FastMCP switches eras restarts its upstream
ADMIN_EMAIL = "admin@example.com"


# -- processes ---------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    url: str
    tool: str
    token: str | None
    roots: list[subprocess.Popen[bytes]]

    def pids(self) -> set[int]:
        """Every process in the server's trees, read from /proc once per call."""
        return _tree({p.pid for p in self.roots})

    def rss_mib(self) -> float:
        """Resident memory of every process in the server's trees, in MiB."""
        return sum(rss_kib(pid) for pid in self.pids()) / 1024

    def pss_mib(self) -> float:
        """The same trees' proportional set size: a page shared by N processes counts 1/N in each
        (the interpreter's and libraries' pages shared by a gateway, its supervisor and the
        upstream are counted once instead of once per process, as RSS counts them)."""
        return sum(pss_kib(pid) for pid in self.pids()) / 1024

    def cpu_s(self) -> tuple[float, float]:
        """CPU seconds used so far by (the gateway's processes, the upstream ``mcp-server-time``)."""
        gateway = upstream = 0.0
        for pid in self.pids():
            used = cpu_s(pid)
            if _is_upstream(pid):
                upstream += used
            else:
                gateway += used
        return gateway, upstream

    def stop(self) -> None:
        for process in self.roots:
            _stop(process)


def _spawn(command: list[str], *, env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    # A session of its own: the server and everything it starts can be ended together.
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=out,
            start_new_session=True,
        )  # fmt: skip


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(process.pid, signal.SIGKILL)  # anything of its group that outlived it
    except ProcessLookupError:
        pass


def _announced(process: subprocess.Popen[bytes], what: str, log: Path) -> dict[str, Any]:
    """The JSON document the process writes to stdout once it listens."""
    assert process.stdout is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    buffered = b""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        buffered += line
        try:
            return json.loads(buffered)
        except json.JSONDecodeError:
            continue
    _stop(process)
    raise SystemExit(f"{what} did not start: {log.read_text(errors='replace')[-2000:]}")


def _tree(roots: set[int]) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found = {pid for pid in roots if pid in parents}
    while True:
        more = {pid for pid, ppid in parents.items() if ppid in found and pid not in found}
        if not more:
            return found
        found |= more








def _is_upstream(pid: int) -> bool:
    try:
        return Path(TIME_SERVER).name in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_http(url: str, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.25)
    raise SystemExit(f"{what} did not answer {url}: {log.read_text(errors='replace')[-2000:]}")


def _wait_port(port: int, what: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=HTTP_TIMEOUT_S):
                return
        except OSError:
            time.sleep(0.25)
    raise SystemExit(f"{what} did not listen on port {port}: {log.read_text(errors='replace')[-2000:]}")


def _api(method: str, url: str, token: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
        return json.loads(response.read())


# -- the peers ---------------------------------------------------------------------------------


def start_pincer(scratch: Path, *, lean: bool = False) -> Server:
    home = scratch / "pincer-home"
    home.mkdir(parents=True)
    # As a user adds it: `pincer mcp add` starts the server once and pins its tools, so `pincer
    # serve` knows them without starting it (startup "lazy", the default): the upstream starts
    # at the first call, as the FastMCP proxy starts its own, and neither idle figure has one.
    added = subprocess.run(
        [PINCER, "mcp", "add", "time", "--command", TIME_SERVER, "--startup", "lazy", "--json"],
        env={**os.environ, "PINCER_HOME": str(home)}, capture_output=True, text=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    if added.returncode != 0:
        raise SystemExit(f"pincer mcp add failed: {added.stderr.strip()}")
    tools = "[tools]\nmcp_lean_calls = true\n\n" if lean else ""
    (home / "config.toml").write_text(f'{tools}[[grants]]\ntool = "time_*"\ndefault = "allow"\n', encoding="utf-8")
    log = scratch / "pincer.log"
    process = _spawn(
        [PINCER, "serve", "--port", "0", "--json"], env={**os.environ, "PINCER_HOME": str(home)}, cwd=scratch, log=log
    )
    info = _announced(process, "pincer serve", log)
    token = (home / "gateway.token").read_text(encoding="utf-8").strip()
    return Server("pincer-lean" if lean else "pincer", info["mcp_url"], "time_get_current_time", token, [process])


def start_pincer_lean(scratch: Path) -> Server:
    return start_pincer(scratch, lean=True)


def start_fastmcp(scratch: Path) -> Server:
    log = scratch / "fastmcp.log"
    command = [sys.executable, str(Path(__file__).with_name("mcp_proxy.py")), "--serve-fastmcp-proxy"]
    process = _spawn(command, env=dict(os.environ), cwd=scratch, log=log)
    info = _announced(process, "the FastMCP proxy", log)
    return Server("fastmcp", info["mcp_url"], "get_current_time", None, [process])


PROBE_TIMEOUT_S = 30.0


def _is_python312(candidate: str) -> bool:
    """Whether ``candidate`` runs and is 3.12: a pyenv shim on PATH fails when 3.12 is installed but
    not the selected version, so a name found on PATH is not enough."""
    try:
        done = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "True"


def _python312_candidates() -> list[str]:
    found: list[str] = []
    if os.environ.get("PINCER_PYTHON312"):
        found.append(os.environ["PINCER_PYTHON312"])
    for command in (["pyenv", "prefix", "3.12"], ["uv", "python", "find", "3.12"]):
        if shutil.which(command[0]) is None:
            continue
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in done.stdout.split() if done.returncode == 0 else ():
            # pyenv prints installation prefixes, uv the interpreter itself
            found.append(str(Path(line) / "bin" / "python3.12") if Path(line).is_dir() else line)
    if shutil.which("python3.12"):
        found.append(str(shutil.which("python3.12")))
    found += [str(c) for c in sorted((Path.home() / ".pyenv" / "versions").glob("3.12*/bin/python3.12"), reverse=True)]
    return found


def _python312() -> str:
    """An installed Python 3.12 that runs: $PINCER_PYTHON312, `pyenv prefix 3.12`, `uv python find
    3.12`, python3.12 on PATH, ~/.pyenv/versions/3.12*, the first that answers as 3.12."""
    for candidate in _python312_candidates():
        if _is_python312(candidate):
            return candidate
    raise SystemExit(
        "ContextForge needs Python 3.12 and none was found that runs: install one "
        "(`pyenv install 3.12` or `uv python install 3.12`), or point PINCER_PYTHON312 at its python3.12"
    )


def ensure_contextforge() -> Path:
    """ContextForge's venv under .cache/peers/ (created, and the package installed, once)."""
    python = CONTEXTFORGE_VENV / "bin" / "python"
    if (CONTEXTFORGE_VENV / "bin" / "mcpgateway").exists():
        return python
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    print(f"installing {CONTEXTFORGE_PACKAGE} into {CONTEXTFORGE_VENV} (once) ...", file=sys.stderr)
    subprocess.run([_python312(), "-m", "venv", str(CONTEXTFORGE_VENV)], check=True, timeout=INSTALL_TIMEOUT_S)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", CONTEXTFORGE_PACKAGE], check=True, timeout=INSTALL_TIMEOUT_S
    )
    return python


def start_contextforge(scratch: Path) -> Server:
    python = ensure_contextforge()
    bin_dir = python.parent
    work = scratch / "contextforge"
    work.mkdir(parents=True)
    secrets_file = work / "secrets.env"
    subprocess.run(
        [str(python), "-m", "mcpgateway.scripts.init_secrets", "--output", str(secrets_file), "--force"],
        cwd=work, check=True, capture_output=True, timeout=START_TIMEOUT_S,
    )  # fmt: skip
    secrets = dict(
        line.split("=", 1) for line in secrets_file.read_text().splitlines() if "=" in line and not line.startswith("#")
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")},
        **secrets,
        "PLATFORM_ADMIN_EMAIL": ADMIN_EMAIL,
        "SSRF_ALLOW_LOCALHOST": "true",  # the upstream bridge listens on 127.0.0.1
        "RATE_LIMITING_ENABLED": "false",  # its default allows 100 calls a minute
    }
    bridge_port, gateway_port = _free_port(), _free_port()
    bridge_log, gateway_log = work / "translate.log", work / "gateway.log"
    bridge = _spawn(
        [str(python), "-m", "mcpgateway.translate", "--stdio", TIME_SERVER, "--expose-streamable-http",
         "--host", "127.0.0.1", "--port", str(bridge_port)],
        env=env, cwd=work, log=bridge_log,
    )  # fmt: skip
    gateway = _spawn(
        [str(bin_dir / "mcpgateway"), "--host", "127.0.0.1", "--port", str(gateway_port)],
        env=env, cwd=work, log=gateway_log,
    )  # fmt: skip
    server = Server("contextforge", "", "", None, [gateway, bridge])
    try:
        base = f"http://127.0.0.1:{gateway_port}"
        _wait_http(f"{base}/health", "ContextForge", gateway_log)
        _wait_port(bridge_port, "ContextForge's stdio bridge", bridge_log)
        made = subprocess.run(
            [str(python), "-m", "mcpgateway.utils.create_jwt_token", "--username", ADMIN_EMAIL, "--exp", "600",
             "--secret", secrets["JWT_SECRET_KEY"]],
            cwd=work, env=env, check=True, capture_output=True, text=True, timeout=START_TIMEOUT_S,
        )  # fmt: skip
        token = made.stdout.strip().splitlines()[-1]
        upstream = {"name": "time", "url": f"http://127.0.0.1:{bridge_port}/mcp", "transport": "STREAMABLEHTTP"}
        _api("POST", f"{base}/gateways", token, upstream)
        tools = _api("GET", f"{base}/tools", token)
        tool = next(t for t in tools if t.get("originalName") == "get_current_time")
        virtual = _api("POST", f"{base}/servers", token, {"server": {"name": "time", "associated_tools": [tool["id"]]}})
    except BaseException:
        server.stop()
        raise
    server.url, server.tool, server.token = f"{base}/servers/{virtual['id']}/mcp", tool["name"], token
    return server


STARTERS: dict[str, Callable[[Path], Server]] = {
    "pincer": start_pincer,
    "contextforge": start_contextforge,
    "fastmcp": start_fastmcp,
    "pincer-lean": start_pincer_lean,
}


# -- the load ----------------------------------------------------------------------------------


FIRST_ERRORS: dict[str, str] = {}  # the first failed call's text, per peer


@dataclass
class Figures:
    calls_per_s: float  # calls that succeeded, per second
    p50_ms: float
    p95_ms: float
    rss_mib: float
    pss_mib: float
    errors: int  # calls answered with an error (a peer failing under load), not counted above
    # CPU per successful call, in microseconds: the SDK clients (this process), the gateway's
    # processes, the upstream. Read from /proc at 10 ms granularity over the whole cell.
    client_cpu_us: float
    gateway_cpu_us: float
    upstream_cpu_us: float
    load1: float = 0.0  # the 1-minute load average at the cell's end


async def measure(server: Server, era: str, clients: int, seconds: float) -> Figures | None:
    """``clients`` SDK clients calling the tool for ``seconds``; None when the server does not
    speak ``era``."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {server.token}"} if server.token else {}
    async with AsyncExitStack() as stack:
        sessions = []
        for _ in range(clients):
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, trust_env=False, timeout=CALL_TIMEOUT_S)
            )
            client = await stack.enter_async_context(
                Client(streamable_http_client(server.url, http_client=http), mode=MODES[era])
            )
            if client.protocol_version != era:
                return None
            sessions.append(client)

        async def call(client: Any) -> bool:
            result = await asyncio.wait_for(client.call_tool(server.tool, ARGS), CALL_TIMEOUT_S)
            if result.is_error and server.name not in FIRST_ERRORS:
                FIRST_ERRORS[server.name] = " ".join(getattr(block, "text", "") for block in result.content)[:200]
            return not result.is_error

        for _ in range(WARMUP_CALLS):
            await asyncio.gather(*(call(c) for c in sessions))
        latencies: list[float] = []
        errors = 0
        deadline = time.perf_counter() + seconds

        async def loop(client: Any) -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                if await call(client):
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1

        client_cpu, (gateway_cpu, upstream_cpu) = time.process_time(), server.cpu_s()
        began = time.perf_counter()
        await asyncio.gather(*(loop(c) for c in sessions))
        elapsed = time.perf_counter() - began
        client_cpu, (gateway_after, upstream_after) = time.process_time() - client_cpu, server.cpu_s()
        rss, pss = server.rss_mib(), server.pss_mib()
    per_call = 1e6 / max(len(latencies), 1)
    return Figures(
        calls_per_s=len(latencies) / elapsed,
        p50_ms=statistics.median(latencies) * 1000 if latencies else float("nan"),
        p95_ms=percentile(latencies, 95) * 1000 if latencies else float("nan"),
        rss_mib=rss,
        pss_mib=pss,
        errors=errors,
        client_cpu_us=client_cpu * per_call,
        gateway_cpu_us=(gateway_after - gateway_cpu) * per_call,
        upstream_cpu_us=(upstream_after - upstream_cpu) * per_call,
        load1=os.getloadavg()[0],
    )


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per cell and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is the median over them")
    parser.add_argument("--peers", default="pincer,pincer-lean,contextforge,fastmcp", help="comma-separated subset")
    options = parser.parse_args()
    names = [name.strip() for name in options.peers.split(",") if name.strip()]
    unknown = sorted(set(names) - set(STARTERS))
    if unknown:
        parser.error(f"unknown peers {unknown}; choose from {sorted(STARTERS)}")
    cells = [(era, clients) for era in (MODERN, LEGACY) for clients in CONCURRENCY]
    samples: dict[tuple[str, str, int], list[Figures]] = {}
    unsupported: set[tuple[str, str]] = set()
    restarts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="pincer-peers-") as tmp:
        servers: dict[str, Server] = {}

        def start(name: str) -> Server:
            scratch = Path(tmp) / f"{name}-{restarts.get(name, 0)}"
            scratch.mkdir()
            return STARTERS[name](scratch)

        try:
            for name in names:
                servers[name] = start(name)
            idle = {name: (server.rss_mib(), server.pss_mib()) for name, server in servers.items()}
            # Rounds interleave the peers cell by cell, so a busy neighbour on the machine
            # weighs on all of them alike.
            for _ in range(options.rounds):
                for era, clients in cells:
                    for name in names:
                        if (name, era) in unsupported:
                            continue
                        server = servers[name]
                        try:
                            figures = asyncio.run(measure(server, era, clients, options.seconds))
                        except BaseExceptionGroup as group:
                            raise SystemExit(f"{name} {era} {clients} clients: {_first_leaf(group)!r}") from group
                        if figures is None:
                            unsupported.add((name, era))
                            continue
                        samples.setdefault((name, era, clients), []).append(figures)
                        if figures.errors:
                            # A peer that failed calls starts afresh, so that the next cell does
                            # not measure what one overload left broken.
                            server.stop()
                            restarts[name] = restarts.get(name, 0) + 1
                            servers[name] = start(name)
        finally:
            for server in servers.values():
                server.stop()

    def median(name: str, era: str, clients: int) -> Figures | None:
        runs = samples.get((name, era, clients))
        if not runs:
            return None
        # Latencies of rounds where every call failed are unknown (nan), not zero: left out.
        timed = [f for f in runs if f.p50_ms == f.p50_ms] or runs
        return Figures(
            calls_per_s=statistics.median(f.calls_per_s for f in runs),
            p50_ms=statistics.median(f.p50_ms for f in timed),
            p95_ms=statistics.median(f.p95_ms for f in timed),
            rss_mib=max(f.rss_mib for f in runs),
            pss_mib=max(f.pss_mib for f in runs),
            errors=sum(f.errors for f in runs),
            client_cpu_us=statistics.median(f.client_cpu_us for f in runs),
            gateway_cpu_us=statistics.median(f.gateway_cpu_us for f in runs),
            upstream_cpu_us=statistics.median(f.upstream_cpu_us for f in runs),
            load1=statistics.median(f.load1 for f in runs),
        )

    print(
        f"tools/call get_current_time -> mcp-server-time (stdio) through each gateway; SDK clients over "
        f"streamable HTTP; median of {options.rounds} rounds x {options.seconds:g} s per cell; {os.cpu_count()} CPUs"
    )
    print(
        f"{'peer':<13}{'era':<11}{'clients':>8} {'calls/s':>9} {'p50 ms':>9} {'p95 ms':>9} {'RSS MiB':>9} "
        f"{'PSS MiB':>9} {'failed calls':>13}   CPU us/call: clients gateway upstream   load"
    )
    for name in names:
        for era, clients in cells:
            figures = median(name, era, clients)
            if figures is None:
                print(f"{name:<13}{era:<11}{clients:>8}   (does not speak this era)")
                continue
            print(
                f"{name:<13}{era:<11}{clients:>8} {figures.calls_per_s:>9.1f} {figures.p50_ms:>9.2f} "
                f"{figures.p95_ms:>9.2f} {figures.rss_mib:>9.0f} {figures.pss_mib:>9.0f} {figures.errors:>13}   "
                f"{figures.client_cpu_us:>20.0f} {figures.gateway_cpu_us:>7.0f} {figures.upstream_cpu_us:>8.0f}"
                f"   {figures.load1:4.1f}"
            )
    print(
        "idle before the load (MiB): "
        + ", ".join(f"{name} RSS {rss:.0f} PSS {pss:.0f}" for name, (rss, pss) in idle.items())
    )
    for name, text in FIRST_ERRORS.items():
        print(f"{name}: first failed call said: {text!r}; restarted {restarts.get(name, 0)} time(s) after failing")
    _print_gateway_cpu(names, cells, median)
    if "pincer" not in names:
        return
    _print_bounds(names, cells, median)
    for name in names:
        if name == "pincer":
            continue
        for era, clients in cells:
            ours, theirs = median("pincer", era, clients), median(name, era, clients)
            if ours is None or theirs is None:
                continue
            if not theirs.calls_per_s:
                print(f"pincer vs {name:<12} {era} {clients:>2} clients: {name} completed no call -> ahead")
                continue
            ahead = ours.calls_per_s >= theirs.calls_per_s and not ours.p50_ms > theirs.p50_ms
            print(
                f"pincer vs {name:<12} {era} {clients:>2} clients: {ours.calls_per_s / theirs.calls_per_s:6.2f}x calls/s, "
                f"p50 {ours.p50_ms / theirs.p50_ms:5.2f}x  -> {'ahead' if ahead else 'NOT ahead'}"
            )


def _print_gateway_cpu(
    names: list[str], cells: list[tuple[str, int]], median: Callable[[str, str, int], Figures | None]
) -> None:
    """The figure issue 39 targets: each pincer's gateway CPU per proxied call over FastMCP's
    (target <= 0.3x), with the load average of both cells."""
    if "fastmcp" not in names:
        return
    for name in (n for n in names if n.startswith("pincer")):
        for era, clients in cells:
            ours, theirs = median(name, era, clients), median("fastmcp", era, clients)
            if ours is None or theirs is None or not theirs.gateway_cpu_us:
                continue
            print(
                f"{name} gateway CPU per call vs fastmcp {era} {clients:>2} clients: "
                f"{ours.gateway_cpu_us:.0f} / {theirs.gateway_cpu_us:.0f} us = "
                f"{ours.gateway_cpu_us / theirs.gateway_cpu_us:.2f}x (load {ours.load1:.1f} / {theirs.load1:.1f})"
            )


def _print_bounds(
    names: list[str], cells: list[tuple[str, int]], median: Callable[[str, str, int], Figures | None]
) -> None:
    """What a gateway costing no CPU at all could reach on this machine, from the CPU the clients
    and the upstream used per call in pincer's cells (the same clients and upstream serve every
    peer). At 1 client the calls are serial, so a call takes at least the clients' and the
    upstream's CPU for it; at 32 they share the CPUs, and the upstream runs on one thread."""
    cpus = os.cpu_count() or 1
    print(f"a gateway that costs nothing, from the clients' and the upstream's CPU per call ({cpus} CPUs):")
    for era, clients in cells:
        ours = median("pincer", era, clients)
        if ours is None or not ours.client_cpu_us + ours.upstream_cpu_us:
            continue
        rest = ours.client_cpu_us + ours.upstream_cpu_us
        bound = 1e6 / rest if clients == 1 else min(cpus * 1e6 / rest, 1e6 / max(ours.upstream_cpu_us, 1e-9))
        line = f"  {era} {clients:>2} clients: at most {bound:7.0f} calls/s"
        for name in names:
            theirs = median(name, era, clients)
            if name != "pincer" and theirs is not None and theirs.calls_per_s:
                need = 2 * theirs.calls_per_s
                line += f"; 2x {name} is {need:.0f} ({'within' if need <= bound else 'beyond'} it)"
        print(line)


if __name__ == "__main__":
    main()
