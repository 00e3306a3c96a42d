"""The shared runner component: built once per machine and pincer version, compiled once, cached.

``ensure_runner(cache_dir, home)`` returns the runner's ``.wasm``: ``cache_dir/pincer_runner-KEY.wasm``
(KEY hashes the runner guest, the guest helper, the WIT and componentize-py's version), built
with componentize-py the first time (~10-30 s), and makes sure the compile cache of ``home``
holds its precompiled artifact (compiled once into ``cache_dir/compiled`` and linked or copied
from there, so a new home does not pay the ~8 s compile again).

The cache lives outside any home (``default_cache_dir``: the XDG cache folder), so every home
of a user shares one build, and ``make setup`` builds it ahead (``pincer builds
prepare``). Because it is shared, it is checked at every load: the folder must
belong to this user and be writable by nobody else (another user could otherwise plant a
runner every build runs), and the ``.wasm`` must match the sha256 written beside it when it was
built (a cut or corrupted file is rebuilt, not run).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pincer.runtimes.wasm import build_key, cached_build

__all__ = ["runner_guest", "ensure_runner", "runner_key", "default_cache_dir", "is_runner_built", "prepare_runner", "RUNNER_CACHE_ENV"]

# Points the runner cache elsewhere (a CI cache, a shared volume of one user).
RUNNER_CACHE_ENV = "PINCER_RUNNER_CACHE"

logger = logging.getLogger(__name__)


def runner_guest() -> Path:
    return Path(__file__).resolve().parent / "guest" / "pincer_runner.py"


def runner_key() -> str:
    return build_key(runner_guest())


def default_cache_dir(environ: Mapping[str, str], home: Path) -> Path:
    """The machine's runner cache for this user: ``PINCER_RUNNER_CACHE``, else
    ``$XDG_CACHE_HOME/pincer/runner``, else ``~/.cache/pincer/runner``; ``home``'s own cache
    folder only when the environment names no home directory at all."""
    named = environ.get(RUNNER_CACHE_ENV)
    if named:
        return Path(named)
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative value is to be ignored
        return Path(xdg) / "pincer" / "runner"
    user_home = environ.get("HOME")
    if user_home and Path(user_home).is_absolute():
        return Path(user_home) / ".cache" / "pincer" / "runner"
    return Path(home) / "cache" / "runner"


def _runner_path(cache_dir: Path) -> Path:
    return Path(cache_dir) / f"{runner_guest().stem}-{runner_key()}.wasm"


def _digest_path(wasm: Path) -> Path:
    return wasm.with_name(wasm.name + ".sha256")


def is_runner_built(cache_dir: Path) -> bool:
    """Whether the runner of this pincer version is in ``cache_dir`` (no build needed)."""
    return _runner_path(cache_dir).is_file()


def _checked_cache_dir(cache_dir: Path) -> Path:
    """Create the folder 0700; refuse one another user owns or others may write."""
    from pincer.core.errors import PincerError

    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = cache_dir.stat()
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PincerError(
            f"the runner cache {cache_dir} belongs to another user (uid {info.st_uid})",
            hint=f"point {RUNNER_CACHE_ENV} at a folder of your own, or remove {cache_dir}",
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PincerError(
            f"the runner cache {cache_dir} is writable by others (mode {stat.filemode(info.st_mode)})",
            hint=f"chmod 700 {cache_dir}",
        )
    return cache_dir


@contextmanager
def _cache_lock(cache_dir: Path) -> Iterator[None]:
    """One process at a time checks and builds in ``cache_dir``: builds are not reproducible
    byte for byte, so two racing builds would leave one's file beside the other's digest."""
    import fcntl

    with open(cache_dir / ".lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _verified_build(cache_dir: Path) -> Path:
    """The built runner whose bytes match the digest recorded at its build; built (again) when
    missing, unrecorded or different."""
    with _cache_lock(cache_dir):
        return _verified_build_locked(cache_dir)


def _verified_build_locked(cache_dir: Path) -> Path:
    wasm = _runner_path(cache_dir)
    recorded = _digest_path(wasm)
    if wasm.is_file():
        expected = recorded.read_text(encoding="ascii").strip() if recorded.is_file() else ""
        if expected and hashlib.sha256(wasm.read_bytes()).hexdigest() == expected:
            return wasm
        logger.warning("the runner in %s does not match its recorded digest: building it again", cache_dir)
        wasm.unlink()
    wasm = cached_build(runner_guest(), cache_dir)
    tmp = recorded.with_name(f".{recorded.name}.{os.getpid()}.tmp")
    tmp.write_text(hashlib.sha256(wasm.read_bytes()).hexdigest() + "\n", encoding="ascii")
    os.replace(tmp, recorded)
    return wasm


def ensure_runner(cache_dir: Path, home: Path) -> Path:
    """The runner component (built now when missing), with its compiled form in ``home``'s cache."""
    from pincer.runtimes.wasm import cache_dir as home_cache_dir
    from pincer.runtimes.wasm import compile_into, compiled_entry

    cache_dir = _checked_cache_dir(Path(cache_dir))
    wasm = _verified_build(cache_dir)
    compiled = cache_dir / "compiled"
    home_cache = home_cache_dir(home)
    digest = hashlib.sha256(wasm.read_bytes()).hexdigest()
    entry = compiled_entry(compiled, digest)
    if Path(home_cache).resolve() == compiled.resolve():
        if not entry.is_file():
            compile_into(compiled, wasm.read_bytes(), source="the pincer runner")
        return wasm
    target = Path(home_cache) / entry.name
    if target.is_file():
        return wasm
    if not entry.is_file():
        compile_into(compiled, wasm.read_bytes(), source="the pincer runner")
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


def prepare_runner(cache_dir: Path) -> tuple[Path, bool]:
    """Build the runner into ``cache_dir`` unless it is there and verified: (its path, whether
    it was built now). What ``pincer builds prepare`` (and ``make setup``) run."""
    was_built = is_runner_built(cache_dir)
    wasm = _verified_build(_checked_cache_dir(Path(cache_dir)))
    return wasm, not was_built
