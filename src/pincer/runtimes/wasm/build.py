"""Build a Python guest into a ``near:agent@0.3.0`` tool component with componentize-py.

``build_component(source, output)`` runs componentize-py against the bundled WIT, world
``sandboxed-tool``, with WASI stubbed (``-s``: the component imports only ``near:agent/host``)
and the guest helper :mod:`pincer_guest` on the guest's path. ``source`` is a Python file (its
stem is the module) or a directory holding ``tool.py`` (or the module named by ``module=``).

The output appears only when the build succeeds (written beside it, then renamed). Building
takes ~10-30 s and needs the ``componentize-py`` package (``pip install 'pincer[wasm-build]'``).
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from pincer.core.errors import RuntimeUnavailable, ToolTimeout, UsageError
from pincer.runtimes.wasm.wit import WORLD, wit_dir

__all__ = ["build_component", "guest_dir", "componentize_py_version", "BUILD_TIMEOUT_S"]

logger = logging.getLogger(__name__)

BUILD_TIMEOUT_S = 300.0
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STDERR_TAIL_CHARS = 2_000
# Runs componentize-py's entry point with this interpreter, so the package in the same
# environment as pincer is the one used (no reliance on PATH).
_LAUNCH = "import sys; from componentize_py import script; sys.argv[0] = 'componentize-py'; sys.exit(script())"


def guest_dir() -> Path:
    """The directory holding ``pincer_guest.py``, put on every guest's path."""
    return Path(__file__).resolve().parent / "guest"


def componentize_py_version() -> str | None:
    try:
        return importlib.metadata.version("componentize-py")
    except importlib.metadata.PackageNotFoundError:
        return None


def build_component(
    source: Path, output: Path, *, module: str | None = None, timeout_s: float = BUILD_TIMEOUT_S
) -> Path:
    """Build ``source`` into ``output``; returns ``output``. Raises UsageError for a bad source or
    a failed build (with componentize-py's message), RuntimeUnavailable without componentize-py."""
    source = Path(source)
    output = Path(output)
    if componentize_py_version() is None:
        raise RuntimeUnavailable(
            "componentize-py is not installed", hint="pip install 'pincer[wasm-build]' (componentize-py 0.25)"
        )
    if source.is_file():
        if source.suffix != ".py":
            raise UsageError(f"{source} is not a Python file", hint="pass a .py module or a directory holding tool.py")
        app_dir, app = source.parent, module or source.stem
    elif source.is_dir():
        app_dir, app = source, module or "tool"
        if not (source / f"{app}.py").is_file() and not (source / app / "__init__.py").is_file():
            raise UsageError(f"{source} has no {app}.py", hint="name the module with --module or add tool.py")
    else:
        raise UsageError(f"{source} does not exist", hint="pass a .py module or a directory holding tool.py")
    if not _MODULE.fullmatch(app) or app in ("wit_world", "pincer_guest"):
        raise UsageError(f"{app!r} cannot be a guest module name", hint="use a Python identifier other than wit_world")
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    args = [
        sys.executable, "-c", _LAUNCH,
        "-q", "-d", str(wit_dir()), "-w", WORLD,
        "componentize", "-s",
        "-p", str(app_dir.resolve()), "-p", str(guest_dir()),
        app, "-o", str(tmp),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the build imports the guest; leave no __pycache__ beside it
    try:
        try:
            proc = subprocess.run(
                args, cwd=app_dir, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            raise ToolTimeout(
                f"building {source} took longer than {timeout_s:.0f} s", hint="simplify the guest"
            ) from None
        if proc.returncode != 0 or not tmp.exists() or tmp.stat().st_size == 0:
            detail = (proc.stderr or proc.stdout or "").strip()[-_STDERR_TAIL_CHARS:]
            raise UsageError(
                f"componentize-py could not build {source} (exit {proc.returncode}):\n{detail}",
                hint="fix the guest module; it must define a @tool function and import Tool from pincer_guest",
            )
        os.replace(tmp, output)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("built %s from %s", output, source)
    return output


def build_key(source: Path) -> str:
    """A short hash of everything a build of ``source`` (a .py file) depends on."""
    import hashlib

    digest = hashlib.sha256()
    digest.update((componentize_py_version() or "none").encode())
    for path in (Path(source), guest_dir() / "pincer_guest.py", wit_dir() / "tool.wit"):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cached_build(source: Path, directory: Path) -> Path:
    """``directory/{stem}-{build_key}.wasm``, built now unless an identical build is there."""
    source = Path(source)
    output = Path(directory) / f"{source.stem}-{build_key(source)}.wasm"
    if not output.is_file():
        build_component(source, output)
    return output
