"""Which IP addresses an outbound request may connect to (the SSRF rule), as a pure function.

Two classes of refusal:

* always refused: unspecified (``0.0.0.0/8``, ``::``), multicast, reserved and broadcast
  addresses, and cloud metadata endpoints: nothing legitimate is served there;
* refused unless the operator set ``allow_private_network``: loopback, private (RFC 1918, ULA),
  link-local, shared address space (CGNAT ``100.64.0.0/10``), IPv6 site-local, and any other
  non-global special-purpose range.

IPv6 addresses that embed an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, 6to4 ``2002::/16``,
Teredo, NAT64 ``64:ff9b::/96``) are judged by the address they embed as well.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["AddressRefusal", "address_refusal", "METADATA_ADDRESSES"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Instance metadata services (AWS/GCP/Azure/OpenStack, AWS IPv6, AWS ECS task, Alibaba): they hand
# out cloud credentials to whoever asks from inside the machine.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "169.254.170.2", "100.100.100.200")
)
_THIS_NETWORK = ipaddress.IPv4Network("0.0.0.0/8")
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


@dataclass(frozen=True, kw_only=True, slots=True)
class AddressRefusal:
    """Why an address is refused; ``always`` when even allow_private_network does not help."""

    reason: str
    always: bool


def address_refusal(ip: IPAddress, *, allow_private_network: bool = False) -> AddressRefusal | None:
    """None when a request may connect to ``ip``; otherwise the reason it may not."""
    refusal = _classify(ip)
    if refusal is None or (allow_private_network and not refusal.always):
        return None
    return refusal


def _classify(ip: IPAddress) -> AddressRefusal | None:
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner = _classify(embedded)
            if inner is not None:
                return AddressRefusal(reason=f"{inner.reason} (embedded in an IPv6 address)", always=inner.always)
            if ip.ipv4_mapped is not None or any(ip in net for net in _NAT64):
                return None  # these connect to (or translate to) the embedded address, which is fine
    if ip in METADATA_ADDRESSES:
        return AddressRefusal(reason="a cloud metadata endpoint", always=True)
    if ip.is_unspecified or (isinstance(ip, ipaddress.IPv4Address) and ip in _THIS_NETWORK):
        return AddressRefusal(reason="an unspecified ('this network') address", always=True)
    if ip.is_multicast:
        return AddressRefusal(reason="a multicast address", always=True)
    if ip.is_loopback:
        return AddressRefusal(reason="a loopback address", always=False)
    if ip.is_link_local:
        return AddressRefusal(reason="a link-local address", always=False)
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return AddressRefusal(reason="a shared (CGNAT 100.64.0.0/10) address", always=False)
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return AddressRefusal(reason="a site-local address", always=False)
    if ip.is_reserved or ip == ipaddress.IPv4Address("255.255.255.255"):
        return AddressRefusal(reason="a reserved address", always=True)
    if ip.is_private:
        return AddressRefusal(reason="a private address", always=False)
    if not ip.is_global:  # pragma: no cover -- 3.11's is_global is 'not is_private' (less CGNAT, refused above)
        return AddressRefusal(reason="a special-purpose (non-global) address", always=False)
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        server, client = ip.teredo
        # Either end being internal makes the address unsafe; report the first that is.
        return client if _classify(client) is not None else server
    if any(ip in net for net in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None
