"""Make the databases a pincer from before the one store history wrote: the upgrade tests' input.

Run with the *older* pincer first on the path (a checkout of the commit before the store moved to
one schema, e.g. ``git worktree add --detach /tmp/before db202f8``)::

    PYTHONPATH=/tmp/before/src .venv/bin/python tests/store/legacy/make_fixtures.py

It opens that pincer on a fresh SQLite home and on a fresh PostgreSQL database (the test
server of tests/backends.py, after that pincer's own ``pincer db upgrade``), writes a little of
everything through its own stores (audit records chained under :data:`AUDIT_KEY`, a grant, an
approval, an idempotent result, a run and its messages, a job, a webhook delivery and its firing,
a dashboard sign-in) and dumps each database as SQL beside this file: ``main-sqlite.sql``
(``iterdump`` plus its ``user_version``) and ``main-postgres.sql`` (``pg_dump --inserts``). The
files are committed; this script is how they were made.
"""

from __future__ import annotations

import glob
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # the repository, for tests.backends

AUDIT_KEY = b"m" * 32
SECRET_KEY = b"s" * 32


async def write_everything(pincer: Any) -> None:
    from pincer.core.effects import EffectKind, Mode
    from pincer.core.values import CallRequest
    from pincer.policy.grants import Grant
    from pincer.store.sign_ins import SignIn
    from pincer.store.triggers import DeliveryRow, FiringRow

    for i in range(5):
        result = await pincer.call(
            CallRequest(tool="echo", args={"text": f"call {i}"}, session="main", caller=f"fixture-{i}")
        )
        assert result.ok, result.error
    keyed = await pincer.call(CallRequest(tool="echo", args={"text": "once"}, idempotency_key="key-1"))
    assert keyed.ok
    pincer.grants.add(Grant(tool="http", effects={EffectKind.NETWORK: Mode.ALLOW}, id="grant-1", source="approval"))
    pending = pincer.approvals.create(
        session="main",
        tool="http",
        args={"url": "https://example.org"},
        effects=("network",),
        hosts=("example.org",),
        reason="asks",
        timeout_s=3600,
    )
    answered = pincer.approvals.create(
        session="main",
        tool="write_file",
        args={"path": "a"},
        effects=("write_filesystem",),
        hosts=(),
        reason="asks",
        timeout_s=3600,
    )
    pincer.approvals.answer(answered.id, "allow_once", by="fixture")
    pincer.runs.create(
        run_id="run-1",
        skill=None,
        params={"p": 1},
        message="hello",
        trigger="cli",
        session="main",
        provider="openai",
        model="gpt-x",
    )
    pincer.runs.append_message("run-1", 0, "user", {"content": "hello"})
    pincer.runs.update("run-1", usage={"input_tokens": 3}, status="done", stop="end")
    store = pincer.trigger_store
    store.add_job(
        name="nightly", source="cli", spec={"cron": "0 3 * * *", "skill": "x"}, spec_hash="h1", next_run=2_000_000_000.0
    )
    delivery = DeliveryRow(
        hook="gh", delivery_id="d-1", received_at=1_700_000_000.0, event="push", status=202, response={"accepted": True}
    )
    store.insert_firings(
        [
            FiringRow(
                id="f-1",
                ts=1_700_000_000.0,
                kind="webhook",
                name="gh",
                fired_by="hook",
                session="main",
                run_id="run-2",
                status="done",
                params={"a": 1},
            )
        ],
        delivery=delivery,
    )
    pincer.sign_ins.add("k" * 64, SignIn(token_digest="t" * 64, csrf="c" * 32, created=1.0, last_used=2.0))
    print(f"  pending approval {pending.id}; {pincer.audit.verify()} audit records", file=sys.stderr)


async def sqlite_fixture() -> None:
    from pincer.config import parse_config
    from pincer.service import Pincer

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = parse_config("[triggers]\nenabled = false\n", home=home)
        async with Pincer.open(
            home,
            config=config,
            secret_key=SECRET_KEY,
            audit_key=AUDIT_KEY,
            external=False,
            scripts=False,
            wasm=False,
            skills=False,
        ) as pincer:
            await write_everything(pincer)
        conn = sqlite3.connect(home / "pincer.db")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        lines = [f"PRAGMA user_version = {version};", *conn.iterdump()]
        conn.close()
    (HERE / "main-sqlite.sql").write_text("\n".join(lines) + "\n")


async def postgres_fixture() -> None:
    from pincer.config import parse_config
    from pincer.service import Pincer
    from pincer.store.pg import upgrade_database
    from tests.backends import postgres_server

    server = postgres_server()
    url = server.new_database()
    upgrade_database(url)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = parse_config(f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n', home=home)
        async with Pincer.open(
            home,
            config=config,
            secret_key=SECRET_KEY,
            audit_key=AUDIT_KEY,
            external=False,
            scripts=False,
            wasm=False,
            skills=False,
        ) as pincer:
            await write_everything(pincer)
    pg_dump = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_dump"))[-1]
    dump = subprocess.run(
        [pg_dump, "--inserts", "--no-owner", "--no-privileges", "--no-comments", "-d", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # The instances' rows name this machine and its processes: not part of what is tested. The
    # psql meta-commands (\restrict) are psql's, not SQL.
    kept = [
        line for line in dump.splitlines()
        if not line.startswith(("INSERT INTO public.pincer_instances", "\\"))
    ]  # fmt: skip
    (HERE / "main-postgres.sql").write_text("\n".join(kept) + "\n")


def main() -> None:
    anyio.run(sqlite_fixture)
    anyio.run(postgres_fixture)


if __name__ == "__main__":
    main()
