"""The browser's lifecycle with real processes: pincer killed with SIGKILL leaves no Chromium
behind; an idle browser closes by itself; a crashed Chromium is started again on the next call."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pincer.core.values import CallRequest
from tests.builtins.browser_pages import Site, serve_site
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

READY_TIMEOUT_S = 90.0
GONE_TIMEOUT_S = 30.0
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def site() -> Iterator[Site]:
    with serve_site() as served:
        yield served


def descendants(root: int) -> dict[int, str]:
    """pid -> command line of every process below ``root`` (from /proc)."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        commands[int(entry)] = cmd
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        current = frontier.pop()
        for pid, parent in parents.items():
            if parent == current and pid not in found:
                found[pid] = commands[pid]
                frontier.append(pid)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def config_text(site: Site, extra: str = "") -> str:
    return f"""
[builtins.browser]
enabled = true
base_url = "{site.origin}"
{extra}

[[grants]]
tool = "browser"
effects = {{ network = "allow" }}
"""


def test_sigkill_of_pincer_leaves_no_chromium(tmp_path: Path, site: Site) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(config_text(site))
    url = site.page("/kill", "<title>kill me</title>")
    program = textwrap.dedent(f"""
        import sys, anyio
        from pathlib import Path
        from pincer.core.values import CallRequest
        from pincer.service import Pincer

        async def main():
            async with Pincer.open(Path({str(home)!r}), secret_key=b"k" * 32, external=False, wasm=False) as p:
                r = await p.call(CallRequest(tool="browser", args={{"action": "navigate", "url": {url!r}}}))
                print("READY" if r.ok else f"FAILED {{r.error}}", flush=True)
                await anyio.sleep(600)

        anyio.run(main)
    """)
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], READY_TIMEOUT_S)
        assert ready, f"pincer did not navigate within {READY_TIMEOUT_S:g} s"
        line = child.stdout.readline().strip()  # the child prints once navigation is done (or failed)
        assert line == "READY", line
        chromium = {pid: cmd for pid, cmd in descendants(child.pid).items() if "chromium" in cmd}
        assert chromium, "no chromium process below pincer"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=READY_TIMEOUT_S)
        deadline = time.monotonic() + GONE_TIMEOUT_S
        while time.monotonic() < deadline and any(alive(pid) for pid in chromium):
            time.sleep(0.2)
        left = {pid: cmd[:120] for pid, cmd in chromium.items() if alive(pid)}
        assert left == {}, f"chromium left behind after SIGKILL: {left}"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()


async def test_an_idle_browser_closes_and_a_crashed_one_restarts(tmp_path: Path, site: Site) -> None:
    url = site.page("/idle", "<title>idle</title>")
    async with pincer_on(tmp_path / "home", config_text(site, "idle_timeout_s = 1")) as pincer:

        async def call(**args: Any) -> Any:
            return await pincer.call(CallRequest(tool="browser", args=args))

        assert (await call(action="navigate", url=url)).ok
        with anyio.fail_after(GONE_TIMEOUT_S):
            while (await call(action="status")).output["running"]:
                await anyio.sleep(0.5)
        # Started again on first use after the idle close; then Chromium is killed under it.
        assert (await call(action="navigate", url=url)).ok
        chromium = [pid for pid, cmd in descendants(os.getpid()).items() if "chromium" in cmd and "--type=" not in cmd]
        assert chromium
        for pid in chromium:
            os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(GONE_TIMEOUT_S):
            while any(alive(pid) for pid in chromium):
                await anyio.sleep(0.2)
            await anyio.sleep(0.5)
        again = await call(action="navigate", url=url)
        assert again.ok, again.error
        status = (await call(action="status")).output
        assert status["running"] and status["restarts"] == 1
