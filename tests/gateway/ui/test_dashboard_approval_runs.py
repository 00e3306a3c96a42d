"""An approval names the run whose call asked and, for a tainted run, what tainted it: on the
dashboard's approvals page (linked to the run's page), in ``pincer approvals show`` and on REST.
A real ``pincer serve``, the local model server (a real HTTP server speaking the OpenAI API's
shapes) scripted to read a poisoned page and then write a file, and the CLI as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import (
    WAIT_S,
    csrf_of,
    dashboard_config,
    pincer_cli,
    sign_in,
    wait_until,
    waiting_call,
)  # fmt: skip
from tests.llm.test_taint import poisoned_site

WRITE_ARGS = {"path": "steered.txt", "content": "from the page"}


def _config(model_url: str) -> str:
    return dashboard_config() + (
        f'\n[llm]\nmodel = "scripted-model"\nbase_url = "{model_url}"\n'
        '\n[network]\nallow_private = true\n'
        '\n[[grants]]\ntool = "http"\neffects = { network = "allow" }\nhosts = ["127.0.0.1"]\n'
    )


def _script(page_url: str) -> list[Turn]:
    return [
        Turn(calls=(ScriptedCall(name="http", arguments={"url": page_url}),)),
        Turn(calls=(ScriptedCall(name="write_file", arguments=WRITE_ARGS),)),
        Turn(text="Done."),
    ]


def _pending(http: httpx.Client, token: str) -> list[dict]:
    listed = http.get("/api/v1/approvals", headers={"Authorization": f"Bearer {token}"})
    assert listed.status_code == 200, listed.text
    return listed.json()["approvals"]


def test_a_tainted_runs_approval_shows_its_run_and_what_tainted_it(pincer_home: Path) -> None:
    with poisoned_site() as page_url, serve_models(_script(page_url)) as models:
        (pincer_home / "config.toml").write_text(_config(models.openai_url))
        with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
            api = {"Authorization": f"Bearer {server.token}"}
            run_id = http.post("/api/v1/runs", headers=api, json={"message": f"summarize {page_url}"}).json()["run_id"]
            pending = wait_until("the run's write_file asking", lambda: _pending(http, server.token))
            assert isinstance(pending, list) and len(pending) == 1
            approval = pending[0]
            http_record = next(
                r for r in json.loads(pincer_cli(pincer_home, "audit", "list", "--json").stdout)
                if r["tool"] == "http" and r.get("run_id") == run_id
            )
            tainted = f"the output of http (audit record {http_record['id']})"
            # REST: the list and the one request.
            assert approval["tool"] == "write_file" and approval["run_id"] == run_id
            assert approval["tainted_by"] == tainted
            one = http.get(f"/api/v1/approvals/{approval['id']}", headers=api).json()
            assert one["run_id"] == run_id and one["tainted_by"] == tainted
            # The CLI, in another process, reads the same row.
            shown = pincer_cli(pincer_home, "approvals", "show", approval["id"])
            assert shown.returncode == 0, shown.stderr
            assert f"run:      {run_id}" in shown.stderr and f"tainted:  {tainted}" in shown.stderr
            as_json = json.loads(pincer_cli(pincer_home, "approvals", "show", approval["id"], "--json").stdout)
            assert as_json["run_id"] == run_id and as_json["tainted_by"] == tainted
            # The dashboard: the card links the run's page and says what tainted it.
            sign_in(http, server.token)
            page = http.get("/ui/approvals").text
            card = page.split(f'id="approval-{approval["id"]}"', 1)[1].split("</article>", 1)[0]
            assert f'<a class="run" href="/ui/runs/{run_id}">{run_id}</a>' in card
            assert f'<dd class="tainted">{tainted}</dd>' in card
            assert http.get(f"/ui/runs/{run_id}").status_code == 200
            denied = http.post(f"/ui/approvals/{approval['id']}", data={"decision": "deny", "csrf_token": csrf_of(page)})
            assert denied.status_code == 303
            wait_until("the run ending", lambda: http.get(f"/api/v1/runs/{run_id}", headers=api).json()["status"] == "done")
            assert not (pincer_home / "workspace" / WRITE_ARGS["path"]).exists()


def test_a_direct_calls_approval_shows_no_run(pincer_home: Path, stopped_calls: list) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config())
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
        call = waiting_call(pincer_home, "write_file", json.dumps(WRITE_ARGS))
        stopped_calls.append(call)
        pending = wait_until("the CLI call asking", lambda: _pending(http, server.token))
        assert isinstance(pending, list)
        approval = pending[0]
        assert approval["run_id"] is None and approval["tainted_by"] is None
        shown = pincer_cli(pincer_home, "approvals", "show", approval["id"])
        assert "run:      -" in shown.stderr and "tainted:" not in shown.stderr
        sign_in(http, server.token)
        card = http.get("/ui/approvals").text.split(f'id="approval-{approval["id"]}"', 1)[1].split("</article>", 1)[0]
        assert "none (a direct call)" in card and 'class="run"' not in card and "Tainted by" not in card
