"""Shared fixtures: every test gets its own PINCER_HOME and never touches the user's."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import compat_threading
from tests.leaks import file_leaves_nothing_behind  # noqa: F401 -- an autouse fixture of every file

# A thread started while another installs coverage's tracer must not die of CPython 3.11's
# process-global settrace guard (tests/compat_threading.py says why).
compat_threading.install()

# Property tests must not depend on the machine being idle: no per-example deadline and no
# "generation too slow" check (both measure wall time, which a loaded 2-core CI machine
# stretches tenfold). The number of examples is what each test asks for, as before.
settings.register_profile("pincer", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pincer")


def _find_corpus() -> Path:
    """``../shared/corpus`` beside the checkout (CI lays it there); worktrees look further up."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "corpus"
        if candidate.is_dir():
            return candidate
    return Path(__file__).resolve().parents[2] / "shared" / "corpus"


CORPUS = _find_corpus()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pincer_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "pincer-home"
    home.mkdir()
    monkeypatch.setenv("PINCER_HOME", str(home))
    monkeypatch.delenv("PINCER_SECRET_KEY", raising=False)
    return home


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"compatibility corpus not found at {CORPUS}: CI lays ../shared beside the clone")
    return CORPUS
