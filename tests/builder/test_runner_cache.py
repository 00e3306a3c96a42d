"""The runner is built once per machine into a cache outside every home, and checked at load."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pincer.builder.runner import (
    _digest_path,
    _runner_path,
    _verified_build,
    default_cache_dir,
    ensure_runner,
    is_runner_built,
    prepare_runner,
)
from pincer.core.errors import PincerError


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"PINCER_RUNNER_CACHE": "/ci/runner", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/ci/runner"),
        ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/pincer/runner"),
        ({"XDG_CACHE_HOME": "relative/x", "HOME": "/h"}, "/h/.cache/pincer/runner"),  # XDG: relative is ignored
        ({"HOME": "/h"}, "/h/.cache/pincer/runner"),
        ({}, "/pincer-home/cache/runner"),
    ],
)
def test_the_cache_is_the_users_not_the_homes(environ, expected) -> None:
    assert default_cache_dir(environ, Path("/pincer-home")) == Path(expected)


def _copy_cache(runner_cache: Path, target: Path) -> Path:
    target.mkdir(mode=0o700)
    wasm = _runner_path(runner_cache)
    shutil.copy2(wasm, _runner_path(target))
    shutil.copy2(_digest_path(wasm), _digest_path(_runner_path(target)))
    return target


def test_two_homes_share_one_build(tmp_path, runner_cache) -> None:
    cache = _copy_cache(runner_cache, tmp_path / "cache")
    before = _runner_path(cache).stat().st_mtime_ns
    for home in ("home-a", "home-b"):
        assert ensure_runner(cache, tmp_path / home) == _runner_path(cache)
    assert _runner_path(cache).stat().st_mtime_ns == before  # nothing was built again
    assert prepare_runner(cache) == (_runner_path(cache), False)


def test_a_cache_others_may_write_is_refused(tmp_path, runner_cache) -> None:
    cache = _copy_cache(runner_cache, tmp_path / "cache")
    cache.chmod(0o777)
    with pytest.raises(PincerError, match="writable by others") as caught:
        ensure_runner(cache, tmp_path / "home")
    assert caught.value.hint == f"chmod 700 {cache}"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown to another user needs root")
def test_a_cache_another_user_owns_is_refused(tmp_path, runner_cache) -> None:
    cache = _copy_cache(runner_cache, tmp_path / "cache")
    os.chown(cache, 4242, 4242)
    with pytest.raises(PincerError, match="belongs to another user"):
        ensure_runner(cache, tmp_path / "home")


@pytest.mark.slow
def test_a_runner_that_does_not_match_its_digest_is_rebuilt_not_run(tmp_path, runner_cache) -> None:
    cache = _copy_cache(runner_cache, tmp_path / "cache")
    planted = b"\x00asm planted by someone else"
    _runner_path(cache).write_bytes(planted)
    wasm = _verified_build(cache)
    rebuilt = wasm.read_bytes()
    assert rebuilt != planted
    assert _digest_path(wasm).read_text().strip() == hashlib.sha256(rebuilt).hexdigest()


def test_pincer_builds_prepare_says_where_and_builds_nothing_twice(tmp_path, runner_cache) -> None:
    cache = _copy_cache(runner_cache, tmp_path / "cache")
    env = dict(os.environ, PINCER_HOME=str(tmp_path / "home"), PINCER_RUNNER_CACHE=str(cache))
    pincer = Path(sys.executable).with_name("pincer")
    done = subprocess.run([str(pincer), "builds", "prepare", "--json"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True, "runner": str(_runner_path(cache)), "built": False}
    human = subprocess.run([str(pincer), "builds", "prepare"], env=env, capture_output=True, text=True, timeout=120,
                           check=False)  # fmt: skip
    assert human.returncode == 0 and f"runner cache: {cache}" in human.stderr and "already built" in human.stderr
    assert is_runner_built(cache)
