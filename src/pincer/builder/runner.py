"""The shared runner component: built once per pincer version, compiled once, cached.

``ensure_runner(cache_dir, home)`` returns the runner's ``.wasm``: ``cache_dir/pincer_runner-KEY.wasm``
(KEY hashes the runner guest, the guest helper, the WIT and componentize-py's version), built
with componentize-py the first time (~10-30 s), and makes sure the compile cache of ``home``
holds its precompiled artifact (compiled once into ``cache_dir/compiled`` and linked or copied
from there, so a new home does not pay the ~8 s compile again).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path

from pincer.runtimes.wasm.build import build_key, cached_build

__all__ = ["runner_guest", "ensure_runner", "runner_key", "default_cache_dir"]

logger = logging.getLogger(__name__)


def runner_guest() -> Path:
    return Path(__file__).resolve().parent / "guest" / "pincer_runner.py"


def runner_key() -> str:
    return build_key(runner_guest())


def default_cache_dir(home: Path) -> Path:
    return Path(home) / "cache" / "runner"


def ensure_runner(cache_dir: Path, home: Path) -> Path:
    """The runner component (built now when missing), with its compiled form in ``home``'s cache."""
    from pincer.runtimes.wasm import install as disk
    from pincer.runtimes.wasm.cache import CompileCache
    from pincer.runtimes.wasm.engine import new_engine

    cache_dir = Path(cache_dir)
    wasm = cached_build(runner_guest(), cache_dir)
    compiled = cache_dir / "compiled"
    home_cache = disk.cache_dir(home)
    probe = CompileCache(compiled, None)
    digest = hashlib.sha256(wasm.read_bytes()).hexdigest()
    entry = probe.entry_path(digest)
    if Path(home_cache).resolve() == compiled.resolve():
        if not entry.is_file():
            CompileCache(compiled, new_engine()).load(wasm.read_bytes(), source="the pincer runner")
        return wasm
    target = Path(home_cache) / entry.name
    if target.is_file():
        return wasm
    if not entry.is_file():
        CompileCache(compiled, new_engine()).load(wasm.read_bytes(), source="the pincer runner")
    Path(home_cache).mkdir(parents=True, exist_ok=True)
    for suffix in (".json", ".cwasm"):  # the artifact last: its presence is what a lookup sees
        _link_or_copy(entry.with_suffix(suffix), target.with_suffix(suffix))
    return wasm


def _link_or_copy(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, target)
