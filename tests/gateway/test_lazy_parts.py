"""The REST API and the dashboard are built at their first request (``pincer.gateway.lazy``).

A gateway that only serves MCP never imports FastAPI, the dashboard's pages or Jinja2 (issue 23:
~8 MiB of an idle ``pincer serve``'s resident memory); the first REST or dashboard request
builds its app, and from then on it answers as if built at start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from starlette.types import Receive, Scope, Send

from pincer.gateway.lazy import LazyApp

PROBE_TIMEOUT_S = 120.0

# Runs in a fresh interpreter: `serve()` on 127.0.0.1:0 in-process, so the test can read which
# modules the gateway loaded at each step, and real HTTP requests against it.
_PROBE = r"""
import json, sys
import anyio, httpx
from pincer.cli.common import open_pincer
from pincer.gateway.serve import serve

LAZY = ("fastapi", "jinja2", "pincer.gateway.rest", "pincer.gateway.ui.app")
steps = {}

def loaded():
    return sorted(m for m in LAZY if m in sys.modules)

async def main():
    async with open_pincer(quiet=True) as pincer:
        token = None
        async with anyio.create_task_group() as tg:
            async def ready(info):
                token = (pincer.home / "gateway.token").read_text().strip()
                auth = {"Authorization": f"Bearer {token}"}
                steps["started"] = loaded()
                async with httpx.AsyncClient(base_url=info.url, headers=auth, trust_env=False, timeout=60) as http:
                    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "probe", "version": "1"}}}
                    head = {"Accept": "application/json, text/event-stream"}
                    answer = await http.post("/mcp", json=init, headers=head)
                    session = answer.headers.get("mcp-session-id")
                    head2 = {**head, "MCP-Protocol-Version": "2025-11-25", **({"Mcp-Session-Id": session} if session else {})}
                    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=head2)
                    listed = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=head2)
                    steps["mcp_status"] = [answer.status_code, listed.status_code]
                    steps["mcp_lists"] = '"tools"' in listed.text
                    steps["healthz"] = (await http.get("/healthz")).status_code
                    steps["after_mcp"] = loaded()
                    rest = await http.get("/api/v1/tools")
                    steps["rest"] = [rest.status_code, "tools" in rest.json()]
                    steps["rest_unauthenticated"] = (await http.get("/api/v1/tools", headers={"Authorization": ""})).status_code
                    steps["after_rest"] = loaded()
                    login = await http.get("/ui/login", headers={"Authorization": ""})
                    steps["ui"] = [login.status_code, "<form" in login.text]
                    steps["after_ui"] = loaded()
                    again = await http.get("/api/v1/tools")
                    steps["rest_again"] = again.status_code
                tg.cancel_scope.cancel()
            tg.start_soon(lambda: serve(pincer, settings=pincer.config.gateway, host="127.0.0.1", port=0, on_ready=ready))
    print(json.dumps(steps))

anyio.run(main)
"""


def test_mcp_alone_builds_neither_the_rest_api_nor_the_dashboard(tmp_path: Path) -> None:
    """Failed before lazy.py: the gateway imported FastAPI and Jinja2 and built both apps at start-up."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=PROBE_TIMEOUT_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    steps = json.loads(done.stdout.strip().splitlines()[-1])
    assert steps["started"] == [], steps
    assert steps["mcp_status"] == [200, 200] and steps["mcp_lists"] and steps["healthz"] == 200, steps
    assert steps["after_mcp"] == [], steps
    # The first REST request builds the REST app, under the same bearer-token rule as ever.
    assert steps["rest"] == [200, True] and steps["rest_unauthenticated"] == 401, steps
    assert steps["after_rest"] == ["fastapi", "pincer.gateway.rest"], steps
    assert steps["ui"] == [200, True], steps
    assert steps["after_ui"] == ["fastapi", "jinja2", "pincer.gateway.rest", "pincer.gateway.ui.app"], steps
    assert steps["rest_again"] == 200, steps


@pytest.mark.anyio
async def test_a_lazy_app_is_built_once_and_a_failed_build_is_tried_again() -> None:
    built: list[str] = []
    answered: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        answered.append(scope["path"])

    def build() -> object:
        built.append("try")
        if len(built) == 1:
            raise RuntimeError("the first build fails")
        return app

    lazy = LazyApp(build)  # type: ignore[arg-type]

    async def receive() -> dict[str, object]:
        return {"type": "http.disconnect"}

    async def send(message: object) -> None:
        pass

    with pytest.raises(RuntimeError):
        await lazy({"type": "http", "path": "/a"}, receive, send)
    assert not lazy.built
    async with anyio.create_task_group() as tg:
        for path in ("/b", "/c", "/d"):
            tg.start_soon(lazy, {"type": "http", "path": path}, receive, send)
    assert built == ["try", "try"] and sorted(answered) == ["/b", "/c", "/d"] and lazy.built
