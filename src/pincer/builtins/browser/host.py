"""One Chromium per pincer, one isolated context per session, closed when idle.

:class:`BrowserHost` starts the browser on first use (:func:`launch_browser`), keeps one
:class:`SessionBrowser` per pincer session (its own Playwright context, so no cookie or storage is
shared, and its own :class:`~pincer.safety.egress_proxy.EgressProxy`, so each session's requests
are checked against that session's grants), closes the whole browser after ``idle_timeout_s`` without a call and with
pincer (:meth:`aclose`), and starts a new one on the next call when the old one crashed.

The proxies run in one task group the host holds open from the first launch until :meth:`aclose`
(:class:`ProxyGroup`): a session's proxy starts in one call and closes in another, so no call's
task could own it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup

from pincer.builtins.browser.launcher import LaunchedBrowser, launch_browser
from pincer.core.errors import EgressDenied, ToolError
from pincer.safety.egress_proxy import CLOSED_POLICY, EgressEvent, EgressProxy, ProxyPolicy, origins_of

__all__ = ["BrowserHost", "BrowserLimits", "ProxyGroup", "SessionBrowser", "Tab"]

logger = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT_S = 300.0
IDLE_CHECK_INTERVAL_S = 5.0
MAX_CONSOLE_ENTRIES = 200
VIEWPORT = {"width": 1280, "height": 720}


@dataclass(frozen=True, kw_only=True, slots=True)
class BrowserLimits:
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_snapshot_chars: int = 20_000
    max_download_bytes: int = 50 * 1024 * 1024
    max_text_chars: int = 20_000  # console and evaluate output


@dataclass(kw_only=True, slots=True)
class Tab:
    id: str
    page: Any
    refs: frozenset[str] = frozenset()  # the refs of this tab's last snapshot


@dataclass(kw_only=True, slots=True)
class SessionBrowser:
    """One session's context: its tabs, console, dialog arming, downloads and proxy."""

    session: str
    context: Any
    proxy: EgressProxy
    limits: BrowserLimits
    tabs: list[Tab] = field(default_factory=list)
    current: str | None = None
    console: deque[dict[str, str]] = field(default_factory=lambda: deque(maxlen=MAX_CONSOLE_ENTRIES))
    dialog_answer: tuple[bool, str | None] | None = None  # armed by the dialog action
    workspace: Path | None = None
    home: Path | None = None  # PINCER_HOME: a download never lands on one of pincer's own files
    downloads: Path | None = None  # where Chromium writes this browser's running downloads
    _next_tab: int = 0
    _noted: int = 0  # the proxy refusals already written to the console
    # (host, port) of every request this context's pages made: a refusal of anything else is
    # Chromium's own background traffic (component updates, safe browsing), no page's and no
    # agent's doing, and is not reported as blocked.
    _requested: set[tuple[str, int]] = field(default_factory=set)

    def saw_request(self, url: str) -> None:
        """A page of this context asks for ``url`` (Playwright's ``request`` event)."""
        try:
            self._requested.update(origins_of([url]))
        except (ValueError, EgressDenied):
            pass  # not an http(s) URL with a host (data:, blob:): never goes through the proxy

    def page_refusals(self, mark: int) -> list[EgressEvent]:
        """The proxy's refusals since ``mark`` of requests this context's pages made."""
        return [r for r in self.proxy.refusals_since(mark) if r.origin is None or r.origin in self._requested]

    def note_refusals(self) -> None:
        """Write the pages' refusals not yet in the console to it (once each)."""
        for refusal in self.page_refusals(self._noted):
            self.note("blocked", f"{refusal.target}: {refusal.reason}")
        self._noted = self.proxy.mark

    def tab(self, tab_id: str | None = None) -> Tab:
        wanted = tab_id or self.current
        found = next((t for t in self.tabs if t.id == wanted), None)
        if found is None:
            known = ", ".join(t.id for t in self.tabs) or "none"
            raise ToolError(
                f"browser: no tab {wanted!r} (open tabs: {known})",
                hint='open one with {"action": "open", "url": "https://..."} or list them with {"action": "tabs"}',
            )
        return found

    def add_page(self, page: Any) -> Tab:
        """Track a page as a tab: those the tool opens and those the page opens (popups)."""
        known = next((t for t in self.tabs if t.page is page), None)
        if known is not None:
            return known
        self._next_tab += 1
        tab = Tab(id=f"t{self._next_tab}", page=page)
        self.tabs.append(tab)
        self.current = tab.id
        page.on("console", lambda msg: self._log(msg.type, msg.text, page))
        page.on("pageerror", lambda exc: self._log("pageerror", str(exc), page))
        page.on("dialog", lambda dialog: self._on_dialog(dialog))
        page.on("download", lambda download: self._on_download(download))
        page.on("close", lambda _p: self._forget(tab.id))
        page.on("framenavigated", lambda frame: self._navigated(tab, frame))
        return tab

    def _navigated(self, tab: Tab, frame: Any) -> None:
        if frame == tab.page.main_frame:
            tab.refs = frozenset()  # a new document: the old refs name nothing

    def _forget(self, tab_id: str) -> None:
        self.tabs = [t for t in self.tabs if t.id != tab_id]
        if self.current == tab_id:
            self.current = self.tabs[-1].id if self.tabs else None

    def _log(self, kind: str, text: str, page: Any) -> None:
        self.console.append({"type": kind, "text": text[: self.limits.max_text_chars], "url": _url(page)})

    def note(self, kind: str, text: str) -> None:
        self.console.append({"type": kind, "text": text})

    async def _on_dialog(self, dialog: Any) -> None:
        answer, self.dialog_answer = self.dialog_answer, None
        with contextlib.suppress(Exception):
            if answer is not None and answer[0]:
                await dialog.accept(answer[1]) if answer[1] is not None else await dialog.accept()
                self.note("dialog", f"{dialog.type} {dialog.message!r} accepted")
            else:
                await dialog.dismiss()
                why = (
                    "dismissed"
                    if answer is not None
                    else 'dismissed (arm {"action": "dialog", "accept": true} first to accept)'
                )
                self.note("dialog", f"{dialog.type} {dialog.message!r} {why}")

    async def _on_download(self, download: Any) -> None:
        from pincer.builtins.browser.files import keep_download

        try:
            kept = await keep_download(
                download, self.workspace, self.limits.max_download_bytes, self.downloads, home=self.home
            )
            self.note("download", kept)
        except ToolError as exc:
            self.note("blocked", exc.message)
        except Exception as exc:  # noqa: BLE001 - a failed download must not break the page's events
            self.note("blocked", f"download failed: {exc}")

    async def new_tab(self) -> Tab:
        tab = self.add_page(await self.context.new_page())
        self.current = tab.id
        return tab

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.context.close()
        await self.proxy.aclose()


class ProxyGroup:
    """A task group held open by a task of its own until :meth:`aclose`, for proxies whose
    lifetimes no one task spans (the browser's: started in one call, closed in another)."""

    def __init__(self) -> None:
        self._group: TaskGroup | None = None
        self._holder: asyncio.Task[None] | None = None

    async def get(self) -> TaskGroup:
        if self._group is None:
            opened = anyio.Event()

            async def hold() -> None:
                async with anyio.create_task_group() as group:
                    self._group = group
                    opened.set()
                    await anyio.sleep_forever()

            self._holder = asyncio.get_running_loop().create_task(hold())
            await opened.wait()
        assert self._group is not None
        return self._group

    async def aclose(self) -> None:
        """Ends every proxy still in the group (each closes its connections) and the holding task."""
        group, holder, self._group, self._holder = self._group, self._holder, None, None
        if group is not None:
            group.cancel_scope.cancel()
        if holder is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await holder


def _url(page: Any) -> str:
    try:
        return str(page.url)
    except Exception:  # noqa: BLE001
        return ""


class BrowserHost:
    """The browser of one pincer (see the module docstring)."""

    def __init__(self, *, profile_root: Path, limits: BrowserLimits | None = None) -> None:
        self.profile_root = profile_root
        self.limits = limits or BrowserLimits()
        self._launched: LaunchedBrowser | None = None
        self._sessions: dict[str, SessionBrowser] = {}
        self._lock = asyncio.Lock()
        self._last_used = time.monotonic()
        self._idle_task: asyncio.Task[None] | None = None
        self._proxies = ProxyGroup()
        self.restarts = 0
        self._busy = 0

    @contextlib.asynccontextmanager
    async def in_use(self) -> AsyncIterator[None]:
        """Around one call: the idle timer does not close a browser a call is using."""
        self._busy += 1
        self.touch()
        try:
            yield
        finally:
            self._busy -= 1
            self.touch()

    @property
    def launched(self) -> LaunchedBrowser | None:
        return self._launched

    def touch(self) -> None:
        self._last_used = time.monotonic()

    async def session(
        self, name: str, policy: ProxyPolicy, workspace: Path | None, home: Path | None = None
    ) -> SessionBrowser:
        """The session's browser, started (or restarted after a crash) when needed, with ``policy``
        in force on its proxy from now on."""
        async with self._lock:
            self.touch()
            if self._launched is not None and not self._launched.is_alive():
                logger.warning("browser: chromium is gone; starting a new one")
                await self._drop_browser()
                self.restarts += 1
            if self._launched is None:
                self._launched = await launch_browser(self.profile_root, proxies=await self._proxies.get())
                self._ensure_idle_watch()
            found = self._sessions.get(name)
            if found is None:
                proxy = await EgressProxy.start(await self._proxies.get(), CLOSED_POLICY)
                try:
                    context = await self._launched.browser.new_context(
                        proxy={"server": proxy.url, "bypass": "<-loopback>"},
                        accept_downloads=True,
                        viewport=VIEWPORT,
                        service_workers="block",  # a worker's fetches would outlive the call's policy
                    )
                except BaseException:
                    await proxy.aclose()
                    raise
                found = SessionBrowser(
                    session=name, context=context, proxy=proxy, limits=self.limits, downloads=self._launched.downloads
                )
                context.on(
                    "page", lambda page: found.add_page(page)
                )  # a page's popups and target=_blank links become tabs
                context.on("request", lambda request: found.saw_request(request.url))
                self._sessions[name] = found
            found.proxy.policy = policy
            found.workspace = workspace
            found.home = home
            return found

    async def stop_session(self, name: str) -> bool:
        async with self._lock:
            found = self._sessions.pop(name, None)
            if found is not None:
                await found.aclose()
            if not self._sessions and self._launched is not None:
                await self._drop_browser()
            return found is not None

    def status(self) -> dict[str, Any]:
        launched = self._launched
        return {
            "running": launched is not None and launched.is_alive(),
            "sandbox": launched.sandbox if launched else None,
            "sandbox_note": launched.sandbox_note if launched else None,
            "sessions": len(self._sessions),
            "restarts": self.restarts,
            "idle_timeout_s": self.limits.idle_timeout_s,
        }

    def _ensure_idle_watch(self) -> None:
        if self._idle_task is None or self._idle_task.done():
            self._idle_task = asyncio.get_running_loop().create_task(self._watch_idle())

    async def _watch_idle(self) -> None:
        while self._launched is not None:
            await asyncio.sleep(min(IDLE_CHECK_INTERVAL_S, self.limits.idle_timeout_s))
            if (
                time.monotonic() - self._last_used >= self.limits.idle_timeout_s
                and not self._busy
                and not self._lock.locked()
            ):
                async with self._lock:
                    logger.info("browser: idle for %.0f s, closing chromium", self.limits.idle_timeout_s)
                    await self._drop_browser()
                return

    async def _drop_browser(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for found in sessions.values():
            await found.aclose()
        launched, self._launched = self._launched, None
        if launched is not None:
            await launched.aclose()

    async def aclose(self) -> None:
        task, self._idle_task = self._idle_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        async with self._lock:
            await self._drop_browser()
            await self._proxies.aclose()
