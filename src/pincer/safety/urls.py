"""URL checks for outbound requests: one strict parser, so what we check is what we send.

``check_url`` accepts ``https://host[:port]/path?query`` and returns a :class:`CheckedUrl` whose
parts are normalised (lower-case ASCII host, explicit port, dot segments resolved, empty segments
collapsed). Everything ambiguous is refused rather than guessed at, because two parsers reading
one URL differently is how allowlists get bypassed:

* userinfo (``https://allowed@evil/``), backslashes, whitespace and control characters;
* encoded separators and dot segments (``%2f``, ``%5c``, ``%2e%2e``), also double-encoded;
* numeric hosts that are not a canonical dotted quad (``2130706433``, ``0177.0.0.1``, ``0x7f.1``);
* IPv6 zone identifiers, percent signs in hosts, bad ports, paths that climb above the root.

Every refusal is an :class:`~pincer.core.errors.EgressDenied` naming the rule.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

import idna

from pincer.core.errors import EgressDenied

__all__ = ["CheckedUrl", "check_url", "normalise_host", "MAX_URL_CHARS", "DEFAULT_PORTS"]

MAX_URL_CHARS = 8192
DEFAULT_PORTS = {"https": 443, "http": 80}

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_FORBIDDEN_CHARS = re.compile(r"[\x00-\x20\x7f\\]")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODED_SPECIAL = re.compile(r"%(2f|5c|2e|00|25)", re.IGNORECASE)
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_LABEL = re.compile(r"^(0x[0-9a-f]*|[0-9]+)$")
_PORT = re.compile(r"^[0-9]{1,5}$")
# Characters that may appear raw in a path segment or query (RFC 3986 pchar plus '%' for the
# escapes we already validated); anything else is percent-encoded before the request is sent.
_PATH_SAFE = "!$&'()*+,;=:@%-._~"
_QUERY_SAFE = "!$&'()*+,;=:@%-._~/?"

_HINT_URL = "write the URL plainly: https://host[:port]/path?query"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckedUrl:
    """A URL that passed ``check_url``. ``path`` is sent; ``decoded_path`` is matched."""

    scheme: str
    host: str  # lower-case ASCII (IDNA), no brackets, no trailing dot
    port: int
    path: str
    decoded_path: str
    query: str = ""
    ip: IPAddress | None = None  # set when the host is an IP literal

    @property
    def target(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if isinstance(self.ip, ipaddress.IPv6Address) else self.host
        if self.port == DEFAULT_PORTS[self.scheme]:
            return host
        return f"{host}:{self.port}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://{self.authority}"

    @property
    def url(self) -> str:
        return self.origin + self.target

    @property
    def display(self) -> str:
        """For error messages: the origin and path, never the query (it may carry credentials)."""
        return self.origin + self.path


def _deny(message: str, hint: str = _HINT_URL) -> EgressDenied:
    return EgressDenied(message, hint=hint)


def check_url(url: object, *, allow_plain_http: bool = False) -> CheckedUrl:
    """Parse and normalise ``url``; raises EgressDenied for anything ambiguous or not https.

    ``allow_plain_http`` lets ``http://`` through this parser only; the caller still has to
    confine plain http to loopback addresses (``send`` does).
    """
    if not isinstance(url, str):
        raise _deny(f"the URL must be a string, got {type(url).__name__}")
    if not url:
        raise _deny("the URL is empty")
    if len(url) > MAX_URL_CHARS:
        raise _deny(f"the URL is {len(url)} characters long; the limit is {MAX_URL_CHARS}")
    bad = _FORBIDDEN_CHARS.search(url)
    if bad:
        raise _deny(
            f"the URL contains {bad.group()!r} (rule: no whitespace, control characters or backslashes)",
        )
    match = _SCHEME.match(url)
    if not match:
        raise _deny("the URL has no scheme (rule: absolute https URLs only)")
    scheme = match.group(1).lower()
    if scheme not in DEFAULT_PORTS or (scheme == "http" and not allow_plain_http):
        raise _deny(
            f"scheme {scheme!r} refused (rule: https only)",
            hint="use https://; plain http reaches only loopback, and only with [network] allow_private = true",
        )
    rest = url[match.end() :]
    if not rest.startswith("//"):
        raise _deny(f"the URL has no '//' after '{scheme}:' (rule: absolute URLs with a host)")
    rest = rest[2:]
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, rest = rest[:cut], rest[cut:]
    rest = rest.split("#", 1)[0]  # the fragment never leaves the client
    raw_path, _, raw_query = rest.partition("?")
    host, ip, port = _parse_authority(authority, scheme)
    path, decoded = _normalise_path(raw_path)
    if _BAD_PERCENT.search(raw_query):
        raise _deny("the query has a '%' not followed by two hex digits (rule: valid percent-encoding)")
    query = quote(raw_query, safe=_QUERY_SAFE)
    return CheckedUrl(scheme=scheme, host=host, port=port, path=path, decoded_path=decoded, query=query, ip=ip)


def _parse_authority(authority: str, scheme: str) -> tuple[str, IPAddress | None, int]:
    if not authority:
        raise _deny("the URL has no host")
    if "@" in authority:
        raise _deny(
            "the URL contains userinfo ('user@host') (rule: no credentials in URLs)",
            hint="remove the part before '@'; credentials are injected by pincer from the secret store",
        )
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _deny("the IPv6 address in the URL has no closing ']'")
        literal, after = authority[1:end], authority[end + 1 :]
        if "%" in literal:
            raise _deny("IPv6 zone identifiers are refused (rule: no '%' in hosts)")
        try:
            ip: IPAddress = ipaddress.IPv6Address(literal)
        except ValueError:
            raise _deny(f"{literal!r} is not a valid IPv6 address") from None
        if after and not after.startswith(":"):
            raise _deny("unexpected characters after the IPv6 address")
        return ip.compressed, ip, _parse_port(after[1:] if after else None, scheme)
    if authority.count(":") > 1:
        raise _deny("the host has more than one ':' (rule: IPv6 addresses go in brackets)")
    raw_host, sep, raw_port = authority.partition(":")
    host, host_ip = normalise_host(raw_host)
    return host, host_ip, _parse_port(raw_port if sep else None, scheme)


def _parse_port(raw: str | None, scheme: str) -> int:
    if raw is None:
        return DEFAULT_PORTS[scheme]
    if not _PORT.match(raw) or not 0 < int(raw) < 65536:
        raise _deny(f"port {raw!r} is not a number from 1 to 65535")
    return int(raw)


def normalise_host(raw: str) -> tuple[str, IPAddress | None]:
    """A host name as we compare and resolve it: lower-case IDNA ASCII, no trailing dot.

    Returns ``(host, ip)`` with ``ip`` set for a canonical dotted-quad IPv4 literal. Refuses
    other numeric forms, which resolvers read as IPs in ways allowlists do not expect.
    """
    if not raw:
        raise _deny("the URL has no host")
    if "%" in raw:
        raise _deny("percent-encoding in the host is refused (rule: plain host names)")
    host = raw
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            raise _deny(f"{raw!r} is not a valid international domain name") from None
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    if not host or len(host) > 253:
        raise _deny(f"host {raw!r} is empty or longer than 253 characters")
    labels = host.split(".")
    if _NUMERIC_LABEL.match(labels[-1]):
        try:
            ip = ipaddress.IPv4Address(host)  # strict: four decimal parts, no leading zeros
        except ValueError:
            raise _deny(
                f"host {raw!r} is a numeric form that is not a plain dotted-quad IPv4 address "
                "(rule: no decimal, octal, hex or shortened IP hosts)",
                hint="write the address as four decimal numbers, e.g. 93.184.216.34",
            ) from None
        return ip.compressed, ip
    for label in labels:
        if not _LABEL.match(label):
            raise _deny(f"host {raw!r} has an invalid label {label!r} (rule: letters, digits, '-', '_')")
    return host, None


def _normalise_path(raw: str) -> tuple[str, str]:
    """(path to send, decoded path to match). Resolves '.' and '..', collapses '//'."""
    if _BAD_PERCENT.search(raw):
        raise _deny("the path has a '%' not followed by two hex digits (rule: valid percent-encoding)")
    segments: list[tuple[str, str]] = []
    parts = raw.split("/")
    for segment in parts:
        try:
            decoded = unquote(segment, errors="strict") if "%" in segment else segment
        except UnicodeDecodeError:
            raise _deny(
                f"the path segment {segment!r} percent-encodes bytes that are not UTF-8 (rule: UTF-8 paths)",
            ) from None
        if "/" in decoded or "\\" in decoded or "\x00" in decoded:
            raise _deny(
                f"the path segment {segment!r} encodes a separator or NUL (rule: no %2f, %5c, %00)",
                hint="write path separators as plain '/'",
            )
        if decoded in (".", "..") and segment != decoded:
            raise _deny(
                f"the path segment {segment!r} is an encoded dot segment (rule: no %2e%2e)",
                hint="write the path without '.' and '..' segments",
            )
        if _ENCODED_SPECIAL.search(decoded):
            raise _deny(
                f"the path segment {segment!r} is double-encoded (rule: percent-encode once)",
                hint="decode the segment once before building the URL",
            )
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                raise _deny("the path climbs above the root with '..' (rule: no traversal)")
            segments.pop()
            continue
        segments.append((quote(segment, safe=_PATH_SAFE), decoded))
    trailing = len(parts) > 1 and parts[-1] in ("", ".", "..") and bool(segments)
    path = "/" + "/".join(s for s, _ in segments) + ("/" if trailing else "")
    decoded_path = "/" + "/".join(d for _, d in segments) + ("/" if trailing else "")
    return path, decoded_path
