"""`/bin/true` through pincer's sandbox against a plain subprocess, measured in the same run.

    .venv/bin/python bench/sandbox.py [--runs 200]

For each working backend it prints p50/p90 of (a) the backend alone (launch + limits + cgroup +
capped output, a reused workdir) and (b) a full ScriptRuntime.invoke of a script tool (scratch
directory, cgroup, teardown), with the added p50 over the plain subprocess. Target: at most 15 ms
of added p50 with bubblewrap. The Landlock row starts a system ``python3 -I -S`` launcher per run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from pincer.core.values import HostContext
from pincer.runtimes.script import ScriptRuntime, ScriptSettings, parse_manifest
from pincer.runtimes.script.backends import Backend, BwrapBackend, HostBackend
from pincer.runtimes.script.cgroups import RunCgroup, detect_cgroups
from pincer.runtimes.script.detect import bwrap_candidates, landlock_backend, probe_bwrap, probe_landlock
from pincer.runtimes.script.manifest import Limits
from pincer.runtimes.script.process import RunRequest, execute
from pincer.runtimes.script.workdir import new_workdir, remove_workdir

LIMITS = Limits(timeout_s=10)
WARMUP = 10


def timed(fn: Callable[[], object], runs: int) -> list[float]:
    for _ in range(WARMUP):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def pct(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1]


def backend_run(backend: Backend, settings: ScriptSettings) -> Callable[[], object]:
    workdir = new_workdir(settings.scratch(), uid=settings.sandbox_uid, gid=settings.sandbox_gid)
    support = detect_cgroups()

    def run() -> object:
        cgroup = RunCgroup(support, memory_bytes=LIMITS.memory_bytes, pids_max=LIMITS.pids) if support.is_usable else None
        try:
            result = execute(backend.launch(RunRequest(argv=("/bin/true",), workdir=workdir, limits=LIMITS)), LIMITS, cgroup)
        finally:
            if cgroup is not None:
                cgroup.close()
        assert result.exit_code == 0, result.stderr
        return result

    run.workdir = workdir  # type: ignore[attr-defined]
    return run


def runtime_run(settings: ScriptSettings) -> Callable[[], object]:
    tool = parse_manifest({"name": "true", "command": ["/bin/true"]}, source="bench")
    runtime = ScriptRuntime([tool], settings, include_exec=False)
    spec = runtime.tools()[0]
    host = HostContext(session="main" if settings.main_session_on_host else "bench", tool="true")

    def run() -> object:
        out = anyio.run(runtime.invoke, spec, {}, host)
        assert out.value["exit_code"] == 0, out.value
        return out

    return run


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="pincer-bench-"))
    scratch.chmod(0o755)
    base = ScriptSettings(scratch_root=scratch / "scratch")
    baseline = timed(lambda: subprocess.run(["/bin/true"], check=True), args.runs)
    b50, b90 = pct(baseline, 50), pct(baseline, 90)
    print(f"runs per row: {args.runs}; cgroups: {detect_cgroups().version}")
    print(f"{'path':52} {'p50 ms':>8} {'p90 ms':>8} {'added p50':>10} {'ratio':>6}")
    print(f"{'plain subprocess /bin/true (baseline)':52} {b50:8.2f} {b90:8.2f} {0:10.2f} {1:6.2f}")
    rows: list[tuple[str, Callable[[], object]]] = []
    for label, path in bwrap_candidates(base):
        report = probe_bwrap(label, path, base)
        if not report.available:
            print(f"{report.name}: unavailable ({report.reason})")
            continue
        settings = ScriptSettings(scratch_root=base.scratch_root, bwrap_path=path, backend="bwrap")
        runs = Path(report.copy) if report.copy else path  # the root-owned copy when the uid cannot reach path
        rows.append((f"{report.name} {report.version}: backend", backend_run(BwrapBackend(bwrap=runs), settings)))
        rows.append((f"{report.name}: ScriptRuntime.invoke", runtime_run(settings)))
    landlock = ScriptSettings(scratch_root=base.scratch_root, backend="landlock")
    report = probe_landlock(landlock)
    backend = landlock_backend(landlock)
    if report.available and backend is not None:
        rows.append((f"landlock+seccomp ({report.version}): backend", backend_run(backend, landlock)))
        rows.append(("landlock+seccomp: ScriptRuntime.invoke", runtime_run(landlock)))
    else:
        print(f"landlock+seccomp: unavailable ({report.reason})")
    host = ScriptSettings(scratch_root=base.scratch_root, main_session_on_host=True)
    rows.append(("host (main session, no sandbox): backend", backend_run(HostBackend(), host)))
    rows.append(("host (main session, no sandbox): ScriptRuntime.invoke", runtime_run(host)))
    for name, fn in rows:
        samples = timed(fn, args.runs)
        p50, p90 = pct(samples, 50), pct(samples, 90)
        print(f"{name:52} {p50:8.2f} {p90:8.2f} {p50 - b50:10.2f} {p50 / b50:6.2f}")
        workdir = getattr(fn, "workdir", None)
        if workdir is not None:
            remove_workdir(workdir)
    print("docker/podman rows appear when an engine works and container_image is configured (not on this machine).")


if __name__ == "__main__":
    main()
