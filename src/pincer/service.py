"""Wiring: one ``Pincer`` per PINCER_HOME — config, database, secret store, registry, dispatcher.

async with Pincer.open(home) as pincer:
    result = await pincer.call(CallRequest(tool="echo", args={"text": "hi"}))
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from pincer.approver import ApprovalHook
from pincer.config import CONFIG_FILENAME, Config, load_config
from pincer.core.errors import ExtraMissing, PincerError, SecretError, UsageError
from pincer.core.values import CallRequest, ToolResult, ToolSpec
from pincer.dispatch import Dispatcher, Operation
from pincer.registry import Registry
from pincer.runtimes.base import Runtime
from pincer.safety.scanner import LeakScanner
from pincer.secrets.keys import AUDIT_KEY, load_or_create_key
from pincer.secrets.store import SecretAccess, SecretStore
from pincer.store import ApprovalStore, AuditLog, GrantStore, IdempotencyStore
from pincer.store.anchor import ANCHOR_FILE, SHARED_ANCHOR_FILE, AnchorFile
from pincer.store.home_share import HomeSync, LocalHome, SharedHomeBackend, share, unshare
from pincer.store.instances import Instances
from pincer.store.oidc_logins import OidcLoginStore
from pincer.store.people import PeopleStore
from pincer.store.runs import RunStore
from pincer.store.sign_ins import SignInStore
from pincer.store.sql import Database, open_postgres, open_sqlite
from pincer.store.tasks import TaskStore
from pincer.store.triggers import TriggerStore

if TYPE_CHECKING:
    from pincer.builder.host import BuilderServices
    from pincer.hub.agent_tools import HubServices
    from pincer.llm.host import AgentServices
    from pincer.llm.loop import AgentLoop
    from pincer.llm.services import DelegateServices, RunnerServices
    from pincer.policy.grants import Grant
    from pincer.reload import ReloadServices
    from pincer.runtimes.mcp.config import ServerConfig
    from pincer.runtimes.mcp.runtime import McpRuntime
    from pincer.runtimes.native.skill_roots import SkillRootGuard
    from pincer.runtimes.openapi.runtime import OpenApiRuntime
    from pincer.runtimes.script.settings import ScriptSettings
    from pincer.runtimes.wasm.runtime import WasmRuntime
    from pincer.skills.deps import DepsResult
    from pincer.skills.library import SkillLibrary
    from pincer.skills.model import Skill
    from pincer.store.cache import SharedRateLimiter
    from pincer.store.retention import Pruned
    from pincer.telemetry.metrics import Metrics, ServerState
    from pincer.triggers.engine import TriggerEngine, TriggerServices
    from pincer.triggers.requests import RunStarter

logger = logging.getLogger(__name__)

# A per-person token of a built-in's login is connected with its command (a person's own OAuth
# login, or a checked paste), not `pincer secrets set`: what a call missing one is told.
_CONNECT_COMMANDS = {"google_oauth_token": "pincer auth setup google", "slack_bot_token": "pincer auth setup slack",
                     "github_token": "pincer auth setup github"}  # fmt: skip

__all__ = ["Pincer", "OpenedStores", "open_stores", "home_audit_log", "RUNTIME_CLOSE_TIMEOUT_S"]

RUNTIME_CLOSE_TIMEOUT_S = 10.0


class Pincer:
    def __init__(
        self,
        *,
        config: Config,
        secret_key: bytes | None,
        stores: OpenedStores,
        environ: Mapping[str, str] | None = None,
        run_starter: RunStarter | None = None,
    ) -> None:
        """``stores``: what :func:`open_stores` opened (the database of the stores, SQLite under
        ``home`` or the PostgreSQL one ``[store] url`` names, with its audit log)."""
        self.config = config
        self._stores = stores
        self.db: Database = stores.db
        # Where [llm] api_key_env is looked up: the CLI and the gateway pass os.environ.
        self.environ: Mapping[str, str] = environ if environ is not None else {}
        self.home = config.home
        db, instances = stores.db, stores.instances
        self.instances = instances  # this process's row on a shared store (None on SQLite)
        owners = instances.owners if instances is not None else None
        self.audit: AuditLog = stores.audit
        self.approvals = ApprovalStore(db, owners=owners, audit=self.audit)
        self.grants = GrantStore(db)
        self.idempotency = IdempotencyStore(
            db, ttl_s=config.idempotency_ttl_s, max_entries=config.idempotency_max_entries, owners=owners
        )
        self.runs = RunStore(db, owners=owners)
        self.sign_ins = SignInStore(db)
        self.tasks = TaskStore(db)
        self.people = PeopleStore(db)
        self.oidc_logins = OidcLoginStore(db)
        self.trigger_store = TriggerStore(db, owners=owners, instances=instances)
        self.secrets = SecretStore.open(config.home, key=secret_key)
        # The registry's files under home, shared with other machines' homes on [store] url.
        self.home_sync = HomeSync(config.home, stores.home_files or LocalHome())
        self._sync_failing = False
        self.registry = Registry()
        self.wasm: WasmRuntime | None = None
        self._watches_wasm = False
        self._wasm_missing_said = False  # the warning that wasmtime is missing, once
        self._scripts: Runtime | None = None
        self._mcp: McpRuntime | None = None
        self._mcp_starts: Callable[[str], bool] | None = None  # Pincer.open's mcp_starts
        self._openapi: Runtime | None = None
        self.skills: SkillLibrary | None = None  # while [skills] is enabled
        # What the hub installed is loaded only while it matches pincer.lock (hub/integrity.py).
        from pincer.hub.integrity import IntegrityGuard

        self.integrity = IntegrityGuard(config.home, check_signatures=instances is not None)
        self._hub_tools: Runtime | None = None
        self._bundled: Runtime | None = None  # the enabled [builtins.NAME]: follows config.toml
        self._agent_tools: list[Runtime] = []  # run_skill, build_tool: while [llm] names a model
        self._builtins = False  # opened with builtins: the config-dependent tools follow config.toml
        self._started_config = config  # what restart_needed compares with
        self.restart_needed: tuple[str, ...] = ()  # settings changed since start that wait for a restart
        # What else follows a reloaded config.toml (the gateway's canvas): called after apply_config.
        self._config_followers: list[Callable[[Config], Awaitable[None]]] = []
        self._bound: tuple[str, int] | None = None  # where pincer serve listens (--host/--port win over config)
        # The RunStarter firings are handed to (commands, schedules, webhooks); None: the agent
        # loop (pincer.triggers.starter's default).
        self._run_starter = run_starter
        self._triggers: TriggerEngine | None = None
        self._unsubscribe: dict[int, Callable[[], None]] = {}
        self._scanner: LeakScanner | None = None
        self._scanner_version: object = None
        self._agent: AgentLoop | None = None
        self.metrics: Metrics | None = None  # set by enable_metrics (the gateway)
        self.dispatcher = Dispatcher(
            registry=self.registry,
            config=config,
            audit=self.audit,
            approvals=self.approvals,
            grants=self.grants,
            idempotency=self.idempotency,
            scanner=self.scanner,
            secret_access=self._secret_access,
        )
        self._shared_limiter: SharedRateLimiter | None = None
        if config.cache.url is not None:
            from pincer.store.cache import SharedRateLimiter

            self._shared_limiter = self.dispatcher.shared_limiter = SharedRateLimiter(config.cache.url)

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: Path,
        *,
        config: Config | None = None,
        secret_key: bytes | None = None,
        audit_key: bytes | None = None,
        builtins: bool = True,
        external: bool = True,
        scripts: bool = True,
        wasm: bool = True,
        skills: bool = True,
        environ: Mapping[str, str] | None = None,
        mcp_starts: Callable[[str], bool] | None = None,
        run_starter: RunStarter | None = None,
    ) -> AsyncIterator[Pincer]:
        """Open the state under ``home``; built-in tools are registered unless ``builtins=False``,
        the MCP servers and OpenAPI services configured under ``home`` unless ``external=False``.
        ``audit_key`` None means ``home/audit.key`` (created 0600 on first use).

        A runtime whose kind has nothing configured is not added, so its dependencies (wasmtime,
        the MCP SDK) are not imported; :meth:`watch_state` adds the WASM runtime when the first
        component is installed. ``mcp_starts``: which MCP servers may start with it, by name (a
        one-shot ``pincer tools call`` starts only the ones that may own its tool, so a broken
        server says nothing to calls of other tools); default: the eager ones and those whose
        tools are not pinned yet. ``run_starter``: what carries firings out (commands, schedules,
        webhooks); default: the agent loop."""
        config = config or load_config(home)
        config.workspace.mkdir(parents=True, exist_ok=True)
        async with open_stores(config, secret_key=secret_key, audit_key=audit_key) as stores:
            pincer = cls(config=config, secret_key=secret_key, stores=stores, environ=environ, run_starter=run_starter)
            try:
                pincer._mcp_starts = mcp_starts
                await pincer._open(builtins=builtins, external=external, scripts=scripts, wasm=wasm, skills=skills)
                yield pincer
            finally:
                with anyio.CancelScope(shield=True):
                    await pincer.aclose()

    async def _open(self, *, builtins: bool, external: bool, scripts: bool, wasm: bool, skills: bool) -> None:
        """Bring up what a Pincer serves (the runtimes, the skills, the hub's and the agent's tools)."""
        pincer, config, home = self, self.config, self.home
        pincer._watches_wasm = wasm
        # Calls whose waiting process died (killed while it waited for an answer) are
        # recorded by whoever opens the store next, if nobody listed the approvals since.
        await pincer.approvals.expire_overdue()
        if pincer.home_sync.is_shared:
            # What other machines installed is in place before the runtimes read the home.
            await pincer.sync_home(always=True)
            share(pincer.home_sync)
        if builtins:
            from pincer.runtimes.native.builtins import builtin_runtime

            await pincer.add_runtime(builtin_runtime(skill_roots=_skill_root_guard(config, pincer.environ)))
            pincer._bundled = pincer._bundled_runtime(config)  # [builtins.NAME]: github, web_fetch...
            if pincer._bundled is not None:
                await pincer.add_runtime(pincer._bundled)
        if scripts:
            pincer._scripts = pincer._script_runtime()
            await pincer.add_runtime(pincer._scripts)
        if wasm and _has_wasm_tools(home):
            await pincer._add_wasm_runtime()
        if external:
            await pincer._add_external_runtimes()
        if skills and config.skills.enabled:
            await pincer._add_skills()
        pincer._builtins = builtins
        if builtins and _has_model(config):
            await pincer._add_agent_tools()
        if builtins and config.hub.sources:
            await pincer._add_hub_tools()

    async def _add_wasm_runtime(self) -> None:
        try:
            from pincer.runtimes.wasm import WasmRuntime
        except ExtraMissing as exc:  # the gateway serves the rest; doctor and config check name the extra
            if not self._wasm_missing_said:
                logger.warning("the installed WASM tools are not served: %s; %s", exc.message, exc.hint)
                self._wasm_missing_said = True
            return

        guard = self.integrity
        self.wasm = WasmRuntime(self.home, scanner=self.scanner, admit=lambda name: guard.refusal("tool", name))
        await self.add_runtime(self.wasm)

    def _bundled_runtime(self, config: Config) -> Runtime | None:
        """The built-ins ``[builtins.NAME]`` enables (None when none is)."""
        if not config.builtins:
            return None
        from pincer.builtins.catalog import bundled_runtime
        from pincer.builtins.oauth import TokenKeeper

        # per_person read at each use: a reload of [secrets] applies without a new keeper.
        tokens = TokenKeeper(store=self.secrets, home=self.home, settings=config.builtins,
                             allow_private_network=config.allow_private_network,
                             per_person=lambda: self.config.secrets.per_person)  # fmt: skip
        return bundled_runtime(config.builtins, tokens=tokens)

    async def _follow_builtins(self, old: Config, new: Config) -> None:
        """``[builtins.NAME]`` edited (by hand, or by `pincer install`/`remove tools/NAME`): the
        bundled runtime is made again from the new settings and replaces the old one, so tools
        come and go at once (MCP clients hear tools/list_changed). Settings that cannot be
        served (an extra not installed) keep the built-ins as they were, and say why."""
        if (old.builtins, old.allow_private_network) == (new.builtins, new.allow_private_network):
            return
        try:
            fresh = self._bundled_runtime(new)
        except PincerError as exc:
            logger.error("config.toml: [builtins] not applied, the built-ins stay as they were: %s%s",
                         exc.message, f"; {exc.hint}" if exc.hint else "")  # fmt: skip
            return
        stale, self._bundled = self._bundled, fresh
        await self._swap(stale, fresh)
        names = sorted(spec.name for spec in fresh.tools()) if fresh is not None else []
        logger.info("config.toml: [builtins] applied; the built-ins offered now: %s", ", ".join(names) or "none")

    async def _add_agent_tools(self) -> None:
        """``run_skill``: other agents delegate a skill to the agent loop (llm/delegate.py);
        ``build_tool``: an agent has pincer build a tool (builder/agent_tool.py)."""
        from pincer.llm.delegate import run_skill_runtime

        runtime = run_skill_runtime(self.delegate_services())
        try:
            await self.add_runtime(runtime)
            self._agent_tools.append(runtime)
        except UsageError as exc:  # a tool of that name from elsewhere keeps it
            logger.warning("run_skill not registered: %s", exc)
        from pincer.builder.agent_tool import builder_runtime

        runtime = builder_runtime(self.builder_services())
        try:
            await self.add_runtime(runtime)  # build_tool: an agent has a tool built (it asks)
            self._agent_tools.append(runtime)
        except UsageError as exc:
            logger.warning("build_tool not registered: %s", exc)

    async def _add_hub_tools(self) -> None:
        """``skills_search`` and ``skills_install``: an agent finds and installs what it needs."""
        from pincer.hub.agent_tools import hub_runtime

        self._hub_tools = hub_runtime(self.hub_services())
        try:
            await self.add_runtime(self._hub_tools)
        except UsageError as exc:
            logger.warning("hub tools not registered: %s", exc)
            self._hub_tools = None

    async def reload_hub_artifacts(self, kinds: frozenset[str] | None = None) -> None:
        """pincer.lock changed: what it covers is checked again (``kinds``: only those runtimes)."""
        wanted = kinds if kinds is not None else frozenset({"tool", "skill", "script", "mcp_server", "openapi"})
        if "tool" in wanted:
            if self.wasm is not None:
                await self.wasm.rescan(recheck=True)
            else:
                await self.reload_wasm_tools()
        if "script" in wanted:
            await self.reload_script_tools()
        if "mcp_server" in wanted:
            await self.reload_mcp_servers()
        if "openapi" in wanted:
            await self.reload_openapi_services()
        skills = self.skills
        if (
            "skill" in wanted
            and skills is not None
            and await anyio.to_thread.run_sync(lambda: skills.reload(notify=False))
        ):
            skills.notify_changed()

    async def _add_skills(self) -> None:
        """The skill library, the ``skill`` tool and the tools made from skills' capabilities."""
        from pincer.skills.library import SkillLibrary
        from pincer.skills.runtime import SkillTool, SkillToolRuntime

        config = self.config
        guard = self.integrity

        def admit(skill: Skill) -> str | None:
            return guard.refusal("skill", skill.base_dir.name)

        library = self.skills = await anyio.to_thread.run_sync(
            lambda: SkillLibrary.from_config(config, environ=self.environ, admit=admit)
        )
        tools = await anyio.to_thread.run_sync(
            lambda: SkillToolRuntime(
                library,
                home=self.home,
                script_settings=self.script_settings(),
                separator=config.skills.tool_separator,
            )
        )

        async def grants() -> tuple[Grant, ...]:
            return config.grants + await self.grants.all()

        for runtime in (SkillTool(library, specs=self.registry.list, grants=grants), tools):
            try:
                await self.add_runtime(runtime)
            except UsageError as exc:
                # A tool of the same name from elsewhere (an installed script tool called
                # "skill"): that one keeps its name, and pincer starts without these.
                logger.warning("skill tools not registered: %s", exc)

    def script_settings(self) -> ScriptSettings:
        """The sandbox settings of config.toml, as the script runtime and skill tools use them."""
        from pincer.runtimes.script.installed import load_exec_policy
        from pincer.runtimes.script.settings import ScriptSettings

        config = self.config
        return ScriptSettings(
            backend=config.sandbox_backend,
            main_session_on_host=config.sandbox_main_session_on_host,
            use_workspace=config.sandbox_use_workspace,
            container_image=config.sandbox_container_image,
            workdir_max_bytes=config.sandbox_workdir_max_bytes,
            exec_policy=load_exec_policy(self.home),
        )

    async def install_skill_deps(self, name: str) -> DepsResult:
        """Install one skill's dependencies (``pincer skills deps NAME``) and reload the library."""
        from pincer.skills.deps import install_deps

        library = self.skills
        if library is None:
            raise UsageError("skills are disabled", hint="set [skills] enabled = true in config.toml")
        skill = library.get(name)
        settings = self.config.skills
        result = await install_deps(
            skill,
            home=self.home,
            script_settings=self.script_settings(),
            npm_registry=settings.npm_registry,
            pip_index=settings.pip_index,
            allow_private_network=self.config.allow_private_network,
        )
        if await anyio.to_thread.run_sync(lambda: library.reload(notify=False)):
            library.notify_changed()
        return result

    async def _install_missing_skill_deps(self, library: SkillLibrary) -> None:
        from pincer.skills.deps import dependency_files, deps_problem

        for skill in list(library.skills):
            if dependency_files(skill) and deps_problem(self.home, skill) is not None:
                try:
                    await self.install_skill_deps(skill.name)
                except PincerError as exc:
                    logger.warning("installing the dependencies of skill %s failed: %s", skill.name, exc)

    async def watch_state(
        self,
        interval_s: float | None = None,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Follow what other processes change under PINCER_HOME (installed tools, MCP servers,
        OpenAPI services, config.toml, exec-approvals.json; see reload.py) and, when skills are
        enabled, SKILL.md files, until cancelled. Missing skill dependencies are installed in the
        background when ``[skills] auto_install_deps`` is on. The trigger engine (the scheduler and
        the run queue) runs beside them unless ``[triggers] enabled = false``."""
        from pincer.reload import STATE_WATCH_INTERVAL_S, watch_state

        interval = STATE_WATCH_INTERVAL_S if interval_s is None else interval_s
        async with anyio.create_task_group() as tg:
            if self.skills is not None:
                await tg.start(self.skills.watch)
                if self.config.skills.auto_install_deps:
                    tg.start_soon(self._install_missing_skill_deps, self.skills)
            if self.config.triggers.enabled:
                await tg.start(self.triggers.run)
            if self.home_sync.is_shared:
                tg.start_soon(self._follow_shared_home)
            tg.start_soon(self._follow_retention)
            await watch_state(self.reload_services(), interval, task_status=task_status)

    async def prune_store(self) -> Pruned:
        """Delete what ``[retention]`` says is old enough (store/retention.py): the counts."""
        from pincer.store.retention import prune

        kept = self.config.retention
        return await prune(self.db, now=time.time(), approvals_days=kept.approvals_days, runs_days=kept.runs_days,
                           webhook_payloads_days=kept.webhook_payloads_days)  # fmt: skip

    async def _follow_retention(self) -> None:
        from pincer.store.retention import PRUNE_EVERY_S

        while True:
            try:
                pruned = await self.prune_store()
            except PincerError as exc:
                logger.warning("pruning the store after [retention] failed (the next hour tries again): %s", exc)
            else:
                if any(pruned.to_dict().values()):
                    logger.info("pruned after [retention]: %s", pruned.to_dict())
            await anyio.sleep(PRUNE_EVERY_S)

    async def sync_home(self, *, always: bool = False) -> None:
        """Sync the registry's files with the other machines' homes ([store] url; see
        store/home_share.py): ``always``, or when the store's counter moved or a file here changed.
        What arrives is reloaded by :meth:`watch_state` as any change on this home is. A failure
        is logged; the next sync retries."""
        sync = self.home_sync
        try:
            report = await anyio.to_thread.run_sync(sync.sync if always else sync.sync_if_needed)
        except Exception as exc:  # noqa: BLE001 - psycopg's errors too: the store may be away a while
            if not self._sync_failing:  # said once per outage, not every interval
                logger.warning("the registry files of %s were not synced with the store: %s; the next sync "
                               "retries (`pincer db status` checks the store)", self.home, exc)  # fmt: skip
            self._sync_failing = True
            return
        if self._sync_failing:
            logger.info("the registry files of %s are synced with the store again", self.home)
        self._sync_failing = False
        for refusal in report.refused:
            logger.error("%s", refusal)
        for path in report.overridden:
            logger.warning("%s changed here and on another machine since the last sync; this home's change is "
                           "the one shared now", path)  # fmt: skip
        if report.changed:
            logger.info("registry files synced with the store: %d published, %d received",
                        len(report.pushed), len(report.pulled))  # fmt: skip

    async def _follow_shared_home(self) -> None:
        from pincer.store.home_share import HOME_SYNC_INTERVAL_S

        while True:
            await anyio.sleep(HOME_SYNC_INTERVAL_S)
            await self.sync_home()

    watch_installed_tools = watch_state

    @property
    def triggers(self) -> TriggerEngine:
        """The trigger engine (``pincer.triggers.TriggerEngine``), made on first use."""
        if self._triggers is None:
            from pincer.triggers.engine import TriggerEngine
            from pincer.triggers.starter import default_starter

            starter = self._run_starter if self._run_starter is not None else default_starter(self.runner_services())
            self._triggers = TriggerEngine.for_services(self.trigger_services(), starter=starter)
        return self._triggers

    async def apply_config(self, config: Config) -> None:
        """Run under ``config`` from now on (a reloaded config.toml): the dispatcher decides with
        it, the gateway's tokens follow it, the script runtime is rebuilt when its settings move."""
        from pincer.reload import live_config_changes

        old, self.config = self.config, config
        self.dispatcher.reconfigure(config)
        await self._record_policy_change(old, config)
        for setting in live_config_changes(old, config):
            logger.warning("config.toml: %s changed; it takes effect when `pincer serve` restarts", setting)
        # against the start, so a setting put back needs no restart any more (`pincer doctor` asks)
        waiting = live_config_changes(self._started_config, config)
        if self._bound is not None:  # a config that now names where it listens (e.g. after --port) waits for nothing
            host, port = self._bound
            waiting = [w for w in waiting if not (w == "[gateway] port" and config.gateway.port == port)
                       and not (w == "[gateway] host" and config.gateway.host == host)]  # fmt: skip
        self.restart_needed = tuple(waiting)
        await self._follow_config_tools(old, config)
        for follow in list(self._config_followers):
            await follow(config)
        config.workspace.mkdir(parents=True, exist_ok=True)
        sandbox = (
            "sandbox_backend", "sandbox_main_session_on_host", "sandbox_use_workspace", "sandbox_container_image",
            "sandbox_workdir_max_bytes",
        )  # fmt: skip
        if any(getattr(old, key) != getattr(config, key) for key in sandbox):
            await self.reload_script_tools()

    def follow_config(self, follow: Callable[[Config], Awaitable[None]]) -> Callable[[], None]:
        """Call ``follow`` with each config.toml applied from now on (after the service took it);
        the function returned stops that."""
        self._config_followers.append(follow)
        return lambda: self._config_followers.remove(follow)

    def serving_at(self, host: str, port: int) -> None:
        """``pincer serve`` listens here (``--host``/``--port`` win over config.toml): a reloaded
        config that names this address waits for no restart."""
        self._bound = (host, port)

    async def _record_policy_change(self, old: Config, new: Config) -> None:
        """A reloaded config.toml that changes policy is an act: one record, by this gateway
        (``config:<host>``: the file says nothing of who edited it), naming the sections that
        changed and the sha256 of the file it read."""
        import hashlib

        from pincer.core.acts import ActKind, Actor
        from pincer.reload import policy_changes
        from pincer.store.acts import act_entry
        from pincer.store.owners import this_host

        changed = policy_changes(old, new)
        if not changed:
            return
        try:
            digest = hashlib.sha256((self.home / CONFIG_FILENAME).read_bytes()).hexdigest()
        except OSError:
            digest = None
        actor = Actor(channel="config", principal=new.store.host_id or this_host())
        await self.audit.append(
            act_entry(ActKind.CONFIG, actor=actor, subject=CONFIG_FILENAME, outcome="applied",
                      reason=f"{CONFIG_FILENAME} reloaded: {', '.join(changed)} changed", args={"changed": changed, "sha256": digest})
        )  # fmt: skip

    async def _follow_config_tools(self, old: Config, new: Config) -> None:
        """The tools that exist because of config.toml come and go with it: run_skill and
        build_tool with a model in [llm], skills_search and skills_install with [[hub.sources]]
        (the registry's change reaches MCP clients as tools/list_changed)."""
        if not self._builtins:
            return
        await self._follow_builtins(old, new)
        if _has_model(new) and not self._agent_tools:
            await self._add_agent_tools()
            logger.info("config.toml: [llm] names a model; run_skill and build_tool are offered")
        elif not _has_model(new) and self._agent_tools:
            tools, self._agent_tools = self._agent_tools, []
            for runtime in tools:
                await self.remove_runtime(runtime)
            logger.info("config.toml: [llm] names no model; run_skill and build_tool are withdrawn")
        if new.hub.sources and self._hub_tools is None:
            await self._add_hub_tools()
            logger.info("config.toml: [[hub.sources]] added; skills_search and skills_install are offered")
        elif not new.hub.sources and self._hub_tools is not None:
            runtime, self._hub_tools = self._hub_tools, None
            await self.remove_runtime(runtime)
            logger.info("config.toml: no [[hub.sources]]; skills_search and skills_install are withdrawn")

    async def reload_wasm_tools(self) -> None:
        if self.wasm is not None:
            await self.wasm.rescan()
        elif self._watches_wasm and _has_wasm_tools(self.home):
            await self._add_wasm_runtime()  # the first component: wasmtime loads only now

    async def reload_script_tools(self) -> None:
        if self._scripts is not None:
            old, self._scripts = self._scripts, self._script_runtime()
            await self._swap(old, self._scripts)

    async def reload_mcp_servers(self) -> None:
        """Servers whose entry did not change keep running (and their calls in flight)."""
        from pincer.runtimes.mcp.config import ServerStore

        if self._mcp is not None:
            await self._mcp.reconcile(self._admitted_servers(ServerStore(self.home).load()))
            return
        new = self._mcp_runtime()
        if new.servers:
            self._mcp = new
            await self.add_runtime(new)

    async def reload_openapi_services(self) -> None:
        new = self._openapi_runtime()
        old, self._openapi = self._openapi, (new if new.services else None)
        await self._swap(old, self._openapi)

    async def _swap(self, old: Runtime | None, new: Runtime | None) -> None:
        """Replace a runtime: the old one's tools leave, the new one's arrive. Its tools are
        missing from the registry for the moment between."""
        if old is not None:
            await self.remove_runtime(old)
        if new is not None:
            await self.add_runtime(new)

    def _script_runtime(self) -> Runtime:
        """The ``exec`` tool and the installed script tools. Exec approvals are asked in the call
        chain's one approval step (the runtime's preflight); allow-always answers go to
        exec-approvals.json."""
        from pincer.policy.session import SessionKind
        from pincer.runtimes.script import ScriptRuntime
        from pincer.runtimes.script.installed import installed_manifests, save_exec_policy

        config = self.config
        guard = self.integrity
        manifests = []
        for manifest in installed_manifests(self.home):
            refusal = guard.refusal("script", manifest.name)
            if refusal is not None:
                logger.error("script tool %s not loaded: %s", manifest.name, refusal)
                continue
            manifests.append(manifest)
        return ScriptRuntime(
            manifests,
            self.script_settings(),
            is_main_session=lambda session: config.session(session).kind is SessionKind.MAIN,
            on_policy_change=lambda policy: save_exec_policy(self.home, policy),
        )

    async def _add_external_runtimes(self) -> None:
        # Reading the settings files is cheap; the runtimes' modules (the MCP SDK, the HTTP
        # client) are imported only when something is configured for them.
        from pincer.runtimes.mcp import ServerStore
        from pincer.runtimes.openapi import ServiceStore

        if ServerStore(self.home).load():
            mcp = self._mcp_runtime()
            if mcp.servers:
                await self.add_runtime(mcp)
                self._mcp = mcp
        if ServiceStore(self.home).load():
            openapi = self._openapi_runtime()
            if openapi.services:
                await self.add_runtime(openapi)
                self._openapi = openapi

    def _admitted_servers(self, servers: list[ServerConfig]) -> list[ServerConfig]:
        kept = []
        for server in servers:
            refusal = self.integrity.refusal("mcp_server", server.name)
            if refusal is not None:
                logger.error("MCP server %s not started: %s", server.name, refusal)
                continue
            kept.append(server)
        return kept

    def _mcp_runtime(self) -> McpRuntime:
        from pincer.runtimes.mcp import McpRuntime, PinStore, ServerStore

        servers = self._admitted_servers(ServerStore(self.home).load())
        tools = self.config.tools
        return McpRuntime(
            servers, pins=PinStore(self.home), secrets=self._mcp_secret, scanner=self.scanner, starts=self._mcp_starts,
            lean_calls=tools.mcp_lean_calls, per_person=self.config.secrets.per_person,
            person_values=self.secrets.find_for, max_person_instances=tools.mcp_max_person_instances,
            person_idle_s=tools.mcp_person_idle_s,
        )  # fmt: skip

    def _mcp_secret(self, name: str) -> str | None:
        """An MCP server's shared ``${secret:NAME}``, read when the server starts. A per-person
        name is resolved by the person's own instance (runtimes/mcp/person_instances.py) and
        never reaches here; if it does, it is refused (never the shared value, nor anyone's)."""
        if name in self.config.secrets.per_person:
            raise SecretError(
                f"secret {name!r} is per person, and this MCP server connection acts for no person",
                hint="call the server's tools with a person's token (`pincer people token NAME`)",
            )
        return self.secrets.find(name)

    def _openapi_runtime(self) -> OpenApiRuntime:
        from pincer.runtimes.openapi import OpenApiRuntime, ServiceStore

        kept = []
        for service in ServiceStore(self.home).load():
            refusal = self.integrity.refusal("openapi", service.name)
            if refusal is not None:
                logger.error("OpenAPI service %s not loaded: %s", service.name, refusal)
                continue
            kept.append(service)
        tokens = None
        if any(scheme.is_oauth for service in kept for scheme in service.schemes):
            from pincer.builtins.openapi_oauth import OpenApiTokens

            tokens = OpenApiTokens(
                store=self.secrets, home=self.home, allow_private_network=self.config.allow_private_network
            )
        return OpenApiRuntime(kept, tokens=tokens, max_request_bytes=self.config.openapi.max_request_bytes)

    async def add_runtime(self, runtime: Runtime) -> None:
        """Start ``runtime`` and register its tools. A runtime with ``subscribe(listener)`` (MCP:
        list_changed, restarts, trusts) gets its registry entries refreshed on each change."""
        await runtime.start()
        try:
            self.registry.add_runtime(runtime)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await runtime.aclose()
            raise
        subscribe = getattr(runtime, "subscribe", None)
        if callable(subscribe):
            self._unsubscribe[id(runtime)] = subscribe(lambda: self._refresh(runtime))

    def _refresh(self, runtime: Runtime) -> None:
        if runtime in self.registry.runtimes:
            self.registry.refresh(runtime)

    async def remove_runtime(self, runtime: Runtime) -> None:
        unsubscribe = self._unsubscribe.pop(id(runtime), None)
        if unsubscribe is not None:
            unsubscribe()
        self.registry.remove_runtime(runtime)
        with anyio.CancelScope(shield=True), anyio.move_on_after(RUNTIME_CLOSE_TIMEOUT_S):
            await runtime.aclose()

    async def call(
        self, request: CallRequest, *, on_approval: ApprovalHook | None = None, operation: Operation | None = None
    ) -> ToolResult:
        return await self.dispatcher.call(request, on_approval=on_approval, operation=operation)

    @property
    def agent(self) -> AgentLoop:
        """The agent loop (``pincer.llm.AgentLoop``), made on first use: the model SDKs load only
        when a run needs a provider."""
        if self._agent is None:
            from pincer.llm.loop import AgentLoop

            self._agent = AgentLoop(self.agent_services(), environ=self.environ)
        return self._agent

    # -- the services each subsystem below is handed (the one place they are made) ------------
    # Each is a frozen value of exactly what that subsystem uses. What the service replaces while
    # it runs (config on reload, the skill library, metrics, the agent loop made on first use) is
    # passed as a function read at each use, never copied.

    def agent_services(self) -> AgentServices:
        """What the agent loop and its runs use (llm/host.py)."""
        from pincer.llm.host import AgentServices

        return AgentServices(
            config=lambda: self.config, audit=self.audit, grants=self.grants, runs=self.runs, registry=self.registry,
            dispatcher=self.dispatcher, secrets=self.secrets, skills=lambda: self.skills, metrics=lambda: self.metrics,
            scanner=self.scanner,
        )  # fmt: skip

    def runner_services(self) -> RunnerServices:
        """What starts runs and follows them: the trigger engine's AgentStarter (llm/services.py)."""
        from pincer.llm.services import RunnerServices

        return RunnerServices(agent=lambda: self.agent, runs=self.runs)

    def delegate_services(self) -> DelegateServices:
        """What ``run_skill`` uses (llm/delegate.py; llm/services.py)."""
        from pincer.llm.services import DelegateServices

        return DelegateServices(agent=lambda: self.agent, dispatcher=self.dispatcher, config=lambda: self.config)

    def builder_services(self) -> BuilderServices:
        """What a build and ``build_tool`` use (builder/host.py)."""
        from pincer.builder.host import BuilderServices

        return BuilderServices(
            config=lambda: self.config, home=self.home, environ=self.environ, secrets=self.secrets,
            registry=self.registry, audit=self.audit, grants=self.grants, approvals=self.approvals,
            reload_hub_artifacts=self.reload_hub_artifacts,
        )  # fmt: skip

    def hub_services(self) -> HubServices:
        """What the hub's agent tools use (hub/agent_tools.py)."""
        from pincer.hub.agent_tools import HubServices

        return HubServices(
            config=lambda: self.config, home=self.home, audit=self.audit, grants=self.grants, approvals=self.approvals,
            reload_hub_artifacts=self.reload_hub_artifacts,
        )  # fmt: skip

    def trigger_services(self) -> TriggerServices:
        """What the trigger engine uses (triggers/engine.py)."""
        from pincer.triggers.engine import TriggerServices

        return TriggerServices(
            store=self.trigger_store, audit=self.audit, config=lambda: self.config, skills=lambda: self.skills,
            scanner=self.scanner,
        )  # fmt: skip

    def reload_services(self) -> ReloadServices:
        """What following the home drives when something under it changes (reload.py)."""
        from pincer.reload import ReloadServices

        return ReloadServices(
            home=self.home, apply_config=self.apply_config, reload_wasm_tools=self.reload_wasm_tools,
            reload_script_tools=self.reload_script_tools, reload_mcp_servers=self.reload_mcp_servers,
            reload_openapi_services=self.reload_openapi_services, reload_hub_artifacts=self.reload_hub_artifacts,
        )  # fmt: skip

    @property
    def mcp(self) -> McpRuntime | None:
        """The MCP runtime (``pincer.runtimes.mcp.McpRuntime``), None when no server is configured."""
        return self._mcp

    def enable_metrics(self) -> Metrics:
        """Keep Prometheus metrics from now on (``pincer serve`` does, for its ``/metrics``)."""
        if self.metrics is None:
            from pincer.telemetry.metrics import Metrics

            self.metrics = self.dispatcher.metrics = Metrics(
                servers=self._server_states, audit_queue=lambda: self.audit.queue_depth
            )
        return self.metrics

    def _server_states(self) -> list[ServerState]:
        from pincer.telemetry.metrics import ServerState

        mcp = self._mcp
        statuses = mcp.statuses() if mcp is not None else ()
        return [ServerState(name=s.name, up=s.state == "running", restarts=s.restarts) for s in statuses]

    async def readiness(self) -> dict[str, str]:
        """What ``GET /readyz`` says of each store, one word each (store/readiness.py)."""
        from pincer.store.readiness import audit_check, cache_check, database_check

        checks = {"store": "", "audit": audit_check(self.audit.queue_depth)}

        async def store() -> None:
            checks["store"] = await database_check(self.db)

        async def cache() -> None:
            checks["cache"] = await cache_check(self._shared_limiter)

        async with anyio.create_task_group() as tg:  # at once: a probe's timeout bounds them both
            tg.start_soon(store)
            if self._shared_limiter is not None:
                tg.start_soon(cache)
        return checks

    def scanner(self) -> LeakScanner:
        """The leak scanner over every secret in the store, rebuilt when the store changes."""
        version = self.secrets.version()
        if self._scanner is None or version != self._scanner_version:
            self._scanner = LeakScanner(self.secrets.values())
            self._scanner_version = version
        return self._scanner

    def shown(self, value: Any) -> Any:
        """``value`` as every view may print it: each known secret value masked by the leak
        scanner (``[REDACTED:<kind>]``). Stored history (audit records, approvals, transcripts,
        deliveries) can hold a value that was stored as a secret only later; the call chain's
        scan ran before the secret existed, so every view of stored history passes through here
        at display time. The stored rows, and the audit chain's MACs over them, stay untouched."""
        scanned, _ = self.scanner().scan(value)
        return scanned

    def _secret_access(self, spec: ToolSpec, person: str | None) -> SecretAccess:
        """One call's view of the secret store: the tool's allowed names, and the per-person ones
        read for the call's ``person`` (docs/teams.md)."""
        caps = spec.capabilities or self.config.credential_capabilities
        allowed = caps.is_secret_allowed if caps is not None else (lambda _name: False)
        return SecretAccess(self.secrets, allowed, person=person, per_person=self.config.secrets.per_person,
                            connect=_CONNECT_COMMANDS)  # fmt: skip

    async def aclose(self) -> None:
        unshare(self.home_sync)
        if self._agent is not None:
            with anyio.move_on_after(RUNTIME_CLOSE_TIMEOUT_S):
                await self._agent.aclose()
        for unsubscribe in self._unsubscribe.values():
            unsubscribe()
        self._unsubscribe.clear()
        for runtime in reversed(self.registry.runtimes):
            self.registry.remove_runtime(runtime)
            with anyio.move_on_after(RUNTIME_CLOSE_TIMEOUT_S):
                try:
                    await runtime.aclose()
                except Exception:
                    logger.exception("closing runtime %s failed", runtime)
        self.secrets.close()
        await self.trigger_store.close()  # the scheduler's lead, if this process held it
        if self._shared_limiter is not None:
            await self._shared_limiter.aclose()


@dataclass(kw_only=True)
class OpenedStores:
    """What :func:`open_stores` opened: the database, its audit log, and on a shared store the
    instances (the heartbeat) and the registry's shared files."""

    db: Database
    audit: AuditLog
    instances: Instances | None = None
    home_files: SharedHomeBackend | None = None


@asynccontextmanager
async def open_stores(
    config: Config, *, secret_key: bytes | None, audit_key: bytes | None = None
) -> AsyncIterator[OpenedStores]:
    """The stores' database for the block: PostgreSQL when ``[store] url`` names one (refused
    unless at this pincer's schema; this process registered among its instances, beating, and
    the registry's shared files), else SQLite under the home (made or migrated first). The
    password comes from the secret ``[store] password_secret`` names, else libpq's PGPASSFILE."""
    key = audit_key if audit_key is not None else load_or_create_key(config.home, None, place=AUDIT_KEY)
    settings = config.store
    with ExitStack() as closing:
        async with _database(config, secret_key) as db:
            if settings.url is None:
                audit = await AuditLog.open(db, key=key, anchor=AnchorFile(config.home / ANCHOR_FILE))
                yield OpenedStores(db=db, audit=audit)
                return
            from pincer.store.home_files import shared_home_files

            instances = Instances(db, host=settings.host_id, home=str(config.home.resolve()))
            await instances.register()
            try:
                audit = await AuditLog.open(db, key=key, anchor=AnchorFile(config.home / SHARED_ANCHOR_FILE))
                files = await anyio.to_thread.run_sync(
                    closing.enter_context, shared_home_files(settings.url, password=_store_password(config, secret_key))
                )
                async with anyio.create_task_group() as background:
                    background.start_soon(instances.heartbeat)
                    try:
                        yield OpenedStores(db=db, audit=audit, instances=instances, home_files=files)
                    finally:
                        background.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await instances.stop()
                    await anyio.to_thread.run_sync(closing.close)  # the shared files' thread ends


@asynccontextmanager
async def _database(config: Config, secret_key: bytes | None) -> AsyncIterator[Database]:
    if config.store.url is None:
        db = await open_sqlite(config.home, synchronous=config.audit_synchronous.upper())
    else:
        db = await open_postgres(
            config.store.url, password=_store_password(config, secret_key), size=config.store.pool_size
        )
    try:
        yield db
    finally:
        with anyio.CancelScope(shield=True):
            await db.aclose()


def _store_password(config: Config, secret_key: bytes | None) -> str | None:
    """The PostgreSQL password from the secret ``[store] password_secret`` names (None: libpq's
    PGPASSFILE)."""
    if config.store.password_secret is None:
        return None
    with SecretStore.open(config.home, key=secret_key) as secrets:
        return secrets.get(config.store.password_secret)


@asynccontextmanager
async def home_audit_log(config: Config, *, audit_key: bytes, secret_key: bytes | None) -> AsyncIterator[AuditLog]:
    """The home's audit log by itself, opened as the gateway opens it, with its anchor: in
    pincer.db, or in the PostgreSQL store ``[store] url`` names (for `pincer doctor` and the
    CLI's acts, which need nothing else and start no instance row)."""
    async with _database(config, secret_key) as db:
        anchor = AnchorFile(config.home / (ANCHOR_FILE if config.store.url is None else SHARED_ANCHOR_FILE))
        yield await AuditLog.open(db, key=audit_key, anchor=anchor)


def _has_wasm_tools(home: Path) -> bool:
    """Whether any component is installed, read from the directory without importing wasmtime."""
    from pincer.runtimes.wasm.install import installed_names

    return bool(installed_names(home))


def _has_model(config: Config) -> bool:
    """[llm] (or a profile) names a model: the parts that talk to one can be offered."""
    return bool(config.llm.default.model or any(p.model for p in config.llm.profiles.values()))


def _skill_root_guard(config: Config, environ: Mapping[str, str]) -> SkillRootGuard:
    """Every root skills are read from, so ``write_file`` into one asks (the same roots the
    library walks: ``SkillLibrary.from_config`` with the same environ)."""
    from pincer.runtimes.native.skill_roots import SkillRootGuard
    from pincer.skills.roots import default_roots, user_home_dir

    roots = default_roots(
        workspace=config.workspace, home_dir=user_home_dir(environ), pincer_home=config.home,
        extra_dirs=config.skills.extra_dirs,
    )  # fmt: skip
    return SkillRootGuard.from_roots(roots, config.home)
