"""Every CLI command as a real subprocess with an isolated PINCER_HOME."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.pending import wait_for_pending

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 60
SECRET = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"


def pincer(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return subprocess.run(
        [*PINCER, *args], input=stdin, capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S
    )


def as_json(result: subprocess.CompletedProcess[str]):
    return json.loads(result.stdout)


def test_version_and_help(tmp_path: Path) -> None:
    result = pincer(tmp_path, "--version")
    assert result.returncode == 0 and result.stdout.startswith("pincer ")
    assert pincer(tmp_path, "tools", "--help").returncode == 0
    assert pincer(tmp_path, "no-such-command").returncode == 2


def test_tools_list_show_and_call(tmp_path: Path) -> None:
    tools = as_json(pincer(tmp_path, "tools", "list", "--json"))
    names = {t["name"] for t in tools}
    assert {"echo", "time", "json", "http", "read_file", "write_file", "list_dir"} <= names
    assert all({"name", "description", "runtime", "effects", "input_schema"} <= set(t) for t in tools)
    shown = as_json(pincer(tmp_path, "tools", "show", "echo", "--json"))
    assert shown["name"] == "echo" and shown["input_schema"]["type"] == "object"

    ok = pincer(tmp_path, "tools", "call", "echo", "--args", '{"text": "hi"}', "--json")
    assert ok.returncode == 0, ok.stderr
    body = as_json(ok)
    assert body == {"ok": True, "output": {"text": "hi"}, "cached": False, "audit_id": 1}
    plain = pincer(tmp_path, "tools", "call", "echo", "--args", '{"text": "plain"}')
    assert plain.returncode == 0 and json.loads(plain.stdout) == {"text": "plain"}


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["tools", "call", "echo", "--args", "{not json"], "usage_error", "not valid JSON"),
        (["tools", "call", "nope", "--args", "{}"], "tool_not_found", "no tool named 'nope'"),
        (["tools", "call", "echo", "--args", '{"text": 5}'], "invalid_arguments", "args.text"),
        (["tools", "call", "write_file", "--args", "{}", "--idempotency-key", "k" * 300], "usage_error", "256"),
    ],
)
def test_bad_input_exits_2_with_a_clear_error_and_an_audit_record(tmp_path: Path, args, code, needle) -> None:
    result = pincer(tmp_path, *args, "--json")
    assert result.returncode == 2, result.stderr
    body = as_json(result)
    assert body["ok"] is False and body["error"]["code"] == code and needle in body["error"]["message"]
    records = as_json(pincer(tmp_path, "audit", "list", "--json"))
    assert len(records) == 1 and records[0]["error_code"] == code


def test_denial_exits_1(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[[grants]]\ntool = "http"\ndefault = "deny"\n')
    result = pincer(tmp_path, "tools", "call", "http", "--args", '{"url": "https://example.com/"}', "--json")
    assert result.returncode == 1
    assert as_json(result)["error"]["code"] == "denied"


def test_corrupt_config_is_a_usage_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[[grants]]\ntool = 'x'\neffects = { network = 'sometimes' }\n")
    result = pincer(tmp_path, "tools", "list")
    assert result.returncode == 2
    assert "grants.0.effects.network" in result.stderr
    # Nothing half-written: no store opened, no workspace made, no tool ran (the keys may be made
    # before the config is read). Was `... or True`, which could not fail (issue 40).
    left = {path.name for path in tmp_path.iterdir()}
    assert left <= {"config.toml", "audit.key", "secret.key"}, sorted(left)
    (tmp_path / "config.toml").write_text("this is = = not toml")
    result = pincer(tmp_path, "policy", "show", "--json")
    assert result.returncode == 2 and as_json(result)["error"]["code"] == "config_error"


def test_secrets_never_printed(tmp_path: Path) -> None:
    stored = pincer(tmp_path, "secrets", "set", "github_token", stdin=SECRET + "\n")
    assert stored.returncode == 0, stored.stderr
    assert SECRET not in stored.stdout + stored.stderr
    key = tmp_path / "secret.key"
    assert key.stat().st_mode & 0o777 == 0o600
    listed = as_json(pincer(tmp_path, "secrets", "list", "--json"))
    assert [s["name"] for s in listed] == ["github_token"]
    assert SECRET not in json.dumps(listed)
    assert SECRET.encode() not in (tmp_path / "secrets.db").read_bytes()
    # A tool that would echo the value gets it redacted, and the audit log never holds it.
    echoed = as_json(pincer(tmp_path, "tools", "call", "echo", "--args", json.dumps({"text": SECRET}), "--json"))
    assert echoed["ok"] and SECRET not in json.dumps(echoed)
    audit = pincer(tmp_path, "audit", "list", "--json")
    assert SECRET not in audit.stdout
    assert pincer(tmp_path, "secrets", "set", "bad name!", stdin="x").returncode == 2
    assert pincer(tmp_path, "secrets", "set", "empty", stdin="").returncode == 2
    assert pincer(tmp_path, "secrets", "rm", "github_token").returncode == 0
    assert as_json(pincer(tmp_path, "secrets", "list", "--json")) == []


def test_approval_round_trip_between_processes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(tmp_path)
    waiting = subprocess.Popen(
        [*PINCER, "tools", "call", "write_file", "--args", '{"path": "a.txt", "content": "hello"}', "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        pending = wait_for_pending(tmp_path, waiting, lambda h: pincer(h, "approvals", "list", "--json"))
        assert len(pending) == 1
        request = pending[0]
        assert request["tool"] == "write_file" and request["effects"] == ["write_filesystem"]
        answered = pincer(tmp_path, "approvals", "approve", request["id"], "--json")
        assert answered.returncode == 0 and as_json(answered)["status"] == "allow_once"
        out, err = waiting.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, err
    assert json.loads(out)["ok"] is True
    assert (tmp_path / "workspace" / "a.txt").read_text() == "hello"
    assert pincer(tmp_path, "approvals", "deny", request["id"]).returncode == 1  # already answered: a failure, not a usage error
    kinds = [(r["kind"], r["decision"]) for r in as_json(pincer(tmp_path, "audit", "list", "--json"))]
    assert ("approval", "allow_once") in kinds


def test_approval_timeout_and_deny(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[approvals]\ntimeout_s = 0.5\n")
    result = pincer(tmp_path, "tools", "call", "write_file", "--args", '{"path": "b", "content": "x"}', "--json")
    assert result.returncode == 1
    assert as_json(result)["error"]["code"] == "approval_timeout"
    assert not (tmp_path / "workspace" / "b").exists()


def test_idempotency_across_processes(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[[grants]]\ntool = "write_file"\ndefault = "allow"\n')
    args = ["tools", "call", "write_file", "--args", '{"path": "c.txt", "content": "1"}', "--idempotency-key", "k1", "--json"]
    first = as_json(pincer(tmp_path, *args))
    second = as_json(pincer(tmp_path, *args))
    assert first["ok"] and not first["cached"]
    assert second["ok"] and second["cached"] and second["output"] == first["output"]


def test_audit_verify_and_tampering(tmp_path: Path) -> None:
    for text in ("a", "b", "c"):
        assert pincer(tmp_path, "tools", "call", "echo", "--args", json.dumps({"text": text})).returncode == 0
    verified = pincer(tmp_path, "audit", "verify", "--json")
    assert verified.returncode == 0
    assert as_json(verified) | {"last_hash": "-", "key_id": "-"} == {
        "ok": True, "full": True, "records": 3, "keyed_from": 1, "plain_records": 0, "last_hash": "-", "key_id": "-",
    }  # fmt: skip
    assert (tmp_path / "audit.key").stat().st_mode & 0o777 == 0o600
    filtered = as_json(pincer(tmp_path, "audit", "list", "--tool", "echo", "--session", "main", "--json"))
    assert len(filtered) == 3
    conn = sqlite3.connect(tmp_path / "pincer.db")
    conn.execute("UPDATE audit SET session = 'other' WHERE id = 2")
    conn.commit()
    conn.close()
    broken = pincer(tmp_path, "audit", "verify", "--json")
    assert broken.returncode == 1 and as_json(broken)["record_id"] == 2
    human = pincer(tmp_path, "audit", "verify")
    assert human.returncode == 1 and "record 2" in human.stderr


def test_policy_show(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[[grants]]\ntool = "http"\neffects = { network = "allow" }\nhosts = ["api.github.com"]\n')
    policy = as_json(pincer(tmp_path, "policy", "show", "--json"))
    assert policy["grants"][0]["hosts"] == ["api.github.com"]
    assert "read_filesystem" in policy["defaults"]["grants"]
