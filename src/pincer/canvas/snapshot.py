"""A PNG of a canvas, rendered by headless Chromium, started the way the browser built-in starts
it (:func:`pincer.builtins.browser.launcher.launch_browser`: Debian's ``/usr/bin/chromium``
through Playwright, the quiet flags, the sandbox rule, the short environment, no orphan when
pincer dies; pincer never downloads a browser).

One browser per snapshot, closed after it: snapshots are rare and a kept browser would hold
memory for nothing. The page is the canvas frame itself, which its CSP sandboxes (an opaque
origin without network), so a snapshot runs pushed scripts exactly as a person's browser does.
Every request of the snapshot goes through an egress proxy that lets through the gateway's own
origin only (the launch-wide proxy passes nothing).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio
import anyio.to_thread

from pincer.core.errors import ToolError

if TYPE_CHECKING:
    from pincer.builtins.browser.launcher import LaunchedBrowser

__all__ = ["snapshot_png", "SNAPSHOT_TIMEOUT_S", "RENDER_SETTLE_S"]

logger = logging.getLogger(__name__)

SNAPSHOT_TIMEOUT_S = 60.0  # launch, load and screenshot together
RENDER_SETTLE_S = 0.3  # after load: let the canvas's scripts draw before the picture is taken


async def snapshot_png(url: str, *, width: int, height: int) -> bytes:
    """The PNG of ``url`` (the gateway's canvas frame) in a ``width`` x ``height`` viewport;
    ToolError when it cannot be had."""
    from pincer.builtins.browser.launcher import launch_browser
    from pincer.builtins.browser.playwright_compat import playwright_error
    from pincer.safety.egress_proxy import EgressProxy, ProxyPolicy, origins_of, proxy_task_group

    PlaywrightError = playwright_error()

    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    origin = f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    policy = ProxyPolicy(grant_hosts=(origin,), trusted_origins=origins_of([url]))
    root = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="pincer-canvas-")))
    try:
        async with proxy_task_group() as proxies:
            proxy = await EgressProxy.start(proxies, policy)
            launched: LaunchedBrowser | None = None
            try:
                with anyio.fail_after(SNAPSHOT_TIMEOUT_S):
                    launched = await launch_browser(root, proxies=proxies)
                    context = await launched.browser.new_context(
                        proxy={"server": proxy.url, "bypass": "<-loopback>"},
                        viewport={"width": width, "height": height},
                        service_workers="block",
                    )
                    page = await context.new_page()
                    await page.goto(url, wait_until="load")
                    await anyio.sleep(RENDER_SETTLE_S)
                    png: bytes = await page.screenshot(type="png", full_page=False)
                    return png
            except TimeoutError:
                raise ToolError(
                    f"canvas snapshot took longer than {SNAPSHOT_TIMEOUT_S:g}s",
                    hint="try again; a canvas script may hang the page",
                ) from None
            except PlaywrightError as exc:
                raise ToolError(
                    f"canvas snapshot failed: {str(exc).splitlines()[0][:300]}",
                    hint="check that /usr/bin/chromium starts",
                ) from None
            finally:
                with anyio.CancelScope(shield=True):
                    if launched is not None:
                        await launched.aclose()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))
