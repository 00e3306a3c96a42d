"""The dashboard's Runs pages against a real ``pincer serve`` and the local model server (a
real HTTP server speaking the OpenAI API's shapes): the list, a transcript with its tool call
linked to the audit record and the tool's output escaped, the live stream, and Cancel."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import POLL_S, WAIT_S, csrf_of, dashboard_config, sign_in

PAYLOAD = "<script>document.title='pwned'</script>"


def _config(url: str) -> str:
    return dashboard_config() + f'\n[llm]\nmodel = "scripted-model"\nbase_url = "{url}"\n'


def _status(http: httpx.Client, token: str, run_id: str) -> str:
    return http.get(f"/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}).json()["status"]


def _wait_for(http: httpx.Client, token: str, run_id: str, wanted: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while _status(http, token, run_id) != wanted:
        assert time.monotonic() < deadline, f"run {run_id} did not become {wanted} within {WAIT_S} s"
        time.sleep(POLL_S)


def test_a_run_shows_its_transcript_with_tool_output_escaped(pincer_home: Path) -> None:
    script = [Turn(text="Echoing. ", calls=(ScriptedCall(name="echo", arguments={"text": PAYLOAD}),)), Turn(text="Done.")]
    with serve_models(script) as models:
        (pincer_home / "config.toml").write_text(_config(models.openai_url))
        with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
            api = {"Authorization": f"Bearer {server.token}"}
            run_id = http.post("/api/v1/runs", headers=api, json={"message": "echo it"}).json()["run_id"]
            _wait_for(http, server.token, run_id, "done")
            sign_in(http, server.token)
            listed = http.get("/ui/runs").text
            assert f'href="/ui/runs/{run_id}"' in listed and "done" in listed
            page = http.get(f"/ui/runs/{run_id}").text
            assert "Cancel" not in page  # a finished run
            assert "<summary>System prompt" in page and ">User</span>" in page and ">Assistant</span>" in page
            assert 'class="card accent tool-call' in page  # the tool's answer is on its call's card
            assert 'href="/ui/audit/' in page  # the tool call links its audit record
            assert "&lt;script&gt;document.title=" in page and PAYLOAD not in page


def test_a_running_run_streams_and_is_cancelled_from_its_page(pincer_home: Path) -> None:
    with serve_models([Turn(text="slow", delay_s=30)]) as models:
        (pincer_home / "config.toml").write_text(_config(models.openai_url))
        with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
            api = {"Authorization": f"Bearer {server.token}"}
            run_id = http.post("/api/v1/runs", headers=api, json={"message": "wait"}).json()["run_id"]
            deadline = time.monotonic() + WAIT_S
            while not models.requests:
                assert time.monotonic() < deadline, "the run never asked the model"
                time.sleep(POLL_S)
            sign_in(http, server.token)
            page = http.get(f"/ui/runs/{run_id}").text
            assert "Cancel" in page and f'data-live-source="/ui/runs/{run_id}/events"' in page
            with http.stream("GET", f"/ui/runs/{run_id}/events") as stream:
                assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
                assert http.post(f"/ui/runs/{run_id}/cancel", data={"go": "1"}).status_code == 403  # no csrf_token
                assert _status(http, server.token, run_id) == "running"
                cancelled = http.post(f"/ui/runs/{run_id}/cancel", data={"csrf_token": csrf_of(page)})
                assert cancelled.status_code == 303
                kinds = [line[7:] for line in stream.iter_lines() if line.startswith("event: ")]
            assert kinds[-1] == "run" and _status(http, server.token, run_id) == "cancelled"
            assert "cancelled" in http.get(f"/ui/runs/{run_id}").text


def test_a_waiting_run_is_answered_on_its_own_page_and_loses_cancel_when_it_ends(pincer_home: Path) -> None:
    script = [Turn(calls=(ScriptedCall(name="write_file", arguments={"path": "inline.txt", "content": "yes"}),)),
              Turn(text="Written.")]  # fmt: skip
    with serve_models(script) as models:
        (pincer_home / "config.toml").write_text(_config(models.openai_url))
        with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
            api = {"Authorization": f"Bearer {server.token}"}
            run_id = http.post("/api/v1/runs", headers=api, json={"message": "write it"}).json()["run_id"]
            sign_in(http, server.token)
            deadline = time.monotonic() + WAIT_S
            while 'name="decision" value="allow_once"' not in (page := http.get(f"/ui/runs/{run_id}").text):
                assert time.monotonic() < deadline, f"run {run_id}'s page never showed its approval"
                time.sleep(POLL_S)
            approval_id = page.split('data-approval-id="', 1)[1].split('"', 1)[0]
            answered = http.post(f"/ui/approvals/{approval_id}", data={"decision": "allow_once", "next": f"/ui/runs/{run_id}",
                                                                      "csrf_token": csrf_of(page)})  # fmt: skip
            assert answered.status_code == 303 and answered.headers["location"] == f"/ui/runs/{run_id}?answered={approval_id}"
            _wait_for(http, server.token, run_id, "done")
            assert f"approval {approval_id} (write_file): allow once" in http.get(answered.headers["location"]).text
            fragment = http.get(f"/ui/runs/{run_id}", headers={"HX-Request": "true"}).text
            assert "Cancel run" not in fragment and "waits for a person" not in fragment
            assert (pincer_home / "workspace" / "inline.txt").read_text() == "yes"


def test_an_answers_next_goes_only_to_a_runs_page(pincer_home: Path, stopped_calls: list) -> None:
    from tests.gateway.ui.conftest import dashboard_config, waiting_call

    (pincer_home / "config.toml").write_text(dashboard_config())
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as http:
        sign_in(http, server.token)
        page = http.get("/ui/approvals").text
        for target in ("https://evil.example/", "//evil.example/ui/runs/x", "/ui/runs/../../api/v1", "/ui/grants"):
            call = waiting_call(pincer_home, "write_file", '{"path": "n.txt", "content": "n"}')
            stopped_calls.append(call)
            deadline = time.monotonic() + WAIT_S
            while not (pending := http.get("/api/v1/approvals", headers={"Authorization": f"Bearer {server.token}"}).json()["approvals"]):
                assert time.monotonic() < deadline, "the call never asked"
                time.sleep(POLL_S)
            answer = http.post(f"/ui/approvals/{pending[0]['id']}", data={"decision": "deny", "next": target, "csrf_token": csrf_of(page)})
            assert answer.status_code == 303 and answer.headers["location"] == f"/ui/approvals?answered={pending[0]['id']}", target
            call.communicate(timeout=WAIT_S)
