"""A PNG of a canvas, rendered by headless Chromium (Debian's ``/usr/bin/chromium`` through
Playwright; pincer never downloads a browser).

One browser per snapshot, closed after it: snapshots are rare and a kept browser would hold
memory for nothing. The page is the canvas frame itself, which its CSP sandboxes (an opaque
origin without network), so a snapshot runs pushed scripts exactly as a person's browser does.
Chromium's own sandbox is used when it can start; only when it cannot (root in a container
without user namespaces) is the launch repeated with ``--no-sandbox``.
"""

from __future__ import annotations

import logging

import anyio

from pincer.core.errors import RuntimeUnavailable, ToolError

__all__ = ["snapshot_png", "CHROMIUM_PATH", "CHROMIUM_ARGS", "SNAPSHOT_TIMEOUT_S", "RENDER_SETTLE_S"]

logger = logging.getLogger(__name__)

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = ("--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync")
SNAPSHOT_TIMEOUT_S = 60.0  # launch, load and screenshot together
RENDER_SETTLE_S = 0.3  # after load: let the canvas's scripts draw before the picture is taken
_SANDBOX_FAILURES = ("no usable sandbox", "sandbox", "setuid")


async def snapshot_png(url: str, *, width: int, height: int) -> bytes:
    """The PNG of ``url`` in a ``width`` x ``height`` viewport; ToolError when it cannot be had."""
    try:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import async_playwright
    except ImportError as exc:  # pragma: no cover - a dependency of pincer
        raise RuntimeUnavailable("canvas snapshot needs playwright", hint="pip install playwright") from exc
    if not await anyio.Path(CHROMIUM_PATH).exists():
        raise RuntimeUnavailable(
            f"canvas snapshot needs Chromium at {CHROMIUM_PATH}", hint="install Debian's chromium (`make setup` does)"
        )
    try:
        with anyio.fail_after(SNAPSHOT_TIMEOUT_S):
            async with async_playwright() as playwright:
                try:
                    browser = await playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=list(CHROMIUM_ARGS))
                except PlaywrightError as exc:
                    if not any(word in str(exc).lower() for word in _SANDBOX_FAILURES):
                        raise
                    logger.info("chromium's sandbox cannot start here; snapshot without it")
                    browser = await playwright.chromium.launch(
                        executable_path=CHROMIUM_PATH, args=[*CHROMIUM_ARGS, "--no-sandbox"]
                    )
                try:
                    page = await browser.new_page(viewport={"width": width, "height": height})
                    await page.goto(url, wait_until="load")
                    await anyio.sleep(RENDER_SETTLE_S)
                    return await page.screenshot(type="png", full_page=False)
                finally:
                    with anyio.CancelScope(shield=True):
                        await browser.close()
    except TimeoutError:
        raise ToolError(f"canvas snapshot took longer than {SNAPSHOT_TIMEOUT_S:g}s", hint="try again; a canvas script may hang the page") from None
    except PlaywrightError as exc:
        raise ToolError(f"canvas snapshot failed: {str(exc).splitlines()[0][:300]}", hint="check that /usr/bin/chromium starts") from None
