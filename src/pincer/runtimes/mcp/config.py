"""MCP server entries and their file, ``$PINCER_HOME/mcp/servers.json``.

The file is pincer's own (``{"schema_version": 1, "servers": [...]}``), parsed strictly: a typo
in your own server list is an error naming the server and the key. Foreign formats (IronClaw's
``mcp-servers.json``, registry entries, ``mcpServers`` maps, OpenClaw's ``mcp.servers``) are read
by :mod:`.importers`.

Besides how to reach the server, an entry says what its tools do: ``effects`` (the base set of
every tool), ``tools`` (per-tool overrides, ``{"TOOL": {"effects": [...]}}``, keyed by the
server's own tool name), ``read_only``/``read_only_tools``; :mod:`.tools` has the table. And
``capabilities``: labels taken over from OpenClaw entries (``["discord", "telegram"]``), shown
by ``pincer mcp list`` and put on each tool (``annotations.capabilities``) for
``pincer tools list --capability``/``pincer mcp list --capability`` to filter by. They are
descriptions, never permissions: pincer neither checks nor grants anything by them.

Secrets never sit in this file: an env value or header may say ``${secret:NAME}`` and the value
is taken from the secret store when the server is started.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pincer.core.effects import EffectKind
from pincer.core.errors import ConfigError, RuntimeUnavailable, UsageError
from pincer.runtimes.mcp.environment import check_variable_name
from pincer.store.jsonfile import locked, read_json, write_json_atomic

__all__ = [
    "ServerConfig",
    "ServerStore",
    "CONNECT_TIMEOUT_S",
    "SERVERS_FILE",
    "check_server_name",
    "may_own_tool",
    "check_url",
    "check_header",
    "check_capability",
    "check_command",
    "tool_name",
    "sanitize",
]

SERVERS_FILE = Path("mcp") / "servers.json"
SCHEMA_VERSION = 1
CONNECT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 3_600.0

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_]")
_CAPABILITY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$")
MAX_TOOL_OVERRIDES = 1_000
_LOOPBACK_NAMES = frozenset({"localhost", "localhost."})

Transport = Literal["stdio", "http", "sse"]
Startup = Literal["lazy", "eager"]


def sanitize(text: str) -> str:
    """Every character other than an ASCII letter, digit or ``_`` becomes ``_``."""
    return _NOT_NAME_CHAR.sub("_", text)


def tool_name(server: str, tool: str) -> str:
    """The registry name of an upstream tool: ``{server}_{tool}``, sanitized."""
    return sanitize(f"{server}_{tool}")


def may_own_tool(server: str, tool: str) -> bool:
    """Whether ``tool`` can be one of ``server``'s registry names (every one is ``{server}_...``)."""
    return tool.startswith(sanitize(server) + "_")


def check_server_name(name: object) -> str:
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise UsageError(
            f"{name!r} is not a usable MCP server name",
            hint="use 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit",
        )
    return name


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: object, *, source: str) -> str:
    """An MCP endpoint: https anywhere, plain http only to loopback; no userinfo."""
    if not isinstance(url, str) or not url:
        raise UsageError(f"{source}: the server URL is missing", hint="give --url https://host/mcp")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port
    except ValueError as exc:
        raise UsageError(f"{source}: the URL cannot be parsed: {exc}", hint="give a URL like https://host/mcp") from None
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"{source}: {url!r} is not an http(s) URL", hint="give a URL like https://host/mcp")
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            f"{source}: the URL carries a user name or password",
            hint='put credentials in a header from the secret store: --header "Authorization:Bearer ${secret:NAME}"',
        )
    if parts.scheme == "http" and not _is_loopback(host):
        raise UsageError(f"{source}: plain http is allowed only to this machine", hint="use https://")
    if any(c in url for c in "\r\n\t\0 "):
        raise UsageError(f"{source}: the URL contains whitespace or control characters")
    return url


def find_command(command: str, *, cwd: str | None = None, path: str | None = None) -> str | None:
    """Where ``command`` would be run from: a path (relative ones against ``cwd``, as the
    supervisor runs it there) that is an executable file, or a name found on ``path``."""
    if "/" in command:
        candidate = Path(command).expanduser()
        if not candidate.is_absolute() and cwd:
            candidate = Path(cwd) / candidate
        return str(candidate) if candidate.is_file() and os.access(candidate, os.X_OK) else None
    return shutil.which(command, path=path)


def check_command(config: ServerConfig) -> str:
    """A stdio server's command resolves to an executable now; its path. Raises
    RuntimeUnavailable saying what is missing (``pincer mcp add --force`` saves it anyway)."""
    command = config.command or ""
    path = config.env.get("PATH") if "${" not in config.env.get("PATH", "") else None
    searched = path if path is not None else os.environ.get("PATH", os.defpath)
    found = find_command(command, cwd=config.cwd, path=searched)
    if found is not None:
        return found
    if "/" in command:
        problem = f"{command!r} is not an executable file" + (f" (relative to {config.cwd})" if config.cwd else "")
    else:
        problem = f"{command!r} is not on PATH (searched {searched or '(empty)'})"
    raise RuntimeUnavailable(
        f"MCP server {config.name!r}: {problem}; nothing was saved",
        hint="install the program or give its full path with --command; --force saves the entry anyway",
    )


def check_capability(label: object, *, source: str) -> str:
    if not isinstance(label, str) or not _CAPABILITY.match(label):
        raise UsageError(
            f"{source}: {label!r} is not a usable capability label",
            hint="use 1-64 letters, digits, '_', '-', '.', ':' or '/', like discord or telegram",
        )
    return label


def check_header(name: object, value: object, *, source: str) -> tuple[str, str]:
    if not isinstance(name, str) or not _HEADER_NAME.match(name):
        raise UsageError(f"{source}: {name!r} is not a valid HTTP header name", hint="use names like X-Api-Key")
    if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
        raise UsageError(f"{source}: the value of header {name} has a line break or NUL")
    return name, value


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerConfig:
    """One MCP server. ``transport`` stdio uses ``command``/``args``/``env``/``cwd``; http (streamable
    HTTP) and sse (the legacy HTTP+SSE transport) use ``url``/``headers``.

    ``startup`` lazy starts the server on its first call (its tools are known from the pins);
    eager starts it with pincer. ``timeout_s`` bounds each call (None: pincer's tools.timeout_s).
    ``effects`` replaces the default base set, ``tool_effects`` (upstream tool name -> effects)
    sets single tools' effects exactly, ``read_only`` (or a name in ``read_only_tools``) drops the
    write effects (the table is in :mod:`.tools`). ``capabilities`` are labels, never permissions.
    ``protocol`` is ``auto`` (discover the 2026 protocol, fall back to the initialize handshake),
    ``legacy`` (handshake only) or a version string."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    enabled: bool = True
    startup: Startup = "lazy"
    timeout_s: float | None = None
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_only: bool = False
    read_only_tools: tuple[str, ...] = ()
    effects: frozenset[EffectKind] | None = None
    tool_effects: Mapping[str, frozenset[EffectKind]] = field(default_factory=dict)
    capabilities: tuple[str, ...] = ()
    protocol: str = "auto"
    description: str | None = None

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        check_server_name(self.name)
        if self.transport == "stdio":
            if not self.command:
                raise UsageError(f"{where}: a stdio server needs a command", hint="give --command CMD")
            if self.url is not None:
                raise UsageError(f"{where}: a stdio server takes no URL", hint="give either --command or --url")
            if self.headers:
                raise UsageError(f"{where}: headers apply to http and sse servers only")
        elif self.transport in ("http", "sse"):
            check_url(self.url, source=where)
            if self.command is not None or self.args or self.env:
                raise UsageError(f"{where}: an {self.transport} server takes no command, args or env")
        else:
            raise UsageError(f"{where}: unknown transport {self.transport!r}", hint="use stdio, http or sse")
        for name in self.env:
            check_variable_name(name, source=f"{where} env")
        for name, value in self.headers.items():
            check_header(name, value, source=where)
        for timeout in (self.timeout_s, self.connect_timeout_s):
            if timeout is not None and not (0 < timeout <= MAX_TIMEOUT_S):
                raise UsageError(f"{where}: timeouts must be between 0 and {MAX_TIMEOUT_S:g} s")
        if self.startup not in ("lazy", "eager"):
            raise UsageError(f"{where}: startup must be lazy or eager")
        if self.protocol not in ("auto", "legacy") and not re.match(r"^\d{4}-\d{2}-\d{2}$", self.protocol):
            raise UsageError(f"{where}: protocol must be auto, legacy or a version like 2026-07-28")
        if len(self.tool_effects) > MAX_TOOL_OVERRIDES:
            raise UsageError(f"{where}: more than {MAX_TOOL_OVERRIDES} per-tool overrides")
        for tool in self.tool_effects:
            if not isinstance(tool, str) or not tool or len(tool) > 256:
                raise UsageError(f"{where}: {tool!r} is not a tool name", hint="use the server's own name of the tool")
        for label in self.capabilities:
            check_capability(label, source=where)

    @property
    def prefix(self) -> str:
        return sanitize(self.name)

    def with_changes(self, **changes: Any) -> ServerConfig:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            data["command"] = self.command
            data["args"] = list(self.args)
            if self.env:
                data["env"] = dict(self.env)
            if self.cwd:
                data["cwd"] = self.cwd
        else:
            data["url"] = self.url
            if self.headers:
                data["headers"] = dict(self.headers)
        data["enabled"] = self.enabled
        data["startup"] = self.startup
        if self.timeout_s is not None:
            data["timeout_s"] = self.timeout_s
        if self.connect_timeout_s != CONNECT_TIMEOUT_S:
            data["connect_timeout_s"] = self.connect_timeout_s
        if self.read_only:
            data["read_only"] = True
        if self.read_only_tools:
            data["read_only_tools"] = list(self.read_only_tools)
        if self.effects is not None:
            data["effects"] = sorted(e.value for e in self.effects)
        if self.tool_effects:
            data["tools"] = {
                tool: {"effects": sorted(e.value for e in effects)} for tool, effects in sorted(self.tool_effects.items())
            }
        if self.capabilities:
            data["capabilities"] = list(self.capabilities)
        if self.protocol != "auto":
            data["protocol"] = self.protocol
        if self.description:
            data["description"] = self.description
        return data


class _ToolEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    effects: list[EffectKind]


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    transport: Transport
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    startup: Startup = "lazy"
    timeout_s: float | None = None
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_only: bool = False
    read_only_tools: list[str] = Field(default_factory=list)
    effects: list[EffectKind] | None = None
    tools: dict[str, _ToolEntry] = Field(default_factory=dict)
    capabilities: list[str] = Field(default_factory=list)
    protocol: str = "auto"
    description: str | None = None


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    servers: list[_Entry] = Field(default_factory=list)


def _entry_to_config(entry: _Entry) -> ServerConfig:
    return ServerConfig(
        name=entry.name,
        transport=entry.transport,
        command=entry.command,
        args=tuple(entry.args),
        env=dict(entry.env),
        cwd=entry.cwd,
        url=entry.url,
        headers=dict(entry.headers),
        enabled=entry.enabled,
        startup=entry.startup,
        timeout_s=entry.timeout_s,
        connect_timeout_s=entry.connect_timeout_s,
        read_only=entry.read_only,
        read_only_tools=tuple(entry.read_only_tools),
        effects=frozenset(entry.effects) if entry.effects is not None else None,
        tool_effects={tool: frozenset(override.effects) for tool, override in entry.tools.items()},
        capabilities=tuple(entry.capabilities),
        protocol=entry.protocol,
        description=entry.description,
    )


def parse_servers(data: Any, *, source: str) -> list[ServerConfig]:
    """Parse pincer's servers file; every error names the file, the server and the key."""
    try:
        parsed = _File.model_validate(data if data is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ConfigError(f"{source}: {key}: {first['msg']}", hint="fix that key or remove the server and add it again") from None
    servers: list[ServerConfig] = []
    seen: set[str] = set()
    for index, entry in enumerate(parsed.servers):
        try:
            config = _entry_to_config(entry)
        except UsageError as exc:
            raise ConfigError(f"{source}: servers.{index}: {exc.message}", hint=exc.hint) from None
        if config.name in seen:
            raise ConfigError(f"{source}: server {config.name!r} is listed twice", hint="remove one of them")
        seen.add(config.name)
        servers.append(config)
    return servers


class ServerStore:
    """The server list of one PINCER_HOME. Every change is a locked, atomic rewrite."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / SERVERS_FILE

    def load(self) -> list[ServerConfig]:
        return parse_servers(read_json(self.path, default=None), source=str(self.path))

    def get(self, name: str) -> ServerConfig:
        for server in self.load():
            if server.name == name:
                return server
        raise UsageError(f"no MCP server named {name!r}", hint="`pincer mcp list` shows the configured servers")

    def add(self, config: ServerConfig, *, replace_existing: bool = False) -> None:
        with locked(self.path):
            servers = self.load()
            names = [s.name for s in servers]
            if config.name in names:
                if not replace_existing:
                    raise UsageError(
                        f"an MCP server named {config.name!r} already exists",
                        hint=f"remove it first (`pincer mcp remove {config.name}`) or pick another name",
                    )
                servers[names.index(config.name)] = config
            else:
                servers.append(config)
            self._write(servers)

    def add_many(self, configs: list[ServerConfig], *, replace_existing: bool = False) -> None:
        """Add several servers at once: all of them or, on a clash, none."""
        with locked(self.path):
            servers = self.load()
            by_name = {s.name: i for i, s in enumerate(servers)}
            for config in configs:
                if config.name in by_name and not replace_existing:
                    raise UsageError(
                        f"an MCP server named {config.name!r} already exists; nothing was imported",
                        hint="remove it first, or import with --replace",
                    )
            for config in configs:
                if config.name in by_name:
                    servers[by_name[config.name]] = config
                else:
                    by_name[config.name] = len(servers)
                    servers.append(config)
            self._write(servers)

    def remove(self, name: str) -> ServerConfig:
        with locked(self.path):
            servers = self.load()
            for index, server in enumerate(servers):
                if server.name == name:
                    del servers[index]
                    self._write(servers)
                    return server
        raise UsageError(f"no MCP server named {name!r}", hint="`pincer mcp list` shows the configured servers")

    def _write(self, servers: list[ServerConfig]) -> None:
        write_json_atomic(
            self.path, {"schema_version": SCHEMA_VERSION, "servers": [s.to_json() for s in servers]}
        )
