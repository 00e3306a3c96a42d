"""The browser built-in (navigate + snapshot through the call chain) next to raw Playwright doing
the same in the same run.

    .venv/bin/python bench/browser.py

A local page on 127.0.0.1 (a heading, a form, a table of 50 rows, 50 links). In the same run:

- baseline: Playwright for Python on Debian's chromium, no proxy: ``page.goto(url)`` then
  ``page.aria_snapshot(mode="ai")``;
- chain: ``Pincer.call(browser navigate)`` then ``Pincer.call(browser snapshot)``: resolve, grant,
  schema check, the session's context, every request through pincer's egress proxy (host and
  address checks, one request per connection), the snapshot with its refs, output bounds, the
  leak scan and two audit records in SQLite.

p50 of each pair over N rounds after a warm-up, interleaved so a shared machine's load falls on
both alike; the target from issue 27 is chain <= 1.3x.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from _stats import percentile
from pincer.builtins.browser.launcher import CHROMIUM, CHROMIUM_ARGS
from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.service import Pincer

N = 60
WARMUP = 10
TARGET_RATIO = 1.3

ROWS = "".join(
    f"<tr><td>item {i}</td><td>{i * 3}</td><td><a href='/item/{i}'>open {i}</a></td></tr>" for i in range(50)
)
PAGE = f"""<!doctype html><html><head><title>Bench page</title></head><body>
<h1>Orders</h1><form><label>Search <input name=q></label><label>Status <select name=s><option>open</option>
<option>closed</option></select></label><button type=submit>Find</button></form>
<table><thead><tr><th>name</th><th>amount</th><th>link</th></tr></thead><tbody>{ROWS}</tbody></table>
</body></html>""".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        body = PAGE if self.path.startswith("/page") else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return


async def _interleaved(a: Any, b: Any) -> tuple[list[float], list[float]]:
    for _ in range(WARMUP):
        await a()
        await b()
    first: list[float] = []
    second: list[float] = []
    for _ in range(N):
        for fn, samples in ((a, first), (b, second)):
            t0 = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - t0) * 1e6)
    return first, second


async def main() -> int:
    from playwright.async_api import async_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    url = f"{origin}/page"
    text = f"""
[builtins.browser]
enabled = true
base_url = "{origin}"

[[grants]]
tool = "browser"
effects = {{ network = "allow" }}
"""
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), chromium_sandbox=False
            )
            page = await browser.new_page()

            async def raw() -> None:
                await page.goto(url, wait_until="load")
                await page.aria_snapshot(mode="ai")

            with tempfile.TemporaryDirectory() as tmp:
                home = Path(tmp)
                config = parse_config(text, home=home)
                async with Pincer.open(
                    home, config=config, secret_key=b"k" * 32, external=False, wasm=False, skills=False
                ) as pincer:
                    navigate = CallRequest(tool="browser", args={"action": "navigate", "url": url})
                    snapshot = CallRequest(tool="browser", args={"action": "snapshot"})

                    async def chain() -> None:
                        for request in (navigate, snapshot):
                            result = await pincer.call(request)
                            if not result.ok:
                                raise SystemExit(f"the call failed: {result.error}")

                    raw_samples, chain_samples = await _interleaved(raw, chain)
            await browser.close()
    finally:
        server.shutdown()
        server.server_close()
    raw_p50, raw_p95 = statistics.median(raw_samples), percentile(raw_samples, 95)
    chain_p50, chain_p95 = statistics.median(chain_samples), percentile(chain_samples, 95)
    ratio = chain_p50 / raw_p50
    print(
        f"browser navigate + snapshot of a local page ({len(PAGE)} bytes), {N} rounds of each, interleaved, after {WARMUP} warm-up"
    )
    print(f"  raw Playwright     p50 {raw_p50 / 1000:8.1f} ms   p95 {raw_p95 / 1000:8.1f} ms")
    print(f"  pincer call chain  p50 {chain_p50 / 1000:8.1f} ms   p95 {chain_p95 / 1000:8.1f} ms")
    print(
        f"  ratio (p50)        {ratio:.2f}x   target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
