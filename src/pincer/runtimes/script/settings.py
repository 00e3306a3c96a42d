"""Settings of the script runtime: which sandbox, where scratch directories live, exec policy."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from pincer.config import SandboxSettings
from pincer.core.errors import ConfigError
from pincer.policy.exec_approvals import ExecApprovalPolicy
from pincer.runtimes.script.manifest import Limits, NetworkMode

__all__ = ["ScriptSettings", "BACKEND_CHOICES", "DEFAULT_WORKDIR_MAX_BYTES"]

_SANDBOX = SandboxSettings()  # [sandbox]'s defaults and choices, written once in pincer.config
BACKEND_CHOICES: tuple[str, ...] = get_args(SandboxSettings.model_fields["backend"].annotation)
DEFAULT_WORKDIR_MAX_BYTES = _SANDBOX.workdir_max_bytes
MIN_WORKDIR_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptSettings:
    """``backend``: ``auto`` tries docker/podman when ``container_image`` is set, then bubblewrap,
    then Landlock + seccomp + rlimits (Linux, no namespaces); a named backend is the only one tried.
    ``main_session_on_host``: the main session's script tools run on the host, unsandboxed (limits
    still apply); every other session is always sandboxed. ``sandbox_uid``/``gid``: the unprivileged
    host uid a sandbox runs as when pincer is root. ``workdir_max_bytes``: the total a run may put in
    its scratch ``/work`` (config ``[sandbox] workdir_max_bytes``; how each backend enforces it is in
    ``docs/script-runtime.md``); not applied to the workspace (``use_workspace``)."""

    backend: str = _SANDBOX.backend
    main_session_on_host: bool = False
    use_workspace: bool = False  # mount the session's workspace at /work instead of a scratch dir
    workdir_max_bytes: int = DEFAULT_WORKDIR_MAX_BYTES
    sandbox_uid: int = 65534
    sandbox_gid: int = 65534
    scratch_root: Path | None = None
    bwrap_path: Path | None = None
    container_engine: str | None = None  # "docker" | "podman"; None: whichever works
    container_image: str | None = None
    container_args: tuple[str, ...] = ()
    exec_limits: Limits = field(default_factory=Limits)
    exec_network: NetworkMode = NetworkMode.NONE
    exec_policy: ExecApprovalPolicy = field(default_factory=ExecApprovalPolicy)

    def __post_init__(self) -> None:
        if self.backend not in BACKEND_CHOICES:
            raise ConfigError(
                f"unknown script backend {self.backend!r}", hint=f"use one of {', '.join(BACKEND_CHOICES)}"
            )
        if self.container_engine not in (None, "docker", "podman"):
            raise ConfigError(f"unknown container engine {self.container_engine!r}", hint='use "docker" or "podman"')
        if self.exec_network is NetworkMode.ALLOWLIST:
            raise ConfigError("the exec tool cannot use an allowlist network", hint='use "none" or "host"')
        if self.workdir_max_bytes < MIN_WORKDIR_MAX_BYTES:
            raise ConfigError(
                f"workdir_max_bytes {self.workdir_max_bytes} is below {MIN_WORKDIR_MAX_BYTES}",
                hint="set [sandbox] workdir_max_bytes to at least 1048576 (1 MiB)",
            )

    def scratch(self) -> Path:
        """Parent of the per-run work directories; the sandbox uid must be able to traverse it."""
        return self.scratch_root or Path(tempfile.gettempdir()) / "pincer-scratch"
