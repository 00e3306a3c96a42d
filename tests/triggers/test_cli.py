"""``pincer cron``, ``pincer triggers list`` and ``pincer hooks list`` as a user types them.

Failed on main before the triggers: none of these commands existed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import write_skill

PINCER_BIN = Path(sys.executable).with_name("pincer")
CLI_TIMEOUT_S = 120
DATA = Path(__file__).parent / "data"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return {**base, "PINCER_HOME": str(home), "HOME": str(tmp_path / "user"), "TZ": "UTC"}


def cli(env: dict[str, str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PINCER_BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def doc(done: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(done.stdout)


def test_cron_add_list_pause_resume_rm(env: dict[str, str]) -> None:
    added = cli(env, "cron", "add", "review-main", "--cron", "0 9 * * 1-5", "--tz", "Europe/Berlin", "--skill", "code-review",
                "--param", "path=src", "--param", "focus=security", "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    job = doc(added)["job"]
    assert job["schedule"] == {"kind": "cron", "expr": "0 9 * * 1-5", "tz": "Europe/Berlin"} and job["next_run"]
    assert job["params"] == {"path": "src", "focus": "security"} and job["session"] == "cron:review-main"
    assert cli(env, "cron", "add", "ping", "--every", "30m", "--message", "anything new?").returncode == 0

    listed = doc(cli(env, "cron", "list", "--json"))["jobs"]
    assert [j["name"] for j in listed] == ["ping", "review-main"] and all(j["state"] == "active" for j in listed)
    human = cli(env, "cron", "list")
    assert human.returncode == 0 and "review-main" in human.stderr and "cron 0 9 * * 1-5 (Europe/Berlin)" in human.stderr

    paused = doc(cli(env, "cron", "pause", "ping", "--json"))["job"]
    assert paused["state"] == "paused"
    resumed = doc(cli(env, "cron", "resume", "ping", "--json"))["job"]
    assert resumed["state"] == "active" and resumed["next_run"]

    assert cli(env, "cron", "rm", "ping").returncode == 0
    assert [j["name"] for j in doc(cli(env, "cron", "list", "--json"))["jobs"]] == ["review-main"]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("cron", "add", "x", "--cron", "61 * * * *", "--message", "m"), "schedule_invalid", "does not parse"),
        (("cron", "add", "x", "--cron", "0 9 * * *", "--tz", "Nowhere/Land", "--message", "m"), "schedule_invalid", "unknown time zone"),
        (("cron", "add", "x", "--cron", "0 9 * * *"), "usage_error", "a job runs a skill or a message"),
        (("cron", "add", "x", "--at", "2001-01-01T00:00:00Z", "--message", "m"), "usage_error", "would never run"),
        (("cron", "add", "x", "--every", "1m", "--skill", "no-such-skill"), "skill_not_found", "no skill named"),
        (("cron", "add", "x", "--every", "1m", "--skill", "code-review", "--param", "focus=loudly"), "invalid_arguments", "must be one of"),
        (("cron", "rm", "ghost"), "job_not_found", "no job named 'ghost'"),
        (("cron", "run", "ghost"), "job_not_found", "no job named 'ghost'"),
    ],
)
def test_cron_refusals_say_what_to_do(env: dict[str, str], args: tuple[str, ...], code: str, says: str) -> None:
    done = cli(env, *args, "--json")
    assert done.returncode == 2, done.stderr
    error = doc(done)["error"]
    assert error["code"] == code and says in error["message"] and error["hint"]
    assert doc(cli(env, "cron", "list", "--json"))["jobs"] == [], "nothing half-written"


def test_cron_run_carries_the_job_out_with_the_agent_loop(env: dict[str, str]) -> None:
    from pincer.demo.model_server import Turn, serve_models

    with serve_models([Turn(text="Nothing new since yesterday.")]) as model:
        Path(env["PINCER_HOME"], "config.toml").write_text(
            f'[llm]\nmodel = "scripted-model"\nbase_url = "{model.openai_url}"\nmax_retries = 0\n'
        )
        assert cli(env, "cron", "add", "brief", "--every", "1h", "--message", "anything new?").returncode == 0
        ran = cli(env, "cron", "run", "brief", "--json")
        result = doc(ran)
        assert ran.returncode == 0, ran.stderr
        assert result["outcome"] == {"status": "done", "error": None}
        assert "anything new?" in json.dumps(model.requests[0].body["messages"])
    [run] = doc(cli(env, "runs", "list", "--json"))
    assert run["id"] == result["run_id"] and run["trigger"] == "schedule:brief" and run["session"] == "cron:brief"
    assert doc(cli(env, "cron", "list", "--json"))["jobs"][0]["last_status"] == "done"


def test_cron_run_without_a_server_runs_here(env: dict[str, str]) -> None:
    assert cli(env, "cron", "add", "now", "--every", "1h", "--message", "hello").returncode == 0
    ran = cli(env, "cron", "run", "now", "--json")
    result = doc(ran)
    # No model is configured here: the firing is recorded and audited, and its start fails, saying so.
    assert ran.returncode == 1 and result["where"] == "here (no pincer serve is running)"
    assert result["outcome"]["status"] == "failed" and "no model is configured" in result["outcome"]["error"]
    records = [r for r in doc(cli(env, "audit", "list", "--json")) if r["kind"] == "trigger"]
    assert [r["tool"] for r in records] == ["schedule:now"] and records[0]["args"]["run_id"] == result["run_id"]
    assert doc(cli(env, "cron", "list", "--json"))["jobs"][0]["last_status"] == "failed"


def test_cron_import_openclaw_files(env: dict[str, str]) -> None:
    yaml_import = doc(cli(env, "cron", "import", str(DATA / "cron.yaml"), "--json"))
    assert yaml_import["format"] == "cron.yaml" and len(yaml_import["added"]) == 4 and len(yaml_import["problems"]) == 1
    json_import = cli(env, "cron", "import", str(DATA / "jobs.json"))
    assert json_import.returncode == 0 and "5 jobs imported" in json_import.stderr and "not used by pincer" in json_import.stderr
    again = doc(cli(env, "cron", "import", str(DATA / "jobs.json"), "--json"))
    assert again["added"] == [] and len(again["skipped"]) == 5
    jobs = {j["name"]: j for j in doc(cli(env, "cron", "list", "--json"))["jobs"]}
    assert jobs["Morning Briefing - 7AM Daily"]["next_run"] == "2030-01-01T07:00:00Z"  # OpenClaw's own next run kept
    assert jobs["poll"]["state"] == "paused" and jobs["Reminder"]["session"] == "main"
    assert jobs["heartbeat"]["schedule_text"] == "every 30m" and jobs["Morning brief"]["source"] == "import"


def test_triggers_list_shows_every_trigger_with_its_state(env: dict[str, str]) -> None:
    home = Path(env["PINCER_HOME"])
    write_skill(home / "skills", "digest", "triggers:\n  - schedule: '0 7 * * *'\n  - command: /digest\n  - manual\n")
    write_skill(home / "workspace" / "skills", "planted", "triggers:\n  - schedule: '* * * * *'\n")
    write_skill(home / "skills", "needs-bin", "requires:\n  bins: [no-such-binary-xyz]\ntriggers:\n  - command: /nb\n")
    (home / "config.toml").write_text(
        '[[hooks]]\nname = "gh"\nauth = "github"\nsecret = "gh_hook_secret"\n\n'
        '[[jobs]]\nname = "brief"\nevery = "1h"\nmessage = "status?"\n'
    )
    rows = doc(cli(env, "triggers", "list", "--json"))["triggers"]
    state = {(r["owner"], r["kind"], r.get("value", "")): r["state"] for r in rows}
    assert state[("skill digest", "command", "/digest")] == "active"
    assert state[("skill digest", "schedule", "0 7 * * *")] == "active"
    assert state[("skill digest", "manual", "")] == "offered for manual runs"
    assert state[("skill needs-bin", "command", "/nb")].startswith("inactive: not eligible")
    assert state[("skill planted", "schedule", "* * * * *")].startswith("inactive: only a trusted skill fires")
    # issue 21 item 16: a hook whose secret is not set delivers nothing, so it makes nothing active
    assert state[("skill code-review", "webhook", "github.pull_request.opened")] == (
        "inactive: /hooks/gh refuses every delivery until the secret 'gh_hook_secret' is set (`pincer secrets set gh_hook_secret`)"
    )
    assert state[("skill code-review", "command", "/review")] == "active"
    [job] = [r for r in rows if r["owner"] == "job brief"]
    assert job["source"] == "config" and job["next_run"]
    [hook] = [r for r in rows if r["owner"] == "hook gh"]
    assert hook["secret_set"] is False and "set the secret 'gh_hook_secret'" in hook["state"]
    human = cli(env, "triggers", "list")
    assert human.returncode == 0 and "/digest" in human.stderr

    assert cli(env, "secrets", "set", "gh_hook_secret", stdin="s3cret-hook").returncode == 0
    [hook] = doc(cli(env, "hooks", "list", "--json"))["hooks"]
    assert hook["secret_set"] is True and hook["state"] == "active" and hook["targets"] == ["code-review"]
    rows = doc(cli(env, "triggers", "list", "--json"))["triggers"]
    assert {(r["owner"], r["kind"]): r["state"] for r in rows}[("skill code-review", "webhook")] == "active via /hooks/gh"
    removed = cli(env, "cron", "rm", "brief", "--json")
    assert removed.returncode == 2 and "comes from config.toml" in doc(removed)["error"]["message"]
    skill_job = cli(env, "cron", "rm", "skill:digest", "--json")
    assert skill_job.returncode == 2 and "SKILL.md" in doc(skill_job)["error"]["message"]


def test_hooks_test_refuses_what_it_cannot_send(env: dict[str, str], tmp_path: Path) -> None:
    home = Path(env["PINCER_HOME"])
    (home / "config.toml").write_text('[[hooks]]\nname = "gh"\nauth = "github"\nsecret = "gh_hook_secret"\n')
    payload = tmp_path / "p.json"
    payload.write_text('{"action": "opened"}')
    missing = cli(env, "hooks", "test", "gh", "--payload", str(payload), "--json")
    assert missing.returncode == 2 and doc(missing)["error"]["code"] == "hook_secret_missing"
    assert cli(env, "secrets", "set", "gh_hook_secret", stdin="s3cret").returncode == 0
    no_event = cli(env, "hooks", "test", "gh", "--payload", str(payload), "--json")
    assert no_event.returncode == 2 and "--event" in doc(no_event)["error"]["hint"]
    unknown = cli(env, "hooks", "test", "nope", "--payload", str(payload), "--json")
    assert unknown.returncode == 2 and doc(unknown)["error"]["code"] == "hook_not_found"
    down = cli(env, "hooks", "test", "gh", "--payload", str(payload), "--event", "pull_request", "--url", "http://127.0.0.1:9", "--json")
    assert down.returncode == 1 and "pincer serve" in doc(down)["error"]["hint"]


def test_cron_and_triggers_list_show_a_paused_job_as_paused(env: dict[str, str]) -> None:
    """Issue 21 item 16. Before: `pincer cron list` showed a paused job with its next run, like an
    active one (no state column), and `pincer triggers list` added "(next ...)" to a paused one."""
    assert cli(env, "cron", "add", "ping", "--every", "30m", "--message", "anything new?").returncode == 0
    assert cli(env, "cron", "add", "pong", "--every", "30m", "--message", "still there?").returncode == 0
    assert cli(env, "cron", "pause", "ping").returncode == 0
    lines = {line.split()[1]: line for line in cli(env, "cron", "list").stderr.splitlines() if line.startswith(("│ ping", "│ pong"))}
    assert "│ paused" in lines["ping"] and "(paused)" in lines["ping"]
    assert "│ active" in lines["pong"] and "(paused)" not in lines["pong"]
    paused = [line for line in cli(env, "triggers", "list").stderr.splitlines() if "job ping" in line]
    assert paused and "paused" in paused[0] and "(next" not in paused[0]


def test_a_bearer_hook_says_plainly_that_it_can_be_replayed(env: dict[str, str]) -> None:
    """Failed on main before this test: nothing said that a ``bearer`` hook has no replay
    protection beyond its delivery id (a token is not a signature: whoever saw one delivery
    can send it again under a new id)."""
    home = Path(env["PINCER_HOME"])
    (home / "config.toml").write_text(
        '[[hooks]]\nname = "tok"\nauth = "bearer"\nsecret = "tok_secret"\nmessage = "x"\n\n'
        '[[hooks]]\nname = "std"\nauth = "standard"\nsecret = "std_secret"\nmessage = "x"\n'
    )
    rows = {r["owner"]: r for r in doc(cli(env, "triggers", "list", "--json"))["triggers"]}
    assert "resent under a new id runs again" in rows["hook tok"]["replay_protection"]
    assert 'auth = "standard"' in rows["hook tok"]["replay_protection"]
    assert rows["hook std"]["replay_protection"].startswith("signed id and timestamp")
    for command in (("triggers", "list"), ("hooks", "list")):
        human = cli({**env, "COLUMNS": "400"}, *command)
        text = " ".join(human.stderr.split())
        assert human.returncode == 0 and "replays: delivery id only" in text, human.stderr


def test_an_interval_past_the_bound_is_refused_and_a_stored_one_lists_as_broken(env: dict[str, str]) -> None:
    """Failed on main before this test: ``cron add X --every 99999999999d`` was stored, and
    then ``cron list`` and ``triggers list`` crashed (``year 273792727 is out of range``) until
    the job was removed."""
    import sqlite3

    refused = cli(env, "cron", "add", "X", "--every", "99999999999d", "--message", "hi", "--json")
    assert refused.returncode == 2 and "longer than 3650 days" in doc(refused)["error"]["message"]
    assert doc(cli(env, "cron", "list", "--json"))["jobs"] == []
    # A row stored before the bound existed: the same job, written as main wrote it.
    assert cli(env, "cron", "add", "X", "--every", "1d", "--message", "hi").returncode == 0
    assert cli(env, "cron", "add", "ok", "--every", "1h", "--message", "hi").returncode == 0
    with sqlite3.connect(Path(env["PINCER_HOME"]) / "pincer.db") as db:
        spec = json.loads(db.execute("SELECT spec FROM trigger_jobs WHERE name = 'X'").fetchone()[0])
        spec["schedule"]["every_s"] = 99999999999 * 86_400.0
        db.execute("UPDATE trigger_jobs SET spec = ?, next_run = ? WHERE name = 'X'", (json.dumps(spec), 8.64e15))
    listed = cli(env, "cron", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    jobs = {j["name"]: j for j in doc(listed)["jobs"]}
    assert jobs["ok"]["state"] == "active"
    assert jobs["X"]["state"].startswith("broken: a stored interval") and jobs["X"]["fix"] == "pincer cron rm X, then add it again"
    human = cli({**env, "COLUMNS": "300"}, "cron", "list")
    # Failed before: the broken state printed twice, as the state and again as the last status.
    assert human.returncode == 0 and " ".join(human.stderr.split()).count("pincer cron rm X") == 1, human.stderr
    triggers = cli(env, "triggers", "list", "--json")
    assert triggers.returncode == 0, triggers.stderr
    [row] = [r for r in doc(triggers)["triggers"] if r["owner"] == "job X"]
    assert row["state"].startswith("broken:")
    assert cli(env, "triggers", "list").returncode == 0
    assert cli(env, "cron", "rm", "X").returncode == 0


def test_a_job_name_with_brackets_prints_as_written(env: dict[str, str]) -> None:
    """Failed on main before this test: ``[daily]`` in a job's name (as OpenClaw files have
    them) was read as rich markup and vanished from ``cron add`` and ``cron list``."""
    added = cli(env, "cron", "add", "[daily] brief", "--every", "1h", "--message", "x")
    assert added.returncode == 0 and "job '[daily] brief' added" in added.stderr, added.stderr
    listed = cli({**env, "COLUMNS": "300"}, "cron", "list")
    assert "[daily] brief" in listed.stderr
    assert "[daily] brief" in cli({**env, "COLUMNS": "300"}, "triggers", "list").stderr
