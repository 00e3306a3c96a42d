"""``pincer people``: the local CLI is the owner. Each change is one act record naming the CLI
user; a token is printed once, never recorded, and stored only as its sha256; bad input is refused
with what was wrong and nothing written."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from tests.acts.support import audit_rows, last_id, rows_after
from tests.gateway.ui.conftest import pincer_cli


def test_each_people_act_writes_one_record_naming_the_cli_user_and_never_the_token(pincer_home: Path) -> None:
    added = pincer_cli(pincer_home, "people", "add", "alice", "--role", "approver:tool=github_*", "--role", "viewer",
                       "--email", "alice@example.test", "--json")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["roles"] == ["approver:tool=github_*", "viewer"]
    assert pincer_cli(pincer_home, "people", "add", "root", "--admin").returncode == 0
    before = last_id(pincer_home)
    made = pincer_cli(pincer_home, "people", "token", "alice", "--expires", "30d", "--json")
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)
    (act,) = rows_after(pincer_home, before)
    assert (act["kind"], act["outcome"], act["tool"], act["caller"][:4]) == ("person", "token-created", "alice", "cli:")
    assert token["token"] not in json.dumps(audit_rows(pincer_home))
    with sqlite3.connect(pincer_home / "pincer.db") as conn:
        assert conn.execute("SELECT digest FROM person_tokens").fetchall() == [(hashlib.sha256(token["token"].encode()).hexdigest(),)]
    listed = pincer_cli(pincer_home, "people", "tokens", "--json")
    assert token["token"] not in listed.stdout and json.loads(listed.stdout)[0]["id"] == token["id"]
    before = last_id(pincer_home)
    changed = pincer_cli(pincer_home, "people", "roles", "alice", "--role", "operator", "--json")
    assert changed.returncode == 0 and json.loads(changed.stdout)["roles"] == ["operator"], changed.stderr
    assert pincer_cli(pincer_home, "people", "roles", "alice").returncode != 0  # no role: refused, unchanged
    assert pincer_cli(pincer_home, "people", "revoke", token["id"]).returncode == 0
    assert pincer_cli(pincer_home, "people", "remove", "alice").returncode == 0
    assert [(r["outcome"], r["tool"]) for r in rows_after(pincer_home, before)] == [
        ("roles-set", "alice"), ("token-revoked", "alice"), ("removed", "alice")]  # fmt: skip
    people = json.loads(pincer_cli(pincer_home, "people", "list", "--json").stdout)
    assert [(p["name"], p["roles"]) for p in people] == [("root", ["admin"])]
    assert [r["outcome"] for r in audit_rows(pincer_home) if r["kind"] == "person"] == [
        "added", "added", "token-created", "roles-set", "token-revoked", "removed"]  # fmt: skip
    assert pincer_cli(pincer_home, "audit", "verify").returncode == 0


def test_wrong_input_is_refused_with_what_to_do_and_nothing_written(pincer_home: Path) -> None:
    for args, said in (
        (("add", "bob"), "needs a role"),
        (("add", "bob", "--role", "boss"), "unknown role 'boss'"),
        (("add", "bob", "--role", "viewer:tool=x"), "takes no scope"),
        (("add", "Bob Smith", "--role", "viewer"), "not a person's name"),
        (("token", "nobody"), "no person named 'nobody'"),
        (("revoke", "pt_000000000000"), "no live token"),
        (("remove", "nobody"), "no person named"),
    ):
        refused = pincer_cli(pincer_home, "people", *args)
        assert refused.returncode != 0 and said in refused.stderr, (args, refused.stderr)
        assert "hint" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert pincer_cli(pincer_home, "people", "add", "bob", "--role", "viewer").returncode == 0
    refused = pincer_cli(pincer_home, "people", "token", "bob", "--expires", "soon")
    assert refused.returncode != 0 and "neither a duration nor a date" in refused.stderr
    assert json.loads(pincer_cli(pincer_home, "people", "tokens", "--json").stdout) == []
    assert [r["outcome"] for r in audit_rows(pincer_home) if r["kind"] == "person"] == ["added"]
