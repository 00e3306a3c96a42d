"""``web_search`` (Brave Search's web search API) and ``llm_context`` (Brave's LLM-context API:
pre-extracted page content for grounding), sharing the ``brave_api_key`` secret, injected by the
egress client as ``X-Subscription-Token``.

The search provider is pluggable behind :class:`SearchProvider` (one method); Brave is the one
shipped. ``[builtins.brave] base_url`` (or ``[builtins.web_search] base_url``) points both at
another host, e.g. a local server in the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pincer.builtins.actions import READ_EFFECTS, Action, ActionSet
from pincer.builtins.api import ApiClient, BaseUrl, ConnectionPool, error_message, json_body, rebase_capabilities
from pincer.builtins.tool import bundled_manifest, make_tool
from pincer.core.capabilities import Capabilities
from pincer.core.errors import ApiRateLimited, ToolError, UsageError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["SearchHit", "SearchProvider", "BraveSearch", "web_search_tool", "llm_context_tool", "DEFAULT_BASE_URL"]

DEFAULT_HOST = "api.search.brave.com"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
MAX_RESULTS = 20  # Brave's own maximum count for web search
MAX_QUERY_CHARS = 400  # Brave refuses longer queries
_FRESHNESS = ["pd", "pw", "pm", "py"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchHit:
    title: str
    url: str
    description: str = ""
    age: str | None = None


class SearchProvider(Protocol):
    """A web search backend: one query in, ranked hits out (through the call's ApiClient)."""

    async def search(
        self, api: ApiClient, query: str, *, count: int, options: Mapping[str, Any]
    ) -> list[SearchHit]: ...


def _check(api: ApiClient, response: Any) -> Any:
    if response.status == 429:
        reset = response.header("x-ratelimit-reset")
        raise ApiRateLimited(
            f"{api.tool}: Brave's rate limit is spent" + (f"; it resets in {reset.split(',')[0]} s" if reset else ""),
            hint="wait and retry, or raise the plan of the key set with `pincer auth setup web_search`",
        )
    if response.status in (401, 403):
        raise ToolError(
            f"{api.tool}: Brave refused the API key ({response.status}: {error_message(response)})",
            hint="set a valid key with `pincer auth setup web_search`",
        )
    if response.status != 200:
        raise ToolError(f"{api.tool}: Brave answered {response.status}: {error_message(response)}", hint="retry later")
    return json_body(response, api.tool)


class BraveSearch:
    """Brave's ``GET /res/v1/web/search``."""

    async def search(self, api: ApiClient, query: str, *, count: int, options: Mapping[str, Any]) -> list[SearchHit]:
        params = {"q": query, "count": count, **{k: v for k, v in options.items() if v is not None}}
        data = _check(api, await api.request("GET", "/res/v1/web/search", query=params))
        results = ((data or {}).get("web") or {}).get("results") or []
        return [
            SearchHit(
                title=str(r.get("title", "")),
                url=str(r.get("url", "")),
                description=str(r.get("description", "")),
                age=r.get("age") or r.get("page_age"),
            )
            for r in results
            if isinstance(r, Mapping) and r.get("url")
        ]


_FIELDS: dict[str, dict[str, Any]] = {
    "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS, "description": "What to search for"},
    "count": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "How many results (default 5)"},
    "offset": {"type": "integer", "minimum": 0, "maximum": 9, "description": "Page of results (0-based)"},
    "country": {"type": "string", "pattern": "^[A-Za-z]{2}$", "description": "Two-letter country code, e.g. US"},
    "search_lang": {"type": "string", "pattern": "^[a-z]{2}(-[a-z]+)?$", "description": "Language code, e.g. en"},
    "freshness": {"type": "string", "enum": _FRESHNESS, "description": "pd: day, pw: week, pm: month, py: year"},
    "max_tokens": {"type": "integer", "minimum": 1024, "maximum": 32768, "description": "Budget for the content"},
}


def _manifest(name: str) -> Capabilities:
    return bundled_manifest(name)


def _setup(name: str, base_url: str | None) -> tuple[BaseUrl, Capabilities]:
    key = f"[builtins.{name}] base_url (or [builtins.brave] base_url)"
    base = BaseUrl.parse(base_url or DEFAULT_BASE_URL, configured=base_url is not None, key=key)
    caps = _manifest(name)
    if base_url is not None:
        caps = rebase_capabilities(caps, base, default_host=DEFAULT_HOST)
    return base, caps


def _brave_tool(name: str, description: str, action: Action, *, base_url: str | None, pool: ConnectionPool | None) -> NativeTool:
    """One Brave API as a tool of one action: its manifest (rebased onto ``base_url``), and an API
    client that sends JSON requests with the key pincer injects."""
    base, caps = _setup(name, base_url)
    return make_tool(
        name=name,
        description=description,
        actions=ActionSet(tool=name, actions=(action,), fields=_FIELDS),
        capabilities=caps,
        api=lambda host: ApiClient(
            tool=name,
            base=base,
            host=host,
            headers={"Accept": "application/json"},
            auth_command=f"pincer auth setup {name}",
            pool=pool,
        ),
    )


def _query(args: Mapping[str, Any]) -> str:
    query = str(args.get("query", "")).strip()
    if not query:
        raise UsageError("query is empty", hint="pass what to search for as query")
    return query


def web_search_tool(
    *, base_url: str | None = None, provider: SearchProvider | None = None, pool: ConnectionPool | None = None
) -> NativeTool:
    backend = provider or BraveSearch()

    async def search(api: ApiClient, args: Mapping[str, Any]) -> Any:
        options = {k: args.get(k) for k in ("offset", "country", "search_lang", "freshness")}
        hits = await backend.search(api, _query(args), count=int(args.get("count") or 5), options=options)
        return {
            "query": args["query"],
            "results": [{"title": h.title, "url": h.url, "description": h.description, "age": h.age} for h in hits],
        }

    action = Action(
        name="search",
        toolset="web",
        handler=search,
        required=("query",),
        optional=("count", "offset", "country", "search_lang", "freshness"),
        effects=READ_EFFECTS,
        description="search the web: titles, URLs, descriptions, ages",
    )
    return _brave_tool(
        "web_search",
        "Search the web (Brave Search). Returns titles, URLs, descriptions and ages of matching pages; "
        "filter by country, language and freshness. The API key is added by pincer.",
        action,
        base_url=base_url,
        pool=pool,
    )


def llm_context_tool(*, base_url: str | None = None, pool: ConnectionPool | None = None) -> NativeTool:
    async def context(api: ApiClient, args: Mapping[str, Any]) -> Any:
        body = {"q": _query(args), "count": int(args.get("count") or 5)}
        for key, name in (
            ("country", "country"),
            ("search_lang", "search_lang"),
            ("max_tokens", "maximum_number_of_tokens"),
        ):
            if args.get(key) is not None:
                body[name] = args[key]
        data = _check(api, await api.request("POST", "/res/v1/llm/context", json=body))
        grounding = ((data or {}).get("grounding") or {}).get("generic") or []
        sources = []
        for item in grounding:
            if isinstance(item, Mapping) and item.get("url"):
                snippets = [str(s) for s in item.get("snippets") or [] if isinstance(s, str)]
                sources.append({"url": item["url"], "title": item.get("title", ""), "snippets": snippets})
        return {"query": args["query"], "sources": sources}

    action = Action(
        name="context",
        toolset="web",
        handler=context,
        required=("query",),
        optional=("count", "country", "search_lang", "max_tokens"),
        effects=READ_EFFECTS,
        description="page content relevant to the query, pre-extracted for grounding",
    )
    return _brave_tool(
        "llm_context",
        "Fetch pre-extracted web content (text chunks, tables, code) relevant to a query from Brave "
        "Search, for grounding answers. Shares web_search's brave_api_key; the key is added by pincer.",
        action,
        base_url=base_url,
        pool=pool,
    )
