"""The bundled catalog: which built-ins exist and how ``[builtins.NAME]`` turns them on.

``[builtins.github] enabled = true`` registers ``github``; ``base_url``, ``actions``,
``toolsets`` and ``read_only`` narrow it. ``[builtins.brave]`` holds only the base URL that
``web_search`` and ``llm_context`` share. A section with a name pincer does not know is a
ConfigError (a typo would otherwise silently leave a tool off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pincer.builtins.api import ConnectionPool
from pincer.config import BUILTIN_SHARED, BUILTIN_TOOLS
from pincer.core.errors import ConfigError
from pincer.core.extras import BUILTIN_EXTRAS, refuse_if_missing
from pincer.core.values import HostContext, RuntimeAsk
from pincer.runtimes.native.decorator import NativeTool
from pincer.runtimes.native.runtime import NativeRuntime

__all__ = ["BUILTIN_NAMES", "SHARED_SECTIONS", "BundledRuntime", "bundled_tools", "bundled_runtime", "RUNTIME_NAME"]

BUILTIN_NAMES = BUILTIN_TOOLS
SHARED_SECTIONS = BUILTIN_SHARED  # an API several built-ins call: base_url only
RUNTIME_NAME = "builtins"


def _github(s: Any, _all: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.github import github_tool

    return github_tool(
        base_url=s.base_url,
        actions=list(s.actions) if s.actions is not None else None,
        toolsets=list(s.toolsets) if s.toolsets is not None else None,
        read_only=s.read_only,
        pool=pool,
    )


def _web_fetch(s: Any, _all: Mapping[str, Any], _pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.web_fetch import web_fetch_tool

    return web_fetch_tool(base_url=s.base_url)


def _brave_base(all_settings: Mapping[str, Any]) -> str | None:
    brave = all_settings.get("brave")
    return brave.base_url if brave is not None else None


def _web_search(s: Any, all_settings: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.brave import web_search_tool

    return web_search_tool(base_url=s.base_url or _brave_base(all_settings), pool=pool)


def _llm_context(s: Any, all_settings: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.brave import llm_context_tool

    return llm_context_tool(base_url=s.base_url or _brave_base(all_settings), pool=pool)


def _narrowed(s: Any) -> dict[str, Any]:
    return {
        "base_url": s.base_url,
        "actions": list(s.actions) if s.actions is not None else None,
        "toolsets": list(s.toolsets) if s.toolsets is not None else None,
        "read_only": s.read_only,
    }


def _slack(s: Any, _all: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.slack import slack_tool

    return slack_tool(**_narrowed(s), pool=pool)


def _telegram(s: Any, _all: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.telegram import telegram_tool

    return telegram_tool(**_narrowed(s), pool=pool)


def _portfolio(s: Any, all_settings: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.portfolio import portfolio_tool

    dune = all_settings.get("dune")
    options = _narrowed(s)
    options["base_url"] = s.base_url or (dune.base_url if dune is not None else None)
    return portfolio_tool(**options, pool=pool)


def _composio(s: Any, _all: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.composio import composio_tool

    return composio_tool(
        base_url=s.base_url,
        actions=list(s.actions) if s.actions is not None else None,
        effects={k: list(v) for k, v in s.effects.items()} if s.effects is not None else None,
        read_only=s.read_only,
        pool=pool,
    )


def _browser(s: Any, _all: Mapping[str, Any], pool: ConnectionPool) -> NativeTool:
    from pincer.builtins.browser.host import BrowserHost, BrowserLimits
    from pincer.builtins.browser.tool import browser_tool

    given = {k: getattr(s, k) for k in ("idle_timeout_s", "max_snapshot_chars", "max_download_bytes")}
    limits = BrowserLimits(**{k: v for k, v in given.items() if v is not None})
    browsers = BrowserHost(profile_root=s.profile_root, limits=limits)
    pool.close_with(browsers.aclose)  # the runtime closes Chromium with pincer
    return browser_tool(browsers=browsers, base_url=s.base_url)


_FACTORIES: dict[str, Callable[[Any, Mapping[str, Any], ConnectionPool], NativeTool]] = {
    "github": _github,
    "web_fetch": _web_fetch,
    "web_search": _web_search,
    "llm_context": _llm_context,
    "slack": _slack,
    "telegram": _telegram,
    "portfolio": _portfolio,
    "composio": _composio,
    "browser": _browser,
}


def _google(name: str) -> Callable[[Any, Mapping[str, Any], ConnectionPool, Any], NativeTool]:
    """A Google tool's factory: its own base URL, else ``[builtins.google]``'s; ``tokens`` keeps
    the one Google login fresh (:class:`pincer.builtins.oauth.TokenKeeper`)."""

    def build(s: Any, all_settings: Mapping[str, Any], pool: ConnectionPool, tokens: Any) -> NativeTool:
        from importlib import import_module

        module, factory = _GOOGLE_MODULES[name]
        shared = all_settings.get("google")
        make = getattr(import_module(f"pincer.builtins.google.{module}"), factory)
        tool: NativeTool = make(
            base_url=s.base_url,
            shared_base_url=shared.base_url if shared is not None else None,
            actions=list(s.actions) if s.actions is not None else None,
            toolsets=list(s.toolsets) if s.toolsets is not None else None,
            read_only=s.read_only,
            pool=pool,
            tokens=tokens,
        )
        return tool

    return build


_GOOGLE_MODULES = {
    "gmail": ("gmail", "gmail_tool"),
    "google_calendar": ("calendar", "calendar_tool"),
    "google_docs": ("docs", "docs_tool"),
    "google_drive": ("drive", "drive_tool"),
    "google_sheets": ("sheets", "sheets_tool"),
    "google_slides": ("slides", "slides_tool"),
}
# Tools that need the OAuth token keeper besides their settings and pool.
_OAUTH_FACTORIES = {name: _google(name) for name in _GOOGLE_MODULES}


def bundled_tools(
    settings: Mapping[str, Any], pools: list[ConnectionPool] | None = None, *, tokens: Any = None
) -> list[NativeTool]:
    """The enabled built-ins, built from their ``[builtins.NAME]`` settings; each API tool's
    connection pool is appended to ``pools`` (whoever keeps the tools closes them). ``tokens``:
    the OAuth logins' keeper (refresh before expiry and after a 401); None: no refresh."""
    for name in settings:
        if name not in BUILTIN_NAMES and name not in SHARED_SECTIONS:
            raise ConfigError(
                f"config.toml: [builtins.{name}] is not a built-in pincer knows",
                hint=f"use one of [builtins.{'], [builtins.'.join(BUILTIN_NAMES + SHARED_SECTIONS)}]",
            )
    tools = []
    for name, item in settings.items():
        if (name in _FACTORIES or name in _OAUTH_FACTORIES) and item.enabled:
            pool = ConnectionPool()
            if pools is not None:
                pools.append(pool)
            if name in _OAUTH_FACTORIES:
                tool = _OAUTH_FACTORIES[name](item, settings, pool, tokens)
            else:
                tool = _FACTORIES[name](item, settings, pool)
            tools.append(_needing_extra(tool, BUILTIN_EXTRAS[name]) if name in BUILTIN_EXTRAS else tool)
    return tools


def _needing_extra(tool: NativeTool, extra: str) -> NativeTool:
    """The tool with its extra checked in the chain's preflight: without it, the call is refused
    (ExtraMissing naming the pip command) before anyone is asked to approve it."""
    before = tool.preflight

    async def check(args: Mapping[str, Any], host: HostContext) -> RuntimeAsk | None:
        refuse_if_missing(extra)
        return await before(args, host) if before is not None else None

    return tool.with_preflight(check)


class BundledRuntime(NativeRuntime):
    """The built-ins' runtime: a NativeRuntime that closes its tools' connection pools."""

    def __init__(self, tools: list[NativeTool], pools: list[ConnectionPool]) -> None:
        super().__init__(tools, name=RUNTIME_NAME)
        self._pools = pools

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
        await super().aclose()


def bundled_runtime(settings: Mapping[str, Any], *, tokens: Any = None) -> BundledRuntime | None:
    """A runtime named ``builtins`` holding the enabled built-ins (None when none is)."""
    pools: list[ConnectionPool] = []
    tools = bundled_tools(settings, pools, tokens=tokens)
    if not tools:
        return None
    return BundledRuntime(tools, pools)


def bundled_key(key: str) -> str | None:
    """The built-in a hub key names (``tools/github`` -> ``github``), or None."""
    kind, _, name = key.partition("/")
    return name if kind == "tools" and name in BUILTIN_NAMES else None


def bundled_bundles() -> dict[str, dict[str, Any]]:
    """The bundles shipped with pincer, from ``manifests/_bundles.json`` in IronClaw's registry
    format (``{"bundles": {NAME: {"extensions": ["tools/gmail", ...], "shared_auth", ...}}}``)."""
    import json
    from importlib import resources

    text = resources.files("pincer.builtins").joinpath("manifests/_bundles.json").read_text("utf-8")
    data = json.loads(text).get("bundles") or {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def bundle_members(key: str) -> list[str] | None:
    """The built-ins a bundle key names (``bundles/google``, or an alias such as ``bundles/gws``),
    each one bundled with pincer; None when ``key`` is not a bundle shipped here."""
    kind, _, name = key.partition("/")
    if kind != "bundles":
        return None
    for bundle_name, bundle in bundled_bundles().items():
        aliases = [str(a).lower() for a in bundle.get("aliases") or ()]
        if name == bundle_name or name.lower() in aliases:
            members = [bundled_key(str(e)) for e in bundle.get("extensions") or ()]
            return [m for m in members if m is not None]
    return None


def enable(home: Any, name: str) -> str:
    """Turn ``[builtins.NAME] enabled = true`` on in ``home/config.toml`` (offline: the tool ships
    with pincer). Returns ``installed`` or ``unchanged``. The rest of the file is kept as written;
    the result is parsed before it replaces the file, so a config that would not load is never
    written."""
    return "installed" if _set_enabled(home, name, on=True) else "unchanged"


def disable(home: Any, name: str) -> str:
    """``pincer remove tools/NAME`` of a bundled built-in: ``[builtins.NAME] enabled = false``, the
    rest of its section kept. Returns ``removed``, or ``unchanged`` when it was not enabled."""
    return "removed" if _set_enabled(home, name, on=False) else "unchanged"


def _set_enabled(home: Any, name: str, *, on: bool) -> bool:
    """Write ``enabled`` of ``[builtins.NAME]``; False when it already was so (nothing written)."""
    import re
    import tomllib
    from pathlib import Path

    from pincer.config import CONFIG_FILENAME, parse_config
    from pincer.store.jsonfile import write_bytes_atomic

    path = Path(home) / CONFIG_FILENAME
    text = path.read_text("utf-8") if path.exists() else ""
    again = "install" if on else "remove"
    try:
        current = tomllib.loads(text).get("builtins", {}).get(name)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}", hint=f"fix it, then run `pincer {again}` again") from None
    if (isinstance(current, dict) and current.get("enabled") is True) is on:
        return False
    value = "true" if on else "false"
    header = re.compile(rf"^\[builtins\.{re.escape(name)}\][ \t]*(#.*)?$", re.M)
    match = header.search(text)
    if match is None:
        new = text + ("" if text.endswith("\n") or not text else "\n") + f"\n[builtins.{name}]\nenabled = {value}\n"
    else:
        start = match.end()
        following = re.compile(r"^\[", re.M).search(text, start)
        end = following.start() if following else len(text)
        body = text[start:end]
        flag = re.compile(r"^enabled[ \t]*=.*$", re.M)
        body = flag.sub(f"enabled = {value}", body, count=1) if flag.search(body) else f"\nenabled = {value}" + body
        new = text[:start] + body + text[end:]
    parsed = parse_config(new, home=Path(home), source=str(path))
    if on:
        # Built too: a tool that needs more than `enabled` (composio's actions) refuses here, not at
        # the next start.
        bundled_tools({name: parsed.builtins[name]}, [])
    write_bytes_atomic(path, new.encode("utf-8"))
    return True
