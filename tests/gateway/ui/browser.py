"""Debian's Chromium under Playwright for the dashboard's tests (never a downloaded browser).

Chromium's sandbox cannot start in some containers (as root without user namespaces): the
launch is tried with it first and only without it when Chromium itself says so."""

from __future__ import annotations

from playwright.sync_api import Browser, Error, Playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--disable-background-networking", "--disable-component-update", "--no-first-run", "--disable-sync"]
LAUNCH_TIMEOUT_MS = 60_000
_SANDBOX_FAILURES = ("sandbox", "namespace", "zygote")


def launch_chromium(playwright: Playwright) -> Browser:
    try:
        return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, timeout=LAUNCH_TIMEOUT_MS)
    except Error as exc:
        if not any(word in str(exc).lower() for word in _SANDBOX_FAILURES):
            raise
    return playwright.chromium.launch(
        executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, "--no-sandbox"], timeout=LAUNCH_TIMEOUT_MS
    )
