"""Resolving a host for egress: once, with every address it has checked by the one address rule.

Kept apart from the transport (``egress_transport``: httpcore2, TLS) so that what only needs to
decide where a connection may go — the sandbox's proxy, a call's preflight — loads no HTTP stack.
"""

from __future__ import annotations

import ipaddress
import socket

import anyio

from pincer.core.errors import EgressDenied, ToolError
from pincer.safety.addresses import address_refusal
from pincer.safety.egress_policy import EgressPolicy
from pincer.safety.urls import CheckedUrl, IPAddress

__all__ = ["checked_addresses", "resolve_checked"]


async def checked_addresses(
    host: str, port: int, *, allow_private_network: bool, ip: IPAddress | None = None, display: str | None = None
) -> tuple[IPAddress, ...]:
    """Resolve ``host`` once (or take the literal ``ip``) and check every address it has with
    :func:`~pincer.safety.addresses.address_refusal`; one refused address refuses the host, so a
    name cannot mix a public answer with an internal one. EgressDenied for a refusal, ToolError
    when the name does not resolve. The caller connects to exactly these addresses."""
    shown = display or f"{host}:{port}"
    if ip is not None:
        addresses: tuple[IPAddress, ...] = (ip,)
    else:
        try:
            infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise ToolError(
                f"could not resolve {host!r}: {getattr(exc, 'strerror', None) or exc}",
                hint="check the host name",
            ) from None
        seen: dict[IPAddress, None] = {}
        for _family, _type, _proto, _canon, sockaddr in infos:
            try:
                seen.setdefault(ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0]), None)
            except ValueError:
                continue
        addresses = tuple(seen)
        if not addresses:  # pragma: no cover -- getaddrinfo fails rather than answer nothing; fail closed if not
            raise ToolError(f"{host!r} resolved to no usable address", hint="check the host name")
    for address in addresses:
        refusal = address_refusal(address, allow_private_network=allow_private_network)
        if refusal is not None:
            via = "" if ip is not None else f" (resolved from {host!r})"
            hint = (
                "this address is never reachable from tools, whatever the settings"
                if refusal.always
                else "private addresses are reachable only with [network] allow_private = true in config.toml"
            )
            raise EgressDenied(f"{shown} refused: {address} is {refusal.reason}{via} (rule: no private network)", hint=hint)
    return addresses


async def resolve_checked(target: CheckedUrl, policy: EgressPolicy) -> tuple[IPAddress, ...]:
    """The checked addresses of a checked URL; plain http only to loopback, except to an origin
    the person named in config.toml (``policy.trusted_origins``), which may also be private."""
    trusted = policy.is_trusted(target)
    addresses = await checked_addresses(
        target.host, target.port, allow_private_network=policy.allow_private_network or trusted, ip=target.ip,
        display=target.display,
    )  # fmt: skip
    if target.scheme == "http" and not trusted and not all(a.is_loopback for a in addresses):
        raise EgressDenied(
            f"{target.display} refused: plain http is allowed only to loopback (rule: https only)",
            hint="use https://",
        )
    return addresses
