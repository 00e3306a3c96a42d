"""A pincer home with something on every dashboard page, made the way a user makes it: calls
through the CLI (allowed, denied by a grant, refused by the egress allowlist, an approval that
timed out, one a person allowed after a wait), a finished run and a run waiting on an approval
(the local model server, a real HTTP server speaking the OpenAI API's shapes), skills with
`pincer skills check` warnings, the browser built-in (the largest schema) and the canvas.

:func:`seeded_dashboard` yields the running ``pincer serve`` and what was made."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.gateway.conftest import ServerProcess, pincer_serve
from tests.gateway.ui.conftest import CLI_TIMEOUT_S, WAIT_S, dashboard_config, pincer_cli, wait_until, waiting_call
from tests.skills.conftest import write_skill

ECHOED = "hello *world*"
FINAL_ANSWER = "## Done\n\nI echoed it:\n\n- **once**, with `echo`\n- nothing else\n\nSee [the docs](https://example.com/docs)."
WAITING_WRITE = {"path": "notes/plan.md", "content": "# Plan\n\n1. ask\n2. write\n"}
APPROVAL_WAIT_S = 1.5  # how long the seeded person takes to allow the asked call
BLOCKED_URL = "https://blocked.example.org/data"


@dataclass(frozen=True, kw_only=True, slots=True)
class Seeded:
    server: ServerProcess
    url: str
    token: str
    done_run: str
    waiting_run: str
    waiting_approval: str


def _config(model_url: str, *, approval_timeout_s: float) -> str:
    return dashboard_config() + (
        f'\n[llm]\nmodel = "scripted-model"\nbase_url = "{model_url}"\n'
        f"\n[approvals]\ntimeout_s = {approval_timeout_s}\n"
        "\n[gateway]\ncanvas = true\n"
        "\n[skills]\ntrust_workspace = true\n"
        "\n[builtins.browser]\nenabled = true\n"
        '\n[[grants]]\ntool = "exec"\ndefault = "deny"\n'
        '\n[[grants]]\ntool = "http"\neffects = { network = "allow", external_write = "allow" }\nhosts = ["api.example.com"]\n'
    )


def _pending(home: Path) -> list[dict]:
    return list(json.loads(pincer_cli(home, "approvals", "list", "--json").stdout)["approvals"])


def _calls(home: Path) -> None:
    """The calls the overview and the audit pages show."""
    for text in ("one", "two", ECHOED):
        assert pincer_cli(home, "tools", "call", "echo", "--args", json.dumps({"text": text})).returncode == 0
    denied = pincer_cli(home, "tools", "call", "exec", "--args", json.dumps({"command": "ls"}))
    assert denied.returncode != 0, "exec should be denied by the grant"
    refused = pincer_cli(home, "tools", "call", "http", "--args", json.dumps({"url": BLOCKED_URL}), "--json")
    assert '"egress_denied"' in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    asked = waiting_call(home, "write_file", json.dumps({"path": "asked.txt", "content": "after a wait"}))
    try:
        pending = wait_until("write_file asking", lambda: _pending(home))
        time.sleep(APPROVAL_WAIT_S)  # a person reading the request
        assert isinstance(pending, list)
        assert pincer_cli(home, "approvals", "approve", pending[0]["id"]).returncode == 0
        asked.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if asked.poll() is None:
            asked.kill()
            asked.communicate(timeout=CLI_TIMEOUT_S)


def _timed_out(home: Path) -> None:
    """A call nobody answered: the approval expires (under a short timeout) and it is refused."""
    out = pincer_cli(home, "tools", "call", "write_file", "--args", json.dumps({"path": "late.txt", "content": "x"}))
    assert out.returncode != 0 and "approval" in out.stderr.lower(), out.stderr


def _skills(home: Path) -> None:
    skills = home / "workspace" / "skills"
    write_skill(skills, "weekly-report", "tools: [no_such_tool]", "Write the weekly report.\n")
    write_skill(home / "skills", "needs-a-bin", "requires: {bins: [no-such-bin-here]}")


def _runs(http: httpx.Client, token: str) -> tuple[str, str]:
    api = {"Authorization": f"Bearer {token}"}

    def status(run_id: str) -> str:
        return str(http.get(f"/api/v1/runs/{run_id}", headers=api).json()["status"])

    done = http.post("/api/v1/runs", headers=api, json={"message": "Echo *hello world* please."}).json()["run_id"]
    wait_until(f"run {done} finishing", lambda: status(done) == "done")
    waiting = http.post("/api/v1/runs", headers=api, json={"message": "Write the plan to notes/plan.md"}).json()["run_id"]
    wait_until(f"run {waiting} asking", lambda: any(a["run_id"] == waiting for a in _pending_over(http, api)))
    return done, waiting


def _pending_over(http: httpx.Client, api: dict[str, str]) -> list[dict]:
    return list(http.get("/api/v1/approvals", headers=api).json()["approvals"])


SCRIPT = [
    Turn(text="Let me **echo** that.", calls=(ScriptedCall(name="echo", arguments={"text": ECHOED}),)),
    Turn(text=FINAL_ANSWER),
    Turn(text="I will write the plan.", calls=(ScriptedCall(name="write_file", arguments=WAITING_WRITE),)),
    Turn(text="Written."),
]


@contextmanager
def seeded_dashboard(home: Path) -> Iterator[Seeded]:
    with serve_models(SCRIPT) as models:
        (home / "config.toml").write_text(_config(models.openai_url, approval_timeout_s=0.5))
        _timed_out(home)
        (home / "config.toml").write_text(_config(models.openai_url, approval_timeout_s=3600))
        _skills(home)
        _calls(home)
        with pincer_serve(home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
            done, waiting = _runs(http, server.token)
            api = {"Authorization": f"Bearer {server.token}"}
            approval = next(a["id"] for a in _pending_over(http, api) if a["run_id"] == waiting)
            yield Seeded(server=server, url=server.info["url"], token=server.token, done_run=done,
                         waiting_run=waiting, waiting_approval=approval)  # fmt: skip

