"""ScriptRuntime: script tools and the built-in ``exec`` tool, run in a sandbox.

Sessions: a call whose session is not the main session always runs sandboxed. The main session's
calls run on the host only when ``ScriptSettings.main_session_on_host`` is set. Which session is
"main" is decided by ``is_main_session(host.session)``, a callable the service wires (default: the
session named ``"main"``), so the runtime never trusts a per-call flag for it.

The ``exec`` tool runs ``/bin/sh -c COMMAND`` under exec approvals (``pincer.policy.exec_approvals``):
the policy decides allow / ask / deny; an ask goes to the ``approver`` callable (the service wires
it to the approvals store) and, without one, to the policy's ``ask_fallback``. Script tools from
manifests run their fixed command template and need no per-command approval: installing the
manifest was the approval, and grants decide per call as for every tool.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import ApprovalDenied, ArgumentsInvalid, Denied, ToolNotFound, ToolTimeout, UsageError
from pincer.core.values import HostContext, ToolOutput, ToolSpec
from pincer.policy.exec_approvals import (
    Answer,
    ExecApprovalPolicy,
    ExecEvaluation,
    Resolver,
    apply_answer,
    evaluate,
    fallback_allows,
)
from pincer.runtimes.script.backends import SANDBOX_PATH, Backend, HostBackend
from pincer.runtimes.script.cgroups import RunCgroup, detect_cgroups
from pincer.runtimes.script.detect import BackendSelector
from pincer.runtimes.script.manifest import Limits, NetworkMode, ScriptToolManifest, render_command
from pincer.runtimes.script.process import Launch, ProcessRun, RunRequest, RunResult, describe
from pincer.runtimes.script.proxy import AllowlistProxy, ProxyEvent
from pincer.runtimes.script.settings import ScriptSettings
from pincer.runtimes.script.workdir import new_workdir, remove_workdir

__all__ = ["ScriptRuntime", "ExecApprovalRequest", "ExecApprover", "EXEC_TOOL", "sandbox_resolver"]

logger = logging.getLogger(__name__)

EXEC_TOOL = "exec"
_MIB = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecApprovalRequest:
    """What a person is asked about: the command, where it would run, and why it was not allowed."""

    session: str
    tool: str
    command: str
    sandboxed: bool
    evaluation: ExecEvaluation

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "tool": self.tool,
            "command": self.command,
            "sandboxed": self.sandboxed,
            "evaluation": self.evaluation.to_dict(),
        }


ExecApprover = Callable[[ExecApprovalRequest], Awaitable["Answer | str | None"]]
"""Returns allow_once / allow_always / deny, or None when nobody answered (ask_fallback decides)."""


def _exec_spec() -> ToolSpec:
    return ToolSpec(
        name=EXEC_TOOL,
        description=(
            "Run a shell command line with /bin/sh -c in a sandbox: no network, read-only system, "
            "a scratch working directory (/work), hard time/CPU/memory/process limits. "
            "Programs outside the exec allowlist need approval."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "minLength": 1, "description": "the shell command line"},
                "timeout_s": {"type": "number", "exclusiveMinimum": 0, "description": "wall-clock limit in seconds"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
        effects=frozenset({EffectKind.EXECUTE_CODE, EffectKind.SPAWN_PROCESS}),
        runtime=RuntimeKind.SCRIPT,
        side_effecting=True,
        source="builtin:script",
    )


def sandbox_resolver() -> Resolver:
    """Resolve program words the way the sandbox's PATH would; /usr is the host's, read-only."""

    def resolve(word: str) -> Sequence[str]:
        if "/" in word:
            if not word.startswith("/") or not os.path.isfile(word):
                return ()  # relative paths depend on the scratch directory: never allowlisted
            found = word
        else:
            located = shutil.which(word, path=SANDBOX_PATH)
            if located is None:
                return ()
            found = located
        return tuple(dict.fromkeys([found, os.path.realpath(found)]))

    return resolve


def _is_main(session: str) -> bool:
    return session == "main"


class ScriptRuntime:
    """Script tools from manifests plus ``exec``. Implements the Runtime protocol."""

    kind = RuntimeKind.SCRIPT

    def __init__(
        self,
        manifests: Sequence[ScriptToolManifest] = (),
        settings: ScriptSettings | None = None,
        *,
        is_main_session: Callable[[str], bool] = _is_main,
        approver: ExecApprover | None = None,
        on_policy_change: Callable[[ExecApprovalPolicy], None] | None = None,
        include_exec: bool = True,
    ) -> None:
        self.settings = settings or ScriptSettings()
        self._is_main = is_main_session
        self._approver = approver
        self._on_policy_change = on_policy_change
        self._policy = self.settings.exec_policy
        self._manifests: dict[str, ScriptToolManifest] = {}
        for manifest in manifests:
            if manifest.name in self._manifests or (include_exec and manifest.name == EXEC_TOOL):
                raise UsageError(
                    f"two script tools are named {manifest.name!r} ({manifest.source})",
                    hint="tool names must be unique; rename one manifest",
                )
            self._manifests[manifest.name] = manifest
        self._specs = [m.to_spec() for m in self._manifests.values()]
        if include_exec:
            self._specs.append(_exec_spec())
        self._names = {spec.name for spec in self._specs}
        self._selector = BackendSelector(self.settings)
        self._running: set[ProcessRun] = set()

    @property
    def exec_policy(self) -> ExecApprovalPolicy:
        return self._policy

    async def start(self) -> None:
        """Nothing to start: the sandbox backend is probed when a tool first runs."""

    async def aclose(self) -> None:
        for run in list(self._running):
            run.cancel()

    def tools(self) -> Sequence[ToolSpec]:
        return list(self._specs)

    async def backend(self, session: str) -> Backend:
        """The backend a call of ``session`` would use (probing it the first time)."""
        if self.settings.main_session_on_host and self._is_main(session):
            return HostBackend()
        return await anyio.to_thread.run_sync(self._selector.select)

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        if spec.name not in self._names:
            raise ToolNotFound(f"the script runtime has no tool {spec.name!r}", hint="list tools to see what exists")
        backend = await self.backend(host.session)
        sandboxed = not isinstance(backend, HostBackend)
        if spec.name == EXEC_TOOL and spec.name not in self._manifests:
            request = await self._exec_request(args, host, sandboxed=sandboxed)
        else:
            request = self._manifest_request(self._manifests[spec.name], args, host)
        result, events = await self._run(backend, request, host, spec.name)
        return self._output(spec.name, request, result, events)

    # --- building requests -------------------------------------------------------------------

    async def _exec_request(self, args: Mapping[str, Any], host: HostContext, *, sandboxed: bool) -> RunRequest:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip() or "\0" in command:
            raise ArgumentsInvalid("exec needs a non-empty 'command' string", hint='e.g. {"command": "ls -la"}')
        await self._approve(command, host, sandboxed=sandboxed)
        limits = self.settings.exec_limits
        timeout = args.get("timeout_s")
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
                raise ArgumentsInvalid("timeout_s must be a positive number of seconds")
            limits = replace(limits, timeout_s=min(limits.timeout_s, float(timeout)))
        return RunRequest(
            argv=("/bin/sh", "-c", command),
            workdir=Path("."),  # replaced by the run's workdir
            limits=self._bounded(limits, host),
            network=self.settings.exec_network,
        )

    def _manifest_request(self, manifest: ScriptToolManifest, args: Mapping[str, Any], host: HostContext) -> RunRequest:
        argv = render_command(manifest.command, args)
        return RunRequest(
            argv=tuple(argv),
            workdir=Path("."),
            limits=self._bounded(manifest.limits, host),
            env=dict(manifest.sandbox.env),
            mounts=manifest.sandbox.mounts,
            network=manifest.sandbox.network,
        )

    @staticmethod
    def _bounded(limits: Limits, host: HostContext) -> Limits:
        return replace(limits, timeout_s=min(limits.timeout_s, host.timeout_s))

    async def _approve(self, command: str, host: HostContext, *, sandboxed: bool) -> None:
        policy = self._policy
        evaluation = evaluate(policy, command, sandbox_resolver())
        if evaluation.mode.value == "allow":
            return
        if evaluation.mode.value == "deny":
            unanalysable = any(segment.problem for segment in evaluation.segments)
            raise Denied(
                f"exec refused: {evaluation.reason}",
                hint=(
                    'no allowlist entry can allow this line: rewrite it without that construct, or set "ask": '
                    '"on-miss" in exec-approvals.json so a person can approve it'
                    if unanalysable
                    else "allowlist the program's resolved path in exec-approvals.json, or change security/ask"
                ),
            )
        answer = None
        if self._approver is not None:
            request = ExecApprovalRequest(
                session=host.session, tool=host.tool, command=command, sandboxed=sandboxed, evaluation=evaluation
            )
            answer = await self._approver(request)
        if answer is None:
            if fallback_allows(policy, evaluation):
                return
            raise ApprovalDenied(
                f"exec needs approval and nobody answered ({evaluation.reason})",
                hint=f"answer the approval request, or allowlist the program (ask_fallback={policy.ask_fallback.value})",
            )
        allowed, updated = apply_answer(policy, evaluation, answer)
        if updated != policy:
            self._policy = updated
            if self._on_policy_change is not None:
                self._on_policy_change(updated)
        if not allowed:
            raise ApprovalDenied(f"exec of {command[:80]!r} was denied", hint="ask for a different command")

    # --- running -----------------------------------------------------------------------------

    async def _run(
        self, backend: Backend, request: RunRequest, host: HostContext, tool: str
    ) -> tuple[RunResult, list[ProxyEvent]]:
        settings = self.settings
        uid, gid = settings.sandbox_uid, settings.sandbox_gid
        # By default a fresh scratch directory that nothing survives; the session's workspace only
        # when the operator opted in (the sandbox uid must be able to reach it).
        owned_workdir = host.workspace is None or not settings.use_workspace
        workdir = (
            await anyio.to_thread.run_sync(lambda: new_workdir(settings.scratch(), uid=uid, gid=gid))
            if owned_workdir
            else host.workspace
        )
        assert workdir is not None
        proxy_dir: Path | None = None
        proxy: AllowlistProxy | None = None
        sandboxed = not isinstance(backend, HostBackend)
        if request.network is NetworkMode.ALLOWLIST and sandboxed:
            proxy_dir = Path(tempfile.mkdtemp(prefix="proxy-", dir=settings.scratch()))
            os.chmod(proxy_dir, 0o711)
            declared = tuple(request_hosts(self._manifests.get(tool)))
            hosts = declared if host.network_hosts is None else tuple(host.network_hosts)
            proxy = AllowlistProxy(
                socket_path=proxy_dir / "proxy.sock", hosts=hosts, allow_private=host.allow_private_network
            )
        request = replace(request, workdir=Path(workdir), proxy_socket=proxy.socket_path if proxy else None)
        support = detect_cgroups()
        if not support.is_usable:
            logger.warning("no cgroups (%s): memory and process limits fall back to rlimits", support.reason)
        run: ProcessRun | None = None
        launch: Launch | None = None
        handed = False  # whether blocking() took over the launch (and its cleanup)

        def blocking() -> RunResult:
            nonlocal run, handed
            assert launch is not None
            handed = True
            try:
                cgroup = (
                    RunCgroup(support, memory_bytes=request.limits.memory_bytes, pids_max=request.limits.pids)
                    if support.is_usable
                    else None
                )
            except BaseException:
                _discard(launch)
                raise
            try:
                run = ProcessRun(launch, request.limits, cgroup)
                self._running.add(run)
                return run.run()
            finally:
                if run is not None:
                    self._running.discard(run)
                if cgroup is not None:
                    cgroup.close()

        try:
            # Built before the proxy starts, so that a backend's refusal (an allowlist on a backend
            # without one) reaches the caller as itself, not inside a task group's exception group.
            launch = backend.launch(request)
            async with anyio.create_task_group() as tg:
                if proxy is not None:
                    await tg.start(proxy.serve)
                try:
                    result = await anyio.to_thread.run_sync(blocking, abandon_on_cancel=True)
                except anyio.get_cancelled_exc_class():
                    if run is not None:
                        run.cancel()
                    raise
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if launch is not None and not handed:
                    _discard(launch)  # never reached blocking(), which cleans up after itself
                if owned_workdir:
                    await anyio.to_thread.run_sync(remove_workdir, Path(workdir))
                if proxy_dir is not None:
                    shutil.rmtree(proxy_dir, ignore_errors=True)
        return result, (list(proxy.events) if proxy is not None else [])

    def _output(
        self, tool: str, request: RunRequest, result: RunResult, events: Sequence[ProxyEvent]
    ) -> ToolOutput:
        if result.killed_by == "timeout":
            raise ToolTimeout(
                f"{tool} ran past its {request.limits.timeout_s:g} s limit; the whole process tree was killed",
                hint="raise limits.timeout_s, or make the command finish sooner",
            )
        value = describe(result)
        value["duration_ms"] = round(result.duration_ms, 3)
        if result.killed_by == "memory":
            value["message"] = f"killed: memory limit of {request.limits.memory_bytes // _MIB} MB reached"
        elif result.killed_by == "cpu":
            value["message"] = f"killed: CPU time limit of {request.limits.cpu_s} s reached"
        elif result.killed_by == "file_size":
            value["message"] = f"killed: file size limit of {request.limits.file_size_bytes // _MIB} MB reached"
        if events:
            value["network"] = [e.to_dict() for e in events]
        usage = {
            "backend": result.backend,
            "duration_ms": round(result.duration_ms, 3),
            "memory_peak_bytes": result.memory_peak_bytes,
            "oom_kills": result.oom_kills,
            "pids_limit_hits": result.pids_limit_hits,
        }
        return ToolOutput(value=value, is_error=not result.ok, usage=usage)


def _discard(launch: Launch) -> None:
    """Release what a launch holds when it never ran: passed fds and the backend's close hook."""
    for fd in launch.pass_fds:
        try:
            os.close(fd)
        except OSError:
            pass
    if launch.on_close is not None:
        launch.on_close()


def request_hosts(manifest: ScriptToolManifest | None) -> tuple[str, ...]:
    return manifest.sandbox.allow_hosts if manifest is not None else ()

