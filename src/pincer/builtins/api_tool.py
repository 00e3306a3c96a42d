"""A built-in over one HTTP API, declared as data, and the one factory that makes its tool.

github, slack, telegram and portfolio differ only in what is declared here: their actions and
field table, the API's default address and the config key that moves it, the headers every request
carries, the command that sets up their credential, and (github) a client of its own around
:class:`~pincer.builtins.api.ApiClient` and an input check. The wiring is :meth:`ApiTool.tool`:
narrow the actions as configured, parse the base URL, rebase the bundled capabilities manifest
onto a configured base, and build the NativeTool (:func:`~pincer.builtins.tool.make_tool`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pincer.builtins.actions import Action, ActionSet, select_actions
from pincer.builtins.api import ApiClient, BaseUrl, ConnectionPool, rebase_capabilities
from pincer.builtins.tool import Checker, bundled_manifest, make_tool
from pincer.core.capabilities import Capabilities
from pincer.core.values import HostContext
from pincer.runtimes.native.decorator import NativeTool

__all__ = ["ApiTool", "JSON_HEADERS"]

JSON_HEADERS: Mapping[str, str] = {"Accept": "application/json"}


@dataclass(frozen=True, kw_only=True, slots=True)
class ApiTool:
    """One built-in over one HTTP API. ``hosts``: the manifest's hosts, the API's first; a
    configured base URL replaces each of them (slack uploads files to a second host)."""

    name: str
    description: str
    actions: tuple[Action, ...]
    fields: Mapping[str, Mapping[str, Any]]
    hosts: tuple[str, ...]
    base_url_key: str  # the config key that moves the API, named in errors: "[builtins.github] base_url"
    headers: Mapping[str, str] = field(default_factory=lambda: JSON_HEADERS)
    auth_command: str | None = None  # None: `pincer auth setup NAME`
    client: Callable[[ApiClient], Any] | None = None  # what the handlers get; None: the ApiClient
    check: Checker | None = None  # raises for bad input, in the preflight and the call

    @property
    def default_base_url(self) -> str:
        return f"https://{self.hosts[0]}"

    def capabilities(self, base: BaseUrl) -> Capabilities:
        """The bundled manifest as the base URL leaves it: a configured base takes every host's place."""
        caps = bundled_manifest(self.name)
        if not base.configured:
            return caps
        return rebase_capabilities(caps, base, default_host=self.hosts[0], other_hosts=self.hosts[1:])

    def tool(
        self,
        *,
        base_url: str | None = None,
        actions: list[str] | None = None,
        toolsets: list[str] | None = None,
        read_only: bool = False,
        pool: ConnectionPool | None = None,
    ) -> NativeTool:
        """The tool, narrowed as ``[builtins.NAME]`` says; ``pool`` keeps connections between
        calls (the runtime that registers the tool closes it)."""
        chosen = select_actions(self.actions, tool=self.name, names=actions, toolsets=toolsets, read_only=read_only)
        base = BaseUrl.parse(base_url or self.default_base_url, configured=base_url is not None, key=self.base_url_key)

        def api(host: HostContext) -> Any:
            client = ApiClient(tool=self.name, base=base, host=host, headers=self.headers,
                               auth_command=self.auth_command, pool=pool)  # fmt: skip
            return client if self.client is None else self.client(client)

        return make_tool(
            name=self.name,
            description=self.description,
            actions=ActionSet(tool=self.name, actions=chosen, fields=self.fields),
            capabilities=self.capabilities(base),
            api=api,
            check=self.check,
        )
