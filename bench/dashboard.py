"""How soon a call that asks shows on the dashboard's approvals page, next to polling the CLI.

    .venv/bin/python bench/dashboard.py [--rounds 10]

One ``pincer serve`` on a throwaway PINCER_HOME. Each round starts ``pincer tools call
write_file`` (it asks), and two watchers note when they first see the request: the approvals
page, signed in, following ``/ui/approvals/events`` (server-sent events) and fetching its rows
when told; and ``pincer approvals list --json`` run again and again, as a person or a script
polling the CLI would. Both are timed from the request's ``created_at``; then the request is
denied over REST and the next round starts. Printed: p50 and p95 of each, and their ratio
(target, issue 26: the page is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._stats import percentile  # noqa: E402
from tests.gateway.conftest import pincer_serve  # noqa: E402

ROUND_TIMEOUT_S = 60.0
CLI_TIMEOUT_S = 60.0
PINCER = [sys.executable, "-m", "pincer.cli"]
_ROW_ID = re.compile(r'id="approval-([0-9a-f]+)"')


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return env


class Seen:
    """When each watcher first saw each approval id (time.time(), comparable with created_at)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.page: dict[str, float] = {}
        self.cli: dict[str, float] = {}

    def note(self, table: dict[str, float], ids: list[str]) -> None:
        now = time.time()
        with self.lock:
            for approval_id in ids:
                table.setdefault(approval_id, now)


def watch_page(url: str, token: str, seen: Seen, stop: threading.Event) -> None:
    with httpx.Client(base_url=url, trust_env=False, timeout=ROUND_TIMEOUT_S) as http:
        form = http.get("/ui/login").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert csrf, "no login form"
        http.post("/ui/login", data={"token": token, "csrf_token": csrf.group(1)})
        try:
            with http.stream("GET", "/ui/approvals/events") as stream:
                for line in stream.iter_lines():
                    if stop.is_set():
                        return
                    if line == "event: approvals":
                        rows = http.get("/ui/approvals/rows", headers={"HX-Request": "true"}).text
                        seen.note(seen.page, _ROW_ID.findall(rows.split("Answered and expired")[0]))
        except httpx.HTTPError:
            if not stop.is_set():  # the server going away at the end is not an error
                raise


def watch_cli(home: Path, seen: Seen, stop: threading.Event) -> None:
    while not stop.is_set():
        listed = subprocess.run([*PINCER, "approvals", "list", "--json"], capture_output=True, text=True,
                                env=_env(home), timeout=CLI_TIMEOUT_S)  # fmt: skip
        if listed.returncode == 0:
            seen.note(seen.cli, [a["id"] for a in json.loads(listed.stdout)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    home = Path(tempfile.mkdtemp(prefix="pincer-bench-dashboard-"))
    page_s: list[float] = []
    cli_s: list[float] = []
    try:
        with pincer_serve(home) as server:
            url, token = server.info["url"], server.token
            api = httpx.Client(base_url=url, trust_env=False, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            seen, stop = Seen(), threading.Event()
            watchers = [threading.Thread(target=watch_page, args=(url, token, seen, stop), daemon=True),
                        threading.Thread(target=watch_cli, args=(home, seen, stop), daemon=True)]  # fmt: skip
            for watcher in watchers:
                watcher.start()
            time.sleep(1.0)  # both watchers running before the first round
            for n in range(rounds):
                call = subprocess.Popen([*PINCER, "tools", "call", "write_file", "--args",
                                         json.dumps({"path": f"b{n}.txt", "content": "x"}), "--json"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(home))  # fmt: skip
                deadline = time.monotonic() + ROUND_TIMEOUT_S
                approval_id = None
                while time.monotonic() < deadline:
                    pending = api.get("/api/v1/approvals").json()["approvals"]
                    if pending:
                        approval_id = pending[0]["id"]
                        created = pending[0]["created_at"]
                        with seen.lock:
                            done = approval_id in seen.page and approval_id in seen.cli
                        if done:
                            break
                    time.sleep(0.05)
                if approval_id is None or approval_id not in seen.page or approval_id not in seen.cli:
                    raise SystemExit(f"round {n}: the request was not seen by both within {ROUND_TIMEOUT_S} s")
                page_s.append(seen.page[approval_id] - created)
                cli_s.append(seen.cli[approval_id] - created)
                api.post(f"/api/v1/approvals/{approval_id}", json={"decision": "deny"})
                call.wait(timeout=CLI_TIMEOUT_S)
            stop.set()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    page_p50, cli_p50 = statistics.median(page_s), statistics.median(cli_s)
    print(f"{'watcher':<40} {'p50 ms':>9} {'p95 ms':>9}")
    print(f"{'approvals page (SSE)':<40} {page_p50 * 1e3:>9.0f} {percentile(page_s, 95) * 1e3:>9.0f}")
    print(f"{'pincer approvals list, polled':<40} {cli_p50 * 1e3:>9.0f} {percentile(cli_s, 95) * 1e3:>9.0f}")
    print(f"page / polling, p50: {page_p50 / cli_p50:.2f} (target < 1: the page is faster); {rounds} rounds")


if __name__ == "__main__":
    main()
