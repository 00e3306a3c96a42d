"""What ``/proc`` says of a benchmark's server processes: CPU seconds and memory (Linux; 0 elsewhere
or once the process is gone)."""

from __future__ import annotations

import os
from pathlib import Path

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().decode("ascii", "replace").rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _field_kib(path: str, name: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def rss_kib(pid: int) -> int:
    """Resident set size: every page the process has in memory, shared ones included."""
    return _field_kib(f"/proc/{pid}/status", "VmRSS:")


def pss_kib(pid: int) -> int:
    """Proportional set size: a page shared by N processes counts 1/N in each."""
    return _field_kib(f"/proc/{pid}/smaps_rollup", "Pss:")
