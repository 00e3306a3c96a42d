"""Credential injection: put secrets into an outgoing HTTP request by capabilities-style rules.

The tool (or agent) builds a request without secrets; the host adds them here, just before the
request leaves, so the tool never sees a value. Which mapping applies is decided by the request's
host (``host_patterns``) and path (``path_patterns``). Mappings that write the same place (the
``Authorization`` header, one header name, one query parameter, one URL placeholder) compete: the
longest matching path pattern wins, then the more specific host pattern, then the first declared.

Every value placed in the request is returned in ``InjectedRequest.injected``, raw and in the form
it was placed (base64 for basic auth, percent-encoded in a URL), so the leak scanner can redact
all of them from the tool's output. No value is ever logged or written into an error.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import SplitResult, quote, unquote_plus, urlsplit, urlunsplit

from pincer.core.capabilities import CredentialMapping
from pincer.core.errors import SecretError, UsageError
from pincer.safety.hosts import host_pattern_rank

__all__ = ["InjectedRequest", "inject_credentials", "unset_credential"]

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"https": 443, "http": 80, "wss": 443, "ws": 80}
_HEADER_BREAKERS = ("\r", "\n", "\0")
# ':' and '@' are legal inside a path segment and a query (RFC 3986 pchar); keeping ':' literal
# matters for Telegram-style tokens (123456:ABC...) placed into /bot{TOKEN}/ paths.
_URL_SAFE = ":@"


@dataclass(frozen=True, kw_only=True, slots=True)
class InjectedRequest:
    """The request with credentials in place. Its repr shows nothing: every field may hold a secret."""

    url: str = field(repr=False)
    headers: Mapping[str, str] = field(repr=False)
    injected: tuple[str, ...] = field(repr=False)


def inject_credentials(
    method: str,
    url: str,
    headers: Mapping[str, str],
    *,
    credentials: Sequence[CredentialMapping],
    resolve: Callable[[str], str | None],
) -> InjectedRequest:
    """Apply ``credentials`` to one request and return the request as it should be sent.

    ``resolve(secret_name)`` returns the secret's value, or None when it is not set (an empty
    value counts as not set). A missing secret is skipped for an ``optional`` mapping (the next
    candidate for the same place is tried) and raises :class:`SecretError` otherwise. A header
    the caller set under an injected name is replaced, never merged. A ``url_path`` mapping
    applies only when its placeholder appears in the URL's path or query (raw or percent-encoded).
    ``method`` is accepted so callers hand over the whole request; mappings do not select by method.
    """
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError as exc:  # a bad port or IPv6 literal; the URL itself is not echoed
        raise UsageError(f"the request URL cannot be parsed: {exc}", hint="send an absolute http(s) URL") from None
    host = parts.hostname or ""
    path = parts.path or "/"
    out_headers = dict(headers)
    injected: list[str] = []
    cache: dict[str, str | None] = {}

    def value_of(mapping: CredentialMapping) -> str | None:
        if mapping.secret_name not in cache:
            cache[mapping.secret_name] = resolve(mapping.secret_name) or None
        return cache[mapping.secret_name]

    for slot, candidates in _candidates(credentials, host, port, path).items():
        location = candidates[0].location
        if location.type == "url_path" and not _placeholder_in(parts.path, parts.query, location.placeholder or ""):
            continue  # the request does not use this credential: no need to read the secret
        for mapping in candidates:
            value = value_of(mapping)
            if value is None:
                if mapping.optional:
                    continue
                name = mapping.key or mapping.secret_name
                raise SecretError(
                    f"credential {name!r} for {host or 'this host'} needs secret {mapping.secret_name!r}, which is not set",
                    hint=f"set it with `pincer secrets set {mapping.secret_name}`",
                )
            parts = _place(mapping, value, parts, out_headers, injected)
            logger.debug("injected credential %r (%s) for %s", mapping.key or mapping.secret_name, slot, host)
            break

    unique = tuple(dict.fromkeys(v for v in injected if v))
    return InjectedRequest(url=urlunsplit(parts), headers=out_headers, injected=unique)


def unset_credential(
    credentials: Sequence[CredentialMapping], targets: Sequence[str], *, has: Callable[[str], bool]
) -> str | None:
    """The secret a call would miss before it is run, for the chain's preflight: every target it
    may reach (``host``, ``host:port``, or a whole URL, whose path and placeholder count) needs a
    required credential and none of that target's secrets is set. None when a target needs none or
    has one: a call is never refused for a credential it may not use."""
    required = [m for m in credentials if not m.optional]
    if not required or not targets:
        return None
    lacking: str | None = None
    for target in targets:
        try:
            parts = urlsplit(target if "://" in target else f"//{target}")
            host, port = parts.hostname or "", parts.port
        except ValueError:
            return None  # not a target this can judge: the call's own checks say what is wrong
        whole = "://" in target
        if whole and port is None:
            port = _DEFAULT_PORTS.get(parts.scheme.lower())
        needed = [
            m for m in required
            if any(host_pattern_rank(host, p, port=port) is not None for p in m.host_patterns)
            and (not whole or m.path_match_length(parts.path or "/") is not None)
            and (not whole or m.location.type != "url_path"
                 or _placeholder_in(parts.path, parts.query, m.location.placeholder or ""))
        ]  # fmt: skip
        if not needed or any(has(m.secret_name) for m in needed):
            return None
        lacking = lacking or needed[0].secret_name
    return lacking


def _candidates(
    credentials: Sequence[CredentialMapping], host: str, port: int | None, path: str
) -> dict[str, list[CredentialMapping]]:
    """Mappings that apply to this host and path, grouped by the place they write, best first."""
    ranked: dict[str, list[tuple[tuple[int, int, int], CredentialMapping]]] = {}
    for index, mapping in enumerate(credentials):
        ranks = [r for p in mapping.host_patterns if (r := host_pattern_rank(host, p, port=port)) is not None]
        path_len = mapping.path_match_length(path)
        if not ranks or path_len is None:
            continue
        ranked.setdefault(mapping.location.slot, []).append(((-path_len, -max(ranks), index), mapping))
    return {slot: [m for _, m in sorted(entries, key=lambda e: e[0])] for slot, entries in ranked.items()}


def _placeholder_in(path: str, query: str, placeholder: str) -> bool:
    encoded = quote(placeholder, safe="")
    return any(p and (p in path or p in query) for p in (placeholder, encoded))


def _check_header_safe(mapping: CredentialMapping, *parts: str | None) -> None:
    if any(part and any(c in part for c in _HEADER_BREAKERS) for part in parts):
        raise SecretError(
            f"secret {mapping.secret_name!r} (or its prefix) holds a line break or NUL and cannot go into a header",
            hint=f"store the value again without line breaks: `pincer secrets set {mapping.secret_name}`",
        )


def _check_cookie_safe(mapping: CredentialMapping, value: str) -> None:
    # RFC 6265 cookie-octets: no controls, whitespace, '"', ',', ';' or '\\'; one of those would
    # end the cookie early or smuggle another one in.
    if any(c in value for c in '";,\\ \t') or any(ord(c) < 0x21 or ord(c) == 0x7F for c in value):
        raise SecretError(
            f"secret {mapping.secret_name!r} holds a character a cookie value cannot carry (space, ';', ',', '\"' or a control)",
            hint=f"store the value again as the API issued it: `pincer secrets set {mapping.secret_name}`",
        )


def _set_header(headers: dict[str, str], name: str, value: str) -> None:
    for existing in [k for k in headers if k.lower() == name.lower()]:
        del headers[existing]
    headers[name] = value


def _place(
    mapping: CredentialMapping, value: str, parts: SplitResult, headers: dict[str, str], injected: list[str]
) -> SplitResult:
    """Write one value into the request; returns the (possibly new) URL parts."""
    loc = mapping.location
    injected.append(value)
    if loc.type == "bearer":
        _check_header_safe(mapping, value)
        _set_header(headers, "Authorization", f"Bearer {value}")
    elif loc.type == "basic":
        _check_header_safe(mapping, value, loc.username)
        # With a username the secret is the password (IronClaw); without one it is "user:pass".
        raw = f"{loc.username}:{value}" if loc.username is not None else value
        encoded = base64.b64encode(raw.encode()).decode("ascii")
        injected.append(encoded)
        _set_header(headers, "Authorization", f"Basic {encoded}")
    elif loc.type == "header":
        _check_header_safe(mapping, value, loc.prefix)
        _set_header(headers, loc.header_name or "", f"{loc.prefix or ''}{value}")
    elif loc.type == "cookie":
        _check_cookie_safe(mapping, value)
        name = loc.param_name or ""
        cookie_header = next((k for k in headers if k.lower() == "cookie"), None)
        kept = [] if cookie_header is None else [
            c.strip() for c in headers[cookie_header].split(";") if c.strip() and c.strip().partition("=")[0] != name
        ]
        _set_header(headers, "Cookie", "; ".join([*kept, f"{name}={value}"]))
    elif loc.type == "query_param":
        name = loc.param_name or ""
        encoded = quote(value, safe="")
        injected.append(encoded)
        kept = [p for p in parts.query.split("&") if p and unquote_plus(p.partition("=")[0]) != name]
        kept.append(f"{quote(name, safe='')}={encoded}")
        parts = parts._replace(query="&".join(kept))
    else:  # url_path
        placeholder = loc.placeholder or ""
        encoded = quote(value, safe=_URL_SAFE)
        injected.append(encoded)
        path, query = parts.path, parts.query
        for form in (placeholder, quote(placeholder, safe="")):
            path, query = path.replace(form, encoded), query.replace(form, encoded)
        parts = parts._replace(path=path, query=query)
    return parts
