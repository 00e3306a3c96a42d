"""The github built-in through the whole call chain next to httpx calling the same server directly.

    .venv/bin/python bench/builtins.py

A local GitHub stand-in on 127.0.0.1 (HTTP/1.1 keep-alive) answers ``GET /repos/{owner}/{repo}``
with a repository object the size of GitHub's own (~6 KB). In the same run:

- baseline: one ``httpx.AsyncClient`` (connection reused) sending the same GET with the same
  headers and bearer token, then ``response.json()``;
- chain: ``Pincer.call(github get_repo)``: resolve, grant, schema check, preflight (the input
  checks), the egress policy (allowlist, address check), the token injected from the secret
  store, the request, GitHub's error and rate-limit handling, output trimming, the leak scan with
  the injected token, the audit record in SQLite.

p50 of each over N sequential calls after a warm-up; the target from issue 24 is chain <= 1.5x.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx

from _stats import percentile
from pincer.config import parse_config
from pincer.core.values import CallRequest
from pincer.service import Pincer

N = 300
WARMUP = 30
TOKEN = "ghp_benchToken0123456789abcdefABCDEFGHIJ"
TARGET_RATIO = 1.5


def _repository() -> bytes:
    owner = {"login": "octocat", "id": 1, "node_id": "MDQ6VXNlcjE=", "avatar_url": "https://github.com/images/error/octocat_happy.gif",
             "gravatar_id": "", "url": "https://api.github.com/users/octocat", "html_url": "https://github.com/octocat",
             "type": "User", "site_admin": False}
    repo: dict[str, Any] = {"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "name": "Hello-World",
                            "full_name": "octocat/Hello-World", "owner": owner, "private": False,
                            "html_url": "https://github.com/octocat/Hello-World", "description": "This your first repo!",
                            "fork": False, "language": "Python", "forks_count": 9, "stargazers_count": 80,
                            "watchers_count": 80, "size": 108, "default_branch": "master", "open_issues_count": 0,
                            "topics": ["octocat", "atom", "electron", "api"], "has_issues": True,
                            "pushed_at": "2011-01-26T19:06:43Z", "created_at": "2011-01-26T19:01:12Z",
                            "updated_at": "2011-01-26T19:14:43Z"}
    for name in ("archive", "assignees", "blobs", "branches", "collaborators", "comments", "commits", "compare",
                 "contents", "contributors", "deployments", "downloads", "events", "forks", "git_commits", "git_refs",
                 "git_tags", "hooks", "issue_comment", "issue_events", "issues", "keys", "labels", "languages",
                 "merges", "milestones", "notifications", "pulls", "releases", "stargazers", "statuses",
                 "subscribers", "subscription", "tags", "teams", "trees"):
        repo[f"{name}_url"] = f"https://api.github.com/repos/octocat/Hello-World/{name}{{/number}}"
    repo["parent"] = {**repo, "parent": None}
    return json.dumps(repo).encode()


BODY = _repository()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # One write per answer, no Nagle: else keep-alive clients wait out the peer's delayed ACK (40 ms).
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}" or not self.path.startswith("/repos/"):
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(BODY)))
        self.send_header("X-RateLimit-Remaining", "4999")
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: Any) -> None:
        return


async def _interleaved(a: Any, b: Any) -> tuple[list[float], list[float]]:
    """Alternate one call of each, so a shared machine's changing load falls on both alike."""
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
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
               "Authorization": f"Bearer {TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=base, headers=headers, trust_env=False) as client:

            async def direct() -> None:
                response = await client.get("/repos/octocat/Hello-World")
                response.raise_for_status()
                response.json()

            base_samples, chain_samples = await _measure(base, direct)
    finally:
        server.shutdown()
        server.server_close()
    base_p50, base_p95 = statistics.median(base_samples), percentile(base_samples, 95)
    chain_p50, chain_p95 = statistics.median(chain_samples), percentile(chain_samples, 95)
    ratio = chain_p50 / base_p50
    print(f"github get_repo, {N} calls of each, interleaved, after {WARMUP} warm-up; response {len(BODY)} bytes")
    print(f"  httpx direct       p50 {base_p50:8.0f} us   p95 {base_p95:8.0f} us")
    print(f"  pincer call chain  p50 {chain_p50:8.0f} us   p95 {chain_p95:8.0f} us")
    print(f"  ratio (p50)        {ratio:.2f}x   target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'}")
    return 0


async def _measure(base: str, direct: Any) -> tuple[list[float], list[float]]:
    """Both sides against one server: httpx's ``direct`` and ``Pincer.call`` in a fresh home."""
    text = f"""
[builtins.github]
enabled = true
base_url = "{base}"

[[grants]]
tool = "github"
effects = {{ network = "allow", use_secret = "allow" }}
"""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = parse_config(text, home=home)
        async with Pincer.open(home, config=config, secret_key=b"k" * 32, external=False, wasm=False, skills=False) as pincer:
            pincer.secrets.set("github_token", TOKEN)
            request = CallRequest(tool="github", args={"action": "get_repo", "owner": "octocat", "repo": "Hello-World"})

            async def chain() -> None:
                result = await pincer.call(request)
                if not result.ok:
                    raise SystemExit(f"the call failed: {result.error}")

            return await _interleaved(direct, chain)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
