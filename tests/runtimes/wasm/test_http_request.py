"""``http-request`` from real guests against a real HTTP server on 127.0.0.1:0: allowlist, SSRF,
credential injection, leak scans, limits. The loopback server is reachable only because these
runtimes set ``allow_loopback_http``; the default-configuration tests show it is refused."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from pincer.core.errors import ToolTimeout
from pincer.core.values import HostContext
from pincer.runtimes.wasm import abi
from pincer.runtimes.wasm.limits import WasmLimits
from pincer.safety.scanner import LeakScanner
from pincer.secrets.access import SecretAccess
from pincer.secrets.store import SecretStore

pytestmark = pytest.mark.anyio

CALL_TIMEOUT_S = 30.0
SLOW_ENDPOINT_S = 20.0  # far past every timeout under test; handler threads are daemons
BLOCK_WAIT_S = 20.0  # how long /block holds a request at most (the test releases it sooner)
POLL_S = 0.01
SECRET = "s3cr3t-" + "7f1c9a0e4b2d6f83"  # a value with no well-known shape: caught by value
GITHUB_SHAPED = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # caught by shape


@dataclass
class Seen:
    requests: list[dict[str, Any]] = field(default_factory=list)


class Handler(BaseHTTPRequestHandler):
    seen: Seen

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        record = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        self.server.seen.requests.append(record)  # type: ignore[attr-defined]
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/slow"):
            time.sleep(SLOW_ENDPOINT_S)
        if self.path.startswith("/block"):
            self.server.release.wait(BLOCK_WAIT_S)  # type: ignore[attr-defined]
        if self.path.startswith("/big"):
            payload = b"x" * 5000
        elif self.path.startswith("/body"):
            payload = body
        else:  # echo what arrived, the injected credential included: the host must scrub it
            payload = json.dumps({"method": self.command, "path": self.path,
                                  "authorization": self.headers.get("Authorization"), "length": len(body)}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("X-Echo-Authorization", self.headers.get("Authorization") or "-")
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, Seen]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True  # a handler still sleeping must not hold up the teardown
    httpd.seen = Seen()  # type: ignore[attr-defined]
    httpd.release = threading.Event()  # type: ignore[attr-defined]
    Handler.release = httpd.release  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", httpd.seen  # type: ignore[attr-defined]
    httpd.release.set()  # type: ignore[attr-defined]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SecretStore]:
    secrets = SecretStore.open(tmp_path / "secrets", key=os.urandom(32))
    secrets.set("api_token", SECRET)
    yield secrets
    secrets.close()


def http_caps(hosts=("127.0.0.1",), **extra: Any) -> dict[str, Any]:
    http = {"allowlist": [{"host": h, "path_prefix": "/", "methods": ["GET", "POST"]} for h in hosts]}
    http.update(extra.pop("http", {}))
    return {"http": http, **extra}


BEARER = {"api": {"secret_name": "api_token", "location": {"type": "bearer"}, "host_patterns": ["127.0.0.1"]}}


async def make(wasm_runtime, store: SecretStore, tools: dict, limits: WasmLimits | None = None):
    limits = limits or WasmLimits(allow_loopback_http=True)
    return await wasm_runtime(tools, limits, scanner=lambda: LeakScanner(store.values()))


async def call(runtime, store: SecretStore, name: str, args: dict, **host_kwargs: Any):
    spec = next(s for s in runtime.tools() if s.name == name)
    access = SecretAccess(store, lambda name: allowed(spec.capabilities, name))
    host = HostContext(session="main", tool=name, timeout_s=host_kwargs.pop("timeout_s", CALL_TIMEOUT_S),
                       capabilities=spec.capabilities, secrets=access, **host_kwargs)  # fmt: skip
    return await runtime.invoke(spec, args, host), access


def allowed(caps: Any, name: str) -> bool:
    """What a tool may resolve: names it may ask about, and the secrets its credentials inject."""
    if caps is None:
        return False
    credentials = caps.http.credentials if caps.http is not None else ()
    return caps.is_secret_allowed(name) or any(c.secret_name == name for c in credentials)


def everything(out) -> str:
    return json.dumps([out.value, out.logs, out.content])


async def test_a_host_outside_the_allowlist_is_refused(wasm_runtime, store, server):
    url, seen = server
    runtime = await make(wasm_runtime, store, {"fetch": http_caps(hosts=("api.example.com",))})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/x"})
    assert out.is_error and "not in the allowlist" in out.value
    out, _ = await call(runtime, store, "fetch", {"url": "https://evil.example.net/"})
    assert out.is_error and "'evil.example.net' is not in the allowlist (allowed: api.example.com)" in out.value
    out, _ = await call(runtime, store, "fetch", {"url": "https://api.example.com/x", "method": "DELETE"})
    assert out.is_error and "method DELETE is not allowed" in out.value
    out, _ = await call(runtime, store, "fetch", {"url": "https://user@api.example.com/"})
    assert out.is_error and "userinfo" in out.value.lower()
    assert seen.requests == []


async def test_loopback_and_metadata_addresses_are_refused_by_default(wasm_runtime, store, server):
    url, seen = server
    port = url.rsplit(":", 1)[1]
    caps = http_caps(hosts=("127.0.0.1", "169.254.169.254", "localhost"))
    runtime = await make(wasm_runtime, store, {"fetch": caps}, WasmLimits())  # the default configuration
    for target, why in [
        (f"{url}/x", "https only"),
        (f"https://127.0.0.1:{port}/x", "127.0.0.1 is"),
        ("https://169.254.169.254/latest/meta-data/", "169.254.169.254 is"),
        (f"https://localhost:{port}/x", "is"),
    ]:
        out, _ = await call(runtime, store, "fetch", {"url": target})
        assert out.is_error and "refused" in out.value and why in out.value, (target, out.value)
    assert seen.requests == []


async def test_metadata_stays_refused_even_with_the_loopback_test_setting(wasm_runtime, store):
    runtime = await make(wasm_runtime, store, {"fetch": http_caps(hosts=("169.254.169.254",))})
    out, _ = await call(runtime, store, "fetch", {"url": "http://169.254.169.254/latest/meta-data/"})
    assert out.is_error and "refused" in out.value


async def test_credential_is_injected_yet_a_guest_that_echoes_everything_shows_no_secret(
    wasm_runtime, store, server, tmp_path
):
    url, seen = server
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "a.txt").write_text(f"token is {SECRET}")
    caps = http_caps(http={"credentials": BEARER}, secrets={"allowed_names": ["api_token"]},
                     workspace={"allowed_prefixes": ["notes/"]})  # fmt: skip
    runtime = await make(wasm_runtime, store, {"secret_echo": caps})
    out, access = await call(
        runtime, store, "secret_echo",
        {"url": f"{url}/who", "secret_names": ["api_token", "missing_one", "other"], "paths": ["notes/a.txt"]},
        workspace=workspace,
    )  # fmt: skip
    assert not out.is_error, out.value
    (request,) = seen.requests
    assert request["headers"]["Authorization"] == f"Bearer {SECRET}"  # the server got the credential
    text = everything(out)
    assert SECRET not in text  # ... and nothing the guest saw or returned holds it
    assert (
        "[REDACTED" in out.value["http"]["body"] and "[REDACTED" in out.value["http"]["headers"]["X-Echo-Authorization"]
    )
    assert out.value["secrets"] == {"api_token": True, "missing_one": False, "other": False}
    assert "[REDACTED" in out.value["files"]["notes/a.txt"]
    assert SECRET in access.injected  # the dispatcher scans the final output with these too


async def test_a_secret_shaped_value_in_the_url_for_an_allowed_host_is_blocked(wasm_runtime, store, server):
    url, seen = server
    runtime = await make(wasm_runtime, store, {"fetch": http_caps()})
    for args in (
        {"url": f"{url}/collect?key={GITHUB_SHAPED}"},
        {"url": f"{url}/collect/{SECRET}"},
        {"url": f"{url}/collect", "headers": {"X-Data": SECRET}},
        {"url": f"{url}/collect", "method": "POST", "body": f"stolen={SECRET}"},
    ):
        out, _ = await call(runtime, store, "fetch", args)
        assert out.is_error and "request blocked" in out.value, out.value
        assert SECRET not in out.value and GITHUB_SHAPED not in out.value
    assert seen.requests == []


async def test_url_path_placeholder_is_filled_host_side_and_errors_are_redacted(wasm_runtime, store, server):
    url, seen = server
    creds = {"bot": {"secret_name": "api_token", "location": {"type": "url_path", "placeholder": "{TOKEN}"},
                     "host_patterns": ["127.0.0.1"]}}  # fmt: skip
    runtime = await make(wasm_runtime, store, {"fetch": http_caps(http={"credentials": creds})})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/bot{{TOKEN}}/send"})
    assert not out.is_error, out.value
    assert seen.requests[0]["path"] == f"/bot{SECRET}/send"
    assert SECRET not in everything(out)
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/bot{{NOPE}}/send"})
    assert out.is_error and "placeholder {NOPE} is not declared" in out.value
    # a connection failure after injection: the message names the URL, the secret is scrubbed
    out, _ = await call(runtime, store, "fetch", {"url": "http://127.0.0.1:9/bot{TOKEN}/send"})
    assert out.is_error and SECRET not in out.value


async def test_redirects_are_not_followed(wasm_runtime, store, server):
    url, seen = server
    runtime = await make(wasm_runtime, store, {"fetch": http_caps()})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/redirect"})
    assert out.value["status"] == 302 and len(seen.requests) == 1


async def test_the_manifests_rate_limit_applies(wasm_runtime, store, server):
    url, seen = server
    caps = http_caps(http={"rate_limit": {"requests_per_minute": 3, "requests_per_hour": 100}})
    runtime = await make(wasm_runtime, store, {"fetch": caps})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/r", "repeat": 5})
    assert len(seen.requests) == 3
    assert len(out.value["refusals"]) == 2 and "3 calls per minute" in out.value["refusals"][0]


async def test_at_most_50_requests_per_execution(wasm_runtime, store, server):
    url, seen = server
    runtime = await make(wasm_runtime, store, {"fetch": http_caps(http={"rate_limit": {"requests_per_minute": 1000}})})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/r", "repeat": 53})
    assert len(seen.requests) == 50
    assert out.value["refusals"] == ["more than 50 HTTP requests in one execution"] * 3


async def test_request_and_response_size_limits(wasm_runtime, store, server):
    url, _seen = server
    caps = http_caps(http={"max_request_bytes": 2000, "max_response_bytes": 1000})
    runtime = await make(wasm_runtime, store, {"fetch": caps})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/body", "method": "POST", "body_bytes": 5000})
    assert out.is_error and "max_request_bytes" in out.value
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/big"})
    assert out.is_error and "larger than 1,000 bytes" in out.value


async def test_timeout_ms_and_the_execution_deadline_bound_a_request(wasm_runtime, store, server):
    url, _ = server
    runtime = await make(wasm_runtime, store, {"fetch": http_caps()})
    started = time.monotonic()
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/slow", "timeout_ms": 200})
    assert out.is_error and ("took longer" in out.value or "timed out" in out.value)
    assert time.monotonic() - started < SLOW_ENDPOINT_S
    started = time.monotonic()
    try:  # the request is cut at the deadline; the guest may or may not get to run after it
        out, _ = await call(runtime, store, "fetch", {"url": f"{url}/slow"}, timeout_s=0.5)
        assert out.is_error
    except ToolTimeout as exc:
        assert "deadline of 0.5 s" in exc.message
    assert time.monotonic() - started < SLOW_ENDPOINT_S


async def test_a_grant_narrows_the_declared_allowlist(wasm_runtime, store, server):
    url, seen = server
    runtime = await make(wasm_runtime, store, {"fetch": http_caps()})
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/x"}, network_hosts=("api.example.com",))
    assert out.is_error and "not in the allowlist (allowed: api.example.com)" in out.value
    assert seen.requests == []


async def test_a_one_megabyte_body_round_trip_is_identical_with_and_without_the_fast_path(wasm_runtime, store, server):
    url, seen = server
    caps = http_caps(http={"max_request_bytes": 2_000_000, "max_response_bytes": 2_000_000})
    runtime = await make(wasm_runtime, store, {"fetch": caps})
    size = 1_000_000
    out, _ = await call(runtime, store, "fetch", {"url": f"{url}/body", "method": "POST", "body_bytes": size})
    expected = (bytes(range(251)) * (size // 251 + 1))[:size]
    assert seen.requests[-1]["body"] == expected
    assert out.value["length"] == size
    fast_sha = out.value["sha256"]
    small = 50_000  # the element-by-element path costs ~2 us a byte: keep it small
    previous = abi.set_fast_bytes(False)
    try:
        slow, _ = await call(runtime, store, "fetch", {"url": f"{url}/body", "method": "POST", "body_bytes": small})
    finally:
        abi.set_fast_bytes(previous)
    fast, _ = await call(runtime, store, "fetch", {"url": f"{url}/body", "method": "POST", "body_bytes": small})
    assert slow.value["sha256"] == fast.value["sha256"] and slow.value["length"] == small
    assert fast_sha != fast.value["sha256"]


async def test_workspace_read_stays_inside_allowed_prefixes(wasm_runtime, wasm_components, store, tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "notes" / "deep").mkdir(parents=True)
    (workspace / "private").mkdir()
    (workspace / "notes" / "a.txt").write_text("alpha")
    (workspace / "notes" / "deep" / "b.txt").write_text("beta")
    (workspace / "private" / "c.txt").write_text("gamma")
    (tmp_path / "outside.txt").write_text("outside")
    (workspace / "notes" / "link.txt").symlink_to(tmp_path / "outside.txt")
    caps = {"workspace": {"allowed_prefixes": ["notes/"]}}
    runtime = await make(wasm_runtime, store, {"secret_echo": caps})
    paths = ["notes/a.txt", "notes/deep/b.txt", "./notes/a.txt", "private/c.txt", "notes/../private/c.txt",
             "/etc/passwd", "notes/link.txt", "notes/missing.txt", "notes", ""]  # fmt: skip
    out, _ = await call(runtime, store, "secret_echo", {"paths": paths}, workspace=workspace)
    files = out.value["files"]
    assert files["notes/a.txt"] == "alpha" and files["notes/deep/b.txt"] == "beta" and files["./notes/a.txt"] == "alpha"
    for refused in paths[3:]:
        assert files[refused] is None, refused
    await runtime.install(wasm_components["secret_echo"], name="no_caps")  # no workspace section
    out, _ = await call(runtime, store, "no_caps", {"paths": ["notes/a.txt"]}, workspace=workspace)
    assert out.value["files"] == {"notes/a.txt": None}


async def wait_for_requests(seen: Seen, count: int) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        while len(seen.requests) < count:
            await anyio.sleep(POLL_S)


@pytest.mark.parametrize("workers", [1, 2])
async def test_executions_share_a_pool_of_worker_threads(wasm_runtime, store, server, workers):
    """A call blocked in the host (its request held by the server) keeps one worker busy: with two
    workers another call completes meanwhile, with one it waits for the slot."""
    url, seen = server
    limits = WasmLimits(allow_loopback_http=True, workers=workers)
    runtime = await make(wasm_runtime, store, {"fetch": http_caps(), "echo": None}, limits)
    done: list[str] = []

    async def blocked() -> None:
        await call(runtime, store, "fetch", {"url": f"{url}/block"})
        done.append("blocked")

    async def quick() -> None:
        await call(runtime, store, "echo", {"x": 1})
        done.append("quick")

    async with anyio.create_task_group() as tg:
        tg.start_soon(blocked)
        await wait_for_requests(seen, 1)
        tg.start_soon(quick)
        if workers == 2:
            with anyio.fail_after(CALL_TIMEOUT_S):
                while not done:
                    await anyio.sleep(POLL_S)
            assert done == ["quick"]  # finished while the other call still held its worker
        else:
            await wait_all_tasks_blocked()  # quick is queued for the only worker
            assert done == []
        Handler.release.set()  # type: ignore[attr-defined]
    assert done == (["quick", "blocked"] if workers == 2 else ["blocked", "quick"])
