"""Tokens for the built-ins, as their capabilities ``auth``/``setup`` sections say: which secret,
which env var may hold it, where to get one, and the request that proves it works
(``validation_endpoint``). ``pincer auth setup|status|revoke`` is the CLI over this module.

A token is checked before it is stored: the validation request goes through the same egress
client and credential injection as the tool's own calls, to the tool's configured base URL, so a
token for GitHub Enterprise is checked against GitHub Enterprise. Revoking forgets the token
locally (a personal access token can only be revoked by its owner on the provider's site: the
result says where).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pincer.core.capabilities import Capabilities
from pincer.core.errors import ToolError, UsageError
from pincer.core.values import HostContext

if TYPE_CHECKING:
    from pincer.builtins.api import BaseUrl

__all__ = ["AuthTarget", "auth_targets", "target", "validate_token", "status"]


@dataclass(frozen=True, kw_only=True, slots=True)
class AuthTarget:
    """One built-in's credential: the tool, its (rebased) capabilities and base URL."""

    name: str
    secret_name: str
    display_name: str
    capabilities: Capabilities
    base: BaseUrl
    default_host: str
    env_var: str | None = None
    instructions: str | None = None
    setup_url: str | None = None
    token_hint: str | None = None
    prompt: str | None = None


def auth_targets(settings: Mapping[str, Any]) -> dict[str, AuthTarget]:
    """Every built-in that takes a token, with the base URL ``[builtins.NAME]`` configures."""
    from pincer.builtins import brave, github
    from pincer.builtins.api import BaseUrl, rebase_capabilities

    def base_url(name: str, shared: str | None = None) -> str | None:
        own = settings.get(name)
        if own is not None and own.base_url:
            return str(own.base_url)
        other = settings.get(shared) if shared else None
        return str(other.base_url) if other is not None and other.base_url else None

    found: dict[str, AuthTarget] = {}
    sources = (
        ("github", github.manifest(), base_url("github"), github.DEFAULT_BASE_URL, github.DEFAULT_HOST),
        ("web_search", brave._manifest("web_search"), base_url("web_search", "brave"), brave.DEFAULT_BASE_URL,
         brave.DEFAULT_HOST),
        ("llm_context", brave._manifest("llm_context"), base_url("llm_context", "brave"), brave.DEFAULT_BASE_URL,
         brave.DEFAULT_HOST),
        *_chat_sources(base_url),
    )
    for name, caps, configured, default, host in sources:
        auth = caps.auth
        if auth is None:
            continue
        base = BaseUrl.parse(configured or default, configured=configured is not None, key=f"[builtins.{name}] base_url")
        if configured:
            caps = rebase_capabilities(caps, base, default_host=host)
        prompt = next((s.prompt for s in (caps.setup.secrets if caps.setup else ()) if s.name == auth.secret_name), None)
        found[name] = AuthTarget(
            name=name,
            secret_name=auth.secret_name,
            display_name=auth.display_name or name,
            capabilities=caps,
            base=base,
            default_host=host,
            env_var=auth.env_var,
            instructions=auth.instructions,
            setup_url=auth.setup_url,
            token_hint=auth.token_hint,
            prompt=prompt,
        )
    return found


def _chat_sources(base_url: Any) -> tuple[tuple[str, Capabilities, str | None, str, str], ...]:
    from pincer.builtins import composio, portfolio, slack, telegram

    return (
        ("slack", slack.manifest(), base_url("slack"), slack.DEFAULT_BASE_URL, slack.DEFAULT_HOST),
        ("telegram", telegram.manifest(), base_url("telegram"), telegram.DEFAULT_BASE_URL, telegram.DEFAULT_HOST),
        ("portfolio", portfolio.manifest(), base_url("portfolio", "dune"), portfolio.DEFAULT_BASE_URL,
         portfolio.DEFAULT_HOST),
        ("composio", composio.manifest(), base_url("composio"), composio.DEFAULT_BASE_URL, composio.DEFAULT_HOST),
    )


def target(settings: Mapping[str, Any], name: str) -> AuthTarget:
    targets = auth_targets(settings)
    if name == "brave":
        name = "web_search"  # one key serves web_search and llm_context
    elif name == "dune":
        name = "portfolio"  # the Dune key is portfolio's
    if name not in targets:
        raise UsageError(
            f"no built-in called {name!r} takes a token",
            hint=f"run `pincer auth setup` with one of: {', '.join(sorted(targets))}",
        )
    return targets[name]


class _Candidate:
    """A SecretAccess for one value that is not stored yet (the token being checked)."""

    def __init__(self, name: str, value: str) -> None:
        self._name = name
        self._value = value
        self.injected: list[str] = []

    def find(self, name: str) -> str | None:
        return self._value if name == self._name else None

    def has(self, name: str) -> bool:
        return name == self._name

    def record(self, value: str) -> None:
        self.injected.append(value)


async def validate_token(item: AuthTarget, value: str, *, allow_private_network: bool = False) -> str | None:
    """Send the validation request with ``value`` injected; None when the manifest has none.
    Raises UsageError when the provider refuses the token (the status, never the token)."""
    from pincer.builtins.api import ApiClient

    auth = item.capabilities.auth
    endpoint = auth.validation_endpoint if auth is not None else None
    if endpoint is None:
        return None
    parts = urlsplit(endpoint.url)
    path = parts.path
    if parts.hostname != item.default_host:
        raise UsageError(f"{item.name}: the validation endpoint {endpoint.url!r} is not on {item.default_host}")
    host = HostContext(
        session="main",
        tool=item.name,
        capabilities=item.capabilities,
        secrets=_Candidate(item.secret_name, value),
        allow_private_network=allow_private_network,
        timeout_s=30.0,
    )
    client = ApiClient(tool=item.name, base=item.base, host=host, headers=dict(endpoint.headers))
    try:
        response = await client.request(endpoint.method, path + (f"?{parts.query}" if parts.query else ""))
    except ToolError as exc:  # not reached (no name, no route, a timeout): the token is not the problem
        raise ToolError(
            f"could not check the token: {endpoint.method} {item.base.url(path)} failed: {exc.message}",
            hint=f"check the network connection; offline, store it unchecked: `pincer auth setup {item.name} --no-check`",
        ) from None
    refusal = _refused_in_body(response.body)
    if response.status != endpoint.success_status or refusal is not None:
        answered = f"{response.status}, ok: false ({refusal})" if refusal else str(response.status)
        raise ToolError(
            f"{item.display_name} refused the token: {endpoint.method} {item.base.url(path)} answered "
            f"{answered} (expected {endpoint.success_status})",
            hint=f"check the token ({item.token_hint or 'as issued'}) and run `pincer auth setup {item.name}` again",
        )
    return item.base.url(path)


def _refused_in_body(body: bytes) -> str | None:
    """The API's own error when it answered ``{"ok": false}`` (Slack refuses a token so, with
    HTTP 200; Telegram with a 401), else None."""
    import json

    try:
        data = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(data, Mapping) or data.get("ok") is not False:
        return None
    return str(data.get("error") or data.get("description") or "refused")[:200]


def status(settings: Mapping[str, Any], store: Any, environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """What is set up, per built-in: stored or not, when, whether its env var is set. No values."""
    stored = {info.name: info for info in store.names()}
    rows = []
    for name, item in sorted(auth_targets(settings).items()):
        info = stored.get(item.secret_name)
        rows.append(
            {
                "tool": name,
                "secret": item.secret_name,
                "stored": info is not None,
                "updated_at": info.updated_at if info is not None else None,
                "env_var": item.env_var,
                "env_var_set": bool(item.env_var and environ.get(item.env_var)),
                "base_url": item.base.url("") if item.base.configured else None,
            }
        )
    return rows
