"""Running one prepared command line: limits, capped output, a deadline that kills the whole tree.

Every backend turns a :class:`RunRequest` into a :class:`Launch` (the argv of bwrap, of a container
engine, or of the command itself on the host); :func:`execute` runs it the same way for all of them.
It is synchronous and meant for a worker thread: a blocking ``select`` loop is simpler to make
correct about pipes held open by grandchildren than an event-loop reader, and it keeps the event loop
free for the network proxy the run may be talking to.
"""

from __future__ import annotations

import logging
import os
import resource
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.script.cgroups import RunCgroup
from pincer.runtimes.script.manifest import Limits, Mount, NetworkMode

__all__ = ["RunRequest", "Launch", "DiskWatch", "RunResult", "execute", "rlimits_for", "disk_usage", "GIB"]

logger = logging.getLogger(__name__)

GIB = 1024**3
DRAIN_AFTER_EXIT_S = 2.0  # how long to keep reading pipes after the tree was killed
POLL_S = 0.1
NPROC_BACKSTOP = 512  # wake-up while pipes stay open after the main process exited
WATCH_INTERVAL_S = 0.1  # how often a DiskWatch directory is measured
WATCH_MAX_ENTRIES = 100_000  # more files than this in a watched directory count as full: walking them costs too much
_READ_CHUNK = 65536


class _TooMany(Exception):
    pass


def disk_usage(path: Path, *, stop_above: int, max_entries: int = WATCH_MAX_ENTRIES) -> int:
    """Bytes allocated under ``path`` (symlinks not followed), stopping early once past
    ``stop_above``; more than ``max_entries`` entries count as past it."""
    total, seen = 0, 0
    stack = [str(path)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue  # removed while we looked, or not ours to read
        with entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    return stop_above + 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if total > stop_above:
                    return total
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRequest:
    """What to run and under which rules; backends decide how."""

    argv: tuple[str, ...]
    workdir: Path
    limits: Limits
    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    network: NetworkMode = NetworkMode.NONE
    proxy_socket: Path | None = None  # host side of the allowlist proxy (network = allowlist)
    # The total the run may write to its fresh scratch workdir; None when the workdir is the
    # session's workspace, which is the operator's directory and not ours to bound.
    workdir_max_bytes: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DiskWatch:
    """A directory whose size a backend cannot bound in the kernel: the run is killed once it holds
    more than ``max_bytes`` (allocated blocks), checked every :data:`WATCH_INTERVAL_S`."""

    path: Path
    max_bytes: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch:
    """A process to start. ``user``/``group`` drop the host uid before exec; ``on_kill`` reaches
    processes the kernel does not (a container engine's)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    backend: str
    cwd: Path | None = None
    user: int | None = None
    group: int | None = None
    pass_fds: tuple[int, ...] = ()
    on_kill: Callable[[], None] | None = None
    on_close: Callable[[], None] | None = None
    watch: DiskWatch | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    exit_code: int | None
    signal: int | None
    stdout: bytes
    stderr: bytes
    stdout_total: int
    stderr_total: int
    killed_by: str | None  # timeout | memory | cpu | file_size | workdir_full | None
    duration_ms: float
    backend: str
    oom_kills: int = 0
    pids_limit_hits: int = 0
    memory_peak_bytes: int = 0

    @property
    def stdout_truncated(self) -> bool:
        return self.stdout_total > len(self.stdout)

    @property
    def stderr_truncated(self) -> bool:
        return self.stderr_total > len(self.stderr)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed_by is None


def _clamp(value: int, hard: int) -> int:
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def rlimits_for(limits: Limits, *, has_cgroup: bool) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for the child. Hard limits are clamped to ours: without
    CAP_SYS_RESOURCE they cannot be raised, and asking would fail the spawn."""
    wanted = [
        # soft first: SIGXCPU at cpu_s, the kernel's SIGKILL one second later
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        (resource.RLIMIT_CORE, 0, 0),
        # A backstop only: the memory cgroup is the real limit. Runtimes like node and java
        # reserve far more address space than they use, so this stays large.
        (resource.RLIMIT_AS, max(16 * GIB, 8 * limits.memory_bytes), max(16 * GIB, 8 * limits.memory_bytes)),
    ]
    if not has_cgroup:
        # RLIMIT_NPROC counts every process of the uid host-wide, including ones still exiting from
        # earlier runs (and is ignored for root), so it is only a generous backstop, used when no
        # pids cgroup contains the run.
        nproc = max(limits.pids, NPROC_BACKSTOP)
        wanted.append((resource.RLIMIT_NPROC, nproc, nproc))
    result = []
    for res, soft, hard in wanted:
        _, current_hard = resource.getrlimit(res)
        hard = _clamp(hard, current_hard)
        result.append((res, min(_clamp(soft, current_hard), hard), hard))
    return result


_SH, _PRLIMIT, _SETPRIV = "/bin/sh", "/usr/bin/prlimit", "/usr/bin/setpriv"
_PRLIMIT_NAMES = {
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_CORE: "core",
    resource.RLIMIT_AS: "as",
    resource.RLIMIT_NPROC: "nproc",
}


def trampoline_available() -> bool:
    """Whether util-linux's prlimit and setpriv are there to start a run without a Python fork."""
    return all(os.access(p, os.X_OK) for p in (_SH, _PRLIMIT, _SETPRIV))


def trampoline_argv(
    argv: tuple[str, ...], *, procs: tuple[Path, ...], rlimits: list[tuple[int, int, int]], user: int | None,
    group: int | None,
) -> list[str]:
    """``sh`` joins the cgroups (as root, writing its own pid), drops the environment dash exports,
    and execs ``prlimit`` -> ``setpriv`` -> the command. Unlike ``preexec_fn`` this lets Python
    start the child with vfork (milliseconds saved on every run) and runs no Python code between
    fork and exec."""
    joins = "".join(f"echo 0 > {shlex.quote(str(p))} && " for p in procs)
    limits = [f"--{_PRLIMIT_NAMES[res]}={soft}:{hard}" for res, soft, hard in rlimits]
    drop = [_SETPRIV, f"--reuid={user}", f"--regid={group}", "--clear-groups", "--pdeathsig=KILL", "--"] if user is not None else []
    script = f'{joins}unset PWD OLDPWD && exec "$@"'
    return [_SH, "-c", script, "pincer-spawn", _PRLIMIT, *limits, "--", *drop, *argv]


def _child_setup(join_fds: tuple[int, ...], rlimits: list[tuple[int, int, int]]) -> Callable[[], None]:
    # Runs between fork and exec: only system calls on values computed beforehand, since another
    # thread of the parent may have held a lock at fork time.
    def setup() -> None:
        for fd in join_fds:
            os.write(fd, b"0")
        for res, soft, hard in rlimits:
            resource.setrlimit(res, (soft, hard))

    return setup


class _Capture:
    def __init__(self, cap: int) -> None:
        self.cap, self.total, self.parts = cap, 0, bytearray()

    def feed(self, data: bytes) -> None:
        room = self.cap - len(self.parts)
        if room > 0:
            self.parts += data[:room]
        self.total += len(data)


class ProcessRun:
    """One execution; ``run()`` blocks, ``cancel()`` may be called from another thread."""

    def __init__(self, launch: Launch, limits: Limits, cgroup: RunCgroup | None) -> None:
        self.launch, self.limits, self.cgroup = launch, limits, cgroup
        self._proc: subprocess.Popen[bytes] | None = None
        self._cancelled = threading.Event()
        self._disk_full = False

    def cancel(self) -> None:
        self._cancelled.set()
        self._kill_tree()

    def _kill_tree(self) -> None:
        proc = self._proc
        if self.cgroup is not None:
            self.cgroup.kill()
        if proc is not None and proc.returncode is None:

            def kill_group() -> None:
                os.killpg(proc.pid, signal.SIGKILL)

            for send in (kill_group, proc.kill):
                try:
                    send()
                except (ProcessLookupError, PermissionError):
                    pass
        if self.launch.on_kill is not None:
            try:
                self.launch.on_kill()
            except Exception:
                logger.exception("backend kill hook failed")

    def run(self) -> RunResult:
        try:
            return self._run()
        finally:
            if self.launch.on_close is not None:
                try:
                    self.launch.on_close()
                except Exception:
                    logger.exception("backend close hook failed")

    def _run(self) -> RunResult:
        launch, limits = self.launch, self.limits
        if launch.watch is not None:
            # No single file may outgrow the watched directory between two measurements.
            limits = replace(limits, file_size_bytes=min(limits.file_size_bytes, launch.watch.max_bytes))
        rlimits = rlimits_for(limits, has_cgroup=self.cgroup is not None)
        join = self.cgroup.join_fds() if self.cgroup is not None else ()
        started = time.monotonic()
        deadline = started + limits.timeout_s
        spawn: dict[str, Any]
        if trampoline_available():
            procs = self.cgroup.procs_paths() if self.cgroup is not None else ()
            argv = trampoline_argv(launch.argv, procs=procs, rlimits=rlimits, user=launch.user, group=launch.group)
            spawn = {}
        else:
            argv = list(launch.argv)
            spawn = {
                "user": launch.user,
                "group": launch.group,
                "extra_groups": [] if launch.user is not None else None,
                "preexec_fn": _child_setup(join, rlimits),
            }
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(launch.env),
                cwd=launch.cwd,
                start_new_session=True,
                pass_fds=launch.pass_fds,
                close_fds=True,
                **spawn,
            )
        except OSError as exc:
            raise RuntimeUnavailable(
                f"cannot start {launch.argv[0]}: {exc}", hint="run `pincer sandbox doctor`"
            ) from exc
        finally:
            for fd in launch.pass_fds:
                os.close(fd)
        proc = self._proc
        out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
        timed_out = self._pump(proc, out, err, deadline)
        status = self._reap(proc)
        if self.cgroup is not None:
            self.cgroup.kill()  # nothing of the run outlives it
        duration_ms = (time.monotonic() - started) * 1000
        exit_code, sig = _decode(status, launch.backend)
        oom = self.cgroup.oom_kills() if self.cgroup else 0
        killed_by = None
        if self._disk_full:
            killed_by = "workdir_full"
        elif timed_out or self._cancelled.is_set():
            killed_by = "timeout"
        elif oom:
            killed_by = "memory"
        elif sig == signal.SIGXCPU:
            killed_by = "cpu"
        elif sig == signal.SIGXFSZ:
            killed_by = "file_size"
        return RunResult(
            exit_code=exit_code,
            signal=sig,
            stdout=bytes(out.parts),
            stderr=bytes(err.parts),
            stdout_total=out.total,
            stderr_total=err.total,
            killed_by=killed_by,
            duration_ms=duration_ms,
            backend=launch.backend,
            oom_kills=oom,
            pids_limit_hits=self.cgroup.pids_limit_hits() if self.cgroup else 0,
            memory_peak_bytes=self.cgroup.memory_peak_bytes() if self.cgroup else 0,
        )

    def _pump(self, proc: subprocess.Popen[bytes], out: _Capture, err: _Capture, deadline: float) -> bool:
        """Read both pipes until EOF. True when the deadline hit and the tree was killed."""
        assert proc.stdout is not None and proc.stderr is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        timed_out, exited_at = False, None
        watch, next_watch = self.launch.watch, time.monotonic()
        try:
            while sel.get_map():
                now = time.monotonic()
                if (now >= deadline or self._cancelled.is_set()) and not timed_out:
                    timed_out = True
                    self._kill_tree()
                    exited_at = now
                if watch is not None and exited_at is None and now >= next_watch:
                    next_watch = now + WATCH_INTERVAL_S
                    if disk_usage(watch.path, stop_above=watch.max_bytes) > watch.max_bytes:
                        self._disk_full = True
                        self._kill_tree()
                        exited_at = now
                if exited_at is None and proc.poll() is not None:
                    # The main process is gone but something still holds the pipes: a background
                    # child. The run is over; it goes too.
                    self._kill_tree()
                    exited_at = now
                if exited_at is not None and now - exited_at > DRAIN_AFTER_EXIT_S:
                    logger.warning("pipes still open %.1f s after the kill; giving up on them", DRAIN_AFTER_EXIT_S)
                    break
                wait = POLL_S if exited_at is not None else max(0.0, min(POLL_S, deadline - now))
                if watch is not None and exited_at is None:
                    wait = min(wait, max(0.0, next_watch - now))
                for key, _ in sel.select(wait):
                    data = os.read(key.fd, _READ_CHUNK)
                    if not data:
                        sel.unregister(key.fileobj)
                    else:
                        key.data.feed(data)
        finally:
            sel.close()
            proc.stdout.close()
            proc.stderr.close()
        return timed_out

    def _reap(self, proc: subprocess.Popen[bytes]) -> int:
        try:
            return proc.wait(timeout=DRAIN_AFTER_EXIT_S)
        except subprocess.TimeoutExpired:
            self._kill_tree()
            return proc.wait()


def _decode(returncode: int, backend: str) -> tuple[int | None, int | None]:
    """(exit code, signal). bwrap and container engines report a killed child as 128+signal; the
    host and Landlock backends exec the command itself, so a signal shows as a negative code."""
    if returncode < 0:
        return None, -returncode
    if backend not in ("host", "landlock") and 128 < returncode < 128 + 65:
        return returncode, returncode - 128
    return returncode, None


def execute(launch: Launch, limits: Limits, cgroup: RunCgroup | None) -> RunResult:
    """Run to completion (blocking)."""
    return ProcessRun(launch, limits, cgroup).run()


def describe(result: RunResult) -> dict[str, Any]:
    """The JSON value a script tool returns."""
    return {
        "exit_code": result.exit_code,
        "signal": result.signal,
        "killed_by": result.killed_by,
        "stdout": _text(result.stdout, result.stdout_total),
        "stderr": _text(result.stderr, result.stderr_total),
        "stdout_truncated": result.stdout_truncated,
        "stderr_truncated": result.stderr_truncated,
        "backend": result.backend,
    }


def _text(data: bytes, total: int) -> str:
    text = data.decode("utf-8", errors="replace")
    if total > len(data):
        text += f"\n[pincer: output truncated, {total - len(data)} more bytes not shown]"
    return text
