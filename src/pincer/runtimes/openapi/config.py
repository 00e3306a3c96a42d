"""OpenAPI services and their file, ``$PINCER_HOME/openapi/services.json``.

A service is stored with its operations already extracted (``pincer openapi add`` reads the
document once), so starting pincer needs neither the document nor the network, and the tools
do not change under the user unless the service is added again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from pincer.core.errors import ConfigError, UsageError
from pincer.runtimes.openapi.naming import assign_tool_names
from pincer.runtimes.openapi.operations import Operation
from pincer.runtimes.openapi.security import SecurityScheme, is_anonymous
from pincer.store.jsonfile import locked, read_json, write_json_atomic

__all__ = ["ServiceConfig", "ServiceStore", "parse_auth", "SERVICES_FILE", "MAX_SERVICE_NAME"]

SERVICES_FILE = Path("openapi") / "services.json"
SCHEMA_VERSION = 1
# A tool name is "{service}_{operation}" in at most 64 characters (naming.py); a service name of
# up to 40 leaves room for the operation and keeps every tool's name starting with it.
MAX_SERVICE_NAME = 40
_NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9_-]{{0,{MAX_SERVICE_NAME - 1}}}$")
_HEADER = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}$")
_SECRET = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def parse_auth(auth: str) -> tuple[str, str | None]:
    """``bearer`` | ``header:NAME`` | ``query:NAME`` -> (kind, name)."""
    kind, _, name = auth.partition(":")
    if kind == "bearer" and not name:
        return "bearer", None
    if kind in ("header", "query") and name and _HEADER.match(name):
        return kind, name
    raise UsageError(f"--auth {auth!r} is not bearer, header:NAME or query:NAME", hint="for example --auth header:X-Api-Key")


def host_pattern_of(url: str) -> str:
    """An allowlist host for ``url``: its host, with its port when it names one."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def path_prefix_of(url: str) -> str:
    return (urlsplit(url).path.rstrip("/") or "") + "/"


@dataclass(frozen=True, kw_only=True, slots=True)
class ServiceConfig:
    name: str
    spec: str  # where the document was read from
    base_url: str
    operations: tuple[Operation, ...]
    auth_secret: str | None = None
    auth: str | None = None  # bearer | header:NAME | query:NAME
    enabled: bool = True
    title: str | None = None
    schemes: tuple[SecurityScheme, ...] = ()  # the document's securitySchemes (security.py)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise UsageError(
                f"{self.name!r} is not a usable service name",
                hint=f"use 1-{MAX_SERVICE_NAME} letters, digits, '_' or '-', starting with a letter or digit",
            )
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(
                f"service {self.name}: base URL {self.base_url!r} is not an absolute http(s) URL",
                hint="give --base-url https://api.example.com/v1",
            )
        if parts.username or parts.password or parts.query or parts.fragment:
            raise UsageError(f"service {self.name}: the base URL may not carry credentials, a query or a fragment")
        if (self.auth_secret is None) != (self.auth is None):
            raise UsageError("--auth-secret and --auth go together", hint="--auth-secret NAME --auth bearer")
        if self.auth is not None:
            parse_auth(self.auth)
        if self.auth_secret is not None and not _SECRET.match(self.auth_secret):
            raise UsageError(f"{self.auth_secret!r} is not a secret name")
        for scheme in self.schemes:
            if not _SECRET.match(scheme.secret):
                raise UsageError(f"{scheme.secret!r} (scheme {scheme.key}) is not a secret name",
                                 hint="use letters, digits, '_', '.' or '-'")

    def tool_names(self) -> list[str]:
        """The registry name of each operation, in order (naming.py: at most 64 characters)."""
        return assign_tool_names(self.name, [op.name for op in self.operations])

    def scheme(self, key: str) -> SecurityScheme | None:
        return next((s for s in self.schemes if s.key == key), None)

    def sends_credential(self, operation: Operation) -> bool:
        """Whether a call of ``operation`` may carry a credential: with ``--auth`` every
        operation but those the document marks anonymous; otherwise those whose security names
        a scheme."""
        if self.auth is not None:
            return operation.security is None or not is_anonymous(operation.security)
        return operation.security is not None and not is_anonymous(operation.security)

    @property
    def host_pattern(self) -> str:
        """The allowlist host: the base URL's host, with its port when it names one."""
        return host_pattern_of(self.base_url)

    @property
    def path_prefix(self) -> str:
        return path_prefix_of(self.base_url)

    def base_for(self, operation: Operation) -> str:
        """Where ``operation`` is sent: its own ``servers`` entry (path item's or operation's;
        a relative one against the service's base URL), else the service's base URL."""
        if not operation.server:
            return self.base_url
        return urljoin(self.base_url.rstrip("/") + "/", operation.server)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "spec": self.spec, "base_url": self.base_url}
        if self.title:
            data["title"] = self.title
        if self.auth_secret:
            data["auth_secret"] = self.auth_secret
            data["auth"] = self.auth
        data["enabled"] = self.enabled
        if self.schemes:
            data["schemes"] = [s.to_json() for s in self.schemes]
        data["operations"] = [op.to_json() for op in self.operations]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ServiceConfig:
        return cls(
            name=data["name"],
            spec=data.get("spec", ""),
            base_url=data["base_url"],
            operations=tuple(Operation.from_json(op) for op in data.get("operations", [])),
            auth_secret=data.get("auth_secret"),
            auth=data.get("auth"),
            enabled=bool(data.get("enabled", True)),
            title=data.get("title"),
            schemes=tuple(SecurityScheme.from_json(s) for s in data.get("schemes") or ()),
        )


class ServiceStore:
    def __init__(self, home: Path) -> None:
        self.path = home / SERVICES_FILE

    def load(self) -> list[ServiceConfig]:
        raw = read_json(self.path, default=None) or {"services": []}
        if not isinstance(raw, Mapping) or not isinstance(raw.get("services"), list):
            raise ConfigError(f"{self.path}: expected {{'services': [...]}}", hint="remove the file and add the services again")
        services = []
        for index, entry in enumerate(raw["services"]):
            try:
                services.append(ServiceConfig.from_json(entry))
            except (KeyError, TypeError) as exc:
                raise ConfigError(f"{self.path}: services.{index}: missing or malformed {exc}") from None
            except UsageError as exc:
                raise ConfigError(f"{self.path}: services.{index}: {exc.message}", hint=exc.hint) from None
        return services

    def add(self, service: ServiceConfig, *, replace_existing: bool = False) -> None:
        with locked(self.path):
            services = self.load()
            names = [s.name for s in services]
            if service.name in names:
                if not replace_existing:
                    raise UsageError(
                        f"an OpenAPI service named {service.name!r} already exists",
                        hint="remove it first or pass --replace",
                    )
                services[names.index(service.name)] = service
            else:
                services.append(service)
            self._write(services)

    def remove(self, name: str) -> None:
        with locked(self.path):
            services = self.load()
            kept = [s for s in services if s.name != name]
            if len(kept) == len(services):
                raise UsageError(f"no OpenAPI service named {name!r}", hint="`pincer openapi list` shows them")
            self._write(kept)

    def _write(self, services: list[ServiceConfig]) -> None:
        write_json_atomic(self.path, {"schema_version": SCHEMA_VERSION, "services": [s.to_json() for s in services]})
