"""Page snapshots with element refs, on Playwright's public API.

``page.aria_snapshot(mode="ai")`` (Playwright >= 1.5x) writes the accessibility tree as YAML-like
text with ``[ref=eN]`` on each element, the format ``@playwright/mcp`` shows models, and the
``aria-ref=eN`` selector finds the element a ref names in the page's last snapshot. No private
API is needed; ``tests/builtins/test_browser_compat.py`` checks both still behave.
"""

from __future__ import annotations

from typing import Any

__all__ = ["page_snapshot", "ref_locator"]


async def page_snapshot(page: Any, *, timeout_s: float) -> str:
    return str(await page.aria_snapshot(mode="ai", timeout=timeout_s * 1000))


def ref_locator(page: Any, ref: str) -> Any:
    return page.locator(f"aria-ref={ref}")
