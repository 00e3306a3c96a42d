"""The dashboard's tasks page against a real ``pincer serve``: the tasks a viewer may see, with
status, tool, session and age; a task waiting for a person shows its approval, answered with the
approvals page's own forms (CSRF, roles), after which the task moves on. A viewer sees and cannot
answer; an agent's session sees only its own tasks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx

from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import AGENT_TOKEN, WAIT_S, csrf_of, dashboard_config, pincer_cli, sign_in, wait_until

WRITE = {"args": {"path": "task.txt", "content": "from the dashboard"}}


def _made_task(http: httpx.Client, token: str, args: dict[str, Any]) -> dict[str, Any]:
    made = http.post("/api/v1/tools/write_file/call", json=args,
                     headers={"Authorization": f"Bearer {token}", "Prefer": "respond-async"})  # fmt: skip
    assert made.status_code == 202, made.text
    task: dict[str, Any] = made.json()
    assert task["status"] == "input_required" and task["approval_id"], task
    return task


def _task(http: httpx.Client, token: str, task_id: str) -> dict[str, Any]:
    got = http.get(f"/api/v1/tasks/{task_id}", headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200, got.text
    task: dict[str, Any] = got.json()
    return task


def _answer_forms(html: str, approval_id: str) -> list[str]:
    return re.findall(rf'<form method="post" action="/ui/approvals/{approval_id}">', html)


def test_a_waiting_task_shows_its_approval_and_an_answer_there_moves_it_on(pincer_home: Path) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config())
    added = pincer_cli(pincer_home, "people", "add", "vera", "--role", "viewer")
    assert added.returncode == 0, added.stderr
    made = pincer_cli(pincer_home, "people", "token", "vera", "--json")
    assert made.returncode == 0, made.stderr
    vera_token = json.loads(made.stdout)["token"]
    with pincer_serve(pincer_home) as server:
        base = server.info["url"]
        with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as api, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as person, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as vera, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as agent:  # fmt: skip
            mine = _made_task(api, server.token, WRITE)
            theirs = _made_task(api, AGENT_TOKEN, {"args": {"path": "agent.txt", "content": "the agent's"}})
            assert sign_in(person, server.token).status_code == 303
            assert sign_in(vera, vera_token).status_code == 303
            assert sign_in(agent, AGENT_TOKEN).status_code == 303

            page = person.get("/ui/tasks")
            assert page.status_code == 200
            html = page.text
            # Both tasks, with status, tool and session; each waiting one with its approval's forms.
            for task, session in ((mine, "main"), (theirs, "agent")):
                row = re.search(rf'<tr class="task-input_required" data-task-id="{re.escape(task["id"])}">(.*?)</tr>', html, re.S)
                assert row is not None, f"no row for task {task['id']}"
                assert "write_file" in row.group(1) and session in row.group(1)
                assert len(_answer_forms(html, task["approval_id"])) == 3  # allow once, allow always, deny
            assert 'name="next" value="/ui/tasks"' in html
            assert "from the dashboard" in html  # the approval's arguments, as the approvals page shows them
            assert "<script>" not in html and "onclick" not in html  # no inline script under the CSP
            assert "script-src" in page.headers["content-security-policy"]

            # A viewer sees the same tasks and approvals, and no form to answer them with.
            seen = vera.get("/ui/tasks").text
            assert mine["id"] in seen and theirs["id"] in seen
            assert _answer_forms(seen, mine["approval_id"]) == [] and "may not answer approvals" in seen
            # Its forged answer (a valid CSRF token of its own) is refused by the approvals route.
            refused = vera.post(f"/ui/approvals/{mine['approval_id']}",
                                data={"decision": "allow_once", "csrf_token": csrf_of(seen), "next": "/ui/tasks"})  # fmt: skip
            assert refused.status_code == 403, refused.text
            assert _task(api, server.token, mine["id"])["status"] == "input_required"

            # The agent's session sees its own task only, and cannot answer it either.
            own = agent.get("/ui/tasks").text
            assert theirs["id"] in own and mine["id"] not in own
            assert _answer_forms(own, theirs["approval_id"]) == []

            # A person answers on the tasks page: back to it, and the task completes.
            answered = person.post(f"/ui/approvals/{mine['approval_id']}",
                                   data={"decision": "allow_once", "csrf_token": csrf_of(html), "next": "/ui/tasks"})  # fmt: skip
            assert answered.status_code == 303, answered.text
            assert answered.headers["location"] == f"/ui/tasks?answered={mine['approval_id']}"
            done = wait_until("the answered task completing",
                              lambda: _task(api, server.token, mine["id"])["status"] == "completed")  # fmt: skip
            assert done
            assert not _task(api, server.token, mine["id"])["result"].get("isError")
            after = person.get("/ui/tasks").text
            assert re.search(rf'<tr class="task-completed" data-task-id="{re.escape(mine["id"])}">', after)
            assert _answer_forms(after, mine["approval_id"]) == []
            # Without a CSRF token the same form is refused, whoever signs it.
            forged = person.post(f"/ui/approvals/{theirs['approval_id']}", data={"decision": "allow_once"})
            assert forged.status_code in (400, 403), forged.text
            assert _task(api, AGENT_TOKEN, theirs["id"])["status"] == "input_required"
