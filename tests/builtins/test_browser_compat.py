"""The Playwright pieces the browser relies on, checked by name so an upgrade that moves them fails
here: the driver-environment internal (``playwright_compat``), ``aria_snapshot(mode="ai")`` writing
``[ref=eN]`` and the ``aria-ref=`` selector finding the element."""

from __future__ import annotations

import inspect
import re
import tempfile
from pathlib import Path

import pytest

from pincer.builtins.browser.launcher import CHROMIUM
from pincer.builtins.browser.playwright_compat import driver_env_hook, start_playwright
from pincer.builtins.browser.snapshot import page_snapshot, ref_locator

pytestmark = pytest.mark.anyio


def test_the_driver_environment_hook_is_where_playwright_compat_expects_it() -> None:
    module, name = driver_env_hook()
    function = getattr(module, name, None)
    assert callable(function), (
        f"playwright moved {module.__name__}.{name}: update pincer/builtins/browser/playwright_compat.py"
    )
    env = function()
    assert isinstance(env, dict) and "PATH" in env


def test_aria_snapshot_takes_a_mode() -> None:
    from playwright.async_api import Page

    assert "mode" in inspect.signature(Page.aria_snapshot).parameters


async def test_the_driver_makes_chromiums_profile_in_the_directory_given() -> None:
    # A short folder of its own: Chromium puts its singleton socket in it, and a Unix socket's
    # path has at most 107 characters (pytest-xdist's tmp_path, .../popen-gw0/NAME0/, is too long).
    with tempfile.TemporaryDirectory(prefix="pw-") as short:
        await _drive_chromium_in(Path(short))


async def _drive_chromium_in(tmp_path: Path) -> None:
    playwright = await start_playwright(tmp_path)
    try:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, chromium_sandbox=False)
        try:
            assert "playwright_chromiumdev_profile" in {p.name[:30] for p in tmp_path.iterdir()}
            page = await browser.new_page()
            await page.set_content("<button>Go</button><a href='#'>there</a>")
            text = await page_snapshot(page, timeout_s=10)
            ref = re.search(r'button "Go" \[ref=(\w+)\]', text)
            assert ref, text
            assert await ref_locator(page, ref.group(1)).inner_text() == "Go"
        finally:
            await browser.close()
    finally:
        await playwright.stop()
