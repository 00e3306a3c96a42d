"""Starting Debian's Chromium under Playwright: the flags, the profile, the sandbox decision.

Public API (also for the canvas): ``launched = await launch_browser(profile_root)`` gives a
:class:`LaunchedBrowser` (``.browser`` a Playwright ``Browser``, ``.sandbox`` whether Chromium's
own sandbox is on and ``.sandbox_note`` why not, ``.proxy`` the launch-wide proxy that refuses
everything, ``await .aclose()``). Contexts then get a proxy each
(``browser.new_context(proxy={"server": egress_proxy.url})``). The proxies run in the task group
the caller passes (``proxies``), which must outlive the browser.

- The executable is ``/usr/bin/chromium`` (the Debian package ``make setup`` installs); Playwright
  never downloads a browser here.
- Quiet on a closed network: no background networking, component updates, first-run or sync.
- Every request goes to a proxy: the launch-wide ``--proxy-server`` is an
  :class:`~pincer.safety.egress_proxy.EgressProxy` with a policy that passes nothing,
  ``<-loopback>`` removes Chromium's implicit loopback bypass, QUIC and non-proxied WebRTC UDP
  are off (neither would go through an HTTP proxy).
- The sandbox: Chromium refuses its sandbox when run as root, so as root it runs with
  ``--no-sandbox`` (said in ``status``); otherwise the sandbox is on, and only when Chromium
  fails to start with it is it started without and the failure named.
- No orphan: Playwright talks to Chromium over a pipe (``--remote-debugging-pipe``) through its
  driver, which reads pincer's end of a pipe too; when pincer dies, even by SIGKILL, the driver
  sees end-of-file and closes the browser, and Chromium exits when its pipe closes
  (tests/builtins/test_browser_lifecycle.py kills pincer with SIGKILL and checks).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pincer.core.errors import ToolError
from pincer.safety.egress_proxy import CLOSED_POLICY, EgressProxy

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "LaunchedBrowser",
    "launch_browser",
    "launch_options",
    "sandbox_plan",
    "LAUNCH_TIMEOUT_S",
]

logger = logging.getLogger(__name__)

CHROMIUM = "/usr/bin/chromium"
LAUNCH_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 15.0
DOWNLOADS_DIR = "downloads"  # in the launch's profile directory, removed with it
CHROMIUM_ARGS = (
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--no-pings",
    "--proxy-bypass-list=<-loopback>",
)
# No --disable-features here: Chromium keeps only the last one, and Playwright's own list (search
# preconnect, account checks, translate, ...) is what keeps it from calling Google at start.


@dataclass(kw_only=True, slots=True)
class LaunchedBrowser:
    playwright: Any
    browser: Any
    proxy: EgressProxy
    profile: Path
    sandbox: bool
    sandbox_note: str

    @property
    def downloads(self) -> Path:
        """Where Chromium writes the downloads of this launch while they run (in the profile)."""
        return self.profile / DOWNLOADS_DIR

    def is_alive(self) -> bool:
        try:
            return bool(self.browser.is_connected())
        except Exception:  # noqa: BLE001 - a browser whose driver went away is not alive
            return False

    async def aclose(self) -> None:
        import asyncio

        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.browser.close(), CLOSE_TIMEOUT_S)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.playwright.stop(), CLOSE_TIMEOUT_S)
        await self.proxy.aclose()
        _remove_tree(self.profile)


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


async def launch_browser(profile_root: Path, *, proxies: TaskGroup, headless: bool = True) -> LaunchedBrowser:
    """Start Playwright's driver and Chromium with a fresh profile under ``profile_root`` (a
    directory per launch, removed on close: the driver's temporary directory, where it makes
    Chromium's ``--user-data-dir``)."""
    import anyio.to_thread

    from pincer.builtins.browser.playwright_compat import playwright_error, start_playwright

    PlaywrightError = playwright_error()
    profile = await anyio.to_thread.run_sync(_fresh_profile, profile_root)
    proxy = await EgressProxy.start(proxies, CLOSED_POLICY)
    playwright = await start_playwright(profile)
    attempts, note = sandbox_plan()
    failure: Exception | None = None
    try:
        for sandbox in attempts:
            try:
                browser = await playwright.chromium.launch(
                    **launch_options(
                        sandbox=sandbox, proxy_url=proxy.url, headless=headless, downloads=profile / DOWNLOADS_DIR
                    )
                )
            except PlaywrightError as exc:
                failure = exc
                if sandbox:
                    note = f"Chromium's sandbox could not start here ({_first_line(exc)}), so it runs with --no-sandbox"
                    logger.warning("browser: %s", note)
                continue
            return LaunchedBrowser(
                playwright=playwright, browser=browser, proxy=proxy, profile=profile, sandbox=sandbox, sandbox_note=note
            )
    except BaseException:
        await playwright.stop()
        await proxy.aclose()
        _remove_tree(profile)
        raise
    await playwright.stop()
    await proxy.aclose()
    _remove_tree(profile)
    raise ToolError(
        f"chromium did not start: {_first_line(failure)}",
        hint=f"check that `{CHROMIUM} --headless --version` runs on this machine",
    )


def sandbox_plan() -> tuple[tuple[bool, ...], str]:
    """The sandbox settings to try, in order, and the note for ``status`` when the first is
    already without it: as root only without (Chromium refuses its sandbox for root), otherwise
    with it first and without only when Chromium cannot start with it."""
    if os.geteuid() == 0:
        return (False,), "running as root: Chromium refuses its sandbox for root, so it runs with --no-sandbox"
    return (True, False), ""


def launch_options(
    *, sandbox: bool, proxy_url: str | None = None, headless: bool = True, downloads: Path | None = None
) -> dict[str, Any]:
    """Keyword arguments for Playwright's ``chromium.launch`` (async or sync API alike): Debian's
    Chromium, the quiet flags, the sandbox setting and the short environment; with ``proxy_url``
    every request of the browser goes through that proxy; with ``downloads`` a download is written
    there while it runs (where :func:`pincer.builtins.browser.files.cut_when_over` watches it)."""
    args = [*CHROMIUM_ARGS, f"--proxy-server={proxy_url}"] if proxy_url else list(CHROMIUM_ARGS)
    more: dict[str, Any] = {"downloads_path": str(downloads)} if downloads is not None else {}
    return {
        **more,
        "executable_path": CHROMIUM,
        "headless": headless,
        # Playwright's own default is no sandbox (it adds --no-sandbox): say it every time.
        "chromium_sandbox": sandbox,
        "args": args,
        "timeout": LAUNCH_TIMEOUT_S * 1000,
        "env": _chromium_env(),
    }


def _fresh_profile(profile_root: Path) -> Path:
    if not os.path.exists(CHROMIUM):
        raise ToolError(
            f"the browser tool needs Debian's chromium at {CHROMIUM}, which is not installed",
            hint="run `make setup` (it installs the chromium package) or apt-get install chromium",
        )
    profile_root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Path(tempfile.mkdtemp(prefix="profile-", dir=profile_root))


def _chromium_env() -> dict[str, str]:
    """Chromium's environment: a short list, never pincer's own (which may hold API keys), and the
    system's temporary directory (its singleton socket path must stay under the UNIX socket limit,
    which a profile deep under $PINCER_HOME would not)."""
    env = {k: v for k in _PASSED_ENV if (v := os.environ.get(k)) is not None}
    env["TMPDIR"] = tempfile.gettempdir()
    return env


_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "FONTCONFIG_PATH", "XDG_RUNTIME_DIR")


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return next((line for line in text.splitlines() if line.strip()), text)[:300]
