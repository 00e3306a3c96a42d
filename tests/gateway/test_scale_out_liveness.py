"""Liveness across machines: a gateway on "another machine" (its own home, ``[store] host_id``
naming another host, the same database) holds an idempotency claim, waits for an approval and
runs a run; it is SIGKILLed; the gateway on this machine takes each over once the dead one's
instance heartbeat is stale (``INSTANCE_STALE_S``), not after the claim's hour-long lease or the
approval's timeout.

Before issue 29's instance rows, an owner on another host could not be read at all: the claim
waited out its lease (an hour), and an approval's waiter was looked up as a pid on the wrong
machine.
"""

from __future__ import annotations

import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from pincer.gateway.tokens import load_or_create_token
from tests.backends import postgres_server
from tests.gateway.scale_out_support import Gateway, cli, gateways, rows, upgrade, wait_for

CALL_TIMEOUT_S = 60.0
OTHER_HOST = "machine-b"




class _Upstream:
    """A local HTTP server: the first ``GET /slow`` and every model request hang until the test
    ends; a later ``/slow`` answers at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen: list[str] = []
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                with upstream._lock:
                    upstream.seen.append(self.path)
                    first_slow = self.path == "/slow" and upstream.seen.count("/slow") == 1
                if first_slow or self.path.endswith("/chat/completions"):
                    upstream.release.wait(CALL_TIMEOUT_S * 2)
                body = b'{"ok": true}'
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the caller is gone (SIGKILLed)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def count(self, path: str) -> int:
        with self._lock:
            return sum(1 for seen in self.seen if seen.endswith(path))


@contextmanager
def _upstream() -> Iterator[_Upstream]:
    upstream = _Upstream()
    thread = threading.Thread(target=upstream.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield upstream
    finally:
        upstream.release.set()
        upstream.server.shutdown()
        upstream.server.server_close()
        thread.join(10)


def _config(url: str, upstream: str, host_id: str | None = None) -> str:
    host = f'host_id = "{host_id}"\n' if host_id else ""
    return f"""[store]
url = "{url}"
{host}
[network]
allow_private = true

[approvals]
timeout_s = 3600

[llm]
model = "hanging-model"
base_url = "{upstream}/v1"
max_retries = 0

[[grants]]
tool = "http"
effects = {{ network = "allow" }}
hosts = ["127.0.0.1"]

[triggers]
enabled = false
"""


def _in_thread(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_dead_gateway_on_another_machine_is_taken_over_after_its_heartbeat_goes_stale(tmp_path: Path) -> None:
    from pincer.store.instances import INSTANCE_STALE_S

    url = postgres_server().new_database()
    here, there = tmp_path / "here", tmp_path / "there"
    with _upstream() as upstream:
        here.mkdir()
        (here / "config.toml").write_text(_config(url, upstream.url))
        upgrade(here)
        token = load_or_create_token(here)
        assert cli(here, "audit", "verify", "--json").returncode == 0  # makes the audit and secret keys
        # Another machine: its own home with the same keys, token and config, but its own host id.
        shutil.copytree(here, there)
        (there / "config.toml").write_text(_config(url, upstream.url, host_id=OTHER_HOST))
        headers = {"Authorization": f"Bearer {token}"}
        slow = {"args": {"url": f"{upstream.url}/slow"}}

        with gateways([here, there]) as (a, b):
            client_errors: list[str] = []
            answered: list[str] = []

            def on_b(path: str, body: dict[str, Any], extra: dict[str, str] | None = None) -> None:
                try:
                    answer = httpx.post(
                        f"{b.url}{path}", json=body, headers={**headers, **(extra or {})}, timeout=CALL_TIMEOUT_S * 2
                    )
                    answered.append(answer.text)  # not expected: B dies first
                except httpx.HTTPError as exc:
                    client_errors.append(type(exc).__name__)  # B died under the call: failed at the client

            claim = _in_thread(lambda: on_b("/api/v1/tools/http/call", slow, {"Idempotency-Key": "slow-1"}))
            asking = _in_thread(lambda: on_b("/api/v1/tools/write_file/call", {"args": {"path": "asked.txt", "content": "x"}}))
            started = httpx.post(f"{b.url}/api/v1/runs", json={"message": "hello"}, headers=headers, timeout=CALL_TIMEOUT_S)
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]

            wait_for("B's slow call at the upstream", lambda: upstream.count("/slow") == 1, alive=[a, b])
            wait_for("B's run at the model", lambda: upstream.count("/chat/completions") >= 1, alive=[a, b])

            def pending_on_a() -> list[dict[str, Any]]:
                answer = httpx.get(f"{a.url}/api/v1/approvals", headers=headers, timeout=CALL_TIMEOUT_S)
                assert answer.status_code == 200, answer.text
                found: list[dict[str, Any]] = answer.json()["approvals"]
                return found

            approval = wait_for(
                "B's approval, listed on A", lambda: ((p := pending_on_a()) and p[0]) or (answered and answered[0]), alive=[a, b]
            )
            assert not answered, f"B answered a call that should be waiting: {answered}"
            # B's rows name B's host; while B beats, A leaves them alone (A cannot read B's pid).
            ((waiter,),) = rows(url, "SELECT waiter FROM approvals WHERE id = %s", (approval["id"],))
            ((claimed_by,),) = rows(url, "SELECT claimed_by FROM idempotency WHERE key = 'slow-1'")
            ((run_owner,),) = rows(url, "SELECT owner FROM runs WHERE id = %s", (run_id,))
            instance = rows(url, "SELECT id, host, pid FROM pincer_instances WHERE host = %s", (OTHER_HOST,))
            assert [(host, pid) for _id, host, pid in instance] == [(OTHER_HOST, b.pid)]
            assert waiter == claimed_by == run_owner == instance[0][0] == f"{OTHER_HOST}/{b.pid}:{_start(b)}"
            assert [r["id"] for r in pending_on_a()] == [approval["id"]]
            assert httpx.get(f"{a.url}/api/v1/runs/{run_id}", headers=headers).json()["status"] == "running"

            b.process.send_signal(signal.SIGKILL)
            assert b.process.wait(timeout=20) == -signal.SIGKILL
            alive = [a]

            # The claim: the same key on A waits for B's claim, then takes it over and runs the call.
            answer = httpx.post(
                f"{a.url}/api/v1/tools/http/call", json=slow, headers={**headers, "Idempotency-Key": "slow-1"},
                timeout=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert answer.status_code == 200 and answer.json()["ok"] is True, answer.text
            assert upstream.count("/slow") == 2  # run again: nothing had completed on B
            # The approval: expired, since nobody waits for it any more (its timeout is an hour).
            wait_for("B's approval to expire on A", lambda: not pending_on_a(), alive=alive, timeout_s=CALL_TIMEOUT_S)
            shown = httpx.get(f"{a.url}/api/v1/approvals/{approval['id']}", headers=headers).json()
            assert shown["status"] == "expired", shown
            # The run: failed as orphaned.
            run = wait_for(
                "B's run to be settled on A",
                lambda: (r := httpx.get(f"{a.url}/api/v1/runs/{run_id}", headers=headers).json())["status"] != "running" and r,
                alive=alive, timeout_s=CALL_TIMEOUT_S,
            )  # fmt: skip
            assert run["status"] == "failed" and run["error"]["code"] == "run_orphaned", run
            # B's instance row is stale now, A's still beats.
            stale = rows(
                url, "SELECT host, heartbeat_at < EXTRACT(EPOCH FROM clock_timestamp()) - %s FROM pincer_instances "
                "WHERE stopped_at IS NULL ORDER BY host", (INSTANCE_STALE_S,),
            )  # fmt: skip
            assert (OTHER_HOST, True) in stale and any(not is_stale for host, is_stale in stale if host != OTHER_HOST)
        claim.join(CALL_TIMEOUT_S)
        asking.join(CALL_TIMEOUT_S)
        assert len(client_errors) == 2, client_errors


def _start(gateway: Gateway) -> str:
    from pincer.store.owners import process_token

    return process_token(gateway.pid).partition(":")[2]
