"""``pincer db``: the schema of the shared PostgreSQL store (``[store] url``).

``pincer db upgrade`` applies the missing migrations (gateways never migrate on their own and
refuse an older schema); ``pincer db status`` says where the store is and at which version.
The SQLite database under $PINCER_HOME migrates itself on open: both say so and change nothing.
"""

from __future__ import annotations

from typing import Any

import typer

from pincer.cli.common import JsonOption, audit_key, emit_json, pincer_home, run, secret_key, stderr
from pincer.core.extras import require

app = typer.Typer(help="Upgrade and inspect the shared PostgreSQL store ([store] url).", no_args_is_help=True)


def _store() -> tuple[str | None, str | None]:
    """The configured url and its password (from the secret [store] password_secret names)."""
    from pincer.config import load_config

    home = pincer_home()
    settings = load_config(home).store
    if settings.url is None or settings.password_secret is None:
        return settings.url, None
    from pincer.secrets.store import SecretStore

    with SecretStore.open(home, key=secret_key(home)) as secrets:
        return settings.url, secrets.get(settings.password_secret)


def _record_pending_acts() -> int:
    """The acts CLI commands did before the schema existed (store/pending_acts.py), appended now
    in the order they happened; how many."""
    from pincer.config import load_config
    from pincer.service import home_audit_log
    from pincer.store.pending_acts import draining

    home = pincer_home()
    with draining(home) as entries:
        if not entries:
            return 0
        config = load_config(home)
        key = secret_key(home) if config.store.password_secret is not None else None
        with home_audit_log(config, audit_key=audit_key(home), secret_key=key) as audit:
            for entry in entries:
                audit.append_sync(entry)
        return len(entries)


@app.command("upgrade")
def upgrade(as_json: bool = JsonOption) -> None:
    """Bring the PostgreSQL store to this pincer's schema (safe to run again, and from several hosts)."""

    async def body() -> dict[str, Any]:
        from pincer.store.pg import SCHEMA_VERSION, redact_url, upgrade_database

        url, password = _store()
        if url is None:
            return {"ok": True, "backend": "sqlite", "changed": False, "schema": None}
        before, after = upgrade_database(url, password=password)
        recorded = _record_pending_acts()
        return {"ok": True, "backend": "postgresql", "url": redact_url(url), "from": before, "to": after,
                "changed": before != after, "schema": SCHEMA_VERSION, "acts_recorded": recorded}  # fmt: skip

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["backend"] == "sqlite":
        stderr.print("no \\[store] url: the SQLite database under PINCER_HOME migrates itself when opened")
    elif report["changed"]:
        stderr.print(f"{report['url']}: schema {report['from']} -> {report['to']}")
    else:
        stderr.print(f"{report['url']}: already at schema {report['to']}")
    if not as_json and report.get("acts_recorded"):
        stderr.print(f"recorded {report['acts_recorded']} act(s) done before the schema existed in the audit log")


@app.command("status")
def status(as_json: bool = JsonOption) -> None:
    """Which store is configured and the schema version it is at."""

    async def body() -> dict[str, Any]:
        psycopg = require("postgres", "psycopg")

        from pincer.store.pg import SCHEMA_VERSION, redact_url
        from pincer.store.pg.connect import CONNECT_TIMEOUT_S, store_unreachable
        from pincer.store.pg.schema import schema_version

        url, password = _store()
        if url is None:
            return {"ok": True, "backend": "sqlite"}
        extra: dict[str, Any] = {"password": password} if password is not None else {}
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, **extra) as conn:
                version = schema_version(conn)
        except psycopg.Error as exc:
            raise store_unreachable(url, exc) from None
        return {"ok": True, "backend": "postgresql", "url": redact_url(url), "schema": version,
                "needs_upgrade": version < SCHEMA_VERSION, "expected": SCHEMA_VERSION}  # fmt: skip

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["backend"] == "sqlite":
        stderr.print("store: SQLite under PINCER_HOME (no \\[store] url)")
    else:
        hint = " (run `pincer db upgrade`)" if report["needs_upgrade"] else ""
        stderr.print(f"store: {report['url']} at schema {report['schema']} of {report['expected']}{hint}")
