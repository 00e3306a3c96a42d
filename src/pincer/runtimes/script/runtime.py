"""ScriptRuntime: script tools and the built-in ``exec`` tool, run in a sandbox.

Sessions: a call whose session is not the main session always runs sandboxed. The main session's
calls run on the host only when ``ScriptSettings.main_session_on_host`` is set. Which session is
"main" is decided by ``is_main_session(host.session)``, a callable the service wires (default: the
session named ``"main"``), so the runtime never trusts a per-call flag for it.

The ``exec`` tool runs ``/bin/sh -c COMMAND`` under exec approvals (``pincer.policy.exec_approvals``).
The policy decides allow / ask / deny in :meth:`ScriptRuntime.preflight`, before the call chain's
approval step: a deny refuses the call before anyone is asked, an ask is returned as a
:class:`~pincer.core.values.RuntimeAsk` that the chain folds into its one approval request (one
timeout, one audit record, every way to answer); ``allow_always`` adds the programs to the
allowlist through ``remember``. ``invoke`` decides again and runs an asked-for command only when
the chain says it was approved (``HostContext.approval``). Script tools from manifests run their
fixed command template and need no per-command approval: installing the manifest was the
approval, and grants decide per call as for every tool.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import ArgumentsInvalid, ConfigError, Denied, ToolNotFound, ToolTimeout, UsageError
from pincer.core.values import HostContext, RuntimeAsk, ToolOutput, ToolSpec
from pincer.policy.exec_approvals import (
    Answer,
    ExecApprovalPolicy,
    ExecEvaluation,
    Resolver,
    apply_answer,
    evaluate,
    fallback_allows,
)
from pincer.runtimes.script.manifest import Limits, NetworkMode, ScriptToolManifest, render_command
from pincer.runtimes.script.settings import ScriptSettings

if TYPE_CHECKING:
    # What running a command takes (backends, processes, cgroups, the proxy) is imported when a
    # tool first runs: listing the tools (`pincer tools list`, `pincer mcp stdio`) never needs it.
    from pincer.runtimes.script.backends import Backend
    from pincer.runtimes.script.detect import BackendSelector
    from pincer.runtimes.script.process import Launch, ProcessRun, RunRequest, RunResult
    from pincer.safety.egress_proxy import EgressEvent

__all__ = ["ScriptRuntime", "EXEC_TOOL", "sandbox_resolver"]

logger = logging.getLogger(__name__)

EXEC_TOOL = "exec"
_MIB = 1024 * 1024


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

    from pincer.runtimes.script.backends import SANDBOX_PATH

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


def _command(args: Mapping[str, Any]) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip() or "\0" in command:
        raise ArgumentsInvalid("exec needs a non-empty 'command' string", hint='e.g. {"command": "ls -la"}')
    return command


def _refused(evaluation: ExecEvaluation) -> Denied:
    unanalysable = any(segment.problem for segment in evaluation.segments)
    return Denied(
        f"exec refused: {evaluation.reason}",
        hint=(
            'no allowlist entry can allow this line: rewrite it without that construct, or set "ask": '
            '"on-miss" in $PINCER_HOME/exec-approvals.json so a person can approve it'
            if unanalysable
            else "allowlist the program's resolved path in $PINCER_HOME/exec-approvals.json, or change its security/ask"
        ),
    )


class ScriptRuntime:
    """Script tools from manifests plus ``exec``. Implements the Runtime protocol."""

    kind = RuntimeKind.SCRIPT

    def __init__(
        self,
        manifests: Sequence[ScriptToolManifest] = (),
        settings: ScriptSettings | None = None,
        *,
        is_main_session: Callable[[str], bool] = _is_main,
        on_policy_change: Callable[[ExecApprovalPolicy], None] | None = None,
        include_exec: bool = True,
    ) -> None:
        self.settings = settings or ScriptSettings()
        self._is_main = is_main_session
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
        self._selector: BackendSelector | None = None  # made when a tool first runs
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
        from pincer.runtimes.script.backends import HostBackend

        if self.settings.main_session_on_host and self._is_main(session):
            return HostBackend()
        if self._selector is None:
            from pincer.runtimes.script.detect import BackendSelector

            self._selector = BackendSelector(self.settings)
        return await anyio.to_thread.run_sync(self._selector.select)

    def _is_exec(self, spec: ToolSpec) -> bool:
        return spec.name == EXEC_TOOL and spec.name not in self._manifests

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        """Exec approvals before anyone is asked: deny refuses, ask becomes the chain's question."""
        if not self._is_exec(spec):
            return None
        command = _command(args)
        evaluation = evaluate(self._policy, command, sandbox_resolver())
        if evaluation.mode.value == "allow":
            return None
        if evaluation.mode.value == "deny":
            raise _refused(evaluation)
        from pincer.runtimes.script.backends import HostBackend

        backend = await self.backend(host.session)
        sandboxed = not isinstance(backend, HostBackend)
        policy = self._policy

        def remember() -> None:
            self._remember(policy, evaluation)

        return RuntimeAsk(
            reason=f"exec approval: {evaluation.reason}" + ("" if sandboxed else " (runs on the host, unsandboxed)"),
            effects=(EffectKind.EXECUTE_CODE.value, EffectKind.SPAWN_PROCESS.value),
            detail={"command": command, "sandboxed": sandboxed, "evaluation": evaluation.to_dict()},
            fallback_allows=fallback_allows(policy, evaluation),
            remember=remember,
        )

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        if spec.name not in self._names:
            raise ToolNotFound(f"the script runtime has no tool {spec.name!r}", hint="list tools to see what exists")
        backend = await self.backend(host.session)
        if self._is_exec(spec):
            request = self._exec_request(args, host)
        else:
            request = self._manifest_request(self._manifests[spec.name], args, host)
        result, events, request = await self._run(backend, request, host, spec.name)
        return self._output(spec.name, request, result, events)

    # --- building requests -------------------------------------------------------------------

    def _exec_request(self, args: Mapping[str, Any], host: HostContext) -> RunRequest:
        command = _command(args)
        self._check_approved(command, host)
        limits = self.settings.exec_limits
        timeout = args.get("timeout_s")
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
                raise ArgumentsInvalid("timeout_s must be a positive number of seconds")
            limits = replace(limits, timeout_s=min(limits.timeout_s, float(timeout)))
        from pincer.runtimes.script.process import RunRequest

        return RunRequest(
            argv=("/bin/sh", "-c", command),
            workdir=Path("."),  # replaced by the run's workdir
            limits=self._bounded(limits, host),
            network=self.settings.exec_network,
        )

    def _manifest_request(self, manifest: ScriptToolManifest, args: Mapping[str, Any], host: HostContext) -> RunRequest:
        from pincer.runtimes.script.process import RunRequest

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

    def _check_approved(self, command: str, host: HostContext) -> None:
        """Decide again at run time: the policy may have changed since preflight, and a caller
        that skipped the chain must not get an asked-for command run unasked."""
        evaluation = evaluate(self._policy, command, sandbox_resolver())
        if evaluation.mode.value == "deny":
            raise _refused(evaluation)
        if evaluation.mode.value == "ask" and host.approval is None:
            raise Denied(
                f"exec needs approval ({evaluation.reason}) and this call was not approved",
                hint="call exec through pincer's call chain, which asks; or allowlist the program in exec-approvals.json",
            )

    def _remember(self, policy: ExecApprovalPolicy, evaluation: ExecEvaluation) -> None:
        """An ``allow_always`` answer: the resolved programs join the allowlist (never inline eval)."""
        _, updated = apply_answer(policy, evaluation, Answer.ALLOW_ALWAYS)
        if updated != self._policy:
            base = self._policy
            # Merge into the policy as it is now (another answer may have changed it meanwhile).
            merged = replace(base, allowlist=tuple(dict.fromkeys((*base.allowlist, *updated.allowlist))))
            self._policy = merged
            if self._on_policy_change is not None:
                self._on_policy_change(merged)

    # --- running -----------------------------------------------------------------------------

    async def _run(
        self, backend: Backend, request: RunRequest, host: HostContext, tool: str
    ) -> tuple[RunResult, list[EgressEvent], RunRequest]:
        """Run ``request`` in a fresh workdir (or the workspace); returns the request as it ran."""
        from pincer.runtimes.script.backends import HostBackend
        from pincer.runtimes.script.cgroups import RunCgroup, detect_cgroups
        from pincer.runtimes.script.process import ProcessRun
        from pincer.runtimes.script.workdir import new_workdir, remove_workdir
        from pincer.safety.egress_proxy import DEFAULT_PORTS, EgressProxy, ProxyPolicy

        settings = self.settings
        uid, gid = settings.sandbox_uid, settings.sandbox_gid
        # By default a fresh scratch directory that nothing survives; the session's workspace only
        # when the operator opted in (the sandbox uid must be able to reach it).
        owned_workdir = host.workspace is None or not settings.use_workspace
        sandboxed = not isinstance(backend, HostBackend)
        if not owned_workdir and sandboxed and os.geteuid() == 0:
            assert host.workspace is not None
            _check_reachable_workspace(Path(host.workspace), uid, gid)
        if not owned_workdir and sandboxed and host.home is not None:
            assert host.workspace is not None
            await anyio.to_thread.run_sync(_check_no_pincer_files, Path(host.workspace), host.home)
        workdir = (
            await anyio.to_thread.run_sync(lambda: new_workdir(settings.scratch(), uid=uid, gid=gid))
            if owned_workdir
            else host.workspace
        )
        assert workdir is not None
        proxy_dir: Path | None = None
        proxy: EgressProxy | None = None
        if request.network is NetworkMode.ALLOWLIST and sandboxed:
            proxy_dir = Path(tempfile.mkdtemp(prefix="proxy-", dir=settings.scratch()))
            os.chmod(proxy_dir, 0o711)
            # The grant's hosts, when it names some, narrow the tool's declared list (a host must be in both).
            policy = ProxyPolicy(
                tool_hosts=tuple(request_hosts(self._manifests.get(tool))),
                grant_hosts=None if host.network_hosts is None else tuple(host.network_hosts),
                default_ports=DEFAULT_PORTS,  # a tunnel to another port of an allowed host is another grant
                allow_private=host.allow_private_network,
            )
            proxy = EgressProxy(policy, socket_path=proxy_dir / "proxy.sock")
        request = replace(
            request,
            workdir=Path(workdir),
            proxy_socket=proxy.socket_path if proxy else None,
            workdir_max_bytes=settings.workdir_max_bytes if owned_workdir else None,
        )
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
        return result, (list(proxy.events) if proxy is not None else []), request

    def _output(
        self, tool: str, request: RunRequest, result: RunResult, events: Sequence[EgressEvent]
    ) -> ToolOutput:
        if result.killed_by == "timeout":
            raise ToolTimeout(
                f"{tool} ran past its {request.limits.timeout_s:g} s limit; the whole process tree was killed",
                hint="raise limits.timeout_s in the tool's manifest (tools.timeout_s in config.toml caps it), or make the command finish sooner",
            )
        usage = {
            "backend": result.backend,
            "duration_ms": round(result.duration_ms, 3),
            "memory_peak_bytes": result.memory_peak_bytes,
            "oom_kills": result.oom_kills,
            "pids_limit_hits": result.pids_limit_hits,
            "exit_code": result.exit_code,
            "signal": result.signal,
            "killed_by": result.killed_by,
        }
        if not result.ok:
            # A failure is read by people and models as text (``pincer tools call`` prints it);
            # the numbers stay in ``usage``.
            return ToolOutput(value=failure_text(tool, request, result, events), is_error=True, usage=usage)
        from pincer.runtimes.script.process import describe

        value = describe(result)
        value["duration_ms"] = round(result.duration_ms, 3)
        if events:
            value["network"] = [e.to_dict() for e in events]
        return ToolOutput(value=value, usage=usage)


def failure_text(tool: str, request: RunRequest, result: RunResult, events: Sequence[EgressEvent]) -> str:
    """What went wrong, then the command's own stderr and stdout (each as captured, truncation marked)."""
    limits = request.limits
    if result.killed_by == "memory":
        why = f"killed: memory limit of {limits.memory_bytes // _MIB} MB reached (limits.memory_mb)"
    elif result.killed_by == "cpu":
        why = f"killed: CPU time limit of {limits.cpu_s} s reached (limits.cpu_s)"
    elif result.killed_by == "file_size":
        why = f"killed: file size limit of {limits.file_size_bytes // _MIB} MB reached (limits.file_size_mb)"
    elif result.killed_by == "workdir_full":
        why = (
            f"killed: the scratch workdir passed its limit of {_size(request.workdir_max_bytes)} "
            "([sandbox] workdir_max_bytes in config.toml)"
        )
    elif result.signal is not None:
        why = f"killed by signal {result.signal}"
    else:
        why = f"exit status {result.exit_code}"
    parts = [f"{tool} failed ({result.backend} sandbox): {why}"]
    if result.killed_by is None and _NO_SPACE in result.stderr:
        parts.append(
            f"a write failed for lack of space: /work holds at most {_size(request.workdir_max_bytes)} "
            f"([sandbox] workdir_max_bytes in config.toml) and /tmp at most {_size(limits.tmp_size_bytes)} "
            "(limits.tmp_size_mb in the tool's manifest)"
            if request.workdir_max_bytes is not None
            else f"a write failed for lack of space: /tmp holds at most {_size(limits.tmp_size_bytes)} "
            "(limits.tmp_size_mb in the tool's manifest); the workspace is bounded only by its disk"
        )
    refused = [e for e in events if not e.allowed]
    for event in refused:
        parts.append(f"network: {event.host}:{event.port} refused: {event.reason}")
    from pincer.runtimes.script.process import describe

    value = describe(result)
    for stream in ("stderr", "stdout"):
        if value[stream]:
            parts.append(f"--- {stream} ---\n{value[stream].rstrip()}")
    return "\n".join(parts)


def _check_reachable_workspace(workspace: Path, uid: int, gid: int) -> None:
    """The sandbox runs as ``uid`` and mounts the workspace by path as that uid (bwrap cannot bind a
    directory it cannot reach, not even by descriptor): say so before starting, naming the key."""
    from pincer.runtimes.script.workdir import blocking_directory

    blocked = blocking_directory(workspace, uid, gid)
    if blocked is not None:
        try:
            mode = oct(blocked.stat().st_mode & 0o7777)[2:].zfill(4)
        except OSError:
            mode = "missing"
        raise ConfigError(
            f"[sandbox] use_workspace is set, but the sandbox uid {uid} cannot reach the workspace {workspace}: "
            f"{blocked} is mode {mode} (the default workspace sits in $PINCER_HOME, which is private)",
            hint="set [workspace] path in config.toml to a directory every parent of which others may traverse "
            "(e.g. /srv/pincer-workspace), or set [sandbox] use_workspace = false",
        )


def _check_no_pincer_files(workspace: Path, home: Path) -> None:
    """The sandbox sees the whole workspace: refuse to mount one where pincer's own files can be
    read (the file tools refuse them one by one; a sandbox cannot be asked per file)."""
    from pincer.runtimes.native.workspace import pincer_files_in

    found = pincer_files_in(workspace, home)
    if found:
        raise Denied(
            f"[sandbox] use_workspace: the workspace {workspace} is not mounted, pincer's own files could be read "
            f"in it: {'; '.join(found[:5])} (rule: the workspace never reaches pincer's keys, secrets or databases)",
            hint="remove those names from the workspace (rm), or set [workspace] path to a folder that does not hold "
            "PINCER_HOME",
        )


_NO_SPACE = b"No space left on device"  # strerror(ENOSPC): the sandbox runs in the C locale


def _size(n: int | None) -> str:
    if n is None:
        return "no limit"
    return f"{n // _MIB} MiB" if n % _MIB == 0 else f"{n:,} bytes"


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

