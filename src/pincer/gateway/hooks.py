"""``POST /hooks/{name}``: webhook deliveries, authenticated by each hook's own ``auth``.

The guard lets ``/hooks/`` past the bearer-token check (GitHub cannot hold our token) but not
past the Host and Origin rules. This route then decides, in this order:

====  =========================================================================================
405   not a POST
400   a credential in the query string (``?token=...``): URLs end up in logs
429   the client address failed authentication ``[triggers] max_failures_per_minute`` times in
      the last minute (``Retry-After`` says when to come back); nothing else is looked at
404   no ``[[hooks]]`` entry of that name (counted as a failure: names are not for guessing)
400   an authentication header sent twice (``Authorization``, ``webhook-signature``,
      ``X-Hub-Signature-256``, ...: :data:`~pincer.triggers.signatures.AUTH_HEADERS`), named in
      the answer (counted as a failure): a proxy and pincer could each read a different copy
413   a body over the hook's limit (``[triggers] hook_max_body_bytes``, 256 KiB), refused from
      its Content-Length before it is read, or as soon as the read passes it
503   the hook's secret is not in the secret store: the answer names it
401   a missing or wrong token or signature, or a Standard Webhooks timestamp outside the
      tolerance (counted as a failure)
400   a signed Standard Webhooks timestamp that is not Unix seconds (``1e400``, 5,000 digits)
415   a body that is not JSON sent as a form: the content type is named (GitHub's form
      deliveries, ``payload=<JSON>``, are read)
200   a delivery id seen before: the first delivery's answer, no second run (GitHub signs the
      body only, so a GitHub delivery's id is its body's digest, not ``X-GitHub-Delivery``)
202   accepted: the run ids, at once (or ``{"ignored": true}`` for an event the hook filters out)
====  =========================================================================================

Refusals made before a delivery was authenticated are counted (``GET /api/v1/metrics``) and
logged at a bounded rate, like the guard's, and never written to the audit log: anyone can send
them by the thousand. Every accepted delivery's firings are audited.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.types import Receive, Scope, Send

from pincer.core.errors import (
    CredentialInQuery,
    DeliveryMalformed,
    HookNotFound,
    HookSecretMissing,
    MethodNotAllowed,
    PayloadTooLarge,
    PincerError,
    SignatureInvalid,
    TooManyFailures,
    UnsupportedMediaType,
    UsageError,
)
from pincer.gateway.guard import duplicated_header
from pincer.gateway.refusals import UnauthenticatedRefusals
from pincer.telemetry import spans
from pincer.telemetry.tracing import TRACING
from pincer.triggers.events import delivery_event
from pincer.triggers.failures import FailureWindow
from pincer.triggers.signatures import AUTH_HEADERS, verify
from pincer.triggers.webhooks import DeliveryAnswer, accept_delivery

if TYPE_CHECKING:
    from pincer.config import Config
    from pincer.secrets.store import SecretStore
    from pincer.telemetry.metrics import Metrics
    from pincer.triggers.engine import TriggerEngine

logger = logging.getLogger(__name__)

__all__ = ["HookServices", "HooksEndpoint", "HOOKS_PREFIX", "CREDENTIAL_QUERY_NAMES"]

HOOKS_PREFIX = "/hooks/"
CREDENTIAL_QUERY_NAMES = frozenset({
    "token", "access_token", "auth", "authorization", "key", "api_key", "apikey", "secret", "password",
    "signature", "sig", "hmac", "bearer", "webhook-signature",
})  # fmt: skip
_SECRET_CACHE_MAX = 256


def _json(status: int, body: Any, headers: Iterable[tuple[str, str]] = ()) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    payload = json.dumps(body, ensure_ascii=False, default=str).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return status, payload, raw


def _error(exc: PincerError, headers: Iterable[tuple[str, str]] = ()) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    return _json(exc.http_status, {"error": exc.to_dict()}, headers)


class _TooLarge(Exception):
    pass


@dataclass(frozen=True, kw_only=True, slots=True)
class HookServices:
    """What webhooks use of the service (``gateway/services.py`` makes it of a Pincer): config.toml
    now (its ``[[hooks]]``), the secrets that sign deliveries, the trigger engine that takes them
    (made on first use), ``shown`` for replayed answers, and the metrics (None while off)."""

    config: Callable[[], Config]
    secrets: SecretStore
    triggers: Callable[[], TriggerEngine]
    shown: Callable[[Any], Any]
    metrics: Metrics | None


class HooksEndpoint:
    """The ASGI app behind ``/hooks/``."""

    def __init__(self, services: HookServices, *, refusals: UnauthenticatedRefusals) -> None:
        self.services = services
        self.refusals = refusals
        self.failures = FailureWindow(limit=lambda: services.config().triggers.max_failures_per_minute)
        self._secrets: dict[str, tuple[int, str]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        metrics = self.services.metrics
        if TRACING.on or metrics is not None:
            status, body, headers = await self._observed(scope, receive, metrics)
        else:
            status, body, headers = await self._answer(scope, receive)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _observed(self, scope: Scope, receive: Receive, metrics: Any) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        """The delivery under its span and counted; a name no ``[[hooks]]`` table has is named
        neither on the span nor in the metrics (anyone can send those)."""
        name = str(scope.get("path", ""))[len(HOOKS_PREFIX) :].rstrip("/")
        hook = name if name and "/" not in name and self.services.config().hook(name) is not None else None
        if TRACING.on:
            with spans.webhook_span(hook) as span:
                answer = await self._answer(scope, receive)
                spans.end_webhook(span, answer[0])
        else:
            answer = await self._answer(scope, receive)
        if metrics is not None:
            metrics.delivery(hook=hook, status=answer[0])
        return answer

    def _refused(self, scope: Scope, address: str, code: str, *, failure: bool) -> None:
        if failure:
            self.failures.record(address)
        self.refusals.record(address=address, method=str(scope.get("method")), path=str(scope.get("path", "")), code=code)

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        client = scope.get("client")
        address = str(client[0]) if client else "(unknown address)"
        path = str(scope.get("path", ""))
        name = path[len(HOOKS_PREFIX) :].rstrip("/")
        if scope.get("method") != "POST":
            self._refused(scope, address, "method_not_allowed", failure=False)
            return _error(
                MethodNotAllowed(f"{scope.get('method')} {path}: webhooks take POST only", hint="send the delivery as a POST"),
                [("allow", "POST")],
            )
        query = scope.get("query_string", b"")
        if query and any(k.lower() in CREDENTIAL_QUERY_NAMES for k, _ in parse_qsl(query.decode("latin-1"), keep_blank_values=True)):
            self._refused(scope, address, "credential_in_query", failure=False)
            return _error(
                CredentialInQuery(
                    "a credential in the query string is refused: URLs are written to logs",
                    hint="send it in a header (Authorization: Bearer ..., or the hook's signature headers)",
                )
            )
        wait = self.failures.retry_after(address)
        if wait is not None:
            self._refused(scope, address, "too_many_failures", failure=False)
            seconds = max(1, math.ceil(wait))
            limit = self.services.config().triggers.max_failures_per_minute
            return _error(
                TooManyFailures(
                    f"{limit} failed deliveries from {address} within a minute", retry_after_s=seconds,
                    hint=f"fix the sender's secret; deliveries are taken again in {seconds} s",
                ),
                [("retry-after", str(seconds))],
            )  # fmt: skip
        config = self.services.config()
        hook = config.hook(name) if name and "/" not in name else None
        if hook is None or not config.triggers.enabled:
            self._refused(scope, address, "hook_not_found", failure=True)
            return _error(
                HookNotFound(f"no webhook named {name[:64]!r}", hint="webhooks are the [[hooks]] tables of config.toml")
            )
        limit = hook.max_body_bytes or config.triggers.hook_max_body_bytes
        raw_headers = scope.get("headers", [])
        twice = duplicated_header(raw_headers, AUTH_HEADERS)
        if twice is not None:
            self._refused(scope, address, "delivery_malformed", failure=True)
            return _error(
                DeliveryMalformed(
                    f"the delivery has more than one {twice} header",
                    hint=f"send {twice} once: with two, a proxy and pincer could each read a different one",
                )
            )
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw_headers}
        try:
            declared = int(headers.get("content-length", "0") or 0)
        except ValueError:
            declared = 0
        too_big = PayloadTooLarge(
            f"the delivery is larger than {limit:,} bytes",
            hint=f"send less, or raise [hooks] max_body_bytes of hook {hook.name} (or [triggers] hook_max_body_bytes)",
        )
        if declared > limit:
            self._refused(scope, address, "body_too_large", failure=False)
            return _error(too_big)
        try:
            body = await _read_body(receive, limit)
        except _TooLarge:
            self._refused(scope, address, "body_too_large", failure=False)
            return _error(too_big)
        secret = self._secret(hook.secret)
        if secret is None:
            self._refused(scope, address, "hook_secret_missing", failure=False)
            return _error(
                HookSecretMissing(
                    f"webhook {hook.name!r} refuses every delivery: its secret {hook.secret!r} is not in the secret store",
                    hint=f"store it: printf %s VALUE | pincer secrets set {hook.secret}",
                )
            )
        try:
            delivery_id = verify(
                hook.auth, secret, headers, body, now=time.time(), tolerance_s=config.triggers.signature_tolerance_s
            )
        except SignatureInvalid as exc:
            self._refused(scope, address, "signature_invalid", failure=True)
            return _error(exc, [("www-authenticate", f'Signature realm="pincer", hook="{hook.name}"')])
        except DeliveryMalformed as exc:
            # Signed by the key's holder (the signature is checked first), so not a failure.
            self._refused(scope, address, exc.code, failure=False)
            return _error(exc)
        try:
            payload = _payload(headers.get("content-type", ""), body)
        except UsageError as exc:
            return _error(exc)
        if hook.auth == "github":
            # GitHub signs the body alone: a captured delivery resent with a fresh
            # X-GitHub-Delivery (or another X-GitHub-Event) verifies again, so it is known by
            # what was signed.
            delivery_id = "sha256:" + hashlib.sha256(body).hexdigest()[:32]
        event = delivery_event(hook.auth, headers, payload)
        generated = not delivery_id
        answer: DeliveryAnswer = await accept_delivery(
            self.services.triggers(), hook, delivery_id=delivery_id or f"gen-{secrets.token_hex(8)}", generated_id=generated,
            event=event, payload=payload, address=address,
        )  # fmt: skip
        # A replayed answer is stored history: a value stored as a secret since is masked here.
        return _json(answer.status, answer.shown(self.services.shown), answer.headers.items())

    def _secret(self, name: str) -> str | None:
        store = self.services.secrets
        version = store.version()
        cached = self._secrets.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        value = store.find(name)
        if value is None:
            self._secrets.pop(name, None)
            return None
        if len(self._secrets) >= _SECRET_CACHE_MAX:
            self._secrets.clear()
        self._secrets[name] = (version, value)
        return value


async def _read_body(receive: Receive, limit: int) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        body.extend(message.get("body", b""))
        if len(body) > limit:
            raise _TooLarge
        if not message.get("more_body", False):
            break
    return bytes(body)


def _payload(content_type: str, body: bytes) -> Any:
    """The delivery's JSON (GitHub may send it form-encoded, as ``payload=``); empty: ``{}``."""
    if not body.strip():
        return {}
    media = content_type.split(";", 1)[0].strip().lower()
    text: str | bytes = body
    if media == "application/x-www-form-urlencoded":
        fields = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        if "payload" not in fields:
            # curl -d sends this content type by default, so a JSON body often arrives as a form.
            raise UnsupportedMediaType(
                "the delivery is sent as a form (content-type: application/x-www-form-urlencoded) without a payload= field",
                hint="send JSON with content-type: application/json (curl -H 'content-type: application/json' -d ...), "
                "or a form with payload=<JSON> as GitHub does",
            )
        text = fields["payload"]
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        where = "the form's payload= field" if media == "application/x-www-form-urlencoded" else "the delivery's body"
        raise UsageError(
            f"{where} is not JSON (content-type: {media or 'none'})", hint="send a JSON body (content-type: application/json)"
        ) from None
