"""``http-request`` for WASM guests, in this order:

1. placeholders: every ``{NAME}`` in the URL must be the placeholder of one of the tool's
   ``url_path`` credentials; it stays in the URL (percent-encoded for the checks) until step 5;
2. allowlist: the capabilities' ``http.allowlist`` (host exact or ``*.`` subdomain, path prefix
   after normalisation, methods; https only; userinfo and encoded separators refused), then the
   grant's ``HostContext.network_hosts`` when the call chain narrowed it;
3. rate limit: the capabilities' ``http.rate_limit`` for this tool, per minute and per hour;
4. leak scan of the guest's URL, headers and body *before* injection: a guest cannot send out a
   secret (or a secret-shaped value) it obtained somehow;
5. credential injection (:func:`pincer.secrets.injection.inject_credentials`) from the call's
   ``SecretAccess``, which records every value so the call's scans redact it;
6. SSRF checks and the exchange (:func:`pincer.safety.egress.send`: resolve once, refuse private,
   loopback and link-local addresses, connect to the resolved address, no redirects), with the
   request and response size limits and the timeout (``timeout-ms``, default 30 s, capped by
   the capabilities' ``timeout_secs`` and by what is left of the execution deadline);
7. leak scan of the response headers and body (values injected in this call included);
8. every error message is redacted before the guest sees it; at most
   ``WasmLimits.max_http_requests`` requests per execution.

Plain http to loopback is reachable only with ``WasmLimits.allow_loopback_http`` (tests), which
no manifest can set. ``redirect`` (the tool builder's test stage only) sends every request that
passed steps 1-5 to a local fixture server instead of its host: the checks are the real ones,
only the exchange goes elsewhere. The exchange runs on the event loop (``anyio.from_thread``); the guest's
worker thread waits for it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.from_thread

from pincer.core.errors import EgressDenied, PincerError, ToolError
from pincer.core.extras import require
from pincer.policy.budget import RateLimit, RateLimiter
from pincer.runtimes.wasm.host import Execution, decode_headers
from pincer.runtimes.wasm.limits import WasmLimits
from pincer.runtimes.wasm.records import HttpResponseRecord
from pincer.safety.egress import EgressClient, EgressPolicy, EgressRule, HttpRequest, HttpResponse, send
from pincer.secrets.injection import inject_credentials

if TYPE_CHECKING:
    from wasmtime.component import Variant

    from pincer.core.capabilities import RateLimit as CapabilityRateLimit
else:  # ExtraMissing naming the extra, never an ImportError, when it is not installed
    _component = require("wasm", "wasmtime.component")
    Variant = _component.Variant

__all__ = ["HttpGateway", "DEFAULT_TIMEOUT_MS"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30_000  # the WIT's documented default
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}|%7B([A-Za-z_][A-Za-z0-9_]*)%7D", re.IGNORECASE)


class _Refused(Exception):
    """A refusal whose message goes to the guest (after redaction)."""


class HttpGateway:
    """One runtime's HTTP path: rate-limit windows and a connection pool per network setting."""

    def __init__(self, limits: WasmLimits, *, redirect: Callable[[HttpRequest], HttpRequest] | None = None) -> None:
        """``redirect`` rewrites a checked request to a loopback fixture server (builder tests)."""
        self._limits = limits
        self._redirect = redirect
        self._rate = RateLimiter()
        self._rate_lock = threading.Lock()
        self._clients: dict[tuple[bool, bool], EgressClient] = {}

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    def reserve(self, key: str, rate: CapabilityRateLimit) -> None:
        """Count one use against a capabilities ``RateLimit``; BudgetExceeded when spent."""
        limit = RateLimit(calls_per_minute=rate.requests_per_minute, calls_per_hour=rate.requests_per_hour)
        with self._rate_lock:
            self._rate.reserve(key, limit, time.time())

    # ------------------------------------------------------------------------------ the import

    def handle(
        self, ex: Execution, method: str, url: str, headers_json: str, body: bytes | None, timeout_ms: int | None
    ) -> Variant:
        """The ``http-request`` import: ``ok(http-response)`` or ``err(message)``; never raises."""
        ex.http_requests += 1
        try:
            if ex.http_requests > ex.limits.max_http_requests:
                raise _Refused(f"more than {ex.limits.max_http_requests} HTTP requests in one execution")
            return Variant("ok", self._request(ex, method, url, headers_json, body, timeout_ms))
        except _Refused as exc:
            return Variant("err", _redact(ex, str(exc)))
        except PincerError as exc:
            text = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
            return Variant("err", _redact(ex, text))
        except Exception as exc:  # never into wasmtime; the type only, a message may hold a secret  # noqa: BLE001
            logger.warning("http-request of %s failed: %s", ex.tool, type(exc).__name__)
            return Variant("err", f"http-request failed in the host ({type(exc).__name__})")

    def _request(
        self, ex: Execution, method: str, url: str, headers_json: str, body: bytes | None, timeout_ms: int | None
    ) -> HttpResponseRecord:
        caps = ex.capabilities
        http = caps.http if caps is not None else None
        if http is None or ex.host is None:
            raise _Refused("http-request is not granted to this tool (no http section in its capabilities)")
        host = ex.host
        headers = decode_headers(headers_json)
        if headers is None:
            raise _Refused("headers-json must be a JSON object of string values")

        # 1. placeholders
        placeholders = {loc.placeholder for c in http.credentials if (loc := c.location).type == "url_path"}
        for match in _PLACEHOLDER.finditer(url):
            name = match.group(1) or match.group(2)
            if not any(p in (f"{{{name}}}", name) for p in placeholders):
                raise _Refused(f"URL placeholder {{{name}}} is not declared by a url_path credential of this tool")

        # 2. allowlist (pure: no network), then the grant's narrower host list
        loopback = self._limits.allow_loopback_http
        settings = {
            "allow_private_network": bool(host.allow_private_network or loopback),
            "allow_plain_http_loopback": loopback,
        }
        policy = EgressPolicy.from_http_capability(http, **settings)
        policy.check(method, url)
        if host.network_hosts is not None:
            EgressPolicy.from_hosts(host.network_hosts, **settings).check(method, url)

        # 3. rate limit
        self.reserve(f"http:{ex.tool}", http.rate_limit)

        # 4. leak scan before injection
        scanner = ex.scanner
        if scanner is not None:
            if scanner.contains_secret(url):
                raise EgressDenied("request blocked: the URL carries a secret or a secret-shaped value",
                                   hint="the host injects credentials itself; send the URL without them")  # fmt: skip
            for name, value in headers.items():
                if scanner.contains_secret(f"{name}: {value}"):
                    raise EgressDenied(f"request blocked: header {name!r} carries a secret or a secret-shaped value",
                                       hint="the host injects credentials itself")  # fmt: skip
            if body and scanner.contains_secret(_as_text(body)[0]):
                raise EgressDenied("request blocked: the body carries a secret or a secret-shaped value")

        # 5. credential injection
        access = host.secrets
        if http.credentials:
            resolve = access.find if access is not None else (lambda _name: None)
            injected = inject_credentials(method, url, headers, credentials=http.credentials, resolve=resolve)
            if access is not None:
                for value in injected.injected:
                    access.record(value)
            url, headers = injected.url, dict(injected.headers)

        # 6. SSRF checks, sizes, timeout and the exchange
        remaining = ex.remaining_s()
        if remaining <= 0.05:
            raise ToolError("the execution deadline has passed; no time left for a request")
        requested = (timeout_ms if timeout_ms and timeout_ms > 0 else DEFAULT_TIMEOUT_MS) / 1000.0
        timeout_s = min(requested, float(http.timeout_secs), remaining)
        policy = EgressPolicy.from_http_capability(http, timeout_s=timeout_s, **settings)
        request = HttpRequest(method=method, url=url, headers=tuple(headers.items()), body=body)
        client_key = (settings["allow_private_network"], settings["allow_plain_http_loopback"])
        if self._redirect is not None:
            request = self._redirect(request)
            policy = dataclasses.replace(
                policy, rules=(EgressRule(host="127.0.0.1"),), allow_private_network=True, allow_plain_http_loopback=True
            )
            client_key = (True, True)

        async def exchange() -> HttpResponse:
            client = self._clients.get(client_key)
            if client is None:
                client = self._clients[client_key] = EgressClient()
            return await send(request, policy=policy, client=client)

        response = anyio.from_thread.run(exchange)
        if response.truncated:
            raise ToolError(
                f"the response is larger than {http.max_response_bytes:,} bytes (max_response_bytes)",
                hint="ask for less data or raise http.max_response_bytes in the capabilities",
            )

        # 7. leak scan of the response
        headers_out: dict[str, str] = {}
        for name, value in response.headers:
            headers_out[name] = f"{headers_out[name]}, {value}" if name in headers_out else value
        headers_text = json.dumps(headers_out)
        body_out = response.body
        if scanner is not None:
            headers_text = scanner.redact_text(headers_text)
            text, encoding = _as_text(body_out)
            if scanner.contains_secret(text):
                body_out = scanner.redact_text(text).encode(encoding, "replace")
        return HttpResponseRecord(status=response.status, headers_json=headers_text, body=body_out)


def _as_text(body: bytes) -> tuple[str, str]:
    """The body as text for scanning, and the codec that turns it back into bytes: UTF-8 when
    it is UTF-8, else Latin-1 (one character per byte, so ASCII secrets inside binary data are
    still found where they are, and scanning does not pay for replacement characters)."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return body.decode("latin-1"), "latin-1"


def _redact(ex: Execution, text: str) -> str:
    try:
        return ex.redact(text)
    except Exception:  # a scanner failure must not leak the unscanned text  # noqa: BLE001
        return "http-request failed (the error message could not be scanned)"
