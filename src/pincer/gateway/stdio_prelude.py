"""``pincer mcp stdio`` answers the handshake before the MCP SDK is imported.

Importing the SDK (``mcp``, ``mcp_types``: pydantic models of the whole protocol) takes longer
than the rest of the start-up together, and a desktop client waits for ``initialize`` and then
``tools/list`` before it shows anything. So the process claims stdin and stdout, answers these
two itself (the same answers the SDK server gives: ``tests/gateway/test_stdio_prelude.py``
compares them), and then hands the conversation to the SDK server:

- ``initialize`` of a handshake-era version, with well-formed params: answered from the config
  (the capabilities the gateway's extensions add are known before they are built);
- ``notifications/initialized`` after it: noted;
- ``tools/list`` after that, with no params but ``_meta``: answered from the registry under the
  session's policy, as ``McpGateway`` lists it.

After ``tools/list`` is answered, or at the first line it does not take as one of these, the
prelude ends; the SDK server starts and is fed the ``initialize`` and ``notifications/initialized``
lines first (so its session state is what it would have been), then the line that ended the
prelude, then the rest of stdin. Its answer to the replayed ``initialize`` is dropped (the client
had it already) after checking that it says what the prelude said; a difference is logged.

While pincer serves, fd 0 reads the null device and fd 1 writes to stderr (what the SDK's
``stdio_server`` does when it claims them), so a child process or a stray print never reaches
the wire; both are restored at the end. Nothing here imports the SDK.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from io import TextIOWrapper
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from pincer.core.tasks import block_task_group
from pincer.gateway.wire import INSTRUCTIONS, server_info

logger = logging.getLogger(__name__)

__all__ = ["HANDSHAKE_PROTOCOL_VERSIONS", "Handover", "StdioWire", "claim_stdio", "handshake_capabilities", "run_prelude"]

# The handshake-era versions the SDK negotiates (mcp_types.version; the prelude's tests check
# they agree) and the one it answers a version it does not know with.
HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = "2025-11-25"


def handshake_capabilities(*, tasks: bool) -> dict[str, Any]:
    """The ``capabilities`` of pincer's ``initialize`` answer in the handshake era: tools, and
    prompts and resources (the upstream MCP servers' ones are served whether or not any server or
    skill is configured, ``upstream_mcp.py``), and 2025-11-25's tasks while ``[tasks] enabled``
    (``handshake_tasks.TASKS_CAPABILITY``, written here without the SDK, which is not loaded yet)."""
    capabilities: dict[str, Any] = {
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": False},
    }
    if tasks:
        capabilities["tasks"] = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    return capabilities


@dataclass(frozen=True, kw_only=True, slots=True)
class Handover:
    """Where the SDK server takes over: the lines it must read first, and the ``initialize``
    answer the prelude sent already (``None`` when it sent none)."""

    replay: tuple[str, ...]
    initialize_id: int | str | None = None
    initialize_result: Mapping[str, Any] | None = None


class StdioWire:
    """This process's stdin and stdout, claimed for MCP (see the module docstring)."""

    def __init__(self) -> None:
        self._in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        self._out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(devnull, 0)
        finally:
            os.close(devnull)
        os.dup2(2, 1)
        # closefd=False: a worker thread may still block in a read of this descriptor after the
        # wire is released, so it must never be closed and reused under it.
        self._reader = anyio.wrap_file(TextIOWrapper(os.fdopen(self._in, "rb", closefd=False), encoding="utf-8", errors="replace"))
        self._writer = anyio.wrap_file(TextIOWrapper(os.fdopen(self._out, "wb", closefd=False), encoding="utf-8"))
        self._send, self.lines = anyio.create_memory_object_stream[str](0)

    async def read_lines(self) -> None:
        """Move stdin's lines to :attr:`lines` until stdin ends."""
        async with self._send:
            async for line in self._reader:
                await self._send.send(line)

    async def write_line(self, text: str) -> None:
        await self._writer.write(text + "\n")
        await self._writer.flush()

    async def send(self, message: Mapping[str, Any]) -> None:
        await self.write_line(json.dumps(message, separators=(",", ":"), ensure_ascii=False))

    def release(self) -> None:
        """Point fd 0 and fd 1 at the wire again."""
        with suppress(OSError):
            os.dup2(self._in, 0)
        with suppress(OSError):
            os.dup2(self._out, 1)


@asynccontextmanager
async def claim_stdio() -> AsyncIterator[StdioWire]:
    """Claim stdin/stdout and read stdin in the background until the block ends."""
    wire = StdioWire()
    try:
        # The block's own error (a PincerError the CLI turns into its message and exit code)
        # comes out as itself, not in a group of one.
        async with block_task_group() as tg:
            tg.start_soon(wire.read_lines)
            yield wire
    finally:
        wire.release()


def _request(line: str) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        return None
    return message


def _request_id(message: Mapping[str, Any]) -> int | str | None:
    value = message.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _initialize_version(params: Any) -> str | None:
    """The version to answer, for params the SDK would accept; None: let the SDK answer."""
    if not isinstance(params, dict):
        return None
    requested, client, capabilities = params.get("protocolVersion"), params.get("clientInfo"), params.get("capabilities")
    if not isinstance(requested, str) or not isinstance(capabilities, dict) or not isinstance(client, dict):
        return None
    if not isinstance(client.get("name"), str) or not isinstance(client.get("version"), str):
        return None
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


async def run_prelude(
    wire: StdioWire,
    *,
    capabilities: Mapping[str, Any],
    list_tools: Callable[[], Awaitable[list[dict[str, Any]]]],
) -> Handover | None:
    """Answer ``initialize`` and ``tools/list`` (module docstring); return where the SDK takes
    over, or None when stdin ended first."""
    replay: list[str] = []
    initialize_id: int | str | None = None
    result: dict[str, Any] | None = None
    is_initialized = False
    lines: MemoryObjectReceiveStream[str] = wire.lines
    while True:
        try:
            line = await lines.receive()
        except anyio.EndOfStream:
            return None
        message = _request(line)
        method = message.get("method") if message is not None else None
        request_id = _request_id(message) if message is not None else None
        if message is not None and method == "initialize" and result is None and request_id is not None:
            version = _initialize_version(message.get("params"))
            if version is not None:
                result = {
                    "capabilities": dict(capabilities),
                    "instructions": INSTRUCTIONS,
                    "protocolVersion": version,
                    "serverInfo": server_info(),
                }
                initialize_id = request_id
                await wire.send({"jsonrpc": "2.0", "id": request_id, "result": result})
                replay.append(line)
                continue
        elif message is not None and method == "notifications/initialized" and result is not None and "id" not in message:
            is_initialized = True
            replay.append(line)
            continue
        elif message is not None and method == "tools/list" and is_initialized and request_id is not None:
            params = message.get("params")
            if params is None or (isinstance(params, dict) and set(params) <= {"_meta"}):
                tools = await list_tools()
                await wire.send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools}})
                return Handover(replay=tuple(replay), initialize_id=initialize_id, initialize_result=result)
        replay.append(line)
        return Handover(replay=tuple(replay), initialize_id=initialize_id, initialize_result=result)


class SdkStdin:
    """The SDK server's stdin: the replayed lines, then the rest of the wire's."""

    def __init__(self, handover: Handover, wire: StdioWire) -> None:
        self._replay = list(handover.replay)
        self._lines = wire.lines

    def __aiter__(self) -> SdkStdin:
        return self

    async def __anext__(self) -> str:
        if self._replay:
            return self._replay.pop(0)
        try:
            return await self._lines.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class SdkStdout:
    """The SDK server's stdout: the wire, less its answer to the replayed ``initialize``."""

    def __init__(self, handover: Handover, wire: StdioWire) -> None:
        self._wire = wire
        self._pending_id = handover.initialize_id
        self._sent = handover.initialize_result

    async def write(self, text: str) -> None:
        if self._pending_id is not None:
            message = _request_or_response(text)
            if message is not None and message.get("id") == self._pending_id and "method" not in message:
                self._pending_id = None
                if message.get("result") != self._sent:
                    logger.warning(
                        "pincer mcp stdio answered initialize with %s, the MCP SDK would have answered %s",
                        json.dumps(self._sent, sort_keys=True),
                        json.dumps(message.get("result", message.get("error")), sort_keys=True),
                    )
                return
        await self._wire.write_line(text.rstrip("\n"))

    async def flush(self) -> None:
        return None  # every write_line flushes


def _request_or_response(text: str) -> dict[str, Any] | None:
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None
