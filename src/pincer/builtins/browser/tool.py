"""The ``browser`` built-in: one tool, OpenClaw's actions, every request through the egress proxy.

Effects per action (``docs/browser.md``): reading actions have ``network``; the interaction verbs
(``act``, ``upload``, ``dialog``) add ``external_write`` (a click can submit a form or buy
something); ``evaluate`` adds ``execute_code`` (and ``external_write``: script can click too), so
it asks unless a grant allows running code. The call's grant hosts, ``[network] allow_private``
and ``[builtins.browser] base_url`` make the proxy policy of the call (:mod:`pincer.safety.egress_proxy`).
Outputs are untrusted (the agent loop's taint rule), bounded here and leak-scanned by the chain.
"""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pincer.builtins.actions import Action, ActionSet
from pincer.builtins.browser.host import BrowserHost, SessionBrowser, Tab
from pincer.builtins.tool import make_tool
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind
from pincer.core.errors import EgressDenied, PincerError, StaleRef, ToolError, UsageError
from pincer.core.values import HostContext, ToolOutput
from pincer.runtimes.native.decorator import NativeTool
from pincer.safety.egress_proxy import EgressEvent, ProxyPolicy, origins_of

__all__ = ["browser_tool", "BrowserCall", "ACTION_TIMEOUT_S", "NAVIGATION_TIMEOUT_S"]

logger = logging.getLogger(__name__)

ACTION_TIMEOUT_S = 10.0
NAVIGATION_TIMEOUT_S = 30.0
MAX_WAIT_S = 30.0
_REF = re.compile(r"\[ref=([A-Za-z0-9_-]+)\]")
_NAV_SCHEMES = ("http", "https")

NET = frozenset({EffectKind.NETWORK})
WRITE = NET | {EffectKind.EXTERNAL_WRITE}
CODE = WRITE | {EffectKind.EXECUTE_CODE}
KINDS = ("click", "type", "fill", "press", "hover", "select", "drag", "wait")


class BrowserCall:
    """One call's view: the browser host, the call's HostContext and the session's browser."""

    def __init__(self, host_browser: BrowserHost, host: HostContext, trusted: frozenset[tuple[str, int]]) -> None:
        self.browsers = host_browser
        self.host = host
        self.policy = ProxyPolicy(
            grant_hosts=host.network_hosts, allow_private=host.allow_private_network, trusted_origins=trusted
        )

    async def session(self) -> SessionBrowser:
        return await self.browsers.session(self.host.session, self.policy, self.host.workspace, self.host.home)

    def check_url(self, url: str) -> str:
        """Refuse before Chromium sees it what the proxy would refuse by name or scheme."""
        parts = _check_scheme(url)
        scheme = parts.scheme.lower()
        if not parts.hostname:
            raise UsageError(f"browser: {url[:200]!r} has no host", hint="pass e.g. https://example.com/")
        from pincer.safety.hosts import normalise_request_host

        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise UsageError(f"browser: {url[:200]!r} has a bad port", hint="use a port 1-65535") from None
        refusal = self.policy.host_refusal(normalise_request_host(parts.hostname), port)
        if refusal is not None:
            raise EgressDenied(
                f"browser: {url[:200]} refused: {refusal}",
                hint=refusal_hint(parts.hostname, port, grant_refused=True, allow_private=self.policy.allow_private),
            )
        return url


def refusal_hint(host: str, port: int, *, grant_refused: bool, allow_private: bool) -> str:
    """What opens ``host:port`` to the browser, all of it at once: a loopback or private address
    needs [network] allow_private as well as the grant's hosts, and hinting only at the grant (the
    first refusal) led to a second refusal after the person followed it."""
    import ipaddress

    from pincer.safety.addresses import address_refusal

    try:
        ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None  # a name: only "localhost" is known to be local without resolving it
    local = host.lower() == "localhost" or host.lower().endswith(".localhost")
    address = address_refusal(ip, allow_private_network=allow_private) if ip is not None else None
    grant = f"{host}:{port} (or {host}) in the browser grant's hosts"
    if address is not None and address.always:
        return f"{host} is {address.reason}: never reachable from tools, whatever the settings"
    if (address is not None or local) and not allow_private:
        needs = f"[network] allow_private = true in config.toml ({host} is a loopback or private address)"
        return f"set {needs}" + (f" and put {grant}" if grant_refused else "")
    if grant_refused:
        return f"put {grant} in config.toml"
    return "check the host name and that the site answers"


def _check_scheme(url: str) -> Any:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise UsageError(f"browser: url is not a URL: {exc}", hint="pass an absolute https:// URL") from None
    scheme = parts.scheme.lower()
    if scheme not in _NAV_SCHEMES:
        raise EgressDenied(
            f"browser: {scheme or 'a relative'}: URL refused (rule: only http and https pages; "
            "file://, chrome://, view-source: and the like never open)",
            hint="pass an absolute https:// URL",
        )
    return parts


def _refused(browser: SessionBrowser, mark: int) -> list[EgressEvent]:
    """The requests refused since ``mark`` (also written to the session's console)."""
    browser.note_refusals()
    return browser.page_refusals(mark)


def _blocked(browser: SessionBrowser, mark: int) -> list[dict[str, object]]:
    return [e.to_dict() for e in _refused(browser, mark)]


def _page_state(tab: Tab) -> dict[str, Any]:
    return {"tab": tab.id, "url": tab.page.url}


async def _title(tab: Tab) -> str | None:
    try:
        return str(await tab.page.title())
    except Exception:  # noqa: BLE001 - a page mid-navigation has no title yet
        return None


def _bounded(text: str, limit: int, what: str) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n… [{what} cut at {limit} characters]", True


async def _goto(call: BrowserCall, browser: SessionBrowser, tab: Tab, url: str) -> dict[str, Any]:
    from pincer.builtins.browser.playwright_compat import playwright_error

    PlaywrightError = playwright_error()

    mark = browser.proxy.mark
    status = None
    try:
        response = await tab.page.goto(url, timeout=NAVIGATION_TIMEOUT_S * 1000, wait_until="load")
        status = response.status if response is not None else None
    except PlaywrightError as exc:
        refused = _refused(browser, mark)
        if refused:
            raise EgressDenied(
                f"browser: {url[:200]} refused: {refused[0].reason}",
                hint=_blocked_hint(call, refused[0]),
            ) from None
        raise ToolError(f"browser: navigating to {url[:200]} failed: {_first_line(exc)}") from None
    refused = _refused(browser, mark)
    document = _document_refusal(refused, tab.page.url)
    if status == 403 and document is not None:
        # The page itself (after any redirects) was refused: an error, not a blank page.
        raise EgressDenied(
            f"browser: {document.target} refused: {document.reason}",
            hint=_blocked_hint(call, document),
        )
    out = {**_page_state(tab), "title": await _title(tab), "status": status}
    if refused:
        out["blocked"] = [e.to_dict() for e in refused]
    return out


def _blocked_hint(call: BrowserCall, refused: EgressEvent) -> str:
    """The hint for a refusal the proxy reported."""
    grant_refused = "not in the hosts of the grant" in refused.reason
    return refusal_hint(
        refused.host.lower(), refused.port, grant_refused=grant_refused, allow_private=call.policy.allow_private
    )


def _document_refusal(refused: list[EgressEvent], final_url: str) -> EgressEvent | None:
    """The refusal of the page's own request, if the page shown is the proxy's refusal."""
    parts = urlsplit(final_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    wanted = f"GET {final_url}" if parts.scheme == "http" else f"{parts.hostname}:{port}"
    return next((e for e in refused if e.target in (wanted, wanted.rstrip("/"))), None)


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return next((line for line in text.splitlines() if line.strip()), text)[:300]


# -- actions ---------------------------------------------------------------------------------------


async def _status(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    return call.browsers.status()


async def _start(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    browser = await call.session()
    if not browser.tabs:
        await browser.new_tab()
    return {**call.browsers.status(), "tabs": _tabs(browser)}


async def _stop(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    stopped = await call.browsers.stop_session(call.host.session)
    return {"stopped": stopped}


def _tabs(browser: SessionBrowser) -> list[dict[str, Any]]:
    return [{"id": t.id, "url": t.page.url, "current": t.id == browser.current} for t in browser.tabs]


async def _tabs_action(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    browser = await call.session()
    return {"tabs": _tabs(browser)}


async def _open(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    url = call.check_url(str(args["url"]))
    browser = await call.session()
    tab = await browser.new_tab()
    return await _goto(call, browser, tab, url)


async def _focus(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    browser = await call.session()
    tab = browser.tab(str(args["target_id"]))
    browser.current = tab.id
    await tab.page.bring_to_front()
    return {"tabs": _tabs(browser)}


async def _close(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    browser = await call.session()
    tab = browser.tab(args.get("target_id"))
    await tab.page.close()
    return {"tabs": _tabs(browser)}


async def _current(call: BrowserCall, args: Mapping[str, Any]) -> tuple[SessionBrowser, Tab]:
    browser = await call.session()
    if not browser.tabs:
        await browser.new_tab()
    return browser, browser.tab(args.get("target_id"))


async def _navigate(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    url = call.check_url(str(args["url"]))
    browser, tab = await _current(call, args)
    return await _goto(call, browser, tab, url)


async def _snapshot(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    from pincer.builtins.browser.snapshot import page_snapshot

    browser, tab = await _current(call, args)
    mark = browser.proxy.mark
    text = await page_snapshot(tab.page, timeout_s=ACTION_TIMEOUT_S)
    tab.refs = frozenset(_REF.findall(text))
    limit = int(args.get("max_chars") or browser.limits.max_snapshot_chars)
    shown, cut = _bounded(text, min(limit, browser.limits.max_snapshot_chars), "snapshot")
    out = {**_page_state(tab), "title": await _title(tab), "snapshot": shown, "truncated": cut}
    if blocked := _blocked(browser, mark):
        out["blocked"] = blocked
    return out


def _locator(tab: Tab, ref: object) -> Any:
    from pincer.builtins.browser.snapshot import ref_locator

    if not isinstance(ref, str) or ref not in tab.refs:
        raise StaleRef(
            f"browser: ref {ref!r} is not in the last snapshot of tab {tab.id} (the page changed or it was never shown)",
            hint='snapshot again ({"action": "snapshot"}) and use a ref from that snapshot',
        )
    return ref_locator(tab.page, ref)


async def _act(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    from pincer.builtins.browser.playwright_compat import playwright_error

    PlaywrightError = playwright_error()

    kind = args["kind"]
    browser, tab = await _current(call, args)
    mark = browser.proxy.mark
    timeout = ACTION_TIMEOUT_S * 1000
    try:
        if kind == "wait":
            await _wait(tab, args)
        elif kind == "press" and "ref" not in args:
            await tab.page.keyboard.press(str(_need(args, "key", kind)))
        else:
            target = _locator(tab, _need(args, "ref", kind))
            if kind == "click":
                await target.click(timeout=timeout, click_count=2 if args.get("double") else 1)
            elif kind == "fill":
                await target.fill(str(_need(args, "text", kind)), timeout=timeout)
            elif kind == "type":
                await target.press_sequentially(str(_need(args, "text", kind)), timeout=timeout)
                if args.get("submit"):
                    await target.press("Enter", timeout=timeout)
            elif kind == "press":
                await target.press(str(_need(args, "key", kind)), timeout=timeout)
            elif kind == "hover":
                await target.hover(timeout=timeout)
            elif kind == "select":
                await target.select_option([str(v) for v in _need(args, "values", kind)], timeout=timeout)
            elif kind == "drag":
                await target.drag_to(_locator(tab, _need(args, "end_ref", kind)), timeout=timeout)
    except PlaywrightError as exc:
        message = _first_line(exc)
        if "aria-ref" in message or "Timeout" in message:
            raise StaleRef(
                f"browser: act {kind} on {args.get('ref')!r} failed: {message}",
                hint='snapshot again ({"action": "snapshot"}): the element may be gone or covered',
            ) from None
        raise ToolError(f"browser: act {kind} failed: {message}") from None
    with _quiet():
        await tab.page.wait_for_load_state("load", timeout=NAVIGATION_TIMEOUT_S * 1000)
    out = {**_page_state(tab), "title": await _title(tab), "done": kind}
    if blocked := _blocked(browser, mark):
        out["blocked"] = blocked
    return out


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], Exception)  # type: ignore[arg-type]


def _need(args: Mapping[str, Any], name: str, kind: str) -> Any:
    if name not in args:
        raise UsageError(f"browser: act {kind} needs {name}", hint=f'pass "{name}" with "kind": "{kind}"')
    return args[name]


async def _wait(tab: Tab, args: Mapping[str, Any]) -> None:
    timeout = min(float(args.get("time_ms") or MAX_WAIT_S * 1000), MAX_WAIT_S * 1000)
    if "text" in args:
        await tab.page.get_by_text(str(args["text"])).first.wait_for(timeout=timeout)
    elif "selector" in args:
        await tab.page.locator(str(args["selector"])).first.wait_for(timeout=timeout)
    elif "time_ms" in args:
        await tab.page.wait_for_timeout(timeout)
    else:
        raise UsageError("browser: act wait needs text, selector or time_ms", hint='pass e.g. "text": "Saved"')


async def _screenshot(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    _browser, tab = await _current(call, args)
    if "ref" in args:
        data = await _locator(tab, args["ref"]).screenshot(timeout=ACTION_TIMEOUT_S * 1000, type="png")
    else:
        data = await tab.page.screenshot(
            full_page=bool(args.get("full_page")), type="png", timeout=ACTION_TIMEOUT_S * 1000
        )
    value = {**_page_state(tab), "mime_type": "image/png", "bytes": len(data)}
    block = {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": "image/png"}
    return ToolOutput(value=value, content=({"type": "text", "text": f"screenshot of {tab.page.url}"}, block))


async def _pdf(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    _browser, tab = await _current(call, args)
    data = await tab.page.pdf(print_background=True)
    value = {**_page_state(tab), "mime_type": "application/pdf", "bytes": len(data)}
    block = {
        "type": "resource",
        "resource": {
            "uri": f"browser://{tab.id}/page.pdf",
            "mimeType": "application/pdf",
            "blob": base64.b64encode(data).decode("ascii"),
        },
    }
    return ToolOutput(value=value, content=(block,))


async def _console(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    browser = await call.session()
    browser.note_refusals()  # those made between calls (a page's timers) too
    entries = list(browser.console)[-int(args.get("limit") or 50) :]
    text, cut = _bounded(
        "\n".join(f"[{e['type']}] {e['text']}" for e in entries), browser.limits.max_text_chars, "console"
    )
    return {"messages": entries if not cut else [], "text": text, "truncated": cut}


async def _dialog(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    browser = await call.session()
    accept = bool(args.get("accept", True))
    browser.dialog_answer = (accept, args.get("prompt_text"))
    return {"armed": "accept" if accept else "dismiss", "note": "the next dialog of this session is answered so"}


async def _upload(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    from pincer.builtins.browser.files import upload_payloads

    _browser, tab = await _current(call, args)
    payloads = await upload_payloads(call.host, list(args["paths"]))
    await _locator(tab, args["ref"]).set_input_files(payloads, timeout=ACTION_TIMEOUT_S * 1000)
    return {**_page_state(tab), "uploaded": [p["name"] for p in payloads]}


async def _evaluate(call: BrowserCall, args: Mapping[str, Any]) -> Any:
    import json

    from pincer.builtins.browser.playwright_compat import playwright_error

    PlaywrightError = playwright_error()

    browser, tab = await _current(call, args)
    mark = browser.proxy.mark
    try:
        if "ref" in args:
            result = await _locator(tab, args["ref"]).evaluate(str(args["expression"]), timeout=ACTION_TIMEOUT_S * 1000)
        else:
            result = await tab.page.evaluate(str(args["expression"]))
    except PlaywrightError as exc:
        raise ToolError(f"browser: evaluate failed: {_first_line(exc)}") from None
    text, cut = _bounded(json.dumps(result, default=str), browser.limits.max_text_chars, "result")
    out = {**_page_state(tab), "result": result if not cut else None, "text": text if cut else None, "truncated": cut}
    if blocked := _blocked(browser, mark):
        out["blocked"] = blocked
    return out


_FIELDS: dict[str, dict[str, Any]] = {
    "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "An http(s) URL"},
    "target_id": {"type": "string", "maxLength": 16, "description": "A tab id from tabs (default: the current tab)"},
    "kind": {"type": "string", "enum": list(KINDS), "description": "The interaction (act)"},
    "ref": {"type": "string", "maxLength": 32, "description": "An element ref from the last snapshot, e.g. e7"},
    "end_ref": {"type": "string", "maxLength": 32, "description": "drag: the ref to drop on"},
    "text": {"type": "string", "maxLength": 100_000, "description": "fill/type: the text; wait: text to wait for"},
    "key": {"type": "string", "maxLength": 64, "description": "press: a key such as Enter or Control+A"},
    "submit": {"type": "boolean", "description": "type: press Enter afterwards"},
    "double": {"type": "boolean", "description": "click: double-click"},
    "values": {
        "type": "array",
        "items": {"type": "string", "maxLength": 1000},
        "maxItems": 100,
        "description": "select: the option values or labels",
    },
    "selector": {"type": "string", "maxLength": 1000, "description": "wait: a CSS selector to wait for"},
    "time_ms": {
        "type": "integer",
        "minimum": 0,
        "maximum": int(MAX_WAIT_S * 1000),
        "description": "wait: how long (or the longest wait)",
    },
    "full_page": {"type": "boolean", "description": "screenshot: the whole page, not only the viewport"},
    "max_chars": {
        "type": "integer",
        "minimum": 100,
        "maximum": 200_000,
        "description": "snapshot: longest text returned",
    },
    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "console: how many recent messages"},
    "accept": {"type": "boolean", "description": "dialog: accept (true) or dismiss (false) the next dialog"},
    "prompt_text": {"type": "string", "maxLength": 10_000, "description": "dialog: the answer to a prompt()"},
    "paths": {
        "type": "array",
        "items": {"type": "string", "maxLength": 4096},
        "minItems": 1,
        "maxItems": 20,
        "description": "upload: workspace paths",
    },
    "expression": {
        "type": "string",
        "minLength": 1,
        "maxLength": 100_000,
        "description": "evaluate: JavaScript (an expression or a function; with ref, a function of the element)",
    },
}

_TAB = ("target_id",)
_ACTIONS = (
    ("status", _status, (), (), NET, "the browser's state (running, sandbox, sessions)"),
    ("start", _start, (), (), NET, "start the browser for this session"),
    ("stop", _stop, (), (), NET, "close this session's browser context and its tabs"),
    ("tabs", _tabs_action, (), (), NET, "list the open tabs"),
    ("open", _open, ("url",), (), NET, "open a URL in a new tab"),
    ("focus", _focus, ("target_id",), (), NET, "make a tab the current one"),
    ("close", _close, (), _TAB, NET, "close a tab (default: the current one)"),
    ("navigate", _navigate, ("url",), _TAB, NET, "load a URL in the current tab"),
    ("snapshot", _snapshot, (), (*_TAB, "max_chars"), NET, "the page as an accessibility tree with [ref=eN] per element"),
    ("act", _act, ("kind",), (*_TAB, "ref", "end_ref", "text", "key", "submit", "double", "values", "selector", "time_ms"),
     WRITE, "interact with an element by ref: kind click, type, fill, press, hover, select, drag or wait"),
    ("screenshot", _screenshot, (), (*_TAB, "ref", "full_page"), NET, "a PNG of the page or of one element"),
    ("pdf", _pdf, (), _TAB, NET, "the page as a PDF"),
    ("console", _console, (), ("limit",), NET, "recent console messages, dialogs, downloads and blocked requests"),
    ("dialog", _dialog, (), ("accept", "prompt_text"), WRITE, "accept or dismiss the next alert/confirm/prompt"),
    ("upload", _upload, ("ref", "paths"), _TAB, WRITE, "set workspace files on a file input (by ref)"),
    ("evaluate", _evaluate, ("expression",), (*_TAB, "ref"), CODE, "run JavaScript in the page"),
)  # fmt: skip


def browser_tool(*, browsers: BrowserHost, base_url: str | None = None) -> NativeTool:
    """The tool over ``browsers``; ``base_url`` is the one origin reachable on loopback/private."""
    trusted = origins_of([base_url]) if base_url else frozenset()

    def wrap(handler: Any) -> Any:
        async def run(call: BrowserCall, args: Mapping[str, Any]) -> Any:
            if handler is _status:  # asking whether it runs is no use of it: the idle timer goes on
                return await handler(call, args)
            async with call.browsers.in_use():
                try:
                    return await handler(call, args)
                except PincerError:
                    raise
                except Exception as exc:  # Playwright's own errors, a closed page, a crashed browser
                    from pincer.builtins.browser.playwright_compat import playwright_error

                    PlaywrightError = playwright_error()

                    if isinstance(exc, PlaywrightError):
                        raise ToolError(
                            f"browser: {_first_line(exc)}", hint="retry; a crashed browser restarts on the next call"
                        ) from None
                    raise

        return run

    actions = tuple(
        Action(name=name, description=about, toolset="browser", handler=wrap(fn), required=req, optional=opt,
               writes=EffectKind.EXTERNAL_WRITE in effects, effects=effects)
        for name, fn, req, opt, effects, about in _ACTIONS
    )  # fmt: skip

    def check(action: str, args: Mapping[str, Any]) -> None:
        # In the preflight too: a file:// or chrome:// URL is refused before anyone is asked.
        if action in ("open", "navigate") and isinstance(args.get("url"), str):
            _check_scheme(args["url"])

    return make_tool(
        name="browser",
        check=check,
        description="Drive a headless Chromium: navigate, snapshot the page as an accessibility tree with "
        "[ref=eN] element refs, act on refs (click, type, fill, press, hover, select, drag, wait), screenshot, "
        "pdf, console, dialogs, uploads from the workspace, evaluate. Every request passes pincer's network rules.",
        actions=ActionSet(tool="browser", actions=actions, fields=_FIELDS),
        capabilities=Capabilities(source="pincer:builtins/browser", name="browser"),
        api=lambda host: BrowserCall(browsers, host, trusted),
    )
