"""web_search and llm_context through the call chain against a local server speaking Brave Search's
API shapes (``GET /res/v1/web/search``, ``POST /res/v1/llm/context``); one ``brave_api_key``
injected host-side as ``X-Subscription-Token`` for both.

Brave publishes no OpenAPI document in a package registry. Its own MCP server
(``@brave/brave-search-mcp-server``, npm) declares the LLM context API's parameters and answer as
zod schemas: the stand-in checks every llm/context request and answer against them
(tests/builtins/declared.py). The web search answer is declared there only as TypeScript types,
which the package does not ship, so the web search stand-in follows Brave's documentation and no
published description checks it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from pincer.builtins.brave import SearchHit, web_search_tool
from pincer.core.values import CallRequest
from tests.builtins import declared
from tests.builtins.conftest import pincer_on

pytestmark = pytest.mark.anyio

KEY = "BSAbraveTestKey_5f0c2a9d81e34b7c"

WEB_ANSWER = {
    "type": "search",
    "query": {"original": "python anyio", "more_results_available": True},
    "web": {
        "type": "search",
        "results": [
            {"title": "AnyIO documentation", "url": "https://anyio.readthedocs.io/", "is_source_local": False,
             "description": "AnyIO is an asynchronous networking and concurrency library", "age": "2 days ago",
             "profile": {"name": "Read the Docs"}, "language": "en", "family_friendly": True},
            {"title": "agronholm/anyio", "url": "https://github.com/agronholm/anyio",
             "description": "High level asynchronous concurrency and networking framework", "page_age": "2026-01-02"},
        ],
    },
}
CONTEXT_ANSWER = {
    "grounding": {
        "generic": [
            {"url": "https://anyio.readthedocs.io/en/stable/tasks.html", "title": "Creating and managing tasks",
             "snippets": ["A task group is an asynchronous context manager...", "start_soon() schedules a task"]},
        ],
        "map": [],
    },
    "sources": {"https://anyio.readthedocs.io/en/stable/tasks.html": {"title": "Creating and managing tasks"}},
}


@dataclass
class FakeBrave:
    server: ThreadingHTTPServer
    seen: list[tuple[str, str, dict[str, list[str]], dict[str, str], Any]] = field(default_factory=list)
    script: list[tuple[int, Any]] = field(default_factory=list)
    echo: bool = False
    violations: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def serve_brave() -> Iterator[FakeBrave]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            url = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw) if raw else None
            state.seen.append((self.command, url.path, parse_qs(url.query), dict(self.headers.items()), body))
            if state.script:
                status, payload = state.script.pop(0)
            elif self.headers.get("X-Subscription-Token") != KEY:
                status, payload = 401, {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "bad token"}}
            elif self.command == "GET" and url.path == "/res/v1/web/search" and parse_qs(url.query).get("q"):
                status, payload = 200, WEB_ANSWER
            elif self.command == "POST" and url.path == "/res/v1/llm/context" and isinstance(body, dict) and body.get("q"):
                status, payload = 200, CONTEXT_ANSWER
            else:
                status, payload = 422, {"type": "ErrorResponse", "error": {"detail": "unknown request"}}
            if url.path == "/res/v1/llm/context":
                state.violations += declared.brave_llm_context_problems(body, payload if status == 200 else None)
            if state.echo and status == 200:
                payload = json.loads(json.dumps(payload))
                payload.setdefault("web", {"results": []})["results"].append(
                    {"title": "echo", "url": "https://e.example/", "description": f"key {self.headers.get('X-Subscription-Token')}"}
                )
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _handle

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state = FakeBrave(server=server)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5.0)


def _config(fake: FakeBrave) -> str:
    return f"""
[builtins.brave]
base_url = "{fake.origin}"

[builtins.web_search]
enabled = true

[builtins.llm_context]
enabled = true

[[grants]]
tool = "web_search"
effects = {{ network = "allow", use_secret = "allow" }}

[[grants]]
tool = "llm_context"
effects = {{ network = "allow", use_secret = "allow" }}
"""


async def test_web_search_and_llm_context_share_one_key(tmp_path: Path) -> None:
    with serve_brave() as fake:
        async with pincer_on(tmp_path, _config(fake), secrets={"brave_api_key": KEY}) as pincer:
            search = await pincer.call(CallRequest(tool="web_search", args={"query": "python anyio", "count": 2,
                                                                             "country": "US", "freshness": "pw"}))
            context = await pincer.call(CallRequest(tool="llm_context", args={"query": "anyio task groups"}))
    assert search.ok, search.error
    assert search.output["results"][0] == {"title": "AnyIO documentation", "url": "https://anyio.readthedocs.io/",
                                           "description": "AnyIO is an asynchronous networking and concurrency library",
                                           "age": "2 days ago"}
    assert context.ok, context.error
    assert context.output["sources"][0]["snippets"][1] == "start_soon() schedules a task"
    (m1, p1, q1, h1, _), (m2, p2, _, h2, b2) = fake.seen
    assert (m1, p1, q1) == ("GET", "/res/v1/web/search", {"q": ["python anyio"], "count": ["2"], "country": ["US"], "freshness": ["pw"]})
    assert (m2, p2, b2) == ("POST", "/res/v1/llm/context", {"q": "anyio task groups", "count": 5})
    assert h1["X-Subscription-Token"] == KEY == h2["X-Subscription-Token"]
    assert KEY not in json.dumps([search.output, context.output])
    assert fake.violations == []


def test_llm_context_requests_and_answers_fit_braves_own_declarations() -> None:
    """Before: the stand-in followed no published description, and its answer lacked
    ``grounding.map``, which Brave's declaration requires."""
    assert declared.brave_llm_context_problems({"q": "anyio", "count": 5, "maximum_number_of_tokens": 4096}, CONTEXT_ANSWER) == []
    without_map = {**CONTEXT_ANSWER, "grounding": {"generic": CONTEXT_ANSWER["grounding"]["generic"]}}
    assert declared.brave_llm_context_problems(None, without_map) == ["answer: missing required parameter 'grounding.map'"]
    assert sorted(declared.brave_llm_context_problems({"q": "", "max_tokens": 9})) == [
        "'q': '' should be non-empty", "unknown parameter 'max_tokens'"]


async def test_a_key_echoed_back_is_redacted_and_limits_are_clear(tmp_path: Path) -> None:
    with serve_brave() as fake:
        fake.echo = True
        async with pincer_on(tmp_path, _config(fake), secrets={"brave_api_key": KEY}) as pincer:
            echoed = await pincer.call(CallRequest(tool="web_search", args={"query": "x"}))
            fake.script.append((429, {"type": "ErrorResponse", "error": {"code": "RATE_LIMITED"}}))
            limited = await pincer.call(CallRequest(tool="web_search", args={"query": "x"}))
    assert echoed.ok and KEY not in json.dumps(echoed.output) and "REDACTED" in json.dumps(echoed.output)
    assert not limited.ok and limited.error["code"] == "api_rate_limited"


async def test_without_a_key_the_error_says_how_to_set_one(tmp_path: Path) -> None:
    with serve_brave() as fake:
        async with pincer_on(tmp_path, _config(fake)) as pincer:
            result = await pincer.call(CallRequest(tool="web_search", args={"query": "x"}))
        assert fake.seen == []
    assert not result.ok and "pincer auth setup web_search" in result.error["hint"]


async def test_the_search_provider_is_pluggable(tmp_path: Path) -> None:
    """Another backend behind SearchProvider: the tool's shape and governance stay the same."""

    class Fixed:
        async def search(self, api: Any, query: str, *, count: int, options: Any) -> list[SearchHit]:
            return [SearchHit(title=f"{query} #{i}", url=f"https://r.example/{i}") for i in range(count)]

    tool = web_search_tool(provider=Fixed())
    from pincer.core.values import HostContext

    out = await tool.run({"query": "q", "count": 2}, HostContext(session="main", tool="web_search"))
    assert [r["title"] for r in out["results"]] == ["q #0", "q #1"]
