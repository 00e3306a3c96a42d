"""The rules of outbound HTTP, without the network: allowlist entries, the policy that holds them
and the values a request and a response are.

:meth:`EgressPolicy.check` does the URL checks (:mod:`pincer.safety.urls`) and the allowlist
(host pattern from :mod:`pincer.safety.hosts`, path prefix on the normalised path, methods); the
transport (:mod:`pincer.safety.egress_transport`) adds the SSRF rule at connect time and performs
the exchange. ``allow_private_network`` and ``allow_plain_http_loopback`` are operator settings:
nothing read from a manifest sets them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pincer.core.errors import EgressDenied, UsageError
from pincer.safety.hosts import HostPattern
from pincer.safety.urls import CheckedUrl, check_url

if TYPE_CHECKING:
    from pincer.core.capabilities import HttpCapability

__all__ = [
    "EgressRule",
    "EgressPolicy",
    "HttpRequest",
    "HttpResponse",
    "check_method",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
    "TOKEN",
]

DEFAULT_MAX_REQUEST_BYTES = 1_048_576  # IronClaw's defaults: 1 MB out, 10 MB in, 30 s
DEFAULT_MAX_RESPONSE_BYTES = 10_485_760
DEFAULT_TIMEOUT_S = 30.0

TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# CONNECT opens a tunnel past every check here; TRACE reflects request headers (credentials) back.
_REFUSED_METHODS = frozenset({"CONNECT", "TRACE"})


@dataclass(frozen=True, kw_only=True, slots=True)
class EgressRule:
    """One allowlist entry. ``host``: a :class:`~pincer.safety.hosts.HostPattern`
    (``api.example.com``, ``*.example.com``, optionally ``:port``); without a port any port
    matches (IronClaw's reading of its manifests, which name hosts only).
    ``path_prefix`` is matched against the normalised, decoded path. ``methods`` None: any."""

    host: str
    path_prefix: str = "/"
    methods: frozenset[str] | None = None
    _pattern: HostPattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            pattern = HostPattern.parse(self.host)
        except UsageError as exc:
            raise UsageError(f"allowlist {exc.message}", hint=exc.hint) from None
        object.__setattr__(self, "_pattern", pattern)
        if not isinstance(self.path_prefix, str) or not self.path_prefix.startswith("/"):
            raise UsageError(
                f"allowlist path prefix {self.path_prefix!r} must start with '/'",
                hint="use '/' to allow every path",
            )
        if self.methods is not None:
            object.__setattr__(self, "methods", frozenset(m.upper() for m in self.methods))

    def matches_host(self, url: CheckedUrl) -> bool:
        return self._pattern.matches(url.host, url.port)

    def matches_path(self, url: CheckedUrl) -> bool:
        return url.decoded_path.startswith(self.path_prefix)

    def matches_method(self, method: str) -> bool:
        return self.methods is None or method in self.methods


@dataclass(frozen=True, kw_only=True, slots=True)
class EgressPolicy:
    """Where requests may go and how big and slow they may be."""

    rules: tuple[EgressRule, ...]
    allow_private_network: bool = False
    allow_plain_http_loopback: bool = False
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    # (scheme, host, port) a person wrote in config.toml as a base URL ([builtins.NAME] base_url):
    # that exact origin is reachable on a loopback or private address and over plain http; no
    # other origin gains anything from it. Never read from a manifest.
    trusted_origins: frozenset[tuple[str, str, int]] = frozenset()

    def is_trusted(self, target: CheckedUrl) -> bool:
        """Whether ``target``'s origin is one the person named explicitly (``trusted_origins``)."""
        return (target.scheme, target.host, target.port) in self.trusted_origins

    @classmethod
    def from_hosts(cls, hosts: Iterable[str], **settings: Any) -> EgressPolicy:
        """Any path and method on each host pattern (a grant's network allowlist)."""
        return cls(rules=tuple(EgressRule(host=h) for h in hosts), **settings)

    @classmethod
    def from_http_capability(cls, http: HttpCapability, **settings: Any) -> EgressPolicy:
        """From a capabilities ``http`` section (``allowlist`` of host / path_prefix / methods and
        its limits); ``settings`` override the limits and carry the operator-only switches."""
        rules = tuple(
            EgressRule(
                host=entry.host,
                path_prefix=entry.path_prefix or "/",
                methods=frozenset(entry.methods) if entry.methods else None,
            )
            for entry in http.allowlist
        )
        limits: dict[str, Any] = {
            "max_request_bytes": http.max_request_bytes,
            "max_response_bytes": http.max_response_bytes,
            "timeout_s": http.timeout_secs,
        }
        limits.update(settings)
        return cls(rules=rules, **limits)

    def check(self, method: str, url: str) -> CheckedUrl:
        """URL checks and allowlist, without touching the network. Raises EgressDenied."""
        method = check_method(method)
        target = check_url(url, allow_plain_http=self.allow_plain_http_loopback or bool(self.trusted_origins))
        if target.scheme == "http" and not self.allow_plain_http_loopback and not self.is_trusted(target):
            raise EgressDenied(
                f"{method} {target.display} refused: scheme 'http' refused (rule: https only)",
                hint="use https://; plain http reaches only an origin written as a base URL in config.toml",
            )
        if not self.rules:
            raise EgressDenied(
                f"{method} {target.display} refused: no host is allowed (rule: empty allowlist)",
                hint=f"add {target.authority!r} to the grant's network hosts",
            )
        by_host = [r for r in self.rules if r.matches_host(target)]
        if not by_host:
            allowed = ", ".join(sorted({r.host for r in self.rules}))
            raise EgressDenied(
                f"{method} {target.display} refused: host {target.authority!r} is not in the allowlist "
                f"(allowed: {allowed})",
                hint=f"add {target.authority!r} to the grant's network hosts if the tool should reach it",
            )
        by_path = [r for r in by_host if r.matches_path(target)]
        if not by_path:
            prefixes = ", ".join(sorted({r.path_prefix for r in by_host}))
            raise EgressDenied(
                f"{method} {target.display} refused: path {target.decoded_path!r} is outside the allowed "
                f"prefixes ({prefixes})",
                hint="use a path under an allowed prefix or widen the allowlist",
            )
        if not any(r.matches_method(method) for r in by_path):
            methods = ", ".join(sorted({m for r in by_path for m in (r.methods or ())}))
            raise EgressDenied(
                f"{method} {target.display} refused: method {method} is not allowed there (allowed: {methods})",
                hint="use an allowed method or widen the allowlist",
            )
        return target


def check_method(method: object) -> str:
    if not isinstance(method, str) or not TOKEN.match(method):
        raise EgressDenied(f"HTTP method {method!r} is not a valid method token", hint="use GET, POST, PUT, ...")
    upper = method.upper()
    if upper in _REFUSED_METHODS:
        raise EgressDenied(f"HTTP method {upper} is refused (rule: no tunnels or header reflection)")
    return upper


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpRequest:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class HttpResponse:
    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes
    truncated: bool = False

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for k, v in self.headers if k.lower() == lower), None)
