"""An open approvals page never re-reads the approvals table on a timer (issue 35 item 4).

Before, each open page's event stream read every approval every 0.2 s on the gateway's loop
(267 ms a read at 10,000 rows: one tab held every call back). Now the stream follows the store's
notifications: LISTEN/NOTIFY on PostgreSQL (every process's changes), the in-process signal on
SQLite plus, for other processes' writes there, the ids of the open requests. Real ``pincer
serve`` processes on a SQLite home and on a real PostgreSQL; the table reads are PostgreSQL's own
statistics (``pg_stat_user_tables``), not anything pincer reports about itself.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg

from tests.backends import postgres_server
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import CLI_TIMEOUT_S, WAIT_S, cli_env, sign_in, waiting_call

IDLE_S = 3.0  # how long the idle page is watched (PostgreSQL flushes a backend's statistics within 1 s)
SETTLE_S = 1.5  # the stream's first read reaches the statistics within this
PINCER = ".venv/bin/pincer"


def _postgres_home(tmp_path: Path) -> tuple[Path, str]:
    url = postgres_server().new_database()
    home = tmp_path / "home"
    home.mkdir()
    # No pruning: the gateway's hourly prune (which runs at start too) reads the approvals table
    # once; what is measured here is the page alone.
    (home / "config.toml").write_text(
        f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n\n[retention]\napprovals_days = 0\n'
    )
    done = subprocess.run([PINCER, "db", "upgrade", "--json"], capture_output=True, text=True, env=cli_env(home),
                          timeout=CLI_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return home, url


def _approvals_reads(url: str) -> int:
    """Scans of the approvals table so far, by every backend (PostgreSQL's statistics)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'approvals'"
        ).fetchone()
    assert row is not None, "no approvals table in the store"
    return int(row[0])


@contextmanager
def _event_lines(http: httpx.Client) -> Iterator[queue.Queue[str]]:
    """The lines of ``/ui/approvals/events``, read on a thread of their own, once the stream is open."""
    lines: queue.Queue[str] = queue.Queue()
    opened = threading.Event()
    stop = threading.Event()

    def read() -> None:
        try:
            with http.stream("GET", "/ui/approvals/events") as stream:
                if stream.status_code != 200:
                    lines.put(f"status {stream.status_code}")
                    return
                opened.set()
                for line in stream.iter_lines():
                    lines.put(line)
                    if stop.is_set():
                        return
        except httpx.HTTPError:
            return  # the gateway stopped under the open stream (the test's end)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert opened.wait(WAIT_S), "the approvals event stream did not open"
    try:
        yield lines
    finally:
        stop.set()


def _next_approvals_event(lines: queue.Queue[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if lines.get(timeout=max(0.0, deadline - time.monotonic())) == "event: approvals":
                return
        except queue.Empty:
            break
    raise AssertionError(f"no 'approvals' event on the page's stream within {WAIT_S} s of a new request")


def test_an_idle_approvals_page_reads_no_table_and_hears_another_process_on_postgresql(
    tmp_path: Path, stopped_calls: list
) -> None:
    home, url = _postgres_home(tmp_path)
    with (
        pincer_serve(home) as server,
        httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http,
    ):
        assert sign_in(http, server.token).status_code == 303
        with _event_lines(http) as lines:
            time.sleep(SETTLE_S)
            before = _approvals_reads(url)
            time.sleep(IDLE_S)
            after = _approvals_reads(url)
            assert after == before, (
                f"an idle approvals page read the approvals table {after - before} times in {IDLE_S} s"
            )
            # A call asking from another process (the CLI) reaches the page by NOTIFY.
            call = waiting_call(home, "write_file", '{"path": "x.txt", "content": "x"}')
            stopped_calls.append(call)
            _next_approvals_event(lines)
        rows = http.get("/ui/approvals/rows").text
        pending = json.loads(subprocess.run([PINCER, "approvals", "list", "--json"], capture_output=True, text=True,
                                            env=cli_env(home), timeout=CLI_TIMEOUT_S).stdout)["approvals"]  # fmt: skip
        assert pending and f'id="approval-{pending[0]["id"]}"' in rows


def test_a_request_made_in_the_gateway_reaches_the_page_by_its_signal_on_sqlite(dashboard_home: Path) -> None:
    """The gateway's own request (a REST call that asks) wakes the page through SQLite's
    in-process signal; the page then shows it."""
    with pincer_serve(dashboard_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False,
                                                              timeout=WAIT_S) as http:  # fmt: skip
        assert sign_in(http, server.token).status_code == 303
        with _event_lines(http) as lines:
            asking = threading.Thread(target=_rest_call_that_asks, args=(server.info["url"], server.token), daemon=True)
            asking.start()
            _next_approvals_event(lines)
        rows = http.get("/ui/approvals/rows").text
        assert "write_file" in rows and "approval-" in rows


def _rest_call_that_asks(url: str, token: str) -> None:
    with httpx.Client(base_url=url, trust_env=False, timeout=WAIT_S,
                      headers={"Authorization": f"Bearer {token}"}) as http:  # fmt: skip
        try:
            http.post("/api/v1/tools/write_file/call", json={"args": {"path": "y.txt", "content": "y"}})
        except httpx.HTTPError:
            pass  # the call waits for an answer nobody gives; the gateway stops under it


def test_verify_chain_walks_on_from_the_last_verify_and_verify_every_record_walks_all(dashboard_home: Path) -> None:
    """The dashboard's two verify buttons: the first walks only what came after the last intact
    verify (its signed mark), the second every record, so only it sees an edit before the mark."""
    from tests.gateway.ui.conftest import csrf_of, tamper_audit

    for text in ("a", "b"):
        done = subprocess.run([PINCER, "tools", "call", "echo", "--args", json.dumps({"text": text})],
                              capture_output=True, text=True, env=cli_env(dashboard_home), timeout=CLI_TIMEOUT_S)  # fmt: skip
        assert done.returncode == 0, done.stderr
    with pincer_serve(dashboard_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False,
                                                              timeout=WAIT_S) as http:  # fmt: skip
        assert sign_in(http, server.token).status_code == 303
        csrf = csrf_of(http.get("/ui/audit").text)
        first = http.post("/ui/audit/verify", data={"csrf_token": csrf})
        assert first.status_code == 200 and "Chain intact" in first.text
        tamper_audit(dashboard_home, 1)
        since = http.post("/ui/audit/verify", data={"csrf_token": csrf})
        assert since.status_code == 200 and "from the last verified one" in since.text
        every = http.post("/ui/audit/verify", data={"csrf_token": csrf, "full": "1"})
        assert every.status_code == 409 and "Chain broken" in every.text and "audit record 1 was altered" in every.text
