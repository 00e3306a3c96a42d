"""``pincer hooks``: the webhooks of config.toml, and test deliveries signed with their secret."""

from __future__ import annotations

import json
import secrets
import time
import uuid
from pathlib import Path
from typing import Any

import typer

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, fail, pincer_home, run, stderr
from pincer.cli.triggers import hook_row, open_for_triggers
from pincer.core.errors import HookNotFound, HookSecretMissing, ToolError, UsageError

__all__ = ["app", "HOOK_TEST_TIMEOUT_S", "SERVE_FILE", "gateway_url"]

app = typer.Typer(help="Webhooks: list them, send a signed test delivery to the running gateway.", no_args_is_help=True)

HOOK_TEST_TIMEOUT_S = 30.0
SERVE_FILE = "serve.json"  # written by `pincer serve` once it listens: its URL and pid
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024


def gateway_url(home: Path, config: Any) -> str:
    """The running gateway's URL (from serve.json when its process lives), else the configured one."""
    from pincer.cli.serve import running_gateway_url

    running = running_gateway_url(home)
    if running is not None:
        return running
    host = config.gateway.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{config.gateway.port}"


@app.command("list")
def list_hooks(as_json: bool = JsonOption) -> None:
    """Every [[hooks]] entry: its path, auth, secret (set or not), what it runs, its events."""

    async def body() -> list[dict[str, Any]]:
        async with open_for_triggers() as pincer:
            return [hook_row(pincer, hook) for hook in pincer.config.hooks]

    rows = run(body, as_json=as_json)
    if as_json:
        emit_json({"hooks": rows})
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"{len(rows)} webhooks", title_justify="left")
    for column in ("path", "auth", "secret", "runs", "events", "state"):
        table.add_column(column, overflow="fold")
    for row in rows:
        secret = row["secret"] + ("" if row["secret_set"] else " (not set)")
        state = row["state"] + (f"; replays: {row['replay_protection']}" if row["auth"] == "bearer" else "")
        cells = (row["path"], row["auth"], secret, row["runs"], ", ".join(row["events"]) or "all", state)
        table.add_row(*(escape(cell) for cell in cells))
    stderr.print(table)


def _github_event(event: str | None) -> str:
    if not event:
        raise UsageError("a GitHub test delivery needs its event", hint="add --event pull_request (or --event github.pr.opened)")
    if event.startswith("github."):
        name = event.split(".")[1]
        return {"pr": "pull_request"}.get(name, name)
    return event


def signed_request(hook: Any, secret: str, body: bytes, *, event: str | None) -> dict[str, str]:
    """The headers of a delivery to ``hook`` signed (or authorized) with ``secret``."""
    from pincer.triggers.signatures import sign_github, sign_standard

    headers = {"content-type": "application/json", "user-agent": "pincer-hooks-test"}
    if hook.auth == "github":
        headers["x-github-event"] = _github_event(event)
        headers["x-github-delivery"] = str(uuid.uuid4())
        headers["x-hub-signature-256"] = sign_github(secret, body)
    elif hook.auth == "standard":
        msg_id = f"msg_{secrets.token_hex(12)}"
        stamp = int(time.time())
        headers.update({"webhook-id": msg_id, "webhook-timestamp": str(stamp),
                        "webhook-signature": sign_standard(secret, msg_id, stamp, body)})  # fmt: skip
    else:
        headers["authorization"] = f"Bearer {secret}"
        headers["webhook-id"] = f"msg_{secrets.token_hex(12)}"
    if event and hook.auth != "github":
        headers["x-pincer-event"] = event
    return headers


@app.command("test")
def test_hook(
    name: str = typer.Argument(..., help="The hook's name ([[hooks]] name)."),
    payload: Path = typer.Option(..., "--payload", help="A JSON file: the delivery's body."),
    event: str = typer.Option(None, "--event", help="The event (GitHub: pull_request or github.pr.opened; others: X-Pincer-Event)."),
    url: str = typer.Option(None, "--url", help="The gateway (default: the running pincer serve, else [gateway] host and port)."),
    as_json: bool = JsonOption,
) -> None:
    """Sign PAYLOAD with the hook's secret and deliver it to the running gateway."""

    def read_payload() -> bytes:
        try:
            if payload.stat().st_size > MAX_PAYLOAD_BYTES:
                raise UsageError(f"{payload} is larger than {MAX_PAYLOAD_BYTES:,} bytes", hint="send a smaller payload")
            data = payload.read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read {payload}: {exc.strerror}", hint="give the path of a JSON file") from None
        try:
            json.loads(data)
        except ValueError as exc:
            raise UsageError(f"{payload} is not JSON: {exc}", hint="the payload is the delivery's JSON body") from None
        return data

    try:
        data = read_payload()
    except UsageError as exc:
        fail(exc, as_json=as_json)

    async def body() -> dict[str, Any]:
        import httpx2

        from pincer.safety.egress_transport import default_ssl_context

        async with open_for_triggers() as pincer:
            hook = pincer.config.hook(name)
            if hook is None:
                known = ", ".join(h.name for h in pincer.config.hooks) or "none"
                raise HookNotFound(f"no webhook named {name!r} (hooks: {known})", hint="`pincer hooks list` shows them")
            secret = pincer.secrets.find(hook.secret)
            if secret is None:
                raise HookSecretMissing(
                    f"hook {name!r} has no secret: the store has no {hook.secret!r}",
                    hint=f"store it: printf %s VALUE | pincer secrets set {hook.secret}",
                )
            headers = signed_request(hook, secret, data, event=event)
            base = (url or gateway_url(pincer_home(), pincer.config)).rstrip("/")
        target = f"{base}/hooks/{name}"
        try:
            async with httpx2.AsyncClient(timeout=HOOK_TEST_TIMEOUT_S, trust_env=False, verify=default_ssl_context()) as client:
                response = await client.post(target, content=data, headers=headers)
        except httpx2.HTTPError as exc:
            raise ToolError(
                f"could not deliver to {target}: {type(exc).__name__}: {exc}",
                hint="start the gateway with `pincer serve`, or point --url at it",
            ) from None
        try:
            answer: Any = response.json()
        except ValueError:
            answer = response.text[:2_000]
        return {"ok": response.is_success, "url": target, "status": response.status_code, "response": answer}

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result)
    else:
        stderr.print(f"POST {result['url']} -> {result['status']}")
        stderr.print(json.dumps(result["response"], indent=2, ensure_ascii=False))
    if not result["ok"]:
        raise typer.Exit(EXIT_FAILURE)
