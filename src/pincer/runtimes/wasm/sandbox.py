"""The shared runner as a sandbox for candidate sources: what the builder's test stage runs.

One :class:`RunnerSandbox` loads the runner component once (compile cache, engine, linker,
epoch ticker) and then runs a source's ``execute`` or ``describe`` in a fresh instance per call,
under the sandbox's limits, the capabilities given, the same scrubbing a production call gets
(:class:`~pincer.runtimes.wasm.runtime.Redactor`) and, when ``redirect`` is given, HTTP sent to a
loopback fixture server after the real egress checks. It wires the runtime's parts together so
the builder does not have to know them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pincer.core.errors import PincerError
from pincer.core.values import HostContext
from pincer.runtimes.wasm.limits import WasmLimits
from pincer.runtimes.wasm.runner_tool import RunnerSource, runner_context

if TYPE_CHECKING:
    from pincer.runtimes.wasm.component import RawResponse, ToolComponent
    from pincer.runtimes.wasm.runtime import WasmHost
    from pincer.safety.egress import HttpRequest
    from pincer.safety.scanner import LeakScanner

__all__ = ["RunnerSandbox"]


class RunnerSandbox:
    """The runner component at ``runner_wasm``, loaded on first use into ``home``'s compile cache."""

    def __init__(self, home: Path, runner_wasm: Path, limits: WasmLimits) -> None:
        self.home = Path(home)
        self.runner_wasm = Path(runner_wasm)
        self.limits = limits
        self._host: WasmHost | None = None
        self._component: ToolComponent | None = None

    def open(self) -> None:
        """Load the runner (blocking: compiles it when the cache lacks it; run it in a thread)."""
        if self._component is not None:
            return
        from pincer.runtimes.wasm.component import ToolComponent
        from pincer.runtimes.wasm.runtime import WasmHost

        host = WasmHost(self.home, self.limits)
        component, digest = host.cache.load(self.runner_wasm.read_bytes(), source="the pincer runner")
        self._component = ToolComponent(name="pincer-runner", component=component, digest=digest,
                                        engine=host.engine, linker=host.linker)  # fmt: skip
        self._host = host
        host.ticker.start()  # the epoch deadline needs it; a daemon thread, stopped by close()

    def close(self) -> None:
        if self._host is not None:
            self._host.ticker.stop()

    async def run(
        self,
        tool: RunnerSource,
        args: Mapping[str, Any],
        *,
        host: HostContext,
        scanner: LeakScanner,
        secret_allowed: Callable[[str], bool],
        redirect: Callable[[HttpRequest], HttpRequest] | None = None,
        op: str = "execute",
    ) -> tuple[RawResponse | None, tuple[str, ...]]:
        """One call of ``tool``'s ``op`` with ``args``: (the raw response, or None on a trap; the
        guest's log lines, a trap's message last). ``scanner`` scrubs what crosses the boundary;
        ``secret_allowed`` answers the guest's ``secret-exists``."""
        from pincer.runtimes.wasm.host import Execution
        from pincer.runtimes.wasm.http import HttpGateway
        from pincer.runtimes.wasm.runtime import Redactor

        if self._host is None or self._component is None:
            await anyio.to_thread.run_sync(self.open)
        wasm_host, component = self._host, self._component
        if wasm_host is None or component is None:  # open() sets both or raises
            raise RuntimeError("the runner sandbox did not open")
        limits, caps = self.limits, host.capabilities
        redactor = Redactor(lambda: scanner, host)
        gateway = HttpGateway(limits, redirect=redirect) if redirect is not None else None
        execution = Execution(
            tool=host.tool, limits=limits, capabilities=caps, host=host, deadline=time.monotonic() + limits.timeout_s,
            timeout_s=limits.timeout_s, http=gateway.handle if gateway is not None and caps is not None and caps.http else None,
            redact=redactor.redact_text, secret_lookup=secret_allowed, scanner=redactor,
        )  # fmt: skip
        try:
            with wasm_host.ticker.active():
                raw = await anyio.to_thread.run_sync(
                    component.execute, execution, json.dumps(dict(args)), runner_context(tool, op=op)
                )
        except PincerError as exc:
            return None, (*execution.log_lines(), f"trap: {exc.message}")
        finally:
            if gateway is not None:
                await gateway.aclose()
        return raw, execution.log_lines()
