"""Every use of Playwright-for-Python's private internals, in one place.

One thing is not public: where Chromium's profile directory goes. ``browser_type.launch`` refuses
``--user-data-dir`` and the driver makes the profile with ``mkdtemp`` in *its* temporary
directory, which it takes from ``TMPDIR`` of the environment Playwright starts it with
(``playwright._impl.transport.get_driver_env``, a copy of ``os.environ``). :func:`start_playwright`
starts the driver with ``TMPDIR`` pointing under ``$PINCER_HOME``, without changing pincer's own
environment: so the profile (cookies, cache) is fresh per launch and lives under the home.

``tests/builtins/test_browser_compat.py`` checks that the internal still exists with the shape
used here, so an upgrade that moves it fails that test by name. When it fails: find the new home
of the internal, change it here, and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["start_playwright", "driver_env_hook", "playwright_error"]


def playwright_error() -> type[Exception]:
    """Playwright's base error class (ExtraMissing naming ``pincer[browser]`` without Playwright)."""
    from pincer.core.extras import require

    error: type[Exception] = require("browser", "playwright.async_api").Error
    return error


def driver_env_hook() -> tuple[Any, str]:
    """The module and attribute name of the function that makes the driver's environment."""
    from pincer.core.extras import require

    return require("browser", "playwright._impl.transport"), "get_driver_env"


async def start_playwright(tmp_dir: Path) -> Any:
    """``async_playwright().start()`` with the driver's ``TMPDIR`` (and so Chromium's profile)
    under ``tmp_dir``. The driver is spawned inside ``start()``; the hook is put back right after,
    and asyncio runs nothing else in between that could start another driver."""
    from pincer.core.extras import require

    async_playwright = require("browser", "playwright.async_api").async_playwright
    module, name = driver_env_hook()
    original: Callable[[], dict[str, str]] = getattr(module, name)

    def env_with_tmpdir() -> dict[str, str]:
        env = dict(original())
        env["TMPDIR"] = str(tmp_dir)
        return env

    setattr(module, name, env_with_tmpdir)
    try:
        return await async_playwright().start()
    finally:
        setattr(module, name, original)
