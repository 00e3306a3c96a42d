"""``WasmRuntime``: installed ``near:agent@0.3.0`` components behind the Runtime seam.

    runtime = WasmRuntime(home)            # every tool under home/tools/wasm/
    await runtime.start()                  # compiles (or loads from the cache) each one
    await runtime.install(Path("echo.wasm"))   # live: subscribers hear about it
    output = await runtime.invoke(spec, {"message": "hi"}, host)

A tool's name is its file name; its description and input schema come from the component's
``description()`` and ``schema()`` exports (the capabilities file's description when the
export is empty); its effects come from its capabilities file. Executions run on worker
threads, at most ``WasmLimits.workers`` at a time for top-level calls (a ``tool-invoke`` child
call does not wait for a slot its parent holds, which would deadlock).

:class:`WasmHost` is the blocking core (engine, epoch ticker, linker, compile cache) that the
runtime and the install CLI share.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pincer.core.effects import EffectKind, RuntimeKind
from pincer.core.errors import PincerError, RuntimeUnavailable, ToolError, ToolNotFound
from pincer.core.values import CallRequest, HostContext, ToolOutput, ToolSpec
from pincer.policy.budget import RateLimit, RateLimiter
from pincer.runtimes.base import ChangeListener, ChangeListeners
from pincer.runtimes.wasm import install as disk
from pincer.runtimes.wasm.cache import CompileCache
from pincer.runtimes.wasm.component import ToolComponent, parse_output
from pincer.runtimes.wasm.engine import EpochTicker, new_engine
from pincer.runtimes.wasm.host import Execution, InvokeRefused, build_linker
from pincer.runtimes.wasm.limits import MIB, ToolLimits, WasmLimits
from pincer.runtimes.wasm.runner_tool import BUILT_SUFFIX, RunnerSource, read_runner_source, runner_context
from pincer.runtimes.wasm.wit import HOST_WIT_VERSION

if TYPE_CHECKING:
    from pincer.core.capabilities import Capabilities
    from pincer.core.values import ToolResult
    from pincer.runtimes.wasm.http import HttpGateway
    from pincer.safety.scanner import LeakScanner

# An installed tool's files as seen on disk (see ``file_stamp``): compared for equality only.
FileStamp = tuple[object, ...]

__all__ = ["WasmRuntime", "WasmHost", "LoadedTool", "Redactor"]

logger = logging.getLogger(__name__)

_READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_WIT = "near:agent@" + ".".join(map(str, HOST_WIT_VERSION))


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedTool:
    """A compiled, described tool: what ``invoke`` needs to run it."""

    name: str
    component: ToolComponent
    spec: ToolSpec
    capabilities: Capabilities | None
    limits: ToolLimits | None
    digest: str
    path: Path | None = None
    stamp: FileStamp | None = None  # what was on disk when it was loaded
    runner: RunnerSource | None = None  # a runner tool: the source the shared runner runs


def file_stamp(home: Path, name: str) -> FileStamp | None:
    """Identity of an installed tool's files: the wasm (through a hub link to its target) and the
    files beside it (capabilities; a runner tool's source and manifest). A changed stamp means
    another version is installed."""
    path = disk.tools_dir(home) / f"{name}.wasm"
    try:
        real = path.resolve()
        info = real.stat()
        beside: list[tuple[int, int, int] | None] = []
        for sibling in (f"{name}.capabilities.json", f"{name}.py", f"{name}{BUILT_SUFFIX}"):
            other = real.with_name(sibling)
            found = other.stat() if other.is_file() else None
            beside.append((found.st_size, found.st_mtime_ns, found.st_ino) if found else None)
    except OSError:
        return None
    return (str(real), info.st_size, info.st_mtime_ns, info.st_ino, *beside)


class WasmHost:
    """Engine, epoch ticker, linker and compile cache; loads and describes components. Blocking."""

    def __init__(self, home: Path, limits: WasmLimits | None = None, *, cache_dir: Path | None = None) -> None:
        self.home = Path(home)
        self.limits = limits or WasmLimits()
        self.engine = new_engine()
        self.ticker = EpochTicker(self.engine, self.limits.tick_ms)
        self.linker = build_linker(self.engine)
        self.cache = CompileCache(cache_dir or disk.cache_dir(self.home), self.engine)

    def load(
        self,
        files: disk.SourceFiles,
        *,
        path: Path | None = None,
        progress: disk.Progress | None = None,
        runner: RunnerSource | None = None,
    ) -> LoadedTool:
        """Check the manifest, compile (or load from cache), check the WIT, read schema/description.
        ``runner``: the component is the shared runner and this is the tool it runs; its
        description and schema are the ones recorded when it was built."""
        step = progress or (lambda _msg: None)
        caps, tool_limits = disk.parse_capabilities(files)
        step("compiling")
        component, digest = self.cache.load(files.wasm, source=files.origin)
        tool = ToolComponent(
            name=files.name, component=component, digest=digest, engine=self.engine, linker=self.linker
        )
        step("describing")
        if runner is not None:
            description, schema_text = runner.description, json.dumps(runner.input_schema)
        else:
            self.ticker.start()
            try:
                with self.ticker.active():
                    description, schema_text = tool.describe(self.limits.for_tool(tool_limits))
            finally:
                self.ticker.stop()
        try:
            schema = json.loads(schema_text)
        except ValueError:
            schema = None
        if not isinstance(schema, dict):
            raise RuntimeUnavailable(
                f"component {files.name!r}: schema() did not return a JSON Schema object",
                hint="schema() must return json.dumps({...}) of an object schema",
            )
        description = description.strip() or (caps.description if caps and caps.description else "")
        spec = ToolSpec(
            name=files.name,
            description=description or f"WASM tool {files.name}",
            input_schema=schema,
            effects=caps.effects() if caps is not None else frozenset(),
            runtime=RuntimeKind.WASM,
            side_effecting=_side_effecting(caps),
            source=f"wasm:{path or files.origin}",
            capabilities=caps,
            annotations={"wit": _WIT, "sha256": digest, **({"source_sha256": runner.sha256} if runner else {})},
        )
        return LoadedTool(
            name=files.name, component=tool, spec=spec, capabilities=caps, limits=tool_limits, digest=digest, path=path,
            runner=runner,
        )  # fmt: skip

    def install_sync(
        self,
        source: Path,
        capabilities: Path | None = None,
        *,
        name: str | None = None,
        progress: disk.Progress | None = None,
    ) -> disk.InstallResult:
        result, _ = self.install_loaded(source, capabilities, name=name, progress=progress)
        return result

    def install_loaded(
        self,
        source: Path,
        capabilities: Path | None = None,
        *,
        name: str | None = None,
        progress: disk.Progress | None = None,
    ) -> tuple[disk.InstallResult, LoadedTool]:
        step = progress or (lambda _msg: None)
        step("reading")
        files = disk.read_source(Path(source), capabilities, name=name)
        loaded = self.load(files, progress=progress)  # everything is checked before a byte is written
        step("installing")
        path, replaced = disk.write_files(self.home, files)
        loaded = dataclasses.replace(loaded, path=path, spec=dataclasses.replace(loaded.spec, source=f"wasm:{path}"))
        result = disk.InstallResult(
            name=files.name,
            path=path,
            digest=loaded.digest,
            description=loaded.spec.description,
            input_schema=dict(loaded.spec.input_schema),
            replaced=replaced,
        )
        return result, loaded

    def load_installed(self, name: str) -> LoadedTool:
        """An installed tool. A hub install is a link into the artifact store: its capabilities
        file is read beside the link's target (both change with one rename of the link)."""
        directory = disk.tools_dir(self.home)
        stamp = file_stamp(self.home, name)
        real = (directory / f"{name}.wasm").resolve()
        files = disk.read_source(real, None, name=name)
        loaded = self.load(files, path=directory / f"{name}.wasm", runner=read_runner_source(real, name))
        return dataclasses.replace(loaded, stamp=stamp)


def _side_effecting(caps: Capabilities | None) -> bool:
    """Conservative: a tool that may write over HTTP or call other tools may change the world."""
    if caps is None:
        return False
    if caps.tool_invoke_aliases:
        return True
    if caps.http is not None:
        for entry in caps.http.allowlist:
            if not entry.methods or set(entry.methods) - _READ_ONLY_METHODS:
                return True
    effects = caps.effects()
    return bool(
        effects
        & {EffectKind.WRITE_FILESYSTEM, EffectKind.DELETE_FILESYSTEM, EffectKind.EXTERNAL_WRITE, EffectKind.FINANCIAL}
    )


class WasmRuntime:
    """Installed WASM tools. See the module docstring; limits default to ``WasmLimits()``."""

    kind = RuntimeKind.WASM

    def __init__(
        self,
        home: Path,
        engine_config: WasmLimits | None = None,
        *,
        cache_dir: Path | None = None,
        scanner: Callable[[], LeakScanner] | None = None,
        on_change: ChangeListener | None = None,
        admit: Callable[[str], str | None] | None = None,
    ) -> None:
        """``admit(name)`` returns None to load an installed tool, or the reason it is refused
        (the hub's lockfile check: a tool edited on disk since it was installed)."""
        self.home = Path(home)
        self.limits = engine_config or WasmLimits()
        self._admit = admit
        self._host = WasmHost(self.home, self.limits, cache_dir=cache_dir)
        self._tools: dict[str, LoadedTool] = {}
        self._specs: tuple[ToolSpec, ...] = ()
        self._changes = ChangeListeners("the WASM runtime")
        if on_change is not None:
            self._changes.subscribe(on_change)
        self._limiter: anyio.CapacityLimiter | None = None
        self._started = False
        self._scanner_factory = scanner
        self.load_errors: dict[str, str] = {}
        self._failed_stamps: dict[str, FileStamp | None] = {}
        self._http: HttpGateway | None = None  # made on first use (it pulls in the HTTP stack)
        self._rate = RateLimiter()
        self._rate_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"WasmRuntime(home={str(self.home)!r}, tools={sorted(self._tools)!r})"

    @property
    def cache(self) -> CompileCache:
        return self._host.cache

    @property
    def ticker(self) -> EpochTicker:
        return self._host.ticker

    # ------------------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the epoch ticker and load every installed tool; a broken tool is skipped and
        its error kept in ``load_errors`` (one bad file must not take the others down)."""
        if self._started:
            return
        self._limiter = anyio.CapacityLimiter(self.limits.workers)
        self._host.ticker.start()
        self._started = True
        for name in disk.installed_names(self.home):
            refusal = self._admit(name) if self._admit is not None else None
            if refusal is not None:
                logger.error("WASM tool %s not loaded: %s", name, refusal)
                self.load_errors[name] = refusal
                continue
            try:
                loaded = await anyio.to_thread.run_sync(self._host.load_installed, name)
            except PincerError as exc:
                logger.warning("WASM tool %s not loaded: %s", name, exc.message)
                self.load_errors[name] = str(exc)
                continue
            self._tools[name] = loaded
        self._rebuild()

    async def aclose(self) -> None:
        if not self._started:
            return
        self._started = False
        self._host.ticker.stop()
        if self._http is not None:
            await self._http.aclose()

    def tools(self) -> Sequence[ToolSpec]:
        return self._specs

    def get(self, name: str) -> LoadedTool | None:
        return self._tools.get(name)

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener()`` after every install/remove/rescan change; returns an unsubscribe."""
        return self._changes.subscribe(listener)

    # ------------------------------------------------------------------------------ install

    async def install(
        self,
        source: Path,
        capabilities: Path | None = None,
        *,
        name: str | None = None,
        progress: disk.Progress | None = None,
    ) -> disk.InstallResult:
        """Install a ``.wasm`` (+ capabilities) or ``.tar.gz`` and register it live.

        Reinstalling a name replaces the tool (the old cache entry is dropped when the bytes
        changed). Nothing is written or registered when any check fails."""
        result, loaded = await anyio.to_thread.run_sync(
            lambda: self._host.install_loaded(source, capabilities, name=name, progress=progress)
        )
        previous = self._tools.get(loaded.name)
        self._tools[loaded.name] = loaded
        self.load_errors.pop(loaded.name, None)
        if previous is not None and previous.digest != loaded.digest:
            self._host.cache.drop(previous.digest)
        self._rebuild()
        self._notify()
        return result

    async def remove(self, name: str) -> None:
        """Unregister a tool, delete its files and drop its compile cache entry."""
        await anyio.to_thread.run_sync(disk.remove, self.home, name)
        loaded = self._tools.pop(name, None)
        if loaded is not None:
            self._host.cache.drop(loaded.digest)
        self.load_errors.pop(name, None)
        self._rebuild()
        self._notify()

    async def rescan(self, *, recheck: bool = False) -> tuple[list[str], list[str]]:
        """Pick up tools another process installed, replaced or removed; returns (added or
        replaced, removed). A replaced tool's calls in flight finish on the component they
        started with. A tool ``admit`` refuses is not loaded; when a loaded one's new files are
        refused, the loaded (verified) version stays. ``recheck``: ask ``admit`` again about
        refused and unchanged tools too (the lock changed)."""
        on_disk = set(disk.installed_names(self.home))
        removed = sorted(set(self._tools) - on_disk)
        added: list[str] = []
        for name in removed:
            self._tools.pop(name, None)
        for name in set(self.load_errors) - on_disk:
            self.load_errors.pop(name, None)
        for name in sorted(on_disk):
            loaded = self._tools.get(name)
            stamp = file_stamp(self.home, name)
            if loaded is not None and loaded.stamp == stamp:
                continue
            if loaded is None and name in self.load_errors and not recheck and self._failed_stamps.get(name) == stamp:
                continue
            refusal = self._admit(name) if self._admit is not None else None
            if refusal is not None:
                logger.error("WASM tool %s not (re)loaded: %s", name, refusal)
                self.load_errors[name] = refusal
                self._failed_stamps[name] = stamp
                continue
            try:
                self._tools[name] = await anyio.to_thread.run_sync(self._host.load_installed, name)
                self.load_errors.pop(name, None)
                self._failed_stamps.pop(name, None)
                added.append(name)
            except PincerError as exc:
                self.load_errors[name] = str(exc)
                self._failed_stamps[name] = stamp
        if added or removed:
            self._rebuild()
            self._notify()
        return added, removed

    # ------------------------------------------------------------------------------ calls

    async def preflight(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> None:
        """Nothing to refuse before a call: a component's limits and capabilities apply as it runs."""

    async def invoke(self, spec: ToolSpec, args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        """Run one call in a fresh instance. Raises ToolError/ToolTimeout for traps (naming the
        limit); a tool's own error comes back as ``ToolOutput(is_error=True)`` with its logs."""
        if not self._started or self._limiter is None:
            raise RuntimeUnavailable("the WASM runtime is not started", hint="await runtime.start() first")
        loaded = self._tools.get(spec.name)
        if loaded is None:
            raise ToolNotFound(f"no WASM tool {spec.name!r} is loaded", hint="install it with `pincer tools install`")
        limits = self.limits.for_tool(loaded.limits)
        timeout_s = min(limits.timeout_s, host.timeout_s)
        caps = host.capabilities if host.capabilities is not None else loaded.capabilities
        redactor = Redactor(self._scanner_factory, host)
        execution = Execution(
            tool=spec.name,
            limits=limits,
            capabilities=caps,
            host=host,
            deadline=time.monotonic() + timeout_s,
            timeout_s=timeout_s,
            http=self._http_gateway().handle if caps is not None and caps.http is not None else None,
            invoke=self._invoke_from_guest,
            redact=redactor.redact_text,
            secret_lookup=_secret_lookup(host),
            scanner=redactor,
        )
        params_json = json.dumps(dict(args))
        context_json = None
        if loaded.runner is not None:
            loaded.runner.check()
            context_json = runner_context(loaded.runner)
        # A child call (tool-invoke) must not queue behind the slot its parent holds.
        limiter = self._limiter if host.depth == 0 else None
        with self._host.ticker.active():
            raw = await anyio.to_thread.run_sync(
                loaded.component.execute, execution, params_json, context_json, limiter=limiter
            )
        logs = execution.log_lines()
        usage = {
            "fuel": raw.fuel_used,
            "wasm_ms": round(raw.duration_ms, 3),
            "http_requests": execution.http_requests,
            "logs": len(execution.logs),
        }
        if raw.error is not None:
            message = redactor.redact_text(raw.error)
            if message.startswith("MemoryError"):
                raise ToolError(
                    f"tool {spec.name!r} hit its memory limit of {limits.memory_bytes // MIB} MiB ({message.strip()})",
                    hint="raise limits.memory_mb in its capabilities if it needs more",
                )
            return ToolOutput(value=message, is_error=True, logs=logs, usage=usage)
        value = parse_output(raw, tool=spec.name, max_bytes=limits.max_output_bytes)
        return ToolOutput(value=value, logs=logs, usage=usage)

    def _invoke_from_guest(self, execution: Execution, alias: str, params_json: str) -> str:
        """``tool-invoke`` on a worker thread: alias -> tool, then the whole call chain."""
        caps = execution.capabilities
        host = execution.host
        aliases = caps.tool_invoke_aliases if caps is not None else {}
        if alias not in aliases:
            raise InvokeRefused(f"alias {alias!r} is not in tool_invoke.aliases of {execution.tool}")
        if host is None or host.invoke is None:
            raise InvokeRefused("tool-invoke is not available outside the call chain")
        if host.depth + 1 > execution.limits.max_invoke_depth:
            raise InvokeRefused(f"tool-invoke nesting deeper than {execution.limits.max_invoke_depth} calls is refused")
        try:
            params = json.loads(params_json) if params_json.strip() else {}
        except ValueError:
            raise InvokeRefused("params-json is not valid JSON") from None
        if not isinstance(params, dict):
            raise InvokeRefused("params-json must be a JSON object")
        rate = caps.tool_invoke_rate_limit if caps is not None else None
        if rate is not None:
            limit = RateLimit(calls_per_minute=rate.requests_per_minute, calls_per_hour=rate.requests_per_hour)
            try:
                with self._rate_lock:
                    self._rate.reserve(f"invoke:{execution.tool}", limit, time.time())
            except PincerError as exc:
                raise InvokeRefused(exc.message) from None
        remaining = execution.remaining_s()
        if remaining <= 0:
            raise InvokeRefused("the execution deadline has passed")
        request = CallRequest(
            tool=aliases[alias],
            args=params,
            session=host.session,
            caller="wasm",
            depth=host.depth + 1,
            client=host.client,
        )
        invoke = host.invoke

        async def call() -> ToolResult:
            with anyio.fail_after(remaining):
                return await invoke(request)

        try:
            result = anyio.from_thread.run(call)
        except TimeoutError:
            raise InvokeRefused(f"{alias} did not answer within the execution's remaining {remaining:.3g} s") from None
        except RuntimeError as exc:  # no event loop to go back to (called outside a worker thread)
            raise InvokeRefused(f"tool-invoke cannot reach the call chain here ({type(exc).__name__})") from None
        if not result.ok:
            error = dict(result.error or {})
            raise InvokeRefused(execution.redact(f"{alias}: {error.get('code', 'error')}: {error.get('message', '')}"))
        return execution.redact(json.dumps(result.output))

    # ------------------------------------------------------------------------------ helpers

    def _http_gateway(self) -> HttpGateway:
        if self._http is None:
            from pincer.runtimes.wasm.http import HttpGateway

            self._http = HttpGateway(self.limits)
        return self._http

    def _rebuild(self) -> None:
        self._specs = tuple(self._tools[name].spec for name in sorted(self._tools))

    def _notify(self) -> None:
        self._changes.notify()


def _secret_lookup(host: HostContext) -> Callable[[str], bool] | None:
    access = host.secrets
    if access is None:
        return None

    def exists(name: str) -> bool:
        is_allowed = getattr(access, "is_allowed", None)
        if is_allowed is not None and not is_allowed(name):
            return False
        try:
            return access.find(name) is not None
        except PincerError:
            return False

    return exists


class Redactor:
    """Scrubs text handed to the guest or returned from it: known secrets, values injected in
    this call (read at each use, since injection happens mid-call) and credential shapes.
    Public: the builder's test bench runs a candidate tool with the same scrubbing."""

    def __init__(self, factory: Callable[[], LeakScanner] | None, host: HostContext) -> None:
        self._factory = factory
        self._host = host
        self._base: LeakScanner | None = None

    def scanner(self) -> LeakScanner:
        if self._base is None:
            if self._factory is not None:
                self._base = self._factory()
            else:
                from pincer.safety.scanner import LeakScanner

                self._base = LeakScanner(())
        injected = tuple(getattr(self._host.secrets, "injected", ()) or ())
        return self._base.with_values(injected) if injected else self._base

    def redact_text(self, text: str) -> str:
        redacted, _ = self.scanner().scan_text(text)
        return redacted

    def contains_secret(self, text: str) -> bool:
        return self.scanner().contains_secret(text)
