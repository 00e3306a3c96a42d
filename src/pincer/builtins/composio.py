"""The ``composio`` built-in: the Composio actions a person enables, run through Composio's v3.1 API
(``POST /api/v3.1/tools/execute/{slug}``, the path of Composio's own client, ``composio-client``),
key ``composio_api_key`` injected as ``x-api-key``.

Composio fronts hundreds of apps; what an action does (read a mailbox, send a message, delete a
file) is known only to the person who picks it. So the configuration names each action and its
effects, and the tool offers exactly those::

    [builtins.composio]
    enabled = true
    actions = ["GITHUB_GET_A_REPOSITORY", "SLACK_SEND_MESSAGE"]
    effects = { GITHUB_GET_A_REPOSITORY = ["network"], SLACK_SEND_MESSAGE = ["network", "external_write"] }

Each enabled action is one action of the tool (its ``action`` enum), with the declared effects
plus ``network`` and ``use_secret`` (every call carries the key to Composio). An enabled action
without declared effects, an effects entry for an action that is not enabled, or no action at all
is a ConfigError: fail closed, never a guess. An action not enabled is not offered (the schema
refuses it before anything runs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pincer.builtins.actions import READ_EFFECTS, Action, ActionSet
from pincer.builtins.api import (
    ApiClient,
    BaseUrl,
    ConnectionPool,
    error_message,
    json_body,
    rebase_capabilities,
    segment,
)
from pincer.builtins.tool import bundled_manifest, make_tool
from pincer.builtins.trim import trim
from pincer.core.capabilities import Capabilities
from pincer.core.effects import EffectKind
from pincer.core.errors import ApiRateLimited, ApiRefused, ConfigError, ToolError
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["composio_tool", "manifest", "DEFAULT_BASE_URL", "DEFAULT_HOST", "USER_ID"]

DEFAULT_HOST = "backend.composio.dev"
DEFAULT_BASE_URL = f"https://{DEFAULT_HOST}"
USER_ID = "default"  # Composio's default user: the connected accounts made in its dashboard
_SLUG = re.compile(r"^[A-Z][A-Z0-9_]{1,127}$")

FIELDS: dict[str, dict[str, Any]] = {
    "arguments": {"type": "object", "description": "The action's arguments, as Composio documents them"},
}


def _declared(actions: Sequence[str] | None, effects: Mapping[str, Sequence[str]] | None) -> dict[str, frozenset[EffectKind]]:
    if not actions:
        raise ConfigError(
            "[builtins.composio] enables no action",
            hint='set [builtins.composio] actions = ["SLUG", ...] and effects = { SLUG = ["network", ...] } in config.toml',
        )
    declared = dict(effects or {})
    out: dict[str, frozenset[EffectKind]] = {}
    for slug in actions:
        if not _SLUG.match(slug):
            raise ConfigError(
                f"[builtins.composio] actions: {slug[:80]!r} is not a Composio action slug (e.g. SLACK_SEND_MESSAGE)",
                hint="copy the slug from Composio's tool list into [builtins.composio] actions in config.toml",
            )
        own = declared.get(slug)
        if not own:
            raise ConfigError(
                f"[builtins.composio] action {slug} has no declared effects (rule: fail closed)",
                hint=f'add {slug} = ["network", "external_write"] (what it does) to [builtins.composio] effects '
                "in config.toml",
            )
        try:
            out[slug] = frozenset(EffectKind(e) for e in own) | READ_EFFECTS
        except ValueError:
            raise ConfigError(
                f"[builtins.composio] effects of {slug}: {list(own)} names an unknown effect",
                hint=f"use effects from: {', '.join(e.value for e in EffectKind)}",
            ) from None
    stray = sorted(set(declared) - set(actions))
    if stray:
        raise ConfigError(
            f"[builtins.composio] effects names actions that are not enabled: {', '.join(stray)}",
            hint="add them to [builtins.composio] actions in config.toml, or drop their effects entries",
        )
    return out


def _execute(slug: str) -> Any:
    async def run(api: ApiClient, args: Mapping[str, Any]) -> Any:
        body = {"user_id": USER_ID, "arguments": dict(args.get("arguments") or {})}
        response = await api.request("POST", f"/api/v3.1/tools/execute/{segment(slug, 'action')}", json=body)
        if response.status == 429:
            raise ApiRateLimited(f"composio: {slug} is rate-limited", hint="wait and retry")
        if response.status in (401, 403):
            raise ToolError(
                f"composio: Composio refused the API key ({response.status}: {error_message(response)})",
                hint="set a valid key with `pincer auth setup composio`",
            )
        data = json_body(response, "composio")
        if response.status != 200 or not isinstance(data, Mapping):
            raise ToolError(f"composio: {slug} answered HTTP {response.status}: {error_message(response)}",
                            hint="check the action's arguments against Composio's documentation")
        if data.get("successful") is not True:
            detail = str(data.get("error") or "unsuccessful")[:300]
            raise ApiRefused(f"composio: {slug} failed: {detail}", api_code="unsuccessful",
                             hint="check the connected account in Composio's dashboard and the arguments")
        return {"action": slug, "data": trim(data.get("data"))}

    return run


def manifest() -> Capabilities:
    return bundled_manifest("composio")


def composio_tool(
    *,
    base_url: str | None = None,
    actions: list[str] | None = None,
    effects: Mapping[str, Sequence[str]] | None = None,
    read_only: bool = False,
    pool: ConnectionPool | None = None,
) -> NativeTool:
    """The tool offering exactly the enabled actions; ConfigError for anything undeclared."""
    table = _declared(actions, effects)
    chosen = tuple(
        Action(
            name=slug,
            toolset="composio",
            handler=_execute(slug),
            optional=("arguments",),
            effects=own,
            writes=bool(own - READ_EFFECTS),
            description=f"Composio action {slug} (effects: {', '.join(sorted(e.value for e in own))})",
        )
        for slug, own in table.items()
    )
    if read_only:
        chosen = tuple(a for a in chosen if not a.writes)
        if not chosen:
            raise ConfigError(
                "[builtins.composio] read_only = true leaves no action: every enabled action declares a write",
                hint="enable a read action in [builtins.composio] actions, or drop read_only in config.toml",
            )
    base = BaseUrl.parse(base_url or DEFAULT_BASE_URL, configured=base_url is not None, key="[builtins.composio] base_url")
    caps = manifest()
    if base.configured:
        caps = rebase_capabilities(caps, base, default_host=DEFAULT_HOST)

    def api(host: Any) -> ApiClient:
        return ApiClient(tool="composio", base=base, host=host, headers={"Accept": "application/json"},
                         auth_command="pincer auth setup composio", pool=pool)

    return make_tool(
        name="composio",
        description="Run the Composio actions enabled in config.toml, each with the effects declared there. "
        "The Composio API key is added by pincer.",
        actions=ActionSet(tool="composio", actions=chosen, fields=FIELDS),
        capabilities=caps,
        api=api,
    )
