"""The first steps of a PostgreSQL home come before its schema, and their acts are not lost.

How it broke: with acts audited (docs/acts.md), ``pincer secrets set pg_password`` on a new
PostgreSQL home stored the password and then exited 1 ("has no pincer schema yet; run `pincer
db upgrade`"), while ``pincer db upgrade`` needs that very password: the steps only worked if
the person ignored the failure, and the act was never recorded. Now the act's record waits in
PINCER_HOME and ``pincer db upgrade`` writes it into the log it has just made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.backends import postgres_server

PINCER_BIN = Path(sys.executable).with_name("pincer")
CLI_TIMEOUT_S = 120


def _cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PINCER_BIN), *args], input=stdin, capture_output=True, text=True,
        env={**os.environ, "PINCER_HOME": str(home)}, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip


def test_the_password_is_set_before_the_schema_and_its_act_recorded_by_db_upgrade(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    database = postgres_server().new_database()  # trust authentication: the password is sent, not needed
    (home / "config.toml").write_text(f'[store]\nurl = "{database}"\npassword_secret = "pg_password"\n')

    stored = _cli(home, "secrets", "set", "pg_password", stdin="pw-first-steps-8841")
    assert stored.returncode == 0, stored.stderr
    assert "pincer db upgrade" in stored.stderr and "pw-first-steps-8841" not in stored.stderr
    assert (home / "acts-pending.json").stat().st_mode & 0o077 == 0

    upgraded = _cli(home, "db", "upgrade", "--json")
    assert upgraded.returncode == 0, upgraded.stderr
    assert json.loads(upgraded.stdout)["acts_recorded"] == 1
    assert not (home / "acts-pending.json").exists()

    listed = _cli(home, "audit", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    records = json.loads(listed.stdout)
    acts = [r for r in records if r["kind"] == "secret" and r["tool"] == "pg_password"]
    assert len(acts) == 1, records
    assert acts[0]["caller"].startswith("cli:") and "pw-first-steps-8841" not in json.dumps(records)
    verified = _cli(home, "audit", "verify")
    assert verified.returncode == 0, verified.stderr

    # Run again: nothing left waiting, nothing recorded twice.
    again = _cli(home, "db", "upgrade", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["acts_recorded"] == 0
