"""The six ``near:agent/host@0.3.0`` imports and the per-execution state they act on.

The linker is built once per engine and shared by every store. A host function finds the
execution it serves through a thread-local (one store runs on one worker thread at a time).
Every host function catches every exception and answers with an error value (``err(...)``,
``None`` or ``false``): a Python exception must never unwind into wasmtime, where wasmtime-py
parks it in a process-wide global that another thread's call could pick up.

No import ever returns a secret value: ``secret-exists`` answers yes/no, credentials are
injected host-side by ``http-request``, and everything handed back to the guest (responses,
workspace files, other tools' outputs) passes through the leak scanner first.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from pincer.core.extras import require
from pincer.runtimes.wasm.abi import add_host_func
from pincer.runtimes.wasm.limits import WasmLimits
from pincer.runtimes.wasm.wit import HOST_INTERFACE

if TYPE_CHECKING:
    import wasmtime
    from wasmtime.component import Linker, Variant
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    wasmtime = require("wasm", "wasmtime")
    _component = require("wasm", "wasmtime.component")
    Linker, Variant = _component.Linker, _component.Variant

if TYPE_CHECKING:
    from pincer.core.capabilities import Capabilities
    from pincer.core.values import HostContext

__all__ = [
    "Execution",
    "InvokeRefused",
    "build_linker",
    "current_execution",
    "activate",
    "resolve_workspace_path",
    "decode_headers",
    "WORKSPACE_READ_MAX_BYTES",
]

logger = logging.getLogger(__name__)

WORKSPACE_READ_MAX_BYTES = 4 * 1024 * 1024
_LOG_LEVELS = ("trace", "debug", "info", "warn", "error")

_local = threading.local()


class Scrubber(Protocol):
    """What crosses the boundary is checked and redacted with (the runtime's ``Redactor``)."""

    def contains_secret(self, text: str) -> bool: ...

    def redact_text(self, text: str) -> str: ...


@dataclass(kw_only=True, slots=True, eq=False)
class Execution:
    """Mutable state of one execute: limits, what the grant allows, what the guest did.

    ``http`` handles ``http-request`` (see :mod:`pincer.runtimes.wasm.http`); ``invoke`` handles
    ``tool-invoke`` (a blocking bridge into the call chain); ``redact`` scrubs text handed back
    to the guest; ``secret_exists`` answers for names the capabilities already allow."""

    tool: str
    limits: WasmLimits
    capabilities: Capabilities | None = None
    host: HostContext | None = None
    deadline: float = 0.0  # time.monotonic() value after which host calls refuse to start
    timeout_s: float = 0.0  # the deadline as configured for this call (for messages)
    http: Callable[[Execution, str, str, str, bytes | None, int | None], Variant] | None = None
    invoke: Callable[[Execution, str, str], str] | None = None
    redact: Callable[[str], str] = lambda text: text
    secret_lookup: Callable[[str], bool] | None = None
    scanner: Scrubber | None = None
    logs: list[tuple[str, str]] = field(default_factory=list)
    logs_dropped: int = 0
    http_requests: int = 0

    def remaining_s(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def log_lines(self) -> tuple[str, ...]:
        lines = [f"{level}: {message}" for level, message in self.logs]
        if self.logs_dropped:
            lines.append(f"warn: {self.logs_dropped} more log entries dropped (limit {self.limits.max_log_entries})")
        return tuple(lines)


def current_execution() -> Execution | None:
    return getattr(_local, "execution", None)


class activate:
    """Context manager binding an execution to the current thread for the host functions."""

    def __init__(self, execution: Execution) -> None:
        self._execution = execution
        self._previous: Execution | None = None

    def __enter__(self) -> Execution:
        self._previous = current_execution()
        _local.execution = self._execution
        return self._execution

    def __exit__(self, *exc: object) -> None:
        _local.execution = self._previous


# ----------------------------------------------------------------------------- host functions


def _log(level: object, message: str) -> None:  # the guest's enum as wasmtime lifts it: checked below
    try:
        ex = current_execution()
        if ex is None:
            return
        if len(ex.logs) >= ex.limits.max_log_entries:
            ex.logs_dropped += 1
            return
        level_name = level if isinstance(level, str) and level in _LOG_LEVELS else "info"
        encoded = message.encode("utf-8")
        if len(encoded) > ex.limits.max_log_bytes:
            message = encoded[: ex.limits.max_log_bytes].decode("utf-8", "ignore") + " [truncated]"
        ex.logs.append((level_name, ex.redact(message)))
    except Exception as exc:  # a log that fails is dropped, never raised into wasm  # noqa: BLE001
        logger.debug("log import failed: %s", type(exc).__name__)


def _now_millis() -> int:
    try:
        return time.time_ns() // 1_000_000
    except Exception:  # pragma: no cover - the clock does not fail, but nothing may raise here  # noqa: BLE001
        return 0


def _workspace_read(path: str) -> str | None:
    """The file for the guest, or None (missing, refused, not granted): the tool's prefixes here,
    the rest (symlinks, a second name, pincer's own files) by the file tools' one opener."""
    from pincer.core.errors import PincerError
    from pincer.runtimes.native.workspace import read_in_workspace

    try:
        ex = current_execution()
        if ex is None or ex.host is None or ex.host.workspace is None or ex.capabilities is None:
            return None
        prefixes = ex.capabilities.workspace_allowed_prefixes
        if prefixes is None:
            return None
        if resolve_workspace_path(Path(ex.host.workspace), path, prefixes) is None:
            return None
        _, data, size = read_in_workspace(ex.host, path, limit=WORKSPACE_READ_MAX_BYTES, prefixes=prefixes)
        if size > WORKSPACE_READ_MAX_BYTES:
            return None
        return ex.redact(data.decode("utf-8", "replace"))
    except PincerError as exc:  # the guest sees None; the operator sees why
        logger.warning("workspace-read of %r refused: %s", path, exc.message)
        return None
    except Exception as exc:  # noqa: BLE001
        logger.debug("workspace-read refused: %s", type(exc).__name__)
        return None


def resolve_workspace_path(root: Path, path: str, prefixes: tuple[str, ...]) -> Path | None:
    """The file ``path`` names inside ``root`` when it is relative, has no ``..``, starts with an
    allowed prefix (an empty tuple allows the whole workspace) and, with symlinks resolved,
    stays inside ``root``; otherwise None."""
    if not path or "\x00" in path or "\\" in path or path.startswith("/"):
        return None
    parts = PurePosixPath(path).parts
    if any(part in ("..", "") for part in parts) or not parts:
        return None
    normalized = "/".join(p for p in parts if p != ".")
    if prefixes and not any(_under_prefix(normalized, prefix) for prefix in prefixes):
        return None
    root_real = Path(os.path.realpath(root))
    target = Path(os.path.realpath(root_real / normalized))
    if root_real not in target.parents:
        return None
    # a symlink under an allowed prefix must not lead to a file outside every prefix
    resolved = target.relative_to(root_real).as_posix()
    if prefixes and not any(_under_prefix(resolved, prefix) for prefix in prefixes):
        return None
    return target if target.is_file() else None


def _under_prefix(path: str, prefix: str) -> bool:
    prefix = prefix.strip("/")
    if not prefix:
        return True
    return path == prefix or path.startswith(prefix + "/")


def _http_request(method: str, url: str, headers_json: str, body: bytes | None, timeout_ms: int | None) -> Variant:
    try:
        ex = current_execution()
        if ex is None or ex.http is None:
            return Variant("err", "http-request is not granted to this tool")
        return ex.http(ex, method, url, headers_json, body, timeout_ms)
    except Exception as exc:  # noqa: BLE001
        logger.warning("http-request failed inside the host: %s", type(exc).__name__)
        return Variant("err", f"http-request failed in the host ({type(exc).__name__})")


def _tool_invoke(alias: str, params_json: str) -> Variant:
    try:
        ex = current_execution()
        if ex is None or ex.invoke is None:
            return Variant("err", "tool-invoke is not available to this tool")
        return Variant("ok", ex.invoke(ex, alias, params_json))
    except InvokeRefused as exc:
        return Variant("err", str(exc))
    except Exception as exc:  # noqa: BLE001
        logger.warning("tool-invoke failed inside the host: %s", type(exc).__name__)
        return Variant("err", f"tool-invoke failed in the host ({type(exc).__name__})")


def _secret_exists(name: str) -> bool:
    try:
        ex = current_execution()
        if ex is None or ex.capabilities is None or ex.secret_lookup is None:
            return False
        if not ex.capabilities.is_secret_allowed(name):
            return False
        return bool(ex.secret_lookup(name))
    except Exception as exc:  # noqa: BLE001
        logger.debug("secret-exists refused: %s", type(exc).__name__)
        return False


class InvokeRefused(Exception):
    """Raised by an invoke handler to answer ``err(message)``; the message goes to the guest."""


def build_linker(engine: wasmtime.Engine) -> Linker:
    """A linker defining every import of ``near:agent/host@0.3.0`` plus WASI preview 2.

    WASI is there for components built for wasm32-wasip2 (IronClaw's Rust tools); each store
    that needs it gets an empty WASI context: no arguments, environment, files or sockets."""
    linker = Linker(engine)
    linker.add_wasip2()
    with linker.root() as root, root.add_instance(HOST_INTERFACE) as host:
        add_host_func(host, "log", _log)
        add_host_func(host, "now-millis", _now_millis)
        add_host_func(host, "workspace-read", _workspace_read)
        add_host_func(host, "http-request", _http_request)
        add_host_func(host, "tool-invoke", _tool_invoke)
        add_host_func(host, "secret-exists", _secret_exists)
    return linker


def decode_headers(headers_json: str) -> dict[str, str] | None:
    """Headers as the guest sent them (a JSON object of strings), or None when malformed."""
    try:
        value = json.loads(headers_json) if headers_json.strip() else {}
    except ValueError:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return None
    return value
