"""Script runtime: commands in a sandbox (bubblewrap; docker or podman when configured).

Public API::

    from pincer.runtimes.script import ScriptRuntime, ScriptSettings, load_manifest

    runtime = ScriptRuntime([load_manifest("wc.toml")], ScriptSettings())
"""

from pincer.runtimes.script.manifest import (
    Limits,
    Mount,
    NetworkMode,
    SandboxSpec,
    ScriptToolManifest,
    load_manifest,
    parse_manifest,
    render_command,
)
from pincer.runtimes.script.runtime import EXEC_TOOL, ScriptRuntime
from pincer.runtimes.script.settings import ScriptSettings

__all__ = [
    "EXEC_TOOL",
    "Limits",
    "Mount",
    "NetworkMode",
    "SandboxSpec",
    "ScriptRuntime",
    "ScriptSettings",
    "ScriptToolManifest",
    "load_manifest",
    "parse_manifest",
    "render_command",
]
