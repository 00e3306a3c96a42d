"""Installed WASM tools on disk: ``$PINCER_HOME/tools/wasm/{name}.wasm`` and, when given,
``{name}.capabilities.json`` beside it (IronClaw's layout), plus the compile cache under
``$PINCER_HOME/cache/wasm/``.

``read_source`` accepts a ``.wasm`` file (with an optional capabilities file) or an
IronClaw-style ``.tar.gz`` holding exactly ``{name}.wasm`` and optionally
``{name}.capabilities.json``. An install checks everything (name, manifest, component, WIT
version, ``schema()``/``description()``) before it writes a byte under the tools directory; the
files then appear by rename (capabilities first, the wasm last, since the wasm's presence is
what makes a tool installed). ``remove`` deletes both files and the tool's cache entry.

``remove`` here works on a home directory with no running runtime (the CLI); installing needs the
compiler, so it is :meth:`WasmHost.install_sync <pincer.runtimes.wasm.runtime.WasmHost.install_sync>`
(no runtime) or :class:`~pincer.runtimes.wasm.runtime.WasmRuntime` (registers the tool live). This
module imports neither: they import it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pincer.core.errors import ManifestError, ToolNotFound, UsageError
from pincer.store.jsonfile import write_bytes_atomic

if TYPE_CHECKING:
    import tarfile

    from pincer.core.capabilities import Capabilities
    from pincer.runtimes.wasm.limits import ToolLimits

__all__ = [
    "SourceFiles",
    "InstallResult",
    "tools_dir",
    "cache_dir",
    "read_source",
    "validate_name",
    "write_files",
    "remove_files",
    "remove",
    "installed_names",
    "MAX_WASM_BYTES",
    "MAX_CAPABILITIES_BYTES",
]

logger = logging.getLogger(__name__)

MAX_WASM_BYTES = 256 * 1024 * 1024
MAX_CAPABILITIES_BYTES = 1024 * 1024
_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_CAPS_SUFFIX = ".capabilities.json"

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceFiles:
    """What an install reads: the tool's name, its wasm bytes and its capabilities text."""

    name: str
    wasm: bytes
    capabilities: bytes | None
    origin: str


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallResult:
    name: str
    path: Path
    digest: str
    description: str
    input_schema: dict[str, Any]
    replaced: bool


def tools_dir(home: Path) -> Path:
    return Path(home) / "tools" / "wasm"


def cache_dir(home: Path) -> Path:
    return Path(home) / "cache" / "wasm"


def validate_name(name: str, *, origin: str = "") -> str:
    """A tool name: lower-case letters, digits, ``_`` and ``-``, starting with a letter, <= 64."""
    if not _NAME.fullmatch(name):
        where = f" (from {origin})" if origin else ""
        raise UsageError(
            f"{name!r} is not a valid tool name{where}",
            hint="use lower-case letters, digits, '_' or '-', starting with a letter; rename the file or pass --name",
        )
    return name


def installed_names(home: Path) -> list[str]:
    directory = tools_dir(home)
    if not directory.is_dir():
        return []
    return sorted(p.stem for p in directory.glob("*.wasm") if p.is_file() and _NAME.fullmatch(p.stem))


def _read_limited(path: Path, limit: int, what: str) -> bytes:
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}", hint="check the path") from None
    if len(data) > limit:
        raise UsageError(f"{what} {path} is larger than {limit:,} bytes", hint="this is not a tool file")
    return data


def read_source(source: Path, capabilities: Path | None = None, *, name: str | None = None) -> SourceFiles:
    """Read a ``.wasm`` (+ capabilities file) or an IronClaw ``.tar.gz`` bundle."""
    source = Path(source)
    if not source.is_file():
        raise UsageError(f"{source} does not exist", hint="pass a .wasm file or a .tar.gz bundle")
    if source.name.endswith((".tar.gz", ".tgz")):
        if capabilities is not None:
            raise UsageError("a .tar.gz bundle carries its own capabilities file", hint="drop --capabilities")
        return _read_bundle(source, name=name)
    if source.suffix != ".wasm":
        raise UsageError(
            f"{source} is neither a .wasm file nor a .tar.gz bundle", hint="build one with `pincer wasm build`"
        )
    tool_name = validate_name(name or source.stem, origin=str(source))
    wasm = _read_limited(source, MAX_WASM_BYTES, "component")
    caps_bytes = None
    if capabilities is None:
        sibling = source.with_name(source.stem + _CAPS_SUFFIX)
        if sibling.is_file():
            capabilities = sibling
    if capabilities is not None:
        caps_bytes = _read_limited(Path(capabilities), MAX_CAPABILITIES_BYTES, "capabilities file")
    return SourceFiles(name=tool_name, wasm=wasm, capabilities=caps_bytes, origin=str(source))


def _read_bundle(source: Path, *, name: str | None) -> SourceFiles:
    """Read members by name only: nothing is extracted, so no path in the archive is trusted."""
    import tarfile  # here: listing what is installed (every CLI start) must not load it

    try:
        with tarfile.open(source, "r:gz") as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            wasm_members = [m for m in members if m.name.endswith(".wasm")]
            if len(wasm_members) != 1:
                raise UsageError(
                    f"{source} holds {len(wasm_members)} .wasm files; a bundle holds exactly one",
                    hint="pack {name}.wasm and {name}.capabilities.json",
                )
            wasm_member = wasm_members[0]
            base = Path(wasm_member.name).name[: -len(".wasm")]
            caps_members = [m for m in members if Path(m.name).name == base + _CAPS_SUFFIX]
            if wasm_member.size > MAX_WASM_BYTES:
                raise UsageError(f"{source}: {wasm_member.name} is larger than {MAX_WASM_BYTES:,} bytes")
            wasm = _extract(tar, wasm_member)
            caps_bytes = None
            if caps_members:
                if caps_members[0].size > MAX_CAPABILITIES_BYTES:
                    raise UsageError(
                        f"{source}: {caps_members[0].name} is larger than {MAX_CAPABILITIES_BYTES:,} bytes"
                    )
                caps_bytes = _extract(tar, caps_members[0])
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UsageError(f"{source} is not a readable .tar.gz: {exc}", hint="pack it with `tar czf`") from None
    tool_name = validate_name(name or _strip_version(base), origin=str(source))
    return SourceFiles(name=tool_name, wasm=wasm, capabilities=caps_bytes, origin=str(source))


def _strip_version(base: str) -> str:
    # IronClaw release bundles name the wasm after the crate: "github-tool" -> "github".
    return base[: -len("-tool")] if base.endswith("-tool") else base


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    fh = tar.extractfile(member)
    if fh is None:
        raise UsageError(f"cannot read {member.name} from the bundle")
    with fh:
        return fh.read()


def parse_capabilities(files: SourceFiles) -> tuple[Capabilities | None, ToolLimits | None]:
    """The capabilities and limits the source's capabilities text declares (None: no text)."""
    from pincer.core.capabilities import Capabilities
    from pincer.runtimes.wasm.limits import parse_tool_limits

    if files.capabilities is None:
        return None, None
    source = f"{files.name}{_CAPS_SUFFIX}"
    caps = Capabilities.from_json(files.capabilities, source=source)
    try:
        raw = json.loads(files.capabilities)
    except ValueError:  # pragma: no cover - from_json refused it already
        raw = {}
    limits = parse_tool_limits(raw.get("limits") if isinstance(raw, dict) else None, source=source)
    if caps.wit_version is not None:
        from pincer.runtimes.wasm.wit import check_version

        try:
            check_version(caps.wit_version, source=source)
        except Exception as exc:  # noqa: BLE001
            raise ManifestError(str(exc), source=source, key="wit_version") from None
    return caps, limits


def write_files(home: Path, files: SourceFiles) -> tuple[Path, bool]:
    """Place the tool's files under ``tools_dir(home)``; returns (wasm path, replaced?)."""
    directory = tools_dir(home)
    directory.mkdir(parents=True, exist_ok=True)
    wasm_path = directory / f"{files.name}.wasm"
    caps_path = directory / f"{files.name}{_CAPS_SUFFIX}"
    replaced = wasm_path.exists()
    if files.capabilities is not None:
        write_bytes_atomic(caps_path, files.capabilities)
    else:
        caps_path.unlink(missing_ok=True)
    write_bytes_atomic(wasm_path, files.wasm)
    return wasm_path, replaced


def remove_files(home: Path, name: str) -> Path:
    """Delete a tool's files; ToolNotFound when it is not installed. Returns the wasm path."""
    validate_name(name)
    directory = tools_dir(home)
    wasm_path = directory / f"{name}.wasm"
    if not wasm_path.is_file():
        known = ", ".join(installed_names(home)) or "none"
        raise ToolNotFound(f"no WASM tool {name!r} is installed", hint=f"installed: {known}")
    wasm_path.unlink()
    (directory / f"{name}{_CAPS_SUFFIX}").unlink(missing_ok=True)
    return wasm_path


def remove(home: Path, name: str) -> Path:
    """Delete a tool's files and its compile cache entry (blocking); returns the wasm path."""
    from pincer.runtimes.wasm.cache import CompileCache, wasm_digest

    wasm_path = tools_dir(home) / f"{validate_name(name)}.wasm"
    digest = wasm_digest(wasm_path.read_bytes()) if wasm_path.is_file() else None
    path = remove_files(home, name)
    if digest is not None:
        CompileCache(cache_dir(home), None).drop(digest)
    return path
