"""Tools that run in pincer's shared runner component: a source file instead of a component.

A runner tool is installed like any WASM tool (``tools/wasm/NAME.wasm`` -> the artifact's
files), but its ``NAME.wasm`` is the shared runner (:mod:`pincer.builder.runner`) and two files
sit beside it::

    NAME.py          the tool's Python source (written against pincer_guest)
    NAME.built.json  {"runner": 1, "source_sha256": "...", "description": "...", "input_schema": {...}}

The runtime reads both when it loads the tool; the source must hash to ``source_sha256`` (and
the hub's lock fingerprint covers all of ``NAME.wasm``, ``NAME.py``, ``NAME.built.json`` and the
capabilities file, so an edit on disk is refused before this is read). Each call hands the
verified source to the runner in the request's ``context`` field: the runner's world is the
ordinary ``sandboxed-tool``, so no host function of ours is needed and the same linker, limits
and host imports apply as to any component.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pincer.core.errors import RuntimeUnavailable

__all__ = ["RunnerSource", "read_runner_source", "runner_context", "source_sha256", "BUILT_SUFFIX", "RUNNER_PROTOCOL",
           "MAX_SOURCE_BYTES"]  # fmt: skip

BUILT_SUFFIX = ".built.json"
RUNNER_PROTOCOL = 1
MAX_SOURCE_BYTES = 256 * 1024


def source_sha256(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class RunnerSource:
    """A runner tool's verified source and the description and schema recorded at build time."""

    source: str
    sha256: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        """Refuse a source whose bytes no longer hash to what was verified (defence in depth)."""
        if source_sha256(self.source) != self.sha256:
            raise RuntimeUnavailable("a runner tool's source changed in memory", hint="`pincer verify --fix` reinstalls it, or `pincer remove tools/NAME`")


def runner_context(tool: RunnerSource, *, op: str = "execute") -> str:
    """The request ``context`` that hands ``tool``'s source to the runner."""
    return json.dumps({"pincer_runner": {"source": tool.source, "sha256": tool.sha256, "op": op}})


def read_runner_source(wasm: Path, name: str) -> RunnerSource | None:
    """The runner source beside ``wasm`` (the link's target), or None for an ordinary component.
    Raises RuntimeUnavailable when the files are there but do not agree."""
    folder = Path(wasm).parent
    manifest_path = folder / f"{name}{BUILT_SUFFIX}"
    if not manifest_path.is_file():
        return None
    where = f"{name}{BUILT_SUFFIX}"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        raw = (folder / f"{name}.py").read_bytes()
        text = raw.decode("utf-8", "strict")
    except (OSError, ValueError) as exc:
        raise RuntimeUnavailable(f"runner tool {name!r}: cannot read {where} or {name}.py ({type(exc).__name__})",
                                 hint="`pincer verify` names what changed; `pincer remove tools/NAME` removes it") from None  # fmt: skip
    if not isinstance(manifest, dict) or manifest.get("runner") != RUNNER_PROTOCOL:
        raise RuntimeUnavailable(f"runner tool {name!r}: {where} is not a runner manifest of protocol {RUNNER_PROTOCOL}",
                                 hint="build it again with this pincer, or `pincer remove tools/NAME`")  # fmt: skip
    if len(raw) > MAX_SOURCE_BYTES:
        raise RuntimeUnavailable(f"runner tool {name!r}: {name}.py is larger than {MAX_SOURCE_BYTES:,} bytes")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != manifest.get("source_sha256"):
        raise RuntimeUnavailable(
            f"runner tool {name!r}: {name}.py does not hash to the source_sha256 in {where}; refusing to run it",
            hint="the source was edited after the build; `pincer verify` shows it, `pincer remove tools/NAME` removes it",
        )
    schema = manifest.get("input_schema")
    description = manifest.get("description")
    return RunnerSource(
        source=text,
        sha256=digest,
        description=description if isinstance(description, str) else "",
        input_schema=schema if isinstance(schema, dict) else {"type": "object"},
    )
