"""Every act of docs/acts.md that the CLI does, through the real CLI (a subprocess each): exactly
one audit record of the act's kind and outcome, naming ``cli:<user>`` (the uid's user name).

Each case prepares its home (which may write records of its own), then runs the one command of
the act; only the records that command wrote are counted."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from pincer.hub.signing import generate_key
from pincer.runtimes.wasm import install as disk
from tests.acts.support import CLI_ACTOR, last_id, notes_server, only_act, rows_after
from tests.cli.pending import wait_for_pending
from tests.gateway.ui.conftest import pincer_cli, waiting_call
from tests.processes import SHOUT_MANIFEST
from tests.runtimes.wasm.conftest import private_compile_cache, wasm_compile_cache, wasm_components  # noqa: F401 - fixtures

TOKEN = "ghp_actsTestToken0123456789abcdefghijklmnop"
SECRET_VALUE = "s3cr3t-value-for-the-acts-test-0123456789"


@dataclass(frozen=True, kw_only=True)
class Act:
    """One CLI act: ``prepare(home, tmp)`` sets the home up and returns the act's command line
    (and its stdin); the record it must write."""

    act: str  # the act's row in docs/acts.md
    prepare: Callable[[Path, Path], tuple[list[str], str | None]]
    kind: str
    outcome: str
    subject: str
    args: Mapping[str, object] | None = None  # fields the record's args must hold


def _ok(home: Path, *args: str, stdin: str | None = None) -> None:
    done = pincer_cli(home, *args, stdin=stdin)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}{done.stdout}"


def _notes_server(tmp: Path) -> list[str]:
    return notes_server(tmp)[0]


def _mcp_add(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    return ["mcp", "add", "notes", *_notes_server(tmp), "--json"], None


def _mcp_remove(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _ok(home, "mcp", "add", "notes", *_notes_server(tmp), "--no-connect")
    return ["mcp", "remove", "notes"], None


def _mcp_import(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    listing = tmp / "clients.json"
    listing.write_text(json.dumps({"mcpServers": {"notes": {"command": sys.executable, "args": ["-u", str(tmp / "x.py")]}}}))
    return ["mcp", "import", str(listing), "--json"], None


def _openapi_document(tmp: Path) -> Path:
    document = {
        "openapi": "3.1.0", "info": {"title": "Weather", "version": "1"}, "servers": [{"url": "https://api.example.com"}],
        "paths": {"/forecast": {"get": {"operationId": "forecast", "responses": {"200": {"description": "ok"}}}}},
    }  # fmt: skip
    path = tmp / "weather.json"
    path.write_text(json.dumps(document))
    return path


def _openapi_add(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    return ["openapi", "add", "weather", "--spec", str(_openapi_document(tmp)), "--force", "--json"], None


def _openapi_remove(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _ok(home, "openapi", "add", "weather", "--spec", str(_openapi_document(tmp)), "--force")
    return ["openapi", "remove", "weather"], None


def _shout(tmp: Path) -> Path:
    manifest = tmp / "shout.toml"
    manifest.write_text(SHOUT_MANIFEST)
    return manifest


def _tool_install(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    return ["tools", "install", str(_shout(tmp)), "--json"], None


def _tool_remove(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _ok(home, "tools", "install", str(_shout(tmp)))
    return ["tools", "remove", "shout"], None


def _skill_approve(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    skill = home / "workspace" / "skills" / "helper"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: helper\ndescription: Helps.\n---\nHelp.\n")
    return ["skills", "approve", "helper", "--json"], None


def _secret_set(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    return ["secrets", "set", "api_token"], SECRET_VALUE + "\n"


def _secret_remove(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _ok(home, "secrets", "set", "api_token", stdin=SECRET_VALUE + "\n")
    return ["secrets", "rm", "api_token"], None


def _github(home: Path) -> None:
    (home / "config.toml").write_text('[builtins.github]\nenabled = true\nbase_url = "https://api.github.invalid"\n')


def _auth_setup(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _github(home)
    return ["auth", "setup", "github", "--no-check", "--json"], TOKEN + "\n"


def _auth_revoke(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _github(home)
    _ok(home, "auth", "setup", "github", "--no-check", stdin=TOKEN + "\n")
    return ["auth", "revoke", "github", "--json"], None


PUBLIC_KEY = generate_key().public


def _signer_trust(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    return ["hub", "trust", "add", "alice", PUBLIC_KEY, "--json"], None


def _signer_forget(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    _ok(home, "hub", "trust", "add", "alice", PUBLIC_KEY)
    return ["hub", "trust", "rm", "alice", "--json"], None


def _token_new(home: Path, tmp: Path) -> tuple[list[str], str | None]:
    return ["token", "new", "--session", "helper", "--json"], None


ACTS = [
    Act(act="mcp-add", prepare=_mcp_add, kind="extension", outcome="added", subject="notes"),
    Act(act="mcp-remove", prepare=_mcp_remove, kind="extension", outcome="removed", subject="notes"),
    Act(act="mcp-import", prepare=_mcp_import, kind="extension", outcome="imported", subject="import:clients.json",
        args={"servers": ["notes"]}),
    Act(act="openapi-add", prepare=_openapi_add, kind="extension", outcome="added", subject="weather",
        args={"host": "api.example.com"}),
    Act(act="openapi-remove", prepare=_openapi_remove, kind="extension", outcome="removed", subject="weather"),
    Act(act="tool-install", prepare=_tool_install, kind="extension", outcome="installed", subject="shout",
        args={"runtime": "script"}),
    Act(act="tool-remove", prepare=_tool_remove, kind="extension", outcome="removed", subject="shout"),
    Act(act="skill-approve", prepare=_skill_approve, kind="skill", outcome="approved", subject="helper",
        args={"approved": "trusted", "approved_by": CLI_ACTOR}),
    Act(act="secret-set", prepare=_secret_set, kind="secret", outcome="set", subject="api_token"),
    Act(act="secret-remove", prepare=_secret_remove, kind="secret", outcome="removed", subject="api_token"),
    Act(act="secret-set", prepare=_auth_setup, kind="secret", outcome="set", subject="github_token", args={"tool": "github"}),
    Act(act="secret-remove", prepare=_auth_revoke, kind="secret", outcome="removed", subject="github_token"),
    Act(act="signer-trust", prepare=_signer_trust, kind="signer", outcome="trusted", subject="alice"),
    Act(act="signer-forget", prepare=_signer_forget, kind="signer", outcome="forgotten", subject="alice"),
    Act(act="token-new", prepare=_token_new, kind="token", outcome="created", subject="helper"),
]  # fmt: skip


@pytest.mark.parametrize("case", ACTS, ids=lambda c: f"{c.act}:{c.prepare.__name__.lstrip('_')}")
def test_each_cli_act_writes_one_record_naming_the_cli_user(case: Act, pincer_home: Path, tmp_path: Path) -> None:
    argv, stdin = case.prepare(pincer_home, tmp_path)
    before = last_id(pincer_home)
    done = pincer_cli(pincer_home, *argv, stdin=stdin)
    assert done.returncode == 0, done.stderr + done.stdout
    record = only_act(rows_after(pincer_home, before))
    assert (record["kind"], record["outcome"], record["tool"], record["caller"], record["decision"]) == (
        case.kind, case.outcome, case.subject, CLI_ACTOR, "allow")  # fmt: skip
    assert record["session"] == "cli" and CLI_ACTOR in record["reason"]
    args = json.loads(record["args"])
    for key, value in (case.args or {}).items():
        assert args.get(key) == value, (key, args)
    # What the act handled in secret never reaches the log, by name or not.
    database = (pincer_home / "pincer.db").read_bytes()
    assert TOKEN.encode() not in database and SECRET_VALUE.encode() not in database


def test_wasm_install_and_remove_each_write_one_record(wasm_components, private_compile_cache, pincer_home: Path) -> None:  # noqa: F811
    shutil.copytree(private_compile_cache("echo"), disk.cache_dir(pincer_home))  # a cache hit: seconds, not 20
    for argv, outcome in ((["wasm", "install", str(wasm_components["echo"]), "--name", "e1", "--json"], "installed"),
                          (["wasm", "remove", "e1", "--json"], "removed")):  # fmt: skip
        before = last_id(pincer_home)
        done = pincer_cli(pincer_home, *argv)
        assert done.returncode == 0, done.stderr
        record = only_act(rows_after(pincer_home, before))
        assert (record["kind"], record["outcome"], record["tool"], record["caller"]) == ("extension", outcome, "e1", CLI_ACTOR)
        assert json.loads(record["args"])["runtime"] == "wasm"


@pytest.mark.parametrize("always", [False, True], ids=["once", "always"])
def test_answering_an_approval_from_the_cli_writes_one_record(pincer_home: Path, always: bool) -> None:
    caller = waiting_call(pincer_home, "write_file", json.dumps({"path": "a.txt", "content": "hello"}))
    try:
        (pending,) = wait_for_pending(pincer_home, caller, lambda h: pincer_cli(h, "approvals", "list", "--json"))
        before = last_id(pincer_home)
        answered = pincer_cli(pincer_home, "approvals", "approve", pending["id"], *(["--always"] if always else []), "--json")
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout)["answered_by"] == CLI_ACTOR
        caller.communicate(timeout=60)
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.communicate(timeout=60)
    answers = [r for r in rows_after(pincer_home, before) if r["kind"] == "approval"]
    assert len(answers) == 1, answers
    (answer,) = answers
    assert (answer["caller"], answer["decision"], answer["outcome"], answer["approval_id"]) == (
        CLI_ACTOR, "allow_always" if always else "allow_once", "answered", pending["id"])  # fmt: skip
