"""How soon a call that asks shows on the dashboard's approvals page, next to polling the REST API.

    .venv/bin/python bench/dashboard.py [--rounds 10]

One ``pincer serve`` on a throwaway PINCER_HOME. Each round starts ``pincer tools call
write_file`` (it asks), and two watchers note when they first see the request: the approvals
page, signed in, following ``/ui/approvals/events`` (server-sent events) and fetching its rows
when told; and two long-lived HTTP clients (one keep-alive connection each) polling
``GET /api/v1/approvals`` as a script would: one back to back (the most a poller can get out of
the server) and one every ``SLOW_POLL_S`` (0.2 s: as often as the page's stream read the store
before it followed the store's notifications). All are timed from the request's ``created_at``; then the request is denied over
REST and the next round starts. Printed: p50 and p95 of each, and the page's p50 over each
poller's (target, issue 26: the page is not slower than polling).
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
SLOW_POLL_S = 0.2
POLL_INTERVALS_S = (0.0, SLOW_POLL_S)  # back to back, and as often as the page's stream once did
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
        self.polls: dict[float, dict[str, float]] = {interval: {} for interval in POLL_INTERVALS_S}

    def all_saw(self, approval_id: str) -> bool:
        return approval_id in self.page and all(approval_id in table for table in self.polls.values())

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


def watch_api(url: str, token: str, interval_s: float, seen: Seen, stop: threading.Event) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, trust_env=False, headers=headers, timeout=ROUND_TIMEOUT_S) as http:
        while not stop.is_set():
            try:
                listed = http.get("/api/v1/approvals")
            except httpx.HTTPError:
                if stop.is_set():  # the server going away at the end is not an error
                    return
                raise
            if listed.status_code == 200:
                seen.note(seen.polls[interval_s], [a["id"] for a in listed.json()["approvals"]])
            if interval_s:
                stop.wait(interval_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    rounds = parser.parse_args().rounds
    home = Path(tempfile.mkdtemp(prefix="pincer-bench-dashboard-"))
    page_s: list[float] = []
    poll_s: dict[float, list[float]] = {interval: [] for interval in POLL_INTERVALS_S}
    try:
        with pincer_serve(home) as server:
            url, token = server.info["url"], server.token
            api = httpx.Client(base_url=url, trust_env=False, headers={"Authorization": f"Bearer {token}"}, timeout=30)
            seen, stop = Seen(), threading.Event()
            watchers = [threading.Thread(target=watch_page, args=(url, token, seen, stop), daemon=True)]
            watchers += [threading.Thread(target=watch_api, args=(url, token, interval, seen, stop), daemon=True)
                         for interval in POLL_INTERVALS_S]  # fmt: skip
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
                            done = seen.all_saw(approval_id)
                        if done:
                            break
                    time.sleep(0.05)
                if approval_id is None or not seen.all_saw(approval_id):
                    raise SystemExit(f"round {n}: the request was not seen by every watcher within {ROUND_TIMEOUT_S} s")
                page_s.append(seen.page[approval_id] - created)
                for interval, table in seen.polls.items():
                    poll_s[interval].append(table[approval_id] - created)
                api.post(f"/api/v1/approvals/{approval_id}", json={"decision": "deny"})
                call.wait(timeout=CLI_TIMEOUT_S)
            stop.set()
    finally:
        shutil.rmtree(home, ignore_errors=True)
    page_p50 = statistics.median(page_s)
    print(f"{'watcher':<52} {'p50 ms':>9} {'p95 ms':>9} {'page p50 / this':>16}")
    print(f"{'approvals page (SSE)':<52} {page_p50 * 1e3:>9.0f} {percentile(page_s, 95) * 1e3:>9.0f}")
    for interval, samples in poll_s.items():
        polled = "back to back" if not interval else f"every {interval:g} s"
        label = f"GET /api/v1/approvals, one client, {polled}"
        p50 = statistics.median(samples)
        print(f"{label:<52} {p50 * 1e3:>9.0f} {percentile(samples, 95) * 1e3:>9.0f} {page_p50 / p50:>15.2f}x")
    print(f"target <= 1x: the page is not slower than polling; {rounds} rounds")


if __name__ == "__main__":
    main()
