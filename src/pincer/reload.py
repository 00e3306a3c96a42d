"""A running pincer follows its state on disk: what another process changes is picked up.

``pincer tools install``, ``pincer mcp add``, ``pincer openapi add``, an edit of
``config.toml`` or of ``exec-approvals.json``: each writes a file under ``$PINCER_HOME``, and
:func:`watch_state` (run by ``pincer serve``) polls their stamps (name, size, mtime) every
``STATE_WATCH_INTERVAL_S`` and reloads what changed:

- ``config.toml``: parsed; a file that does not parse keeps the old config running and is
  logged with the key at fault; a good one is applied live (grants, sessions, ``[network]``,
  gateway tokens, limits, approvals, sandbox...), and the tools that exist because of it come
  and go with it (``run_skill`` and ``build_tool`` with a model in ``[llm]``, ``skills_search``
  and ``skills_install`` with ``[[hub.sources]]``, the built-ins of ``[builtins.NAME]``, which
  ``pincer install``/``remove tools/NAME`` edit, and the canvas of ``[gateway] canvas``). What
  cannot change while serving (the listening address, the Host/Origin names, the body limit,
  audit durability, the skill roots, the store and the cache, the scheduler, the MCP lean path) is named in a warning, in ``/healthz``
  as ``restart_needed`` for ``pincer doctor``, and on the dashboard's overview.
- installed WASM tools: rescanned; installed script tools and ``exec-approvals.json``: the
  script runtime is rebuilt;
- MCP servers and OpenAPI services: their runtime is rebuilt from the file;
- ``pincer.lock`` (the hub's installs): the runtimes of the kinds it lists (before or after the
  change) check their hub-installed artifacts again, so an install's new lock admits the new
  version and an edited file stays refused.

Polling, not inotify: it works on every filesystem and costs a few ``stat`` calls a second.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from pincer.config import CONFIG_FILENAME, Config, load_config
from pincer.core.errors import PincerError

logger = logging.getLogger(__name__)

__all__ = ["ReloadServices", "watch_state", "STATE_WATCH_INTERVAL_S", "live_config_changes", "policy_changes", "POLICY_SECTIONS"]

STATE_WATCH_INTERVAL_S = 1.0

Stamp = tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReloadServices:
    """What :func:`watch_state` drives when something under the home changes: made by
    ``Pincer.reload_services()`` (service.py imports this module, never the other way)."""

    home: Path
    apply_config: Callable[[Config], Awaitable[None]]
    reload_wasm_tools: Callable[[], Awaitable[None]]
    reload_script_tools: Callable[[], Awaitable[None]]
    reload_mcp_servers: Callable[[], Awaitable[None]]
    reload_openapi_services: Callable[[], Awaitable[None]]
    reload_hub_artifacts: Callable[[frozenset[str] | None], Awaitable[None]]


def _stamp(path: Path) -> Stamp:
    """Name, size and mtime of a file, or of each entry of a folder; () when absent."""
    try:
        entries = sorted(path.iterdir()) if path.is_dir() else [path]
        found = []
        for entry in entries:
            info = entry.stat()
            found.append((entry.name, info.st_size, info.st_mtime_ns))
        return tuple(found)
    except OSError:
        return ()


def live_config_changes(old: Config, new: Config) -> list[str]:
    """The settings that changed but take effect only when ``pincer serve`` restarts."""
    changed = []
    for key in ("host", "port", "allow_remote", "max_body_bytes", "allowed_hosts", "allowed_origins"):
        if getattr(old.gateway, key) != getattr(new.gateway, key):
            changed.append(f"[gateway] {key}")
    # the stores are opened once: PostgreSQL's pools and instance row, Redis's client
    for key in ("url", "password_secret", "pool_size", "host_id"):
        if getattr(old.store, key) != getattr(new.store, key):
            changed.append(f"[store] {key}")
    if old.cache.url != new.cache.url:
        changed.append("[cache] url")
    if old.triggers.enabled != new.triggers.enabled:  # the scheduler and the run queue start with serve
        changed.append("[triggers] enabled")
    if old.audit_synchronous != new.audit_synchronous:
        changed.append("[audit] synchronous")
    # an MCP server's connection keeps the path it was started on; a rebuilt runtime keeps
    # running servers (reload_mcp_servers), so the new path needs new connections
    if old.tools.mcp_lean_calls != new.tools.mcp_lean_calls:
        changed.append("[tools] mcp_lean_calls")
    for key in ("mcp_max_person_instances", "mcp_person_idle_s"):  # fixed when the runtime is made
        if getattr(old.tools, key) != getattr(new.tools, key):
            changed.append(f"[tools] {key}")
    # the skill library's roots are fixed when it is made
    for key in ("enabled", "extra_dirs"):
        if getattr(old.skills, key) != getattr(new.skills, key):
            changed.append(f"[skills] {key}")
    if old.workspace != new.workspace:
        changed.append("[workspace] path")
    # the tracer provider and the metrics listener are set up once, when the gateway starts
    for key in type(new.telemetry).model_fields:
        if getattr(old.telemetry, key) != getattr(new.telemetry, key):
            changed.append(f"[telemetry] {key}")
    return changed


# The parts of config.toml that decide what pincer may do: who may call (sessions, tokens,
# allowed hosts), what a call may do (grants, limits, credentials, network, sandbox, the taint
# rule, tool limits), how it is asked (approvals), what starts runs (hooks, jobs) and which tools
# exist (built-ins, hub sources, a model for run_skill and build_tool), and who signs in with
# which roles (auth: single sign-on's providers and rules). A change to any of them
# is an act (core/acts.py): the gateway that applies it records it.
POLICY_SECTIONS = (
    "grants", "sessions", "limits", "credentials", "network", "sandbox", "agent", "tools", "approvals",
    "idempotency", "gateway", "hooks", "jobs", "builtins", "hub", "llm", "auth",
)  # fmt: skip


def policy_changes(old: Config, new: Config) -> list[str]:
    """The policy sections (:data:`POLICY_SECTIONS`) that differ between two configs."""
    return [name for name in POLICY_SECTIONS if getattr(old, name) != getattr(new, name)]


def _locked_kinds(path: Path) -> set[str]:
    """The kinds of artifact ``pincer.lock`` lists (nothing when it is absent or broken)."""
    from pincer.hub.lockfile import Lockfile

    try:
        return {entry.kind.value for entry in Lockfile.read(path).entries}
    except PincerError:
        return set()


class _Watched:
    """One thing on disk and what to do when it changes."""

    def __init__(self, name: str, paths: tuple[Path, ...], reload: Callable[[], Any]) -> None:
        self.name = name
        self.paths = paths
        self.reload = reload
        self.seen = self.now()

    def now(self) -> tuple[Stamp, ...]:
        return tuple(_stamp(path) for path in self.paths)


async def watch_state(
    services: ReloadServices,
    interval_s: float = STATE_WATCH_INTERVAL_S,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Poll until cancelled; with ``TaskGroup.start`` it reports ready once it has taken stock."""
    from pincer.runtimes.mcp.config import SERVERS_FILE
    from pincer.runtimes.openapi.config import SERVICES_FILE
    from pincer.runtimes.script.installed import script_dir

    home = services.home

    async def reload_config() -> None:
        try:
            config = load_config(home)
        except PincerError as exc:
            logger.error("%s was not applied, the running config stays: %s", home / CONFIG_FILENAME, exc)
            return
        await services.apply_config(config)

    watched = [
        _Watched("config.toml", (home / CONFIG_FILENAME,), reload_config),
        _Watched("WASM tools", (home / "tools" / "wasm",), services.reload_wasm_tools),
        _Watched("script tools", (script_dir(home), home / "exec-approvals.json"), services.reload_script_tools),
        _Watched("MCP servers", (home / SERVERS_FILE,), services.reload_mcp_servers),
        _Watched("OpenAPI services", (home / SERVICES_FILE,), services.reload_openapi_services),
    ]
    reload_hub = services.reload_hub_artifacts
    lock_path = home / "pincer.lock"
    kinds_before = [_locked_kinds(lock_path)]

    async def reload_lock() -> None:
        # What the lock covered before or covers now is checked again; the rest is left be.
        now = _locked_kinds(lock_path)
        kinds = now | kinds_before[0]
        kinds_before[0] = now
        if kinds:
            await reload_hub(frozenset(kinds))

    watched.append(_Watched("pincer.lock", (lock_path,), reload_lock))
    task_status.started()
    while True:
        await anyio.sleep(interval_s)
        for item in watched:
            now = item.now()
            if now == item.seen:
                continue
            item.seen = now
            try:
                await item.reload()
                logger.info("reloaded %s", item.name)
            except PincerError as exc:
                logger.warning("reloading %s failed, the previous state stays: %s", item.name, exc)
            except Exception:  # a reload must never stop the watcher
                logger.exception("reloading %s failed", item.name)
