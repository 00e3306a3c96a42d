"""Host patterns: the one matcher every egress path uses (the http tool, OpenAPI and WASM requests,
the script sandbox's proxy, credential injection).

A pattern is ``api.example.com`` (exactly that host) or ``*.example.com`` (any subdomain at any
depth, never the apex itself), optionally with ``:PORT`` (only that port) or ``:*`` (any port).
Hosts are compared in the form :func:`pincer.safety.urls.normalise_host` gives them: lower-case
IDNA ASCII without a trailing dot; IPv6 literals compressed (in brackets when a port follows).
A bare ``*`` or a ``*`` anywhere but a leading ``*.`` label is refused: a pattern names a domain.

A pattern without a port matches any port unless the caller passes ``default_ports`` (the sandbox
proxy does: a tunnel to an arbitrary port of an allowed host is a different grant).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from pincer.core.errors import EgressDenied, UsageError
from pincer.safety.urls import normalise_host

__all__ = ["HostPattern", "normalise_request_host", "host_pattern_rank", "EXACT_RANK"]

EXACT_RANK = 1 << 16  # an exact name beats any wildcard, whatever its length


@dataclass(frozen=True, kw_only=True, slots=True)
class HostPattern:
    """One parsed pattern. ``port`` None: any port (or the caller's default ports)."""

    text: str
    host: str
    wildcard: bool = False
    port: int | None = None
    any_port: bool = False  # written ``:*``: any port even where a caller has default ports

    @classmethod
    def parse(cls, text: object) -> HostPattern:
        """Read a pattern; UsageError names what is wrong with it."""
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"host pattern {text!r} must be a non-empty string", hint="write api.example.com")
        raw = text.strip()
        wildcard = raw.startswith("*.")
        body = raw[2:] if wildcard else raw
        if body.startswith("["):
            end = body.find("]")
            if end < 0:
                raise UsageError(f"host pattern {text!r} has no closing ']'", hint="write [2001:db8::1]:443")
            host_part, rest = body[1:end], body[end + 1 :]
            if rest and not rest.startswith(":"):
                raise UsageError(f"host pattern {text!r} is not host[:port]", hint="write [2001:db8::1]:443")
            raw_port = rest[1:] if rest else None
        elif body.count(":") > 1:
            # More than one ':' is an IPv6 address written without brackets, and then without a port
            # (which part would be the port is ambiguous): it must parse as a whole or it is refused.
            host_part, raw_port = body, None
        else:
            host_part, sep, tail = body.partition(":")
            raw_port = tail if sep else None
        port, any_port = _parse_port(raw_port, text)
        if "*" in host_part:
            raise UsageError(
                f"host pattern {text!r}: '*' is allowed only as a leading '*.' label",
                hint="list hosts explicitly or use *.example.com for subdomains",
            )
        try:
            host = normalise_request_host(host_part)
        except EgressDenied as exc:
            raise UsageError(f"host pattern {text!r} is not a valid host: {exc.message}") from None
        return cls(text=raw, host=host, wildcard=wildcard, port=port, any_port=any_port)

    def rank(self, host: str, port: int | None = None, *, default_ports: Iterable[int] | None = None) -> int | None:
        """How closely this pattern names ``host`` (already normalised): None when it does not
        match, :data:`EXACT_RANK` for the exact host, else the length of the wildcard's suffix.
        ``port`` None skips the port check (a caller that has no port yet)."""
        if port is not None:
            if self.port is not None and self.port != port:
                return None
            if self.port is None and not self.any_port and default_ports is not None and port not in default_ports:
                return None
        if self.wildcard:
            return len(self.host) if host.endswith("." + self.host) else None
        return EXACT_RANK if host == self.host else None

    def matches(self, host: str, port: int | None = None, *, default_ports: Iterable[int] | None = None) -> bool:
        return self.rank(host, port, default_ports=default_ports) is not None


def _parse_port(raw: str | None, text: object) -> tuple[int | None, bool]:
    if raw is None:
        return None, False
    if raw == "*":
        return None, True
    if raw.isascii() and raw.isdigit() and 0 < int(raw) < 65536:
        return int(raw), False
    raise UsageError(f"host pattern {text!r} has a bad port", hint="use host, host:PORT (1-65535) or host:*")


def normalise_request_host(raw: str) -> str:
    """A host as patterns compare it; EgressDenied for anything :func:`normalise_host` refuses.
    Brackets around an IPv6 literal are optional here."""
    text = raw.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        if "%" in text:
            raise EgressDenied(f"{raw!r}: IPv6 zone identifiers are refused", hint="write the address without %zone")
        try:
            return ipaddress.IPv6Address(text).compressed
        except ValueError:
            raise EgressDenied(f"{raw!r} is not a valid IPv6 address", hint="write [2001:db8::1]") from None
    host, _ = normalise_host(text)
    return host


def host_pattern_rank(host: str, pattern: str, *, port: int | None = None) -> int | None:
    """:meth:`HostPattern.rank` for a pattern and a host given as text; a pattern or host that does
    not parse matches nothing (fail closed)."""
    try:
        parsed = HostPattern.parse(pattern)
        normalised = normalise_request_host(host)
    except (UsageError, EgressDenied):
        return None
    return parsed.rank(normalised, port)
