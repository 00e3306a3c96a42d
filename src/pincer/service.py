"""Wiring: one ``Pincer`` per PINCER_HOME — config, database, secret store, registry, dispatcher.

    async with Pincer.open(home) as pincer:
        result = await pincer.call(CallRequest(tool="echo", args={"text": "hi"}))
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from pincer.config import Config, load_config
from pincer.core.errors import PincerError, UsageError
from pincer.core.values import CallRequest, ToolResult, ToolSpec
from pincer.dispatch import ApprovalHook, Dispatcher
from pincer.registry import Registry
from pincer.runtimes.base import Runtime
from pincer.safety.scanner import LeakScanner
from pincer.secrets.store import SecretAccess, SecretStore
from pincer.store import ApprovalStore, AuditLog, GrantStore, IdempotencyStore, open_database

logger = logging.getLogger(__name__)

__all__ = ["Pincer", "RUNTIME_CLOSE_TIMEOUT_S"]

RUNTIME_CLOSE_TIMEOUT_S = 10.0
TOOL_WATCH_INTERVAL_S = 1.0


class Pincer:
    def __init__(self, *, config: Config, secret_key: bytes | None) -> None:
        self.config = config
        self.home = config.home
        self._conn = open_database(config.home, synchronous=config.audit_synchronous.upper())
        self.audit = AuditLog(self._conn)
        self.approvals = ApprovalStore(self._conn)
        self.grants = GrantStore(self._conn)
        self.idempotency = IdempotencyStore(
            self._conn, ttl_s=config.idempotency_ttl_s, max_entries=config.idempotency_max_entries
        )
        self.secrets = SecretStore.open(config.home, key=secret_key)
        self.registry = Registry()
        self.wasm: Any = None
        self._scripts: Runtime | None = None
        self.skills: Any = None  # pincer.skills.SkillLibrary when skills are enabled
        self._unsubscribe: dict[int, Any] = {}
        self._scanner: LeakScanner | None = None
        self._scanner_version: object = None
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

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: Path,
        *,
        config: Config | None = None,
        secret_key: bytes | None = None,
        builtins: bool = True,
        external: bool = True,
        scripts: bool = True,
        wasm: bool = True,
        skills: bool = True,
    ) -> AsyncIterator[Pincer]:
        """Open the state under ``home``; built-in tools are registered unless ``builtins=False``,
        the MCP servers and OpenAPI services configured under ``home`` unless ``external=False``."""
        config = config or load_config(home)
        config.workspace.mkdir(parents=True, exist_ok=True)
        pincer = cls(config=config, secret_key=secret_key)
        try:
            if builtins:
                from pincer.runtimes.native.builtins import builtin_runtime

                await pincer.add_runtime(builtin_runtime())
            if scripts:
                pincer._scripts = pincer._script_runtime()
                await pincer.add_runtime(pincer._scripts)
            if wasm:
                await pincer._add_wasm_runtime()
            if external:
                await pincer._add_external_runtimes()
            if skills and config.skills.enabled:
                await pincer._add_skills()
            yield pincer
        finally:
            with anyio.CancelScope(shield=True):
                await pincer.aclose()

    async def _add_wasm_runtime(self) -> None:
        from pincer.runtimes.wasm import WasmRuntime

        self.wasm = WasmRuntime(self.home, scanner=self.scanner)
        await self.add_runtime(self.wasm)

    async def _add_skills(self) -> None:
        """The skill library, the ``skill`` tool and the tools made from skills' capabilities."""
        from pincer.skills.library import SkillLibrary
        from pincer.skills.runtime import SkillTool, SkillToolRuntime

        config = self.config
        self.skills = await anyio.to_thread.run_sync(lambda: SkillLibrary.from_config(config))
        tools = await anyio.to_thread.run_sync(
            lambda: SkillToolRuntime(
                self.skills, home=self.home, script_settings=self.script_settings(), separator=config.skills.tool_separator
            )
        )
        def grants() -> tuple[Any, ...]:
            return config.grants + tuple(self.grants.all())

        for runtime in (SkillTool(self.skills, specs=self.registry.list, grants=grants), tools):
            try:
                await self.add_runtime(runtime)
            except UsageError as exc:
                # A tool of the same name from elsewhere (an installed script tool called
                # "skill"): that one keeps its name, and pincer starts without these.
                logger.warning("skill tools not registered: %s", exc)

    def script_settings(self) -> Any:
        """The sandbox settings of config.toml, as the script runtime and skill tools use them."""
        from pincer.runtimes.script.installed import load_exec_policy
        from pincer.runtimes.script.settings import ScriptSettings

        config = self.config
        return ScriptSettings(
            backend=config.sandbox_backend,
            main_session_on_host=config.sandbox_main_session_on_host,
            use_workspace=config.sandbox_use_workspace,
            container_image=config.sandbox_container_image,
            exec_policy=load_exec_policy(self.home),
        )

    async def install_skill_deps(self, name: str) -> Any:
        """Install one skill's dependencies (``pincer skills deps NAME``) and reload the library."""
        from pincer.skills.deps import install_deps

        skill = self.skills.get(name)
        settings = self.config.skills
        result = await install_deps(
            skill,
            home=self.home,
            script_settings=self.script_settings(),
            npm_registry=settings.npm_registry,
            pip_index=settings.pip_index,
            allow_private_network=self.config.allow_private_network,
        )
        if await anyio.to_thread.run_sync(lambda: self.skills.reload(notify=False)):
            self.skills.notify_changed()
        return result

    async def _install_missing_skill_deps(self) -> None:
        from pincer.skills.deps import dependency_files, deps_problem

        for skill in list(self.skills.skills):
            if dependency_files(skill) and deps_problem(self.home, skill) is not None:
                try:
                    await self.install_skill_deps(skill.name)
                except PincerError as exc:
                    logger.warning("installing the dependencies of skill %s failed: %s", skill.name, exc)

    async def watch_installed_tools(
        self,
        interval_s: float = TOOL_WATCH_INTERVAL_S,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Watch installed tools and, when skills are enabled, SKILL.md files (added, changed or
        removed ones are picked up within a second); missing skill dependencies are installed in
        the background when ``[skills] auto_install_deps`` is on. Runs until cancelled."""
        async with anyio.create_task_group() as tg:
            if self.skills is not None:
                await tg.start(self.skills.watch)
                if self.config.skills.auto_install_deps:
                    tg.start_soon(self._install_missing_skill_deps)
            await self._watch_tools(interval_s, task_status=task_status)

    async def _watch_tools(
        self,
        interval_s: float = TOOL_WATCH_INTERVAL_S,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Pick up tools that another process (``pincer tools install``) added or removed, so a
        running gateway serves them without a restart. Runs until cancelled; with
        ``TaskGroup.start`` it reports ready once it has taken stock of what is installed."""
        from pincer.runtimes.script.installed import script_dir

        def stamp(folder: Path) -> tuple[tuple[str, int], ...]:
            try:
                return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()))
            except OSError:
                return ()

        wasm_dir, scripts_dir = self.home / "tools" / "wasm", script_dir(self.home)
        seen = (stamp(wasm_dir), stamp(scripts_dir))
        task_status.started()
        while True:
            await anyio.sleep(interval_s)
            now = (stamp(wasm_dir), stamp(scripts_dir))
            if now == seen:
                continue
            try:
                if now[0] != seen[0] and getattr(self, "wasm", None) is not None:
                    await self.wasm.rescan()
                if now[1] != seen[1] and self._scripts is not None:
                    old, self._scripts = self._scripts, self._script_runtime()
                    await self.remove_runtime(old)
                    await self.add_runtime(self._scripts)
            except PincerError as exc:
                logger.warning("reloading installed tools failed: %s", exc)
            seen = now

    def _script_runtime(self) -> Runtime:
        """The ``exec`` tool and the installed script tools. Exec approvals are asked through the
        same approval requests as every other ask; allow-always answers go to exec-approvals.json."""
        from pincer.policy.session import SessionKind
        from pincer.runtimes.script import ScriptRuntime
        from pincer.runtimes.script.installed import installed_manifests, load_exec_policy, save_exec_policy
        from pincer.runtimes.script.settings import ScriptSettings

        config = self.config
        settings = ScriptSettings(
            backend=config.sandbox_backend,
            main_session_on_host=config.sandbox_main_session_on_host,
            use_workspace=config.sandbox_use_workspace,
            container_image=config.sandbox_container_image,
            exec_policy=load_exec_policy(self.home),
        )

        async def approve_exec(request: Any) -> str | None:
            evaluation = request.evaluation
            approval = self.approvals.create(
                session=request.session,
                tool=request.tool,
                args={"command": self.dispatcher.redact({"command": request.command})["command"]},
                effects=("execute_code", "spawn_process"),
                hosts=(),
                reason=f"exec approval: {evaluation.reason}"
                + ("" if request.sandboxed else " (runs on the host, unsandboxed)"),
                timeout_s=config.approval_timeout_s,
            )
            try:
                answered = await self.approvals.wait(approval.id, config.approval_timeout_s)
            except PincerError:
                return None  # nobody answered: the policy's ask fallback decides
            return answered.status.value

        return ScriptRuntime(
            installed_manifests(self.home),
            settings,
            is_main_session=lambda session: config.session(session).kind is SessionKind.MAIN,
            approver=approve_exec,
            on_policy_change=lambda policy: save_exec_policy(self.home, policy),
        )

    async def _add_external_runtimes(self) -> None:
        from pincer.runtimes.mcp import McpRuntime
        from pincer.runtimes.openapi import OpenApiRuntime

        mcp = McpRuntime.from_home(self.home, secrets=self.secrets)
        if mcp.servers:
            await self.add_runtime(mcp)
        openapi = OpenApiRuntime.from_home(self.home)
        if openapi.services:
            await self.add_runtime(openapi)

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

    async def call(self, request: CallRequest, *, on_approval: ApprovalHook | None = None) -> ToolResult:
        return await self.dispatcher.call(request, on_approval=on_approval)

    def scanner(self) -> LeakScanner:
        """The leak scanner over every secret in the store, rebuilt when the store changes."""
        version = self.secrets.version()
        if self._scanner is None or version != self._scanner_version:
            self._scanner = LeakScanner(self.secrets.values())
            self._scanner_version = version
        return self._scanner

    def _secret_access(self, spec: ToolSpec) -> Any:
        caps = spec.capabilities or self.config.credential_capabilities
        if caps is None:
            return SecretAccess(self.secrets, lambda _name: False)
        return SecretAccess(self.secrets, caps.is_secret_allowed)

    async def aclose(self) -> None:
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
        self._conn.close()
