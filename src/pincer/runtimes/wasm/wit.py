"""The WIT contract pincer hosts (``near:agent@0.3.0``, world ``sandboxed-tool``) and version checks.

Compatibility follows semver as the component model uses it: a component targeting
``near:agent@X.Y.Z`` runs here when the major version equals ours, for 0.x the minor version
equals ours too, and it is not newer than what we implement. Anything else is refused with a
message naming both versions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from pincer.core.errors import RuntimeUnavailable

__all__ = [
    "HOST_WIT_VERSION",
    "HOST_INTERFACE",
    "TOOL_INTERFACE",
    "WORLD",
    "wit_dir",
    "parse_version",
    "check_version",
    "check_component_interfaces",
]

HOST_WIT_VERSION = (0, 3, 0)
_V = ".".join(map(str, HOST_WIT_VERSION))
HOST_INTERFACE = f"near:agent/host@{_V}"
TOOL_INTERFACE = f"near:agent/tool@{_V}"
WORLD = "sandboxed-tool"

_IFACE = re.compile(r"near:agent/(?P<iface>[a-z][a-z0-9-]*)@(?P<version>\S+)")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:[-+].*)?")


def wit_dir() -> Path:
    """The directory holding the bundled ``tool.wit`` (for componentize-py's ``-d``)."""
    return Path(str(resources.files("pincer.runtimes.wasm") / "wit"))


def parse_version(text: str) -> tuple[int, int, int] | None:
    m = _VERSION.fullmatch(text.strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def _show(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def check_version(text: str, *, source: str) -> tuple[int, int, int]:
    """The parsed version when a component or manifest for ``near:agent@text`` can run here."""
    version = parse_version(text)
    if version is None:
        raise RuntimeUnavailable(
            f"{source}: WIT version {text!r} is not a semantic version", hint=f"this host implements near:agent@{_V}"
        )
    major, minor, _ = version
    compatible = (
        major == HOST_WIT_VERSION[0] and (major > 0 or minor == HOST_WIT_VERSION[1]) and version <= HOST_WIT_VERSION
    )
    if not compatible:
        raise RuntimeUnavailable(
            f"{source} was built for near:agent@{_show(version)} but this host implements near:agent@{_V}",
            hint=f"rebuild the tool against near:agent@{_V} (`pincer wasm build` uses the bundled WIT)",
        )
    return version


def check_component_interfaces(imports: Iterable[str], exports: Iterable[str], *, source: str) -> bool:
    """Refuse a component whose ``near:agent`` interfaces are missing or of another version.

    Returns True when the component imports WASI (a wasm32-wasip2 build, as IronClaw's Rust
    tools are): the host then gives it an empty WASI context."""
    exports = list(exports)
    tool_versions = [m["version"] for e in exports if (m := _IFACE.fullmatch(e)) and m["iface"] == "tool"]
    if not tool_versions:
        raise RuntimeUnavailable(
            f"{source} does not export near:agent/tool (exports: {', '.join(exports) or 'none'})",
            hint=f"build it for world {WORLD} of near:agent@{_V}",
        )
    for version in tool_versions:
        check_version(version, source=source)
    needs_wasi = False
    for name in imports:
        m = _IFACE.fullmatch(name)
        if m and m["iface"] == "host":
            check_version(m["version"], source=source)
        elif name.startswith("wasi:"):
            needs_wasi = True
        else:
            raise RuntimeUnavailable(
                f"{source} imports {name}, which this host does not provide",
                hint=f"a tool may import only near:agent/host@{_V} (and WASI)",
            )
    return needs_wasi
