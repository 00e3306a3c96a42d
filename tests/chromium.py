"""Debian's Chromium for the tests that drive a page themselves (the dashboard, the canvas),
started with the browser built-in's launch options and sandbox rule
(:func:`pincer.builtins.browser.launcher.launch_options`, :func:`~.sandbox_plan`): the same
executable, quiet flags and short environment, never a downloaded browser. Playwright's sync API,
so without the launcher's proxy (these pages are the test's own gateway on loopback)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Browser, Error, Playwright, sync_playwright

from pincer.builtins.browser.launcher import launch_options, sandbox_plan


def launch_chromium(playwright: Playwright) -> Browser:
    """Chromium with its own sandbox where it can start (not as root); without only when not."""
    attempts, _ = sandbox_plan()
    for sandbox in attempts[:-1]:
        try:
            return playwright.chromium.launch(**launch_options(sandbox=sandbox))
        except Error:
            continue
    return playwright.chromium.launch(**launch_options(sandbox=attempts[-1]))


@contextmanager
def chromium() -> Iterator[Browser]:
    """One Chromium from its own Playwright, closed on the way out (a module fixture's)."""
    with sync_playwright() as playwright:
        launched = launch_chromium(playwright)
        try:
            yield launched
        finally:
            launched.close()
