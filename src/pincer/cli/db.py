"""``pincer db``: the schema of the shared PostgreSQL store (``[store] url``).

``pincer db upgrade`` applies the missing migrations (gateways never migrate on their own and
refuse an older schema); ``pincer db status`` says where the store is and at which version.
The SQLite database under $PINCER_HOME migrates itself on open: both say so and change nothing.
"""

from __future__ import annotations

from typing import Any

import typer

from pincer.cli.common import JsonOption, audit_key, emit_json, pincer_home, run, secret_key, stderr

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


async def _record_pending_acts() -> int:
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
        async with home_audit_log(config, audit_key=audit_key(home), secret_key=key) as audit:
            for entry in entries:
                await audit.append(entry, gather=False)
        return len(entries)


@app.command("upgrade")
def upgrade(as_json: bool = JsonOption) -> None:
    """Bring the PostgreSQL store to this pincer's schema (safe to run again, and from several hosts)."""

    async def body() -> dict[str, Any]:
        import anyio.to_thread

        from pincer.store.sql.migrate import HEAD, upgrade_postgres
        from pincer.store.sql.postgres import redact_url

        url, password = _store()
        if url is None:
            return {"ok": True, "backend": "sqlite", "changed": False, "schema": None}
        before, after = await anyio.to_thread.run_sync(lambda: upgrade_postgres(url, password=password))
        recorded = await _record_pending_acts()
        return {"ok": True, "backend": "postgresql", "url": redact_url(url), "from": before.revision,
                "from_legacy": before.legacy or None, "to": after.revision, "changed": not before.at_head,
                "schema": HEAD, "acts_recorded": recorded}  # fmt: skip

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["backend"] == "sqlite":
        stderr.print("no \\[store] url: the SQLite database under PINCER_HOME migrates itself when opened")
    elif report["changed"]:
        was = report["from"] or (f"an older pincer's {report['from_legacy']}" if report["from_legacy"] else "none")
        stderr.print(f"{report['url']}: schema {was} -> {report['to']}")
    else:
        stderr.print(f"{report['url']}: already at schema {report['to']}")
    if not as_json and report.get("acts_recorded"):
        stderr.print(f"recorded {report['acts_recorded']} act(s) done before the schema existed in the audit log")


@app.command("status")
def status(as_json: bool = JsonOption) -> None:
    """Which store is configured and the schema it is at."""

    async def body() -> dict[str, Any]:
        from pincer.store.sql import open_postgres
        from pincer.store.sql.migrate import HEAD, read_state

        url, password = _store()
        if url is None:
            return {"ok": True, "backend": "sqlite"}
        db = await open_postgres(url, password=password, size=1, check_schema=False)
        try:
            state = await read_state(db)
        finally:
            await db.aclose()
        return {"ok": True, "backend": "postgresql", "url": db.shown, "schema": state.revision,
                "legacy_schema": state.legacy or None, "needs_upgrade": not state.at_head,
                "expected": HEAD}  # fmt: skip

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    elif report["backend"] == "sqlite":
        stderr.print("store: SQLite under PINCER_HOME (no \\[store] url)")
    else:
        hint = " (run `pincer db upgrade`)" if report["needs_upgrade"] else ""
        stderr.print(f"store: {report['url']} at schema {report['schema'] or 'none'} of {report['expected']}{hint}")


@app.command("prune")
def prune(as_json: bool = JsonOption) -> None:
    """Delete now what [retention] says is old enough (a gateway does it hourly): answered and
    expired approvals, finished runs and their transcripts, delivered webhook payloads."""

    async def body() -> dict[str, Any]:
        from pincer.cli.common import open_pincer

        async with open_pincer(builtins=False, quiet=as_json) as pincer:
            pruned = await pincer.prune_store()
        return {"ok": True, "pruned": pruned.to_dict()}

    report = run(body, as_json=as_json)
    if as_json:
        emit_json(report)
    else:
        done = report["pruned"]
        stderr.print(f"pruned {done['approvals']} approvals, {done['runs']} runs ({done['run_messages']} transcript "
                     f"messages), {done['webhook_payloads']} webhook payloads")  # fmt: skip
