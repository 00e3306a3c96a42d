"""Per-run control groups: the memory and process-count limits, and a kill that reaches every process.

Works with what the host has: a pure cgroup v2 tree, a v1 tree (memory and pids controllers mounted
separately), or a hybrid of the two (v1 controllers plus a v2 tree used only for ``cgroup.kill``).
Each run gets its own group *inside the cgroup pincer itself runs in*, so whatever limit the host put
on pincer still covers its children.

The child joins its groups between fork and exec by writing ``0`` to ``cgroup.procs`` files that the
parent opened (as root) beforehand: the kernel checks the opener's permission, so the write still works
after the child dropped to the unprivileged sandbox uid, and no process of the run ever starts outside.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pincer.core.errors import RuntimeUnavailable

__all__ = ["CgroupSupport", "RunCgroup", "detect_cgroups"]

logger = logging.getLogger(__name__)

CGROUP_REMOVE_TIMEOUT_S = 2.0
STALE_CGROUP_AGE_S = 300.0  # an empty run group this old was left by a pincer that was killed
CGROUP_KILL_ROUNDS = 50  # v1 has no cgroup.kill: kill what is listed, again, until the group is empty
_POLL_S = 0.001



@dataclass(frozen=True, kw_only=True, slots=True)
class CgroupSupport:
    """Where per-run groups can be created, or why they cannot."""

    version: str  # "v2" | "v1" | "none"
    memory_dir: Path | None = None
    pids_dir: Path | None = None
    kill_dir: Path | None = None  # a v2 directory whose children have cgroup.kill
    reason: str = ""

    @property
    def is_usable(self) -> bool:
        return self.memory_dir is not None and self.pids_dir is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "version": self.version,
            "memory": str(self.memory_dir) if self.memory_dir else None,
            "pids": str(self.pids_dir) if self.pids_dir else None,
            "kill": str(self.kill_dir) if self.kill_dir else None,
            "reason": self.reason,
        }


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    found: list[tuple[str, str, set[str]]] = []
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return found
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3:
            continue
        if rfields[0] in ("cgroup", "cgroup2") and fields[3] == "/":
            found.append((fields[4], rfields[0], set(rfields[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """Controller name (or "" for v2) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return paths
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            paths[controller] = parts[2]
    return paths


def _join(mount: str, path: str) -> Path:
    return Path(mount) / path.lstrip("/")


@functools.cache
def detect_cgroups() -> CgroupSupport:
    """Find writable memory and pids hierarchies; cached for the life of the process. The first
    call also removes run groups a killed pincer left behind."""
    support = _detect()
    sweep_stale(support)
    return support


def sweep_stale(support: CgroupSupport, *, older_than_s: float = STALE_CGROUP_AGE_S) -> int:
    """Remove empty ``pincer-*`` groups older than ``older_than_s``; returns how many went."""
    removed = 0
    now = time.time()
    for parent in {support.memory_dir, support.pids_dir, support.kill_dir} - {None}:
        try:
            candidates = list(parent.glob("pincer-*"))  # type: ignore[union-attr]
        except OSError:
            continue
        for group in candidates:
            try:
                if now - group.stat().st_mtime < older_than_s or (group / "cgroup.procs").read_text().strip():
                    continue
                group.rmdir()
                removed += 1
            except OSError:
                continue
    return removed


def _detect() -> CgroupSupport:
    mounts, own = _mounts(), _own_paths()
    v2_dir: Path | None = None
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and "" in own:
            candidate = _join(point, own[""])
            if candidate.is_dir():
                v2_dir = candidate
    kill_dir = v2_dir if v2_dir and (v2_dir / "cgroup.procs").exists() and os.access(v2_dir, os.W_OK) else None
    v1: dict[str, Path] = {}
    for point, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        for controller in ("memory", "pids"):
            if controller in options and controller in own:
                v1[controller] = _join(point, own[controller])
    if "memory" in v1 and "pids" in v1:
        missing = [str(d) for d in v1.values() if not os.access(d, os.W_OK)]
        if missing:
            return CgroupSupport(version="none", reason=f"cgroup v1 directories not writable: {', '.join(missing)}")
        return CgroupSupport(
            version="v1", memory_dir=v1["memory"], pids_dir=v1["pids"], kill_dir=kill_dir, reason="cgroup v1 memory+pids"
        )
    if v2_dir is not None:
        return _v2_support(v2_dir)
    return CgroupSupport(version="none", reason="no cgroup memory and pids controllers are mounted")


def _v2_support(own: Path) -> CgroupSupport:
    if not os.access(own, os.W_OK):
        return CgroupSupport(version="none", reason=f"cgroup v2 directory {own} is not writable (no delegation)")
    try:
        enabled = set((own / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            (own / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError as exc:
        return CgroupSupport(
            version="none",
            reason=f"cannot enable memory and pids for children of {own}: {exc.strerror} "
            "(a v2 group holding processes cannot delegate; run pincer in its own scope, e.g. systemd-run --scope -p Delegate=yes)",
        )
    return CgroupSupport(version="v2", memory_dir=own, pids_dir=own, kill_dir=own, reason="cgroup v2 memory+pids")


def _read_key(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


class RunCgroup:
    """The groups of one run. ``join_fds()`` go to the child; ``close()`` kills and removes."""

    def __init__(self, support: CgroupSupport, *, memory_bytes: int, pids_max: int) -> None:
        if not support.is_usable:
            raise RuntimeUnavailable(f"no usable cgroups: {support.reason}", hint="run `pincer sandbox doctor`")
        self.support = support
        name = f"pincer-{uuid.uuid4().hex[:12]}"
        dirs: list[Path] = []
        for parent in (support.memory_dir, support.pids_dir, support.kill_dir):
            if parent is not None and (parent / name) not in dirs:
                dirs.append(parent / name)
        self.dirs = dirs
        self.memory = support.memory_dir / name  # type: ignore[operator]
        self.pids = support.pids_dir / name  # type: ignore[operator]
        self.kill_path = support.kill_dir / name / "cgroup.kill" if support.kill_dir else None
        self._fds: list[int] = []
        try:
            for d in dirs:
                d.mkdir()
            self._limit(memory_bytes, pids_max)
            self._fds = [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in dirs]
        except OSError as exc:
            self.close()
            raise RuntimeUnavailable(
                f"cannot set up the run's cgroup: {exc}", hint="run `pincer sandbox doctor` to see what works here"
            ) from exc

    def _limit(self, memory_bytes: int, pids_max: int) -> None:
        if self.support.version == "v2":
            (self.memory / "memory.max").write_text(str(memory_bytes))
            swap = self.memory / "memory.swap.max"
            if swap.exists():
                swap.write_text("0")
        else:
            (self.memory / "memory.limit_in_bytes").write_text(str(memory_bytes))
            memsw = self.memory / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # without it a hog pushes pages to swap instead of being killed
                memsw.write_text(str(memory_bytes))
        (self.pids / "pids.max").write_text(str(pids_max))

    def procs_paths(self) -> tuple[Path, ...]:
        """The ``cgroup.procs`` files a starting process (still root) writes ``0`` to."""
        return tuple(d / "cgroup.procs" for d in self.dirs)

    def join_fds(self) -> tuple[int, ...]:
        """Fds the child writes ``b"0"`` to, before exec, to join every group of the run."""
        return tuple(self._fds)

    def oom_kills(self) -> int:
        if self.support.version == "v2":
            return _read_key(self.memory / "memory.events", "oom_kill")
        return _read_key(self.memory / "memory.oom_control", "oom_kill")

    def pids_limit_hits(self) -> int:
        return _read_key(self.pids / "pids.events", "max")

    def memory_peak_bytes(self) -> int:
        name = "memory.peak" if self.support.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((self.memory / name).read_text().strip())
        except (OSError, ValueError):
            return 0

    def members(self) -> list[int]:
        """Host pids still in the run's pids group."""
        return self._members()

    def kill(self) -> None:
        """SIGKILL every process of the run, including ones that left their session or process group."""
        if self.kill_path is not None and self.kill_path.exists():
            try:
                self.kill_path.write_text("1")
            except OSError as exc:
                logger.warning("cgroup.kill failed: %s", exc)
        for _ in range(CGROUP_KILL_ROUNDS):
            members = self._members()
            if not members:
                return
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(_POLL_S)

    def _members(self) -> list[int]:
        try:
            return [int(p) for p in (self.pids / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def close(self) -> None:
        """Kill what is left, close the join fds, remove the groups. Safe to call twice."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self.kill()
        deadline = time.monotonic() + CGROUP_REMOVE_TIMEOUT_S
        for d in reversed(self.dirs):
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        logger.warning("could not remove cgroup %s", d)
                        break
                    time.sleep(_POLL_S)
