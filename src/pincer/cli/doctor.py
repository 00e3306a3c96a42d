"""``pincer doctor``: check this installation; every problem comes with its fix.

Each check gives ``ok``, ``warn`` (works, but not as it should) or ``fail`` (something will not
work), what it found, and for anything but ok a hint naming the command or config key that fixes
it. Exit 1 when a check fails. Nothing is changed: the checks read files, start ``node
--version``, run the sandbox's ``/bin/true`` smoke test and ask ``/healthz`` of a running gateway.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from pincer.cli.common import EXIT_FAILURE, JsonOption, emit_json, pincer_home, stderr
from pincer.core.errors import PincerError

__all__ = ["Check", "doctor", "run_checks"]

GATEWAY_PROBE_TIMEOUT_S = 2.0
STORE_PROBE_TIMEOUT_S = 5  # PostgreSQL's connect_timeout and Redis's socket timeouts, in seconds
REDIS_SLOW_MS = 50.0  # a PING slower than this is worth a warning: every rate-limited call pays it
NODE_VERSION_TIMEOUT_S = 10.0
MIN_PYTHON = (3, 11)
MIN_NODE_MAJOR = 18  # the MCP reference servers' floor
_NODE_LAUNCHERS = ("npx", "node", "npm")


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint}


def doctor(as_json: bool = JsonOption) -> None:
    """Check this installation; every problem comes with its fix.

    Python, PINCER_HOME, the settings files, the secret key, the databases and the audit chain,
    [llm] (a model, and its key), the sandbox, Node for npx-launched MCP servers, the MCP servers' commands, the registry
    files shared through [store] url (links that lead out, rows refused), a running gateway,
    and whether `pincer` on PATH is this installation. Exit 1 when a check fails.
    """
    from pincer.cli.progress import Steps

    checks: list[Check] = []
    with Steps(enabled=not as_json, lines=False) as steps:  # off a terminal each result is the line

        def done(check: Check) -> None:
            checks.append(check)
            if not as_json:
                _render(check)

        run_checks(pincer_home(), on_check=done, on_stage=steps.stage)
    failed = [c for c in checks if c.status == "fail"]
    if as_json:
        emit_json({"ok": not failed, "checks": [c.to_dict() for c in checks]})
    else:
        warned = sum(c.status == "warn" for c in checks)
        summary = f"{len(failed)} failed, {warned} warnings" if failed or warned else "everything checks out"
        stderr.print(summary, style="bold red" if failed else None, highlight=False)
    if failed:
        raise typer.Exit(EXIT_FAILURE)


_STYLES = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def _render(check: Check) -> None:
    stderr.print(f"[{_STYLES[check.status]}]{check.status:<4}[/] {check.name:<13}", end=" ", highlight=False)
    stderr.print(check.detail, markup=False, highlight=False)  # paths and messages: never markup
    if check.hint and check.status != "ok":
        stderr.print(f"{'':18} fix: {check.hint}", markup=False, highlight=False, style="dim")


def run_checks(home: Path, *, on_check: Callable[[Check], None], on_stage: Callable[[str], None]) -> None:
    """Every check in order; ``on_stage`` hears what runs now, ``on_check`` each result."""
    config = _config(home)
    stages: list[tuple[str, str, Callable[[], list[Check]]]] = [
        ("python", "checking Python", lambda: [_python()]),
        ("home", "checking PINCER_HOME", lambda: [_home(home)]),
        ("settings", "checking the settings files", lambda: [_settings(home)]),
        ("secret key", "checking the secret key", lambda: [_secret_key(home)]),
        ("database", "checking the databases and the audit chain", lambda: _databases(home, config)),
        ("llm", "checking [llm]", lambda: [_llm(home, config)]),
        ("extras", "checking the optional parts (extras)", lambda: [_extras(home, config)]),
        ("sandbox", "checking the sandbox (a /bin/true in each backend)", lambda: [_sandbox(config)]),
        ("mcp server", "checking the MCP servers' commands", lambda: _mcp_commands(home)),
        ("shared home", "checking the registry files shared through [store] url", lambda: [_shared_home(home, config)]),
        ("gateway", "asking a running gateway for /healthz", lambda: [_gateway(home, config)]),
        ("path", "checking PATH", lambda: [_path()]),
    ]
    for name, stage, check in stages:
        on_stage(stage)
        try:
            results = check()
        except PincerError as exc:  # a check that cannot run says why instead of ending the report
            results = [Check(name=name, status="fail", detail=exc.message, hint=exc.hint)]
        for result in results:
            on_check(result)


def _config(home: Path) -> Any:
    from pincer.config import Config, load_config

    try:
        return load_config(home)
    except PincerError:
        return Config(home=home, workspace=home / "workspace")  # the settings check reports why


def _python() -> Check:
    version = ".".join(str(v) for v in sys.version_info[:3])
    if sys.version_info < MIN_PYTHON:
        return Check(name="python", status="fail", detail=f"Python {version} is older than 3.11", hint="install Python 3.11 or newer and reinstall pincer")
    return Check(name="python", status="ok", detail=f"Python {version} ({sys.executable})")


def _home(home: Path) -> Check:
    if not os.access(home, os.W_OK | os.X_OK):
        return Check(name="home", status="fail", detail=f"{home} is not writable by you", hint="set PINCER_HOME to a directory of yours")
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & 0o077:
        return Check(
            name="home", status="warn", detail=f"{home} is open to other users (mode {mode:04o})", hint=f"chmod 700 {home}"
        )
    return Check(name="home", status="ok", detail=f"{home} (mode {mode:04o})")


def _settings(home: Path) -> Check:
    from pincer.config_check import check_home

    reports = check_home(home)
    problems = [(r, p) for r in reports for p in r.problems]
    if problems:
        report, first = problems[0]
        where = f"{first.key}: " if first.key else ""
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return Check(
            name="settings", status="fail", detail=f"{report.path}: {where}{first.message}{more}",
            hint="`pincer config check` lists every problem with its fix",
        )  # fmt: skip
    present = [r.path.name for r in reports if r.exists]
    return Check(name="settings", status="ok", detail=f"valid: {', '.join(present)}" if present else "no settings files: the defaults apply")


def _secret_key(home: Path) -> Check:
    from pincer.secrets.keys import KEY_FILE_NAME, load_or_create_key, parse_key
    from pincer.secrets.store import SECRETS_DB_NAME

    env = os.environ.get("PINCER_SECRET_KEY")
    if env is not None and env.strip():
        parse_key(env, source="PINCER_SECRET_KEY")  # a SecretError says what is wrong with it
        return Check(name="secret key", status="ok", detail="from PINCER_SECRET_KEY (32 bytes)")
    path = home / KEY_FILE_NAME
    if not path.exists():
        if (home / SECRETS_DB_NAME).exists():
            return Check(
                name="secret key", status="fail", detail=f"{path} is missing but {SECRETS_DB_NAME} holds secrets it encrypted",
                hint="restore secret.key from a backup, or set PINCER_SECRET_KEY to the key; without it they cannot be read",
            )  # fmt: skip
        return Check(name="secret key", status="ok", detail=f"none yet: {path} is created (mode 0600) on first use")
    load_or_create_key(home, None)  # reads it: refuses a wrong mode, owner or content with the fix
    return Check(name="secret key", status="ok", detail=f"{path} (mode {stat.S_IMODE(path.stat().st_mode):04o})")


def _llm(home: Path, config: Any) -> Check:
    """A model, and its API key where it says the key is. Without a model the parts that talk
    to one are off, and nothing else says so until a run fails."""
    llm = config.llm
    if not (llm.default.model or any(p.model for p in llm.profiles.values())):
        return Check(
            name="llm", status="warn",
            detail="no model: [llm] model is not set, so the agent loop (`pincer run`, `pincer chat`), the run_skill tool "
            "and the builder (`pincer build`, the build_tool tool) are off",
            hint='set [llm] model in config.toml (e.g. model = "gpt-4o-mini", with api_key_env = "OPENAI_API_KEY"); '
            "a running `pincer serve` picks it up",
        )  # fmt: skip
    try:
        chosen = llm.resolve()
    except PincerError as exc:
        return Check(name="llm", status="fail", detail=exc.message, hint=exc.hint)
    table = f"[llm.profiles.{chosen.profile}]" if chosen.profile else "[llm]"
    where = f"{chosen.model} ({chosen.provider}{', ' + chosen.base_url if chosen.base_url else ''})"
    if not chosen.model:
        return Check(name="llm", status="warn", detail=f"{table} sets no model; runs that name no --profile have none",
                     hint=f"set model in {table} of config.toml, or [llm] profile to a profile that has one")  # fmt: skip
    if chosen.api_key_env and not os.environ.get(chosen.api_key_env):
        instead = (f'[llm.profiles.{chosen.profile}] api_key_secret = "NAME"' if chosen.profile
                   else '[llm] api_key_secret = "NAME"')  # fmt: skip
        return Check(name="llm", status="warn", detail=f"{where}: {table} api_key_env names {chosen.api_key_env}, which is not set here",
                     hint=f"export {chosen.api_key_env} where pincer runs, or store the key: `pincer secrets set NAME` and {instead}")  # fmt: skip
    if chosen.api_key_secret:
        from pincer.cli.common import secret_key
        from pincer.secrets.store import SecretStore

        store = SecretStore.open(home, key=secret_key(home))
        try:
            present = store.find(chosen.api_key_secret) is not None
        finally:
            store.close()
        if not present:
            return Check(name="llm", status="warn", detail=f"{where}: {table} api_key_secret names {chosen.api_key_secret!r}, which is not in the secret store",
                         hint=f"`pincer secrets set {chosen.api_key_secret}`")  # fmt: skip
    key = f"key from ${chosen.api_key_env}" if chosen.api_key_env else (f"key from secret {chosen.api_key_secret!r}" if chosen.api_key_secret else "no key")
    return Check(name="llm", status="ok", detail=f"{where}, {key}")


def _extras(home: Path, config: Any) -> Check:
    """Each optional part config.toml turns on (and installed WASM tools) has its extra."""
    from pincer.config_check import configured_extras
    from pincer.core.extras import EXTRAS, available, install_hint
    from pincer.runtimes.wasm.install import installed_names

    wanted = configured_extras(config)
    if installed_names(home):
        wanted.append(("wasm", "installed WASM tools"))
    missing = [(extra, why) for extra, why in wanted if not available(extra)]
    if missing:
        names = sorted({extra for extra, _ in missing})
        detail = "; ".join(f"{why} needs {EXTRAS[extra].feature}, not installed" for extra, why in missing)
        return Check(name="extras", status="fail", detail=detail, hint=install_hint(",".join(names)))
    present = [name for name in EXTRAS if available(name)]
    absent = [name for name in EXTRAS if name not in present]
    detail = f"installed: {', '.join(present) or 'none'}"
    return Check(name="extras", status="ok", detail=detail + (f"; not installed (nothing here needs them): {', '.join(absent)}" if absent else ""))


def _databases(home: Path, config: Any) -> list[Check]:
    """The store config.toml names (pincer.db, or PostgreSQL and the Redis of [cache] url), its
    audit chain, and the secret store. A PostgreSQL home's pincer.db holds nothing the gateway
    reads: it is neither opened nor reported."""
    from pincer.secrets.store import SECRETS_DB_NAME
    from pincer.store.db import integrity_problems

    checks = _sqlite(home, config) if config.store.url is None else _postgres(home, config)
    if config.cache.url is not None:
        checks.append(_redis(config.cache.url))
    secrets_db = home / SECRETS_DB_NAME
    if secrets_db.exists():
        if problems := integrity_problems(secrets_db):
            checks.append(Check(
                name="secret store", status="fail", detail=f"{secrets_db} fails SQLite's quick_check: {problems[0]}",
                hint="restore it from a backup, or remove it and set the secrets again with `pincer secrets set NAME`",
            ))  # fmt: skip
        else:
            checks.append(Check(name="secret store", status="ok", detail=f"{secrets_db} passes quick_check"))
    return checks


def _sqlite(home: Path, config: Any) -> list[Check]:
    from pincer.store.db import DB_FILENAME, integrity_problems

    checks = []
    database = home / DB_FILENAME
    readable = False  # the local log can be verified
    if not database.exists():
        checks.append(Check(name="database", status="ok", detail=f"none yet: {database} is created on first use"))
    elif problems := integrity_problems(database):
        checks.append(Check(
            name="database", status="fail", detail=f"{database} fails SQLite's quick_check: {problems[0]}",
            hint=f"stop pincer, copy {database} aside and restore a backup (sqlite3's .recover salvages what it can)",
        ))  # fmt: skip
    else:
        checks.append(Check(name="database", status="ok", detail=f"{database} passes quick_check"))
        readable = True
    if readable:  # the log the gateway records to
        checks.append(_audit_chain(home, config))
    return checks


def _postgres(home: Path, config: Any) -> list[Check]:
    """The PostgreSQL store: it answers, at this pincer's schema; its audit chain; the pincer
    processes (gateways, commands) that beat on it now."""
    import anyio

    from pincer.core.errors import StoreError
    from pincer.store.instances import Instances, LiveInstance
    from pincer.store.sql import HEAD, open_postgres
    from pincer.store.sql.migrate import SchemaState, read_state
    from pincer.store.sql.postgres import redact_url

    url = config.store.url
    shown = redact_url(url)
    password = _store_password(home, config)

    async def probe() -> tuple[SchemaState, list[LiveInstance]]:
        with anyio.fail_after(STORE_PROBE_TIMEOUT_S * 2):
            db = await open_postgres(url, password=password, size=1, check_schema=False)
            try:
                state = await read_state(db)
                return state, (await Instances.live(db) if state.at_head else [])
            finally:
                await db.aclose()

    try:
        state, live = anyio.run(probe)
    except StoreError as exc:
        return [Check(name="database", status="fail", detail=exc.message, hint=exc.hint)]
    except TimeoutError:
        return [Check(name="database", status="fail", detail=f"{shown} did not answer within {STORE_PROBE_TIMEOUT_S * 2} s",
                      hint="check [store] url in config.toml and that the server runs")]  # fmt: skip
    if not state.at_head:
        try:
            state.refuse_newer(f"the PostgreSQL store {shown}")
        except StoreError:
            return [Check(name="database", status="fail", detail=f"{shown} has {state.describe()}: a newer pincer upgraded it",
                          hint="upgrade this pincer to the version the other gateways run")]  # fmt: skip
        never = state.revision is None and not state.legacy
        return [Check(
            name="database", status="fail",
            detail=f"{shown} has {state.describe()}, this pincer's is {HEAD}" + (" (never upgraded)" if never else ""),
            hint="`pincer db upgrade`",
        )]  # fmt: skip
    checks = [Check(name="database", status="ok", detail=f"PostgreSQL {shown} answers, at schema {state.revision}")]
    checks.append(_audit_chain(home, config))
    checks.append(_instances(home, config, live))
    return checks


def _instances(home: Path, config: Any, live: list[Any]) -> Check:
    """The pincer processes that beat on the shared store now, told apart: this home's gateway
    (its host and PINCER_HOME), the other homes' gateways, and commands (``pincer tools call``
    and the like, which open the store too but serve nobody)."""
    from pincer.store.owners import this_host

    here, path = config.store.host_id or this_host(), str(home.resolve())
    ours = [i for i in live if i.kind == "gateway" and (i.host, i.home) == (here, path)]
    others = [i for i in live if i.kind == "gateway" and i not in ours]
    commands = [i for i in live if i.kind == "command"]
    older = [i for i in live if i.kind not in ("gateway", "command")]
    if not live:
        return Check(name="instances", status="ok", detail="no pincer process is live on the store now (no gateway of any home runs on it)")
    parts = [
        f"this home's gateway: {_listed_instances(ours, at=True)}" if ours else "no gateway of this home runs on the store",
        f"{len(others)} other gateway(s) on the store: {_listed_instances(others, at=True, home=True)}" if others
        else "no other gateway runs on the store",
    ]
    if commands:
        parts.append(f"{len(commands)} pincer command(s) running, not gateways: {_listed_instances(commands)}")
    if older:
        parts.append(f"{len(older)} process(es) of an older pincer, gateway or command: {_listed_instances(older)}")
    return Check(name="instances", status="ok", detail="; ".join(parts))


def _listed_instances(found: list[Any], *, at: bool = False, home: bool = False, most: int = 10) -> str:
    shown = [
        f"{i}" + (f" at {i.url}" if at and i.url else "") + (f" (home {i.home})" if home and i.home else "")
        for i in found[:most]
    ]  # fmt: skip
    return ", ".join(shown) + (f" and {len(found) - most} more" if len(found) > most else "")


def _store_password(home: Path, config: Any) -> str | None:
    if config.store.password_secret is None:
        return None
    from pincer.cli.common import secret_key
    from pincer.secrets.store import SecretStore

    with SecretStore.open(home, key=secret_key(home)) as secrets:
        return secrets.get(config.store.password_secret)


def _redis(url: str) -> Check:
    """``[cache] url``: a PING, and how long it took."""
    from pincer.core.extras import require
    from pincer.store.sql.postgres import redact_url

    redis = require("redis", "redis")
    shown = redact_url(url)
    client = redis.Redis.from_url(url, socket_timeout=STORE_PROBE_TIMEOUT_S, socket_connect_timeout=STORE_PROBE_TIMEOUT_S)
    try:
        started = time.perf_counter()
        client.ping()
        took_ms = (time.perf_counter() - started) * 1000
    except redis.RedisError as exc:
        reason = redact_url(str(exc).strip().splitlines()[0]) if str(exc).strip() else type(exc).__name__
        return Check(
            name="redis", status="fail", detail=f"{shown} does not answer: {reason}",
            hint="check [cache] url in config.toml and that redis-server runs there; without it rate limits are refused",
        )  # fmt: skip
    finally:
        client.close()
    status = "ok" if took_ms < REDIS_SLOW_MS else "warn"
    return Check(
        name="redis", status=status, detail=f"{shown} answers PING in {took_ms:.1f} ms",
        hint=None if status == "ok" else "every rate-limited call waits this long: put Redis near the gateways ([cache] url)",
    )  # fmt: skip


def _listed(found: dict[str, str], *, most: int = 5) -> str:
    shown = "; ".join(f"{path}: {why}" for path, why in sorted(found.items())[:most])
    return shown + (f"; and {len(found) - most} more" if len(found) > most else "")


def _shared_home(home: Path, config: Any) -> Check:
    """Links of the shared roots that lead out of them, and shared rows this home refused
    (store/home_share.py keeps those in shared-home.json: the sync that met them has passed)."""
    from pincer.store.home_share import MANIFEST_FILE, links_leading_out, refused_rows

    if config.store.url is None and not (home / MANIFEST_FILE).exists():
        return Check(name="shared home", status="ok", detail="the registry is not shared ([store] url is unset)")
    leading_out, refused = links_leading_out(home), refused_rows(home)
    found = []
    if leading_out:
        found.append(f"{len(leading_out)} link(s) of the shared registry files lead out of them: {_listed(leading_out)}")
    if refused:
        found.append(f"{len(refused)} shared row(s) refused, this home kept its own copy: {_listed(refused)}")
    if leading_out:
        return Check(
            name="shared home", status="fail", detail=". ".join(found),
            hint="remove each link that leads out from PINCER_HOME (rm PATH); the next sync (any pincer command) shares the removal",
        )  # fmt: skip
    if refused:
        return Check(
            name="shared home", status="warn", detail=found[0],
            hint="the rows were changed in the database, or lead out of the shared files: check who writes the store "
            "(`pincer db status`), then repeat the change on the machine it came from (e.g. `pincer tools install`)",
        )  # fmt: skip
    return Check(name="shared home", status="ok", detail="no link leads out of the shared registry files; no shared row refused")


def _audit_chain(home: Path, config: Any) -> Check:
    """The chain the gateway records to (pincer.db's, or the PostgreSQL store's), verified as
    `pincer audit verify` verifies it: with the home's anchor."""
    import anyio

    from pincer.cli.common import audit_key, secret_key
    from pincer.core.errors import PincerError
    from pincer.service import home_audit_log

    async def verify() -> int:
        password_key = secret_key(home) if config.store.password_secret is not None else None
        async with home_audit_log(config, audit_key=audit_key(home), secret_key=password_key) as audit:
            return await audit.verify()

    try:
        records = anyio.run(verify)
    except PincerError as exc:  # a broken chain, or an audit key that is not this log's
        return Check(name="audit chain", status="fail", detail=exc.message, hint="`pincer audit verify` names the first bad record")
    where = " (in the PostgreSQL store)" if config.store.url is not None else ""
    return Check(name="audit chain", status="ok", detail=f"intact over {records} records{where}")


def _sandbox(config: Any) -> Check:
    from pincer.runtimes.script.detect import probe_all
    from pincer.runtimes.script.settings import ScriptSettings

    settings = ScriptSettings(backend=config.sandbox_backend, container_image=config.sandbox_container_image)
    report = probe_all(settings)
    if report["selected"]:
        limits = report["limits"]["memory_and_pids"]
        status = "ok" if report["cgroups"]["version"] != "none" else "warn"
        hint = None if status == "ok" else "memory and process limits fall back to rlimits: `pincer sandbox doctor` says why"
        return Check(name="sandbox", status=status, detail=f"script tools run in {report['selected']} (limits: {limits})", hint=hint)
    why = [f"{b['name']}: {b['reason']}" for b in report["backends"] if not b["available"]]
    hints = [b["hint"] for b in report["backends"] if not b["available"] and b["hint"]]
    return Check(
        name="sandbox", status="fail", detail=f"no sandbox backend works (backend = {config.sandbox_backend!r}): {'; '.join(why)}",
        hint=(hints[0] + "; " if hints else "") + "`pincer sandbox doctor` shows every backend",
    )  # fmt: skip


def _mcp_commands(home: Path) -> list[Check]:
    from pincer.runtimes.mcp.config import ServerStore
    from pincer.runtimes.mcp.pins import PinStore

    try:
        servers = [s for s in ServerStore(home).load() if s.enabled]
        pins = PinStore(home)
    except PincerError:
        return []  # the settings check reports the broken file
    stdio = [s for s in servers if s.transport == "stdio"]
    checks = [_node(needed_by=[s.name for s in stdio if Path(s.command or "").name in _NODE_LAUNCHERS])]
    for server in servers:
        command = server.command or ""
        found = server.url if server.transport != "stdio" else (
            shutil.which(command) if os.sep not in command else (command if os.access(command, os.X_OK) else None))  # fmt: skip
        if found is None:
            checks.append(Check(
                name="mcp server", status="fail", detail=f"{server.name}: its command {command!r} is not found or not executable",
                hint=f"install it, or fix the entry: `pincer mcp remove {server.name}` then `pincer mcp add`",
            ))  # fmt: skip
        elif not pins.pins(server.name):  # it never answered: its tools are not offered (the others are)
            checks.append(Check(
                name="mcp server", status="warn",
                detail=f"{server.name}: {found} has no tools pinned: it has never answered (or offers no tools); "
                "every other tool works without it",
                hint=f"`pincer mcp test {server.name}` starts it and shows why it fails; `pincer mcp remove {server.name}` drops it",
            ))  # fmt: skip
        else:
            checks.append(Check(name="mcp server", status="ok", detail=f"{server.name}: {found}"))
    return checks


def _node(*, needed_by: list[str]) -> Check:
    npx, node = shutil.which("npx"), shutil.which("node")
    users = f" (needed by {', '.join(needed_by)})" if needed_by else ""
    if npx is None or node is None:
        if not needed_by:
            return Check(name="node", status="ok", detail="not installed; only npx-launched MCP servers need it")
        return Check(
            name="node", status="fail", detail=f"{'npx' if npx is None else 'node'} is not on PATH{users}",
            hint="install Node.js 18 or newer (it brings npx), e.g. apt-get install nodejs npm",
        )  # fmt: skip
    try:
        done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=NODE_VERSION_TIMEOUT_S, check=False)
        version = done.stdout.strip()
        major = int(version.lstrip("v").split(".")[0])
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return Check(name="node", status="warn", detail=f"{node} --version did not answer{users}", hint="reinstall Node.js 18 or newer")
    if major < MIN_NODE_MAJOR:
        return Check(
            name="node", status="warn" if not needed_by else "fail", detail=f"Node {version} is older than {MIN_NODE_MAJOR}{users}",
            hint="install Node.js 18 or newer",
        )  # fmt: skip
    return Check(name="node", status="ok", detail=f"Node {version}, npx at {npx}{users}")


def _gateway(home: Path, config: Any) -> Check:
    settings = config.gateway
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(settings.host, settings.host)
    url = f"http://{f'[{host}]' if ':' in host else host}:{settings.port}/healthz"
    if settings.port == 0:
        return Check(name="gateway", status="ok", detail="[gateway] port = 0: pincer serve picks a free port each start")
    try:
        with urllib.request.urlopen(url, timeout=GATEWAY_PROBE_TIMEOUT_S) as response:
            body = json.loads(response.read(4096) or b"{}")
    except urllib.error.HTTPError as exc:
        return _port_taken(url, f"it answers HTTP {exc.code}")
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            return Check(name="gateway", status="warn", detail=f"no pincer serve answers at {url}", hint="`pincer serve` starts it")
        return Check(name="gateway", status="warn", detail=f"{url} did not answer: {reason}", hint="`pincer serve` starts it; check [gateway] host")
    except ValueError:
        return _port_taken(url, "it does not answer JSON")
    if not isinstance(body, dict) or body.get("status") != "ok":
        return _port_taken(url, "its /healthz is not pincer's")
    if not _accepts_this_homes_token(home, url.removesuffix("/healthz")):
        return Check(
            name="gateway", status="fail",
            detail=f"the pincer serve at {url} is another home's: it refuses the token in {home / 'gateway.token'}, "
            "so this home's gateway cannot listen there",
            hint="stop that gateway, or give this home another [gateway] port in config.toml",
        )  # fmt: skip
    waiting = [str(s) for s in body.get("restart_needed") or () if isinstance(s, str)][:20]
    if waiting:
        return Check(
            name="gateway", status="warn",
            detail=f"pincer serve {body.get('version', '?')} at {url} runs without a change of config.toml: "
            f"{', '.join(waiting)} changed and take effect only when it restarts",
            hint="restart `pincer serve` (Ctrl-C, then `pincer serve` or `make run`)",
        )  # fmt: skip
    return Check(name="gateway", status="ok", detail=f"pincer serve {body.get('version', '?')} answers at {url}")


def _accepts_this_homes_token(home: Path, base: str) -> bool:
    """Whether the gateway at ``base`` takes this home's bearer token (another home's gateway on
    the same port answers /healthz too, but never knows this token)."""
    try:
        token = (home / "gateway.token").read_text(encoding="utf-8").strip()
    except OSError:
        return False  # this home never started a gateway: whatever answers is someone else's
    request = urllib.request.Request(f"{base}/api/v1/metrics", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=GATEWAY_PROBE_TIMEOUT_S):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code != 401  # 403: a token of a session that may not read metrics, still ours
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return True  # it answered /healthz a moment ago; the next doctor run tells


def _port_taken(url: str, why: str) -> Check:
    return Check(
        name="gateway", status="fail", detail=f"something else listens at {url}: {why}",
        hint="stop that program or choose another [gateway] port in config.toml",
    )  # fmt: skip


def _path() -> Check:
    here = Path(sys.executable).parent / "pincer"
    found = shutil.which("pincer")
    if found is None:
        return Check(name="path", status="warn", detail="pincer is not on PATH", hint=f'export PATH="{here.parent}:$PATH"')
    if here.exists() and os.path.samefile(found, here):
        return Check(name="path", status="ok", detail=f"pincer on PATH is this installation ({found})")
    return Check(
        name="path", status="warn", detail=f"pincer on PATH is {found}, not this installation ({here})",
        hint=f'put {here.parent} first on PATH, or run {here}',
    )  # fmt: skip
