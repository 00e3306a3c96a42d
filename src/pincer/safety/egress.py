"""Outbound HTTP for every runtime that makes requests (native ``http``, WASM ``http-request``,
OpenAPI): one policy, one checked path to the network.

Two modules, re-exported here so ``from pincer.safety.egress import ...`` keeps working:

- :mod:`pincer.safety.egress_policy`, the rules without I/O: :class:`EgressRule` (host pattern
  from :mod:`pincer.safety.hosts`, path prefix, methods), :class:`EgressPolicy` (URL checks and
  allowlist, sizes, timeout, the operator-only switches), :class:`HttpRequest`/:class:`HttpResponse`;
- :mod:`pincer.safety.resolution`: :func:`checked_addresses` (resolve once, every address
  through :func:`pincer.safety.addresses.address_refusal`) and :func:`resolve_checked`;
- :mod:`pincer.safety.egress_transport`, the network: the pinned connection pool
  :class:`EgressClient` and :func:`send`.

The script sandbox's proxy uses the same host patterns and :func:`checked_addresses`.
"""

from __future__ import annotations

from pincer.safety.egress_policy import (
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT_S,
    EgressPolicy,
    EgressRule,
    HttpRequest,
    HttpResponse,
    check_method,
)
from pincer.safety.egress_transport import EgressClient, send
from pincer.safety.resolution import checked_addresses, resolve_checked
from pincer.safety.urls import CheckedUrl, check_url

__all__ = [
    "EgressRule",
    "EgressPolicy",
    "HttpRequest",
    "HttpResponse",
    "EgressClient",
    "CheckedUrl",
    "check_url",
    "send",
    "resolve_checked",
    "checked_addresses",
    "check_method",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT_S",
]
