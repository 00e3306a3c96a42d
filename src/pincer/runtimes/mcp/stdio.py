"""The stdio transport: one MCP server process under pincer's supervisor, speaking JSON-RPC lines.

Modelled on the SDK's ``stdio_client`` with three differences that are the reason it exists:

* the server runs under :mod:`.supervisor` with a lifeline pipe, so it and everything it starts
  (also a grandchild that left the process group with ``setsid()``) die with pincer, even when
  pincer is SIGKILLed; on shutdown the supervisor ends them the same way;
* anything on stdout that is not a JSON-RPC message ends the connection at once with the
  offending line in the reason (the spec forbids it; waiting for a timeout helps nobody);
* stderr is kept as a short tail for error messages instead of being mixed into pincer's.

Shutdown follows the MCP lifecycle (close stdin, wait; then close the lifeline, so the supervisor
SIGTERMs and SIGKILLs every descendant; SIGKILL of the group only if the supervisor does not exit),
shielded and bounded by named constants, so a cancelled caller can neither leak nor hang on a server.
"""

from __future__ import annotations

import collections
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from pincer.core.process_compat import close_transport
from pincer.runtimes.mcp.lean import LeanCalls, encode_line

# What the transport yields: the streams an MCP ClientSession reads from and writes to.
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]

logger = logging.getLogger(__name__)

__all__ = [
    "StdioLaunch",
    "StdioTransport",
    "SUPERVISOR_PATH",
    "CLOSE_GRACE_S",
    "TERM_GRACE_S",
    "MAX_LINE_BYTES",
]

SUPERVISOR_PATH = Path(__file__).with_name("supervisor.py")
KILL_NOW = b"k"  # on the lifeline: the supervisor ends everything at once (see supervisor.py)
CLOSE_GRACE_S = 2.0  # after stdin closes, before the supervisor is told to end everything
# The supervisor's own SIGTERM grace plus its SIGKILL rounds, with room for a loaded machine.
TERM_GRACE_S = 2.0 + 5.0
REAP_TIMEOUT_S = 2.0
EXIT_POLL_S = 0.01
MAX_LINE_BYTES = 64 * 1024 * 1024
STDERR_TAIL_LINES = 20
STDERR_LINE_CHARS = 500
READ_CHUNK_BYTES = 65_536


@dataclass(frozen=True, kw_only=True, slots=True)
class StdioLaunch:
    server: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)  # may hold mapped secrets
    cwd: str | None = None


def _preview(raw: bytes) -> str:
    text = raw[:200].decode("utf-8", errors="replace")
    return text + ("..." if len(raw) > 200 else "")


class StdioTransport:
    """``async with StdioTransport(launch) as (read_stream, write_stream)``.

    ``failure`` says why the connection ended when the server ended it (exit, garbage, a line
    too long); ``stderr_tail()`` the last lines the server wrote to stderr. ``lean`` (with
    ``lean=True``) sends pincer's own requests past the SDK (:mod:`.lean`): its answers are
    taken off the one reader task before the SDK sees a line, its writes share the one writer."""

    def __init__(
        self, launch: StdioLaunch, *, on_closed: Callable[[str], None] | None = None, lean: bool = False
    ) -> None:
        self.launch = launch
        self.failure: str | None = None
        self._write_lock = anyio.Lock()
        self.lean = LeanCalls(self._send_message) if lean else None
        self._on_closed = on_closed
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._process: anyio.abc.Process | None = None
        self._lifeline_w: int | None = None
        self._context: AbstractAsyncContextManager[Streams, bool | None] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    def stderr_tail(self) -> str:
        return "\n".join(self._stderr)

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Streams:
        self._context = self._open()
        return await self._context.__aenter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        context, self._context = self._context, None
        if context is None:
            raise RuntimeError("StdioTransport exited without being entered")
        return await context.__aexit__(exc_type, exc, tb)

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[Streams]:
        lifeline_r, lifeline_w = os.pipe()
        try:
            self._process = await anyio.open_process(
                [sys.executable, "-I", "-S", str(SUPERVISOR_PATH), str(lifeline_r), "--",
                 self.launch.command, *self.launch.args],
                env=dict(self.launch.env),
                cwd=self.launch.cwd,
                start_new_session=True,
                pass_fds=(lifeline_r,),
            )
        except BaseException:
            os.close(lifeline_w)
            raise
        finally:
            os.close(lifeline_r)
        self._lifeline_w = lifeline_w
        # No await between the spawn and the task group: a cancellation there would leak the process.
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_stdout, read_send)
            tg.start_soon(self._write_stdin, write_recv)
            tg.start_soon(self._read_stderr)
            try:
                yield read_recv, write_send
            finally:
                # Shielded and bounded: a cancelled caller must neither leak nor hang on the server.
                try:
                    with anyio.CancelScope(shield=True):
                        await self._stop()
                finally:
                    for stream in (read_send, read_recv, write_send, write_recv):
                        stream.close()  # not aclose(): a native cancel of _stop must not skip it
                tg.cancel_scope.cancel()

    async def kill(self) -> None:
        """End the server and everything it started now (a hung server is not worth a grace
        period): the supervisor is told over the lifeline, since a SIGKILL of the group would
        end the supervisor too and leave whatever left the group behind."""
        if self._process is None or self._process.returncode is not None:
            return
        if self._lifeline_w is not None:
            try:
                os.write(self._lifeline_w, KILL_NOW)
                return
            except OSError:
                pass
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)

    async def _stop(self) -> None:
        process = self._process
        if process is None:
            return
        try:
            await self._end(process)
        except anyio.get_cancelled_exc_class():
            # anyio's shield does not hold against a native task.cancel() on asyncio (its runner
            # cancels every task when the loop closes; _retire cancels a session slow to stop):
            # end everything at once, still bounded, then let the cancel go on. Cut short here,
            # the lifeline stayed open, so the server ran on with its pipes left to the collector.
            with suppress(anyio.get_cancelled_exc_class()):
                await self._end_now(process)
            raise
        finally:
            self._release(process)

    async def _end(self, process: anyio.abc.Process) -> None:
        """The lifecycle's shutdown: stdin closed, then the lifeline, then the group's SIGKILL."""
        if self.failure is not None and process.returncode is None:
            await self.kill()  # it broke the protocol: no grace period
        if process.stdin is not None:
            with suppress(Exception):
                await process.stdin.aclose()
        if not await self._wait_exit(CLOSE_GRACE_S):
            # EOF on the lifeline: the supervisor SIGTERMs every descendant, waits, SIGKILLs them.
            self._close_lifeline()
            if not await self._wait_exit(TERM_GRACE_S):
                logger.warning(
                    "MCP server %s: its supervisor did not exit; killing its process group", self.launch.server
                )
                await self._kill_group(process)
        self._close_lifeline()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                with suppress(Exception):
                    await pipe.aclose()

    async def _end_now(self, process: anyio.abc.Process) -> None:
        """No grace: ``k`` on the lifeline (the supervisor SIGKILLs every descendant), then the group's SIGKILL."""
        await self.kill()
        if not await self._wait_exit(TERM_GRACE_S):
            await self._kill_group(process)

    async def _kill_group(self, process: anyio.abc.Process) -> None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if not await self._wait_exit(REAP_TIMEOUT_S):
            logger.warning("MCP server %s (pid %d) survived SIGKILL", self.launch.server, process.pid)

    def _release(self, process: anyio.abc.Process) -> None:
        """What needs no await, so no cancel can skip it: the lifeline (its EOF ends the supervisor
        and everything below it) and the subprocess transport with its pipes."""
        self._close_lifeline()
        close_transport(process)  # else asyncio warns at garbage collection about an open transport

    def _close_lifeline(self) -> None:
        if self._lifeline_w is not None:
            with suppress(OSError):
                os.close(self._lifeline_w)
            self._lifeline_w = None

    async def _wait_exit(self, timeout_s: float) -> bool:
        # Not process.wait(): on asyncio it also waits for pipe EOF, which a grandchild holding
        # the pipes can delay past the process's own exit.
        assert self._process is not None
        with anyio.move_on_after(timeout_s):
            while self._process.returncode is None:  # noqa: ASYNC110 -- see the comment above
                await anyio.sleep(EXIT_POLL_S)
            return True
        return self._process.returncode is not None

    def _closed(self, reason: str) -> None:
        if self.failure is None:
            self.failure = reason
            if self._on_closed is not None:
                try:
                    self._on_closed(reason)
                except Exception:
                    logger.exception("on_closed callback failed")

    # -- pipes -------------------------------------------------------------------------------

    async def _read_stdout(self, sink: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        buffer = b""
        try:
            while True:
                try:
                    chunk = await stdout.receive(READ_CHUNK_BYTES)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                buffer += chunk
                while True:
                    newline = buffer.find(b"\n")
                    if newline < 0:
                        break
                    line, buffer = buffer[:newline], buffer[newline + 1 :]
                    if not line.strip():
                        continue
                    if self.lean is not None and self.lean.in_flight and self._lean_claims(line):
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError:
                        self._closed(f"wrote something that is not JSON-RPC on stdout: {_preview(line)!r}")
                        return
                    try:
                        await sink.send(SessionMessage(message))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return
                if len(buffer) > MAX_LINE_BYTES:
                    self._closed(f"wrote a line longer than {MAX_LINE_BYTES} bytes on stdout")
                    return
        finally:
            # The reason first, then EOF: the calls that EOF fails read the reason.
            with anyio.CancelScope(shield=True):
                await self._note_exit()
            if self.lean is not None:
                self.lean.close(self.failure or "closed the connection")
            sink.close()

    def _lean_claims(self, line: bytes) -> bool:
        # Parsed by the same JSON parser the SDK's validation uses; what the lean table does not
        # take is validated from the line again below, exactly as without the lean path.
        try:
            parsed = pydantic_core.from_json(line)
        except ValueError:
            return False
        return self.lean is not None and self.lean.claim(parsed)

    async def _note_exit(self) -> None:
        """stdout ended: say why, waiting briefly for the exit status to make the reason useful."""
        if self.failure is not None or self._process is None:
            return
        with anyio.move_on_after(0.2), anyio.CancelScope(shield=True):
            while self._process.returncode is None:  # noqa: ASYNC110 -- the exit status, polled for at most 0.2 s
                await anyio.sleep(EXIT_POLL_S)
        code = self._process.returncode
        if code is None:
            self._closed("closed its stdout")
        elif code > 128:
            self._closed(f"was killed by signal {code - 128}")
        else:
            self._closed(f"exited with status {code}")

    async def _write_stdin(self, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
        assert self._process is not None and self._process.stdin is not None
        stdin = self._process.stdin
        try:
            async with source:
                async for message in source:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    async with self._write_lock:
                        await stdin.send(data.encode("utf-8"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._closed("closed its stdin")

    async def _send_message(self, message: Mapping[str, Any], headers: Mapping[str, str] | None) -> None:
        await self.send_line(encode_line(message))

    async def send_line(self, data: bytes) -> None:
        """One line of pincer's own (the lean path's) on the server's stdin; the SDK's messages
        wait for it, so no two writes interleave."""
        if self._process is None or self._process.stdin is None or self.failure is not None:
            raise anyio.ClosedResourceError
        try:
            async with self._write_lock:
                await self._process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._closed("closed its stdin")
            raise

    async def _read_stderr(self) -> None:
        assert self._process is not None and self._process.stderr is not None
        partial = b""
        try:
            async for chunk in self._process.stderr:
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()
                for raw in lines:
                    text = raw.decode("utf-8", errors="replace").rstrip()[:STDERR_LINE_CHARS]
                    if text:  # kept for error messages only: never logged, it may hold secrets
                        self._stderr.append(text)
                if len(partial) > READ_CHUNK_BYTES:
                    partial = b""
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
