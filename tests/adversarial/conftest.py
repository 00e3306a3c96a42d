"""What the adversarial tests share: the canvas tests' Chromium (one per module, Debian's,
through Playwright), for the canvas attacks."""

from tests.canvas.conftest import browser

__all__ = ["browser"]
