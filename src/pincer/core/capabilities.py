"""IronClaw ``*.capabilities.json`` manifests as values.

A manifest is read flat or wrapped in ``"capabilities"`` (channel files nest it); a section present
at the top level wins over the same section inside the wrapper, as in IronClaw, where the merge is
per section, not per key. Unknown keys are ignored; a known key holding the wrong shape raises
:class:`ManifestError` naming the file and the dotted key. Defaults are IronClaw's: 60 requests a
minute, 1000 an hour, 1 MiB request, 10 MiB response, 30 s timeout.

The ``auth`` and ``setup`` sections are values of :mod:`pincer.core.auth_setup`; the typed JSON
reading lives in :mod:`pincer.core.jsonread`. Pure: nothing here does I/O except
:meth:`Capabilities.from_path` reading its one file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pincer.core.auth_setup import AuthSpec, SetupSpec, read_auth, read_setup
from pincer.core.effects import EffectKind, parse_effects
from pincer.core.errors import ManifestError, UsageError
from pincer.core.jsonread import JsonReader, key_at

__all__ = [
    "Capabilities",
    "EndpointPattern",
    "CredentialLocation",
    "CredentialMapping",
    "RateLimit",
    "HttpCapability",
    "WebhookSpec",
]

logger = logging.getLogger(__name__)


MAX_MANIFEST_BYTES = 1_048_576  # a capabilities file is a few KiB; past this it is not one
MAX_DESCRIPTION_CHARS = 4096  # IronClaw truncates longer descriptions the same way
MAX_WRAPPER_DEPTH = 8  # IronClaw stops resolving nested "capabilities" past this depth

LocationType = Literal["bearer", "basic", "header", "query_param", "url_path", "cookie"]
_LOCATION_TYPES: tuple[str, ...] = ("bearer", "basic", "header", "query_param", "url_path", "cookie")
# location type -> (field it needs, manifest keys that may carry it)
_LOCATION_NEEDS = {
    "header": ("header_name", ("name", "header_name")),
    "query_param": ("param_name", ("name", "param_name")),
    "url_path": ("placeholder", ("placeholder",)),
    "cookie": ("param_name", ("name", "param_name")),
}
_SECTIONS = ("description", "version", "wit_version", "name", "type", "http", "secrets",
             "tool_invoke", "workspace", "webhook", "auth", "setup")  # fmt: skip
_METHOD = re.compile(r"[A-Z]+")


# ---------------------------------------------------------------------------------------- values


@dataclass(frozen=True, kw_only=True, slots=True)
class EndpointPattern:
    """One allowlist entry. Empty ``methods`` means any method; ``path_prefix`` is a plain prefix.
    Matching is :class:`pincer.safety.egress_policy.EgressRule`'s (the one host matcher lives in
    :mod:`pincer.safety.hosts`)."""

    host: str
    path_prefix: str = "/"
    methods: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class CredentialLocation:
    """Where a secret goes: ``Authorization: Bearer``/``Basic``, a header, a query parameter, a
    cookie (an OpenAPI ``apiKey`` scheme ``in: cookie``), or a ``{PLACEHOLDER}`` in the URL. ``basic`` without ``username`` encodes the secret as ``user:pass``."""

    type: LocationType
    header_name: str | None = None
    prefix: str | None = None
    param_name: str | None = None
    placeholder: str | None = None
    username: str | None = None

    def __post_init__(self) -> None:
        if self.type not in _LOCATION_TYPES:
            raise UsageError(f"unknown credential location {self.type!r}", hint=f"one of {', '.join(_LOCATION_TYPES)}")
        needed = _LOCATION_NEEDS.get(self.type)
        if needed and not getattr(self, needed[0]):
            raise UsageError(f"a {self.type} credential location needs {needed[0]}")

    @property
    def slot(self) -> str:
        """The place in a request this location writes; two mappings with one slot compete."""
        if self.type in ("bearer", "basic"):
            return "header:authorization"
        if self.type == "header":
            return f"header:{(self.header_name or '').lower()}"
        if self.type == "query_param":
            return f"query:{self.param_name}"
        if self.type == "cookie":
            return f"cookie:{self.param_name}"
        return f"url:{self.placeholder}"


@dataclass(frozen=True, kw_only=True, slots=True)
class CredentialMapping:
    """A secret injected into requests to ``host_patterns`` (and, when given, paths starting with
    one of ``path_patterns``; a trailing ``*`` is allowed and means the same prefix)."""

    secret_name: str
    location: CredentialLocation
    host_patterns: tuple[str, ...]
    path_patterns: tuple[str, ...] = ()
    optional: bool = False
    key: str = ""  # the manifest's name for this mapping (its key under http.credentials)

    def path_match_length(self, path: str) -> int | None:
        """Length of the longest path pattern ``path`` starts with; 0 without patterns; None: no match."""
        if not self.path_patterns:
            return 0
        best: int | None = None
        for pattern in self.path_patterns:
            prefix = pattern.rstrip("*")
            if path.startswith(prefix) and (best is None or len(prefix) > best):
                best = len(prefix)
        return best


@dataclass(frozen=True, kw_only=True, slots=True)
class RateLimit:
    requests_per_minute: int = 60
    requests_per_hour: int = 1000


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpCapability:
    allowlist: tuple[EndpointPattern, ...] = ()
    credentials: tuple[CredentialMapping, ...] = ()
    rate_limit: RateLimit = field(default_factory=RateLimit)
    max_request_bytes: int = 1_048_576
    max_response_bytes: int = 10_485_760
    timeout_secs: int = 30


@dataclass(frozen=True, kw_only=True, slots=True)
class WebhookSpec:
    """How the host verifies a tool's inbound webhooks (shared secret, Ed25519 or HMAC)."""

    secret_header: str | None = None
    secret_name: str | None = None
    signature_key_secret_name: str | None = None
    hmac_secret_name: str | None = None
    hmac_signature_header: str | None = None
    hmac_timestamp_header: str | None = None
    hmac_prefix: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """A parsed capabilities manifest. Sections absent from the file are None or empty.

    ``workspace_allowed_prefixes`` is None without a ``workspace`` section; an empty tuple means
    the whole workspace, as in IronClaw. Secrets named by credentials are injected by the host;
    ``secrets_allowed_names`` governs what the tool itself may ask about.
    """

    source: str = "<manifest>"
    description: str | None = None
    version: str | None = None
    wit_version: str | None = None
    name: str | None = None
    kind: str | None = None  # the manifest's "type": "channel" in channel files; tools leave it out
    http: HttpCapability | None = None
    secrets_allowed_names: tuple[str, ...] = ()
    tool_invoke_aliases: Mapping[str, str] = field(default_factory=dict)
    tool_invoke_rate_limit: RateLimit | None = None
    workspace_allowed_prefixes: tuple[str, ...] | None = None
    webhook: WebhookSpec | None = None
    auth: AuthSpec | None = None
    setup: SetupSpec | None = None
    extra_effects: frozenset[EffectKind] = frozenset()

    @classmethod
    def from_json(cls, data: str | bytes | Mapping[str, Any], *, source: str) -> Capabilities:
        """Parse a manifest from JSON text, bytes or an already-decoded object."""
        parser = _Parser(source)
        return parser.manifest(parser.load(data))

    @classmethod
    def from_path(cls, path: str | Path) -> Capabilities:
        """Read and parse one file; unreadable and oversized files raise ManifestError too."""
        path = Path(path)
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
        except OSError as exc:
            raise ManifestError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from None
        if len(raw) > MAX_MANIFEST_BYTES:
            raise ManifestError(f"larger than {MAX_MANIFEST_BYTES} bytes; not a capabilities file", source=str(path))
        return cls.from_json(raw, source=str(path))

    def effects(self) -> frozenset[EffectKind]:
        """The effects the manifest implies, plus any widened explicitly."""
        found = set(self.extra_effects)
        if self.http is not None:
            found.add(EffectKind.NETWORK)
        if (self.http is not None and self.http.credentials) or self.secrets_allowed_names:
            found.add(EffectKind.USE_SECRET)
        if self.workspace_allowed_prefixes is not None:
            found.add(EffectKind.READ_FILESYSTEM)
        if self.tool_invoke_aliases:
            found.add(EffectKind.DISPATCH_CAPABILITY)
        return frozenset(found)

    def widen(self, effects: Iterable[EffectKind | str]) -> Capabilities:
        """A copy declaring more effects than the manifest implies (never fewer)."""
        extra = parse_effects(list(effects), source=f"{self.source}: widen")
        return replace(self, extra_effects=self.extra_effects | extra)

    def is_secret_allowed(self, name: str) -> bool:
        """True when ``secrets.allowed_names`` lists ``name`` exactly or by a trailing-``*`` prefix."""
        for pattern in self.secrets_allowed_names:
            if pattern == name or (pattern.endswith("*") and name.startswith(pattern[:-1])):
                return True
        return False


# ---------------------------------------------------------------------------------------- parsing


class _Parser(JsonReader):
    """Reads one capabilities manifest."""

    def host(self, value: Any, at: str) -> str:
        if not isinstance(value, str):
            self.fail(at, "a host name such as api.example.com or *.example.com", value)
        host = value.strip().lower()
        bare = host[2:] if host.startswith("*.") else host
        if not bare or bare == "*" or "*" in bare or any(c in bare for c in "/?#@\\ \t") or "://" in bare:
            self.fail(at, "a host name such as api.example.com or *.example.com (no scheme, path or bare *)",
                      hint="a wildcard may only be a leading '*.' label")  # fmt: skip
        return host

    def manifest(self, data: Mapping[str, Any]) -> Capabilities:
        found: dict[str, tuple[Any, str]] = {}  # section -> (value, dotted key where it was found)
        node, prefix = data, ""
        for _ in range(MAX_WRAPPER_DEPTH + 1):
            for name in _SECTIONS:  # the outer level wins, section by section
                if name not in found and node.get(name) is not None:
                    found[name] = (node[name], key_at(prefix, name))
            if node.get("capabilities") is None:
                break
            prefix = key_at(prefix, "capabilities")
            node = self.obj(node["capabilities"], prefix, "an object holding the capability sections")

        def meta(name: str) -> str | None:
            value, at = found.get(name, (None, ""))
            return self.text({name: value}, name, at.rpartition(".")[0])

        def section(name: str) -> tuple[Mapping[str, Any], str] | None:
            return (self.obj(found[name][0], found[name][1]), found[name][1]) if name in found else None

        description = meta("description")
        if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
            logger.warning("%s: description truncated to %d characters", self.source, MAX_DESCRIPTION_CHARS)
            description = description[:MAX_DESCRIPTION_CHARS]
        http, secrets, invoke, workspace = (section(n) for n in ("http", "secrets", "tool_invoke", "workspace"))
        webhook, auth, setup = (section(n) for n in ("webhook", "auth", "setup"))
        return Capabilities(
            source=self.source,
            description=description,
            version=meta("version"),
            wit_version=meta("wit_version"),
            name=meta("name"),
            kind=meta("type"),
            http=self.http(*http) if http else None,
            secrets_allowed_names=self.texts(secrets[0], "allowed_names", secrets[1]) if secrets else (),
            tool_invoke_aliases=self.text_map(invoke[0], "aliases", invoke[1]) if invoke else {},
            tool_invoke_rate_limit=self.rate_limit(*invoke) if invoke else None,
            workspace_allowed_prefixes=self.texts(workspace[0], "allowed_prefixes", workspace[1]) if workspace else None,
            webhook=self.webhook(*webhook) if webhook else None,
            auth=read_auth(self, *auth) if auth else None,
            setup=read_setup(self, *setup) if setup else None,
        )

    def rate_limit(self, m: Mapping[str, Any], at: str) -> RateLimit | None:
        rl = self.section(m, "rate_limit", at)
        if rl is None:
            return None
        at = key_at(at, "rate_limit")
        return RateLimit(requests_per_minute=self.number(rl, "requests_per_minute", at, 60),
                         requests_per_hour=self.number(rl, "requests_per_hour", at, 1000))  # fmt: skip

    def http(self, m: Mapping[str, Any], at: str) -> HttpCapability:
        allowlist = []
        for where, item in self.items(m, "allowlist", at, "a list of {host, path_prefix, methods} objects"):
            entry = self.obj(item, where, "an object with host, path_prefix and methods")
            prefix = self.text(entry, "path_prefix", where) or "/"
            if not prefix.startswith("/"):
                self.fail(key_at(where, "path_prefix"), "a path starting with '/'")
            methods = []
            for i, method in enumerate(self.texts(entry, "methods", where)):
                if not _METHOD.fullmatch(method.upper()):
                    self.fail(key_at(key_at(where, "methods"), i), "an HTTP method name such as GET")
                methods.append(method.upper())
            host = self.host(entry.get("host"), key_at(where, "host"))
            allowlist.append(EndpointPattern(host=host, path_prefix=prefix, methods=tuple(methods)))
        credentials = []
        creds = self.section(m, "credentials", at) or {}
        for key, item in creds.items():
            credentials.append(self.credential(str(key), item, key_at(key_at(at, "credentials"), str(key))))
        return HttpCapability(
            allowlist=tuple(allowlist),
            credentials=tuple(credentials),
            rate_limit=self.rate_limit(m, at) or RateLimit(),
            max_request_bytes=self.number(m, "max_request_bytes", at, 1_048_576),
            max_response_bytes=self.number(m, "max_response_bytes", at, 10_485_760),
            timeout_secs=self.number(m, "timeout_secs", at, 30, minimum=1),
        )

    def credential(self, key: str, item: Any, at: str) -> CredentialMapping:
        m = self.obj(item, at, "an object with secret_name, location and host_patterns")
        loc_at = key_at(at, "location")
        loc = self.obj(m.get("location"), loc_at, "an object such as {\"type\": \"bearer\"}")
        kind = loc.get("type")
        if kind not in _LOCATION_TYPES:
            self.fail(key_at(loc_at, "type"), f"one of {', '.join(_LOCATION_TYPES)}", kind)
        fields: dict[str, Any] = {"type": kind, "prefix": self.text(loc, "prefix", loc_at)}
        if kind == "basic":
            fields["username"] = self.text(loc, "username", loc_at)
        if kind in _LOCATION_NEEDS:
            target, keys = _LOCATION_NEEDS[kind]
            present = [k for k in keys if loc.get(k) is not None]
            fields[target] = self.text(loc, present[0] if present else keys[0], loc_at, required=True)
        hosts = tuple(self.host(h, key_at(key_at(at, "host_patterns"), i))
                      for i, h in enumerate(self.texts(m, "host_patterns", at)))  # fmt: skip
        paths = self.texts(m, "path_patterns", at)
        for i, path in enumerate(paths):
            if not path.startswith("/"):
                self.fail(key_at(key_at(at, "path_patterns"), i), "a path starting with '/'")
        return CredentialMapping(
            key=key,
            secret_name=self.text(m, "secret_name", at, required=True) or "",
            location=CredentialLocation(**fields),
            host_patterns=hosts,
            path_patterns=paths,
            optional=self.flag(m, "optional", at),
        )

    def webhook(self, m: Mapping[str, Any], at: str) -> WebhookSpec:
        names = ("secret_header", "secret_name", "signature_key_secret_name", "hmac_secret_name",
                 "hmac_signature_header", "hmac_timestamp_header", "hmac_prefix")  # fmt: skip
        return WebhookSpec(**{n: self.text(m, n, at) for n in names})
