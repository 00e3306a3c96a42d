"""``web_fetch``: one web page as readable Markdown, main content only.

The page comes through pincer's egress client (:func:`pincer.safety.egress.send`): https only
(an ``http://`` URL is asked for over https), every address the name resolves to checked by the
one address rule (loopback, private, link-local and metadata addresses refused, also when a
public-looking name resolves to one), redirects followed by hand, at most
:data:`MAX_REDIRECTS`, each hop checked again as if it were the first. A grant's ``hosts``
narrow the pages it may fetch. ``[builtins.web_fetch] base_url`` names the one origin the person
allows also on a private address or over plain http (an intranet wiki); nothing else gains from it.

Extraction is trafilatura's (boilerplate removal: navigation, footers, cookie banners and
sidebars go; the article stays), in a worker thread. Text is decoded by the charset the response
declares, else the page's ``<meta charset>``, else charset detection (charset_normalizer).
Size and time are bounded: :data:`MAX_FETCH_BYTES` read, :data:`FETCH_TIMEOUT_S` per hop,
``max_chars`` returned.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import anyio.to_thread

from pincer.builtins.actions import Action, ActionSet
from pincer.builtins.api import BaseUrl
from pincer.builtins.tool import make_tool
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind
from pincer.core.errors import EgressDenied, ToolError, UsageError
from pincer.core.values import HostContext
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["web_fetch_tool", "html_to_markdown", "decode_page", "MAX_REDIRECTS", "MAX_FETCH_BYTES"]

logger = logging.getLogger(__name__)

MAX_REDIRECTS = 5
MAX_FETCH_BYTES = 5_000_000  # read at most this much of one page
FETCH_TIMEOUT_S = 20.0  # per hop, within the call's own timeout
DEFAULT_MAX_CHARS = 20_000
MAX_CHARS = 200_000
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/plain", "text/markdown", "application/json", "text/csv", "application/xml", "text/xml")
_USER_AGENT = "Mozilla/5.0 (compatible; pincer-web_fetch/0.1; +https://github.com/)"


def decode_page(body: bytes, content_type: str) -> tuple[str, str]:
    """The page's text and the charset used: declared header charset, else ``<meta charset>``,
    else charset_normalizer's guess, else UTF-8 with replacement characters."""
    declared = None
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            declared = value.strip("\"' ").lower()
    if declared is None and (match := _META_CHARSET.search(body[:4096])):
        declared = match.group(1).decode("ascii", "replace").lower()
    if declared:
        try:
            return body.decode(declared), declared
        except (LookupError, UnicodeDecodeError):
            pass
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    if best is not None:
        return body.decode(best.encoding, "replace"), best.encoding
    return body.decode("utf-8", "replace"), "utf-8"


def html_to_markdown(html: str, *, url: str | None = None) -> tuple[str, str | None]:
    """Main content as Markdown and the page title (trafilatura); blocking, run in a thread."""
    from pincer.core.extras import require

    trafilatura = require("web")

    markdown = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_comments=False,
        include_formatting=True,
        favor_precision=True,
    )
    title = None
    try:
        meta = trafilatura.extract_metadata(html, default_url=url)
        title = getattr(meta, "title", None)
    except Exception:  # noqa: BLE001 - metadata is a nicety; a page without it still converts
        title = None
    return (markdown or "").strip(), title


def _https(url: str, base: BaseUrl | None) -> str:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise UsageError(f"url is not a URL: {exc}", hint="pass an absolute https URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"url {url[:200]!r} must be an absolute http(s) URL", hint="pass e.g. https://example.com/page"
        )
    if scheme == "http" and not _is_base(parts, base):
        # Plain http reaches nothing outside loopback; ask the same page over TLS instead.
        return urlunsplit(("https", parts.netloc, parts.path, parts.query, ""))
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, ""))


def _is_base(parts: Any, base: BaseUrl | None) -> bool:
    if base is None:
        return False
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        return False
    return (parts.scheme.lower(), (parts.hostname or "").lower(), port) == (base.scheme, base.host, base.port)


class _Fetcher:
    """One call's page fetch: the hop loop with its checks."""

    def __init__(self, host: HostContext, base: BaseUrl | None) -> None:
        self.host = host
        self.base = base

    def _policy(self, url: str) -> Any:
        from pincer.safety import egress
        from pincer.safety.urls import check_url

        target = check_url(url, allow_plain_http=True)
        hosts = self.host.network_hosts
        if hosts is not None:
            from pincer.safety.hosts import HostPattern

            if not any(HostPattern.parse(h).matches(target.host, target.port) for h in hosts):
                raise EgressDenied(
                    f"web_fetch: {target.display} refused: the grant allows only {', '.join(hosts)}",
                    hint=f"add {target.host!r} to the grant's hosts in config.toml or drop its hosts list",
                )
        trusted: frozenset[tuple[str, str, int]] = frozenset()
        if self.base is not None and self.base.configured:
            trusted = frozenset({(self.base.scheme, self.base.host, self.base.port)})
        # One rule for exactly this hop's host and port: the egress policy then checks the URL,
        # the addresses the name resolves to and the scheme, as for any other request.
        authority = f"[{target.host}]" if ":" in target.host else target.host
        rule = egress.EgressRule(host=f"{authority}:{target.port}", methods=frozenset({"GET"}))
        return egress.EgressPolicy(
            rules=(rule,),
            allow_private_network=self.host.allow_private_network,
            allow_plain_http_loopback=self.host.allow_private_network,
            trusted_origins=trusted,
            max_response_bytes=MAX_FETCH_BYTES,
            timeout_s=min(FETCH_TIMEOUT_S, self.host.timeout_s),
        )

    async def fetch(self, url: str) -> tuple[str, Any, list[str]]:
        from pincer.safety import egress

        hops: list[str] = []
        current = _https(url, self.base)
        for _ in range(MAX_REDIRECTS + 1):
            policy = self._policy(current)
            request = egress.HttpRequest(
                method="GET",
                url=current,
                headers=(
                    ("User-Agent", _USER_AGENT),
                    ("Accept", "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5"),
                ),
            )
            response = await egress.send(request, policy=policy)
            location = response.header("location")
            if 300 <= response.status < 400 and location:
                hops.append(current)
                current = _https(urljoin(current, location), self.base)
                continue
            return current, response, hops
        raise ToolError(
            f"web_fetch: more than {MAX_REDIRECTS} redirects from {url[:200]}",
            hint="fetch the final address directly",
        )


def web_fetch_tool(*, base_url: str | None = None) -> NativeTool:
    base = BaseUrl.parse(base_url, configured=True, key="[builtins.web_fetch] base_url") if base_url else None

    async def fetch(host: HostContext, args: Mapping[str, Any]) -> Any:
        max_chars = int(args.get("max_chars") or DEFAULT_MAX_CHARS)
        final, response, hops = await _Fetcher(host, base).fetch(str(args["url"]))
        content_type = (response.header("content-type") or "text/html").lower()
        if response.status >= 400:
            raise ToolError(
                f"web_fetch: {final} answered {response.status}", hint="check the URL; the page is not there"
            )
        mime = content_type.split(";", 1)[0].strip()
        text, charset = decode_page(response.body, content_type)
        title = None
        if mime in _HTML_TYPES or (not mime and "<html" in text[:2000].lower()):
            markdown, title = await anyio.to_thread.run_sync(
                lambda: html_to_markdown(text, url=final), abandon_on_cancel=True
            )
        elif mime in _TEXT_TYPES or mime.startswith("text/"):
            markdown = text
        else:
            raise ToolError(
                f"web_fetch: {final} is {mime or 'of no declared type'}, not a page of text",
                hint="web_fetch reads HTML and text pages; use the http tool for other content",
            )
        cut = len(markdown) > max_chars
        if cut:
            markdown = markdown[:max_chars] + f"\n\n… [cut at {max_chars} characters; ask with a larger max_chars]"
        out: dict[str, Any] = {
            "url": final,
            "status": response.status,
            "title": title,
            "content_type": mime,
            "charset": charset,
            "markdown": markdown,
            "truncated": cut or response.truncated,
        }
        if hops:
            out["redirects"] = hops
        return out

    action = Action(
        name="fetch",
        toolset="web",
        handler=fetch,
        required=("url",),
        optional=("max_chars",),
        effects=frozenset({EffectKind.NETWORK}),
        description="fetch a page as Markdown",
    )
    fields = {
        "url": {"type": "string", "minLength": 1, "maxLength": 8192, "description": "The page's http(s) URL"},
        "max_chars": {
            "type": "integer",
            "minimum": 100,
            "maximum": MAX_CHARS,
            "description": f"Longest Markdown returned (default {DEFAULT_MAX_CHARS})",
        },
    }
    return make_tool(
        name="web_fetch",
        description="Fetch a web page and return its main content as Markdown (navigation, footers and ads "
        "removed), with its title. Public https pages only; redirects are followed and checked.",
        actions=ActionSet(tool="web_fetch", actions=(action,), fields=fields),
        capabilities=Capabilities(source="pincer:builtins/web_fetch", name="web_fetch"),
        api=lambda host: host,
    )
