"""``pincer run``, ``pincer chat`` and ``pincer runs`` as real subprocesses against the local model
server: streamed text on stdout, a line per tool call, approvals answered on stdin, Ctrl-C
stopping a turn (not the program), cross-process cancel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from tests.acts.support import CLI_ACTOR, audit_rows

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 60
WAIT_S = 90.0  # bounded waits for another process; a loaded 2-core machine has needed over 30 s
POLL_S = 0.05


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    env["HOME"] = str(home.parent / "user-home")
    return env


def pincer(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PINCER, *args], input=stdin, capture_output=True, text=True, env=_env(home), timeout=CLI_TIMEOUT_S)


def _home(tmp_path: Path, server, extra: str = "") -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[llm]\nmodel = "gpt-4o-mini"\nbase_url = "{server.openai_url}"\n\n[approvals]\ntimeout_s = 30\n' + extra
    )
    return home


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(POLL_S)


def test_run_streams_text_shows_tool_lines_asks_on_stdin_and_sums_up(tmp_path: Path) -> None:
    script = [
        Turn(text="Writing the notes.", calls=(ScriptedCall(name="write_file", arguments={"path": "RELEASE.md", "content": "## 1.0"}),),
             input_tokens=1000, output_tokens=100),
        Turn(text="Wrote RELEASE.md.", input_tokens=1200, output_tokens=50),
    ]
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        result = pincer(home, "run", "release-notes", "--param", "version=1.0", "--param", "output=RELEASE.md", stdin="y\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Writing the notes.\nWrote RELEASE.md.\n"
    assert "approval" in result.stderr and "write_file" in result.stderr and "allow? [y]es once" in result.stderr
    assert '> write_file {"path": "RELEASE.md", "content": "## 1.0"} -> ok' in result.stderr
    # gpt-4o-mini has a built-in price: 2,200 input and 150 output tokens.
    assert "2 turns, 1 tool calls, 2,200 input / 150 output tokens, $0.0004" in result.stderr
    assert (home / "workspace" / "RELEASE.md").read_text() == "## 1.0"
    assert "Release notes for 1.0" in json.dumps(server.requests[0].body)
    # The answer at the prompt is one act, by the CLI's user (docs/acts.md: approval-answer).
    answers = [r for r in audit_rows(home) if r["kind"] == "approval"]
    assert [(r["caller"], r["decision"], r["tool"]) for r in answers] == [(CLI_ACTOR, "allow_once", "write_file")]


def test_run_json_is_one_document_and_a_denied_answer_reaches_the_model(tmp_path: Path) -> None:
    script = [Turn(calls=(ScriptedCall(name="write_file", arguments={"path": "x.md", "content": "x"}),)), Turn(text="Could not write.")]
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        result = pincer(home, "run", "release-notes", "-p", "version=2.0", "--json", stdin="n\n")
        denied = json.dumps(server.requests[1].body)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["status"] == "done" and data["text"] == "Could not write."
    assert data["tool_calls"][0]["error_code"] == "approval_denied"
    assert "denied (approval_denied)" in denied
    assert not (home / "workspace" / "x.md").exists()


def test_run_refuses_bad_params_and_budgets_with_exit_2_and_records_nothing(tmp_path: Path) -> None:
    with serve_models([]) as server:
        home = _home(tmp_path, server)
        missing = pincer(home, "run", "release-notes", "--json")
        assert missing.returncode == 2 and json.loads(missing.stdout)["error"]["code"] == "invalid_arguments"
        budget = pincer(home, "run", "release-notes", "-p", "version=1", "--budget", "turn=3")
        assert budget.returncode == 2 and "unknown budget 'turn'" in budget.stderr
        nothing = json.loads(pincer(home, "runs", "list", "--json").stdout)
        assert nothing == [] and server.requests == []
        helped = pincer(home, "run", "--help").stdout
        assert "--api-key" not in helped and "--budget" in helped  # a key never comes from argv


def test_a_budget_from_the_command_line_stops_the_run_with_exit_1(tmp_path: Path) -> None:
    script = [Turn(calls=(ScriptedCall(name="echo", arguments={"text": "a"}),))] * 3
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        result = pincer(home, "run", "release-notes", "-p", "version=1", "--budget", "turns=1", "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert (data["status"], data["stop"]) == ("budget_exceeded", "turns")


def test_runs_list_show_and_cancel_from_another_process(tmp_path: Path) -> None:
    with serve_models([Turn(text="slow", delay_s=40)]) as server:
        home = _home(tmp_path, server)
        proc = subprocess.Popen(
            [*PINCER, "run", "release-notes", "-p", "version=1", "--json"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(home),
        )  # fmt: skip
        try:
            _wait_for(lambda: server.requests, "the run's first request")
            listed = json.loads(pincer(home, "runs", "list", "--json").stdout)
            assert [r["status"] for r in listed] == ["running"]
            run_id = listed[0]["id"]
            cancelled = pincer(home, "runs", "cancel", run_id)
            assert cancelled.returncode == 0 and "cancel requested" in cancelled.stderr
            out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
        finally:
            proc.kill()
    assert proc.returncode == 1, err
    assert json.loads(out)["status"] == "cancelled"
    shown = json.loads(pincer(home, "runs", "show", run_id, "--json").stdout)
    assert shown["status"] == "cancelled" and shown["skill"] == "release-notes" and shown["params"] == {"version": "1", "changes": "CHANGES.txt", "output": ""}
    assert [m["role"] for m in shown["messages"]] == ["system", "user"]
    human = pincer(home, "runs", "show", run_id)
    assert human.returncode == 0 and f"run {run_id}: cancelled" in human.stderr
    table = pincer(home, "runs", "list")
    assert run_id in table.stderr and "release-notes" in table.stderr
    again = pincer(home, "runs", "cancel", run_id)
    assert "had already ended: cancelled" in again.stderr
    assert pincer(home, "runs", "show", "nope").returncode == 2


def _reader(stream, sink: list[str]) -> None:
    for line in iter(stream.readline, ""):
        sink.append(line)


def test_chat_runs_commands_lists_and_survives_ctrl_c(tmp_path: Path) -> None:
    script = [
        Turn(text="Hello! How can I help?"),
        Turn(text="Working on it...", delay_s=40),  # interrupted with Ctrl-C
        Turn(text="Notes for 3.0 drafted."),  # the /release-notes command's run
        Turn(text="Still here."),
    ]
    with serve_models(script) as server:
        home = _home(tmp_path, server)
        proc = subprocess.Popen(
            [*PINCER, "chat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=_env(home), bufsize=1,
        )  # fmt: skip
        out: list[str] = []
        err: list[str] = []
        threads = [threading.Thread(target=_reader, args=(proc.stdout, out), daemon=True),
                   threading.Thread(target=_reader, args=(proc.stderr, err), daemon=True)]  # fmt: skip
        for t in threads:
            t.start()
        try:
            assert proc.stdin is not None
            proc.stdin.write("hello\n")
            proc.stdin.flush()
            _wait_for(lambda: "Hello! How can I help?\n" in out, "the first answer")
            proc.stdin.write("/skills\n/tools\nplease wait\n")
            proc.stdin.flush()
            _wait_for(lambda: len(server.requests) == 2, "the slow turn")
            time.sleep(0.3)  # let the turn settle into its wait before the interrupt
            proc.send_signal(signal.SIGINT)
            _wait_for(lambda: any("[cancelled" in line for line in err), "the cancelled turn")
            proc.stdin.write("/release-notes version=3.0\nstill there?\n/exit\n")
            proc.stdin.flush()
            proc.wait(timeout=CLI_TIMEOUT_S)
        finally:
            proc.kill()
            for t in threads:
                t.join(5)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
    text = "".join(err)
    assert proc.returncode == 0, text
    assert "release-notes /release-notes" in text  # /skills
    assert "tools (all sent to the model)" in text and "write_file" in text  # /tools
    assert "Notes for 3.0 drafted.\n" in out and "Still here.\n" in out
    command_run = next(r for r in server.requests if "Release notes for 3.0" in json.dumps(r.body))
    assert command_run.body["messages"][0]["role"] == "system"
    # The chat's last request holds the whole conversation, the cancelled message included.
    last = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "user"]
    assert last == ["hello", "please wait", "still there?"]
    runs = json.loads(pincer(home, "runs", "list", "--json").stdout)
    assert sorted((r["trigger"], r["status"]) for r in runs) == [("chat", "done"), ("command:/release-notes", "done")]
    # /NAME is a firing of the skill's command trigger: recorded and audited as one.
    records = json.loads(pincer(home, "audit", "list", "--json").stdout)
    fired = [r for r in records if r["kind"] == "trigger"]
    command_run_id = next(r["id"] for r in runs if r["trigger"] == "command:/release-notes")
    assert [r["tool"] for r in fired] == ["command:/release-notes"] and fired[0]["args"]["run_id"] == command_run_id


def test_demo_shows_a_skill_run_against_the_local_model_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    result = pincer(home, "demo")
    assert result.returncode == 0, result.stderr[-3000:]
    text = " ".join(result.stderr.split())
    assert "skill run: code-review path=notes" in text
    assert '> list_dir {"path": "notes"} -> ok' in text and '> read_file {"path": "notes/hello.txt"} -> ok' in text
    assert "Review of notes/: hello.txt holds one word" in result.stdout  # the model's text, as `pincer run` shows it
    assert "done; 2 turns, 2 tool calls, 4,150 input / 105 output tokens (1,800 cached), $0.0006" in text
    assert "audit verify: chain intact" in text


def _command_problems(line: str) -> list[str]:
    """Walk ``pincer a b ...`` down the real command tree; every --flag must be an option of the
    command reached (after the subcommands, any positional words are that command's arguments)."""
    import typer.main
    from typer import _click
    from typer.core import TyperGroup

    from pincer.cli.main import app

    node = typer.main.get_command(app)
    problems = []
    words = line.split()[1:]
    for word in words:
        if word.startswith("--"):
            options = {opt for param in node.params for opt in getattr(param, "opts", [])}
            if word.split("=")[0] not in options:
                problems.append(f"{node.name} has no option {word}")
        elif isinstance(node, TyperGroup):
            alternatives = word.split("|")
            for alternative in alternatives[1:]:
                if node.get_command(_click.Context(node), alternative) is None:
                    problems.append(f"{node.name} has no subcommand {alternative!r}")
            found = node.get_command(_click.Context(node), alternatives[0])
            if found is None:
                problems.append(f"{node.name} has no subcommand {alternatives[0]!r}")
                break
            node = found
    return problems


def test_every_agent_command_the_docs_show_exists() -> None:
    """docs/agent.md shows these commands: each word a real subcommand, each --flag a real
    option of the command it reaches."""
    root = Path(__file__).resolve().parents[2]
    agent_doc = (root / "docs" / "agent.md").read_text()
    lines = [
        line.split("  #", 1)[0].strip()
        for block in agent_doc.split("```sh\n")[1:]
        for line in block.split("```", 1)[0].splitlines()
        if line.strip().startswith("pincer ")
    ]
    assert len(lines) >= 10
    for line in lines:
        # "[--param k=v ...]", "[--json]": the flags count, the brackets and the "|" between
        # alternatives of a whole line ("list | show ID") do not.
        for part in line.replace(" | ", " |").split(" |"):
            command = part if part.startswith("pincer ") else "pincer runs " + part
            words = " ".join(w.strip("[]") for w in command.split() if w.strip("[]") and w != "...")
            assert not _command_problems(words), (line, _command_problems(words))
    assert _command_problems("pincer run x --no-such-flag") == ["run has no option --no-such-flag"]
    assert _command_problems("pincer runs nope") == ["runs has no subcommand 'nope'"]


def test_the_agent_config_examples_in_the_docs_are_valid(tmp_path: Path) -> None:
    from pincer.config_check import check_config_text

    agent_doc = (Path(__file__).resolve().parents[2] / "docs" / "agent.md").read_text()
    blocks = [part.split("```", 1)[0] for part in agent_doc.split("```toml\n")[1:]]
    assert len(blocks) == 2  # [llm] with its profiles, [agent] with a price
    for block in blocks:
        assert check_config_text(block, home=tmp_path) == []


def test_the_chat_banner_names_a_command_this_home_answers(tmp_path: Path) -> None:
    """Failed on main before this test: the banner's example was always ``/review path=src``,
    also once a skill of the user's named code-review (declaring no command) shadowed the bundled
    one and took /review away. (A workspace skill no longer shadows a trusted one: issue 20.)"""
    with serve_models([Turn(text="hi")]) as server:
        home = _home(tmp_path, server)
        assert "(/review path=" in pincer(home, "chat", stdin="/exit\n").stderr
        skills = home / "skills"
        for name, front in (("code-review", ""), ("digest", "triggers:\n  - command: /digest\n")):
            (skills / name).mkdir(parents=True)
            (skills / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: The {name} skill\n{front}---\nDo it.\n")
        shadowed = pincer(home, "chat", stdin="/help\n/exit\n")
    assert shadowed.returncode == 0, shadowed.stderr
    assert "/review" not in shadowed.stderr and shadowed.stderr.count("runs a skill's command (/digest)") == 2
