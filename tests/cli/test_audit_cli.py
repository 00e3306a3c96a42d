"""``pincer audit checkpoint`` and ``pincer audit verify --checkpoint`` as real subprocesses, and
the audit key from ``PINCER_AUDIT_KEY``."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
from pathlib import Path

from tests.cli.test_cli import CLI_TIMEOUT_S, PINCER, as_json

KEY_A = base64.b64encode(b"A" * 32).decode()
KEY_B = (b"B" * 32).hex()


def pincer(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    return subprocess.run(
        [*PINCER, *args],
        capture_output=True,
        text=True,
        env={**clean, "PINCER_HOME": str(home), **(env or {})},
        timeout=CLI_TIMEOUT_S,
    )


def _calls(home: Path, count: int, env: dict[str, str] | None = None) -> None:
    for i in range(count):
        result = pincer(home, "tools", "call", "echo", "--args", json.dumps({"text": str(i)}), env=env)
        assert result.returncode == 0, result.stderr


def test_checkpoint_to_stdout_verifies(tmp_path: Path) -> None:
    _calls(tmp_path, 2)
    made = pincer(tmp_path, "audit", "checkpoint")
    assert made.returncode == 0, made.stderr
    document = json.loads(made.stdout)  # the bare checkpoint, ready to pipe elsewhere
    assert document["format"] == "pincer-audit-checkpoint/1" and document["records"] == 2
    assert document["signature"].startswith("hmac-sha256:")
    saved = tmp_path / "shipped.json"
    saved.write_text(made.stdout)
    _calls(tmp_path, 1)
    verified = pincer(tmp_path, "audit", "verify", "--checkpoint", str(saved), "--json")
    report = as_json(verified)
    assert verified.returncode == 0 and report["ok"] and report["records"] == 3
    assert report["checkpoint"]["records"] == 2
    human = pincer(tmp_path, "audit", "verify", "--checkpoint", str(saved))
    assert human.returncode == 0 and "holds the checkpoint" in human.stderr


def test_checkpoint_to_a_file_with_json(tmp_path: Path) -> None:
    _calls(tmp_path, 1)
    target = tmp_path / "out" / "head.json"
    made = pincer(tmp_path, "audit", "checkpoint", "-o", str(target), "--json")
    body = as_json(made)
    assert made.returncode == 0 and body["ok"] and body["file"] == str(target)
    assert json.loads(target.read_text()) == body["checkpoint"]
    assert "written to" in made.stderr


def test_a_broken_chain_gets_no_checkpoint(tmp_path: Path) -> None:
    _calls(tmp_path, 2)
    conn = sqlite3.connect(tmp_path / "pincer.db")
    conn.execute("UPDATE audit SET tool = 'other' WHERE id = 1")
    conn.commit()
    conn.close()
    made = pincer(tmp_path, "audit", "checkpoint", "--json")
    assert made.returncode == 1 and as_json(made)["error"]["code"] == "audit_chain_broken"


def test_an_altered_checkpoint_file_is_refused(tmp_path: Path) -> None:
    _calls(tmp_path, 3)
    document = json.loads(pincer(tmp_path, "audit", "checkpoint").stdout)
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**document, "records": 1, "last_id": 1}))
    result = pincer(tmp_path, "audit", "verify", "--checkpoint", str(forged), "--json")
    assert result.returncode == 1 and as_json(result)["error"]["code"] == "checkpoint_invalid"
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\xff\x00 not json")
    human = pincer(tmp_path, "audit", "verify", "--checkpoint", str(garbage))
    assert human.returncode == 1 and "not JSON" in human.stderr and "pincer audit checkpoint" in human.stderr


def test_the_audit_key_from_the_environment(tmp_path: Path) -> None:
    _calls(tmp_path, 1, env={"PINCER_AUDIT_KEY": KEY_A})
    assert not (tmp_path / "audit.key").exists()
    verified = pincer(tmp_path, "audit", "verify", "--json", env={"PINCER_AUDIT_KEY": KEY_A})
    assert verified.returncode == 0 and as_json(verified)["records"] == 1
    # Another key cannot extend or verify this log: refused at open, naming what to do.
    other = pincer(tmp_path, "audit", "verify", "--json", env={"PINCER_AUDIT_KEY": KEY_B})
    error = as_json(other)["error"]
    assert other.returncode == 1 and "audit key" in error["message"] and "PINCER_AUDIT_KEY" in error["hint"]
    bad = pincer(tmp_path, "audit", "verify", env={"PINCER_AUDIT_KEY": "not a key"})
    assert bad.returncode == 1 and "PINCER_AUDIT_KEY" in bad.stderr and "not a key" not in bad.stderr


def test_archive_then_verify_across_the_archive_through_the_cli(tmp_path: Path) -> None:
    """``pincer audit archive DIR`` moves the records into segments; ``verify`` walks from the
    archived mark, ``verify --archive DIR`` across both; a deleted segment is named; ``verify``
    walks every record still in the database unless told ``--since-mark``; a bad ``--before`` names what it accepts."""
    _calls(tmp_path, 3)
    archive = tmp_path / "audit-archive"
    done = as_json(pincer(tmp_path, "audit", "archive", str(archive), "--json"))
    assert done["ok"] is True and (done["first_id"], done["last_id"]) == (1, 3) and len(done["segments"]) == 1
    _calls(tmp_path, 2)
    with sqlite3.connect(tmp_path / "pincer.db") as conn:
        assert conn.execute("SELECT MIN(id), COUNT(*) FROM audit").fetchone() == (4, 2)
    assert as_json(pincer(tmp_path, "audit", "verify", "--since-mark", "--json"))["records"] == 5
    full = as_json(pincer(tmp_path, "audit", "verify", "--json"))
    assert full["full"] is True and full["records"] == 5
    across = as_json(pincer(tmp_path, "audit", "verify", "--archive", str(archive), "--json"))
    assert across["ok"] is True and across["records"] == 5
    for segment in archive.iterdir():
        segment.unlink()
    broken = pincer(tmp_path, "audit", "verify", "--archive", str(archive))
    assert broken.returncode == 1 and "archive ends at record 0" in broken.stderr
    bad = pincer(tmp_path, "audit", "archive", str(archive), "--before", "last tuesday")
    assert bad.returncode != 0 and "90d" in bad.stderr


def test_db_prune_deletes_old_answered_approvals_and_keeps_the_audit_log(tmp_path: Path) -> None:
    _calls(tmp_path, 2)
    with sqlite3.connect(tmp_path / "pincer.db") as conn:
        for n, (status, answered) in enumerate((("deny", 1_000.0), ("allow_once", 9e9), ("pending", None))):
            conn.execute(
                "INSERT INTO approvals (id, created_at, expires_at, session, tool, args, effects, hosts, reason, "
                "status, answered_at, closed_at, session_kind, detail) VALUES (?, 1, 9e9, 'main', 't', '{}', '[]', "
                "'[]', 'r', ?, ?, ?, 'main', '{}')",
                (f"a{n}", status, answered, answered),  # closed_at: set with the answer (revision 0008)
            )
    pruned = as_json(pincer(tmp_path, "db", "prune", "--json"))
    assert pruned["pruned"]["approvals"] == 1
    with sqlite3.connect(tmp_path / "pincer.db") as conn:
        assert sorted(r[0] for r in conn.execute("SELECT id FROM approvals")) == ["a1", "a2"]
        assert conn.execute("SELECT COUNT(*) FROM audit").fetchone() == (2,)


def test_an_edit_before_the_verified_mark_is_named_by_a_plain_verify(tmp_path: Path) -> None:
    """A verify that ends intact leaves a signed mark, and a walk from that mark cannot see a
    record edited before it. ``pincer audit verify`` is what a person runs when they suspect the
    log, so it walks every record unless told ``--since-mark`` (which, as documented, does not
    see such an edit)."""
    _calls(tmp_path, 3)
    first = as_json(pincer(tmp_path, "audit", "verify", "--json"))
    assert first["ok"] is True and first["records"] == 3
    with sqlite3.connect(tmp_path / "pincer.db") as conn:  # a database writer without the key
        conn.execute("UPDATE audit SET tool = 'exec' WHERE id = 1")
    plain = pincer(tmp_path, "audit", "verify", "--json")
    assert plain.returncode == 1, plain.stdout
    assert as_json(plain)["ok"] is False and as_json(plain)["record_id"] == 1
    since = pincer(tmp_path, "audit", "verify", "--since-mark", "--json")
    assert since.returncode == 0 and as_json(since)["full"] is False
