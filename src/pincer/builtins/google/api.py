"""Google's REST conventions over :class:`~pincer.builtins.api.ApiClient`, and the builder the six
Google tools share.

* the login: refreshed before its expiry and once after a 401 (:class:`TokenKeeper`); a second
  401, or a refresh the provider refuses, is :class:`ReauthRequired` naming
  ``pincer auth setup google``; no loop;
* errors: Google's ``{"error": {"code", "message", "status"}}`` becomes a ToolError with the
  message; 429 and ``RATE_LIMIT_EXCEEDED``/``userRateLimitExceeded`` 403s are ApiRateLimited.
"""

from __future__ import annotations

import json as jsonlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from pincer.builtins.actions import Action, ActionSet, select_actions
from pincer.builtins.api import ApiClient, BaseUrl, ConnectionPool, json_body, rebase_capabilities
from pincer.builtins.tool import bundled_manifest, make_tool
from pincer.core.capabilities import Capabilities
from pincer.core.errors import ApiRateLimited, ReauthRequired, ToolError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["GoogleApi", "google_tool", "LOGIN", "AUTH_COMMAND"]

logger = logging.getLogger(__name__)

LOGIN = "google"
AUTH_COMMAND = "pincer auth setup google"
_RATE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED", "quotaExceeded"})


class GoogleApi:
    """One call's way to one Google API (the tool's ApiClient, the login's keeper)."""

    def __init__(self, client: ApiClient, tokens: Any = None) -> None:
        self.client = client
        self.tool = client.tool
        self._tokens = tokens  # pincer.builtins.oauth.TokenKeeper, or None (no refresh)

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        """The decoded JSON answer (``raw``: the body's bytes); errors translated."""
        stamp = None
        # A per-person login is the calling person's own: theirs is refreshed, never another's.
        person = self.client.host.person
        if self._tokens is not None:
            await self._tokens.ensure_fresh(LOGIN, person)
            stamp = self._tokens.stamp(LOGIN, person)
        response = await self.client.request(method, path, query=query, json=json, content=content, headers=headers)
        if response.status == 401 and self._tokens is not None:
            await self._tokens.after_unauthorized(LOGIN, stamp, person)  # ReauthRequired when refused
            response = await self.client.request(method, path, query=query, json=json, content=content,
                                                 headers=headers)
        if 200 <= response.status < 300:
            if raw:
                return response.body
            return json_body(response, self.tool) if response.status != 204 else None
        raise _error(self.tool, method, path, response)


def _google_error(response: Any) -> tuple[str, str | None]:
    try:
        data = jsonlib.loads(response.body.decode("utf-8", "replace"))
    except ValueError:
        return f"HTTP {response.status}", None
    error = data.get("error") if isinstance(data, Mapping) else None
    if isinstance(error, Mapping):
        reason = None
        errors = error.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], Mapping):
            reason = errors[0].get("reason")
        reason = reason or error.get("status")
        return str(error.get("message") or f"HTTP {response.status}")[:500], str(reason) if reason else None
    return f"HTTP {response.status}", None


def _error(tool: str, method: str, path: str, response: Any) -> Exception:
    message, reason = _google_error(response)
    where = f"{method} {path.split('?', 1)[0]}"
    if response.status == 401:
        return ReauthRequired(
            f"{tool}: Google refused the login (401: {message})",
            hint=f"reconnect with `{AUTH_COMMAND}`",
        )
    if response.status == 429 or (response.status == 403 and reason in _RATE_REASONS):
        return ApiRateLimited(
            f"{tool}: Google's rate limit ({where}): {message}",
            hint="wait a minute, then retry; fewer calls in a row",
        )
    if response.status == 403:
        return ToolError(
            f"{tool}: {where}: Google refused ({reason or 403}: {message})",
            hint=f"the login may lack this tool's scope: run `{AUTH_COMMAND}` again to grant it",
        )
    if response.status == 404:
        return ToolError(f"{tool}: {where}: not found (404: {message})", hint="check the ids passed")
    if response.status == 400:
        return ToolError(f"{tool}: {where}: Google refused the input (400: {message})", hint="fix the fields it names")
    return ToolError(f"{tool}: {where} failed ({response.status}: {message})", hint="retry later or check the input")


def manifest(name: str) -> Capabilities:
    return bundled_manifest(name)


def google_tool(
    *,
    name: str,
    description: str,
    actions: tuple[Action, ...],
    fields: Mapping[str, Mapping[str, Any]],
    default_host: str,
    base_url: str | None = None,
    shared_base_url: str | None = None,
    names: list[str] | None = None,
    toolsets: list[str] | None = None,
    read_only: bool = False,
    pool: ConnectionPool | None = None,
    tokens: Any = None,
    check: Callable[[str, Mapping[str, Any]], None] | None = None,
) -> NativeTool:
    """One Google tool, narrowed as configured; its base URL is its own ``[builtins.NAME]
    base_url``, else ``[builtins.google] base_url``, else Google's."""
    chosen = select_actions(actions, tool=name, names=names, toolsets=toolsets, read_only=read_only)
    action_set = ActionSet(tool=name, actions=chosen, fields=fields)
    configured = base_url or shared_base_url
    key = f"[builtins.{name}] base_url" if base_url else "[builtins.google] base_url"
    base = BaseUrl.parse(configured or f"https://{default_host}", configured=configured is not None, key=key)
    caps = manifest(name)
    if configured is not None:
        caps = rebase_capabilities(caps, base, default_host=default_host)

    def api(host: Any) -> GoogleApi:
        client = ApiClient(tool=name, base=base, host=host, auth_command=AUTH_COMMAND, pool=pool,
                           headers={"Accept": "application/json"})
        return GoogleApi(client, tokens)

    return make_tool(name=name, description=description, actions=action_set, capabilities=caps, api=api, check=check)
