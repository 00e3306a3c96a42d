"""Webhook authentication: a bearer token, Standard Webhooks signatures, GitHub signatures.

Pure functions over the request's headers and its raw body; each returns the delivery's id (or
None when the sender gives none) or raises :class:`~pincer.core.errors.SignatureInvalid` saying
what did not hold. Comparisons are constant-time.

- **bearer**: ``Authorization: Bearer <the secret>``.
- **standard** (standardwebhooks.com): ``webhook-id``, ``webhook-timestamp`` (Unix seconds) and
  ``webhook-signature``, a space-separated list of ``v1,<base64 HMAC-SHA256 of
  "id.timestamp.body">`` (several during a key rotation: one match is enough). The secret is
  ``whsec_<base64 key>``; the store entry may hold several, separated by spaces, so a receiver
  can rotate too. The timestamp must be within the tolerance (5 minutes) of now, either side;
  it is Unix seconds as at most 12 digits (anything else, ``1e400`` or a 5,000-digit number,
  is :class:`~pincer.core.errors.DeliveryMalformed`, 400, not an arithmetic overflow).
  Svix's ``svix-*`` headers are the same scheme and are read too.
- **github**: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`` under the hook's
  secret; the delivery id is ``X-GitHub-Delivery``. GitHub sends no timestamp and signs neither
  header, so the gateway knows a GitHub delivery by its body's digest (``gateway/hooks.py``):
  a captured one resent under a fresh id is a replay.

Each header is read once: :data:`AUTH_HEADERS` sent twice is refused by the gateway before any
of this runs (``gateway/hooks.py``), since a proxy in front and pincer could each read a
different copy.

A **bearer** hook has no replay protection beyond its delivery id: the token is a shared
password, not a signature, so anyone who saw one delivery holds the token and could make any
timestamp or nonce fresh. Where replays matter use ``standard``, whose signature covers the id
and the timestamp (``pincer triggers list`` says so for every bearer hook).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

from pincer.config import TriggersSettings
from pincer.core.errors import DeliveryMalformed, SignatureInvalid

__all__ = [
    "verify",
    "verify_bearer",
    "verify_standard",
    "verify_github",
    "sign_standard",
    "sign_github",
    "standard_keys",
    "AUTH_KINDS",
    "AUTH_HEADERS",
    "DEFAULT_TOLERANCE_S",
    "MAX_TIMESTAMP_DIGITS",
]

AUTH_KINDS = ("bearer", "standard", "github")
DEFAULT_TOLERANCE_S = TriggersSettings().signature_tolerance_s  # [triggers]'s default
# Every header that authenticates a delivery, names it or says what it is: each may come once.
AUTH_HEADERS = (
    "authorization", "webhook-id", "webhook-timestamp", "webhook-signature", "svix-id", "svix-timestamp",
    "svix-signature", "x-hub-signature-256", "x-hub-signature", "x-github-delivery", "x-github-event",
    "x-pincer-event", "content-type",
)  # fmt: skip
# Unix seconds stay 10 digits until the year 2286; 12 leave room and keep the arithmetic exact.
MAX_TIMESTAMP_DIGITS = 12
_WHSEC = "whsec_"
_MAX_SIGNATURES = 16


def _header(headers: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = headers.get(name)
        if value is not None:
            return value
    return None


def verify(
    auth: str, secret: str, headers: Mapping[str, str], body: bytes, *, now: float,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> str | None:  # fmt: skip
    """Check a delivery for a hook of kind ``auth``; ``headers`` has lower-case names."""
    if not secret.strip():
        # An empty key is one anyone can sign with: refuse rather than accept everything.
        raise SignatureInvalid("the hook's secret is empty", hint="store a real secret under the hook's secret name")
    if auth == "bearer":
        return verify_bearer(secret, headers)
    if auth == "standard":
        return verify_standard(secret, headers, body, now=now, tolerance_s=tolerance_s)
    if auth == "github":
        return verify_github(secret, headers, body)
    raise SignatureInvalid(f"unknown webhook auth {auth!r}", hint='[[hooks]] auth is "bearer", "standard" or "github"')


def verify_bearer(secret: str, headers: Mapping[str, str]) -> str | None:
    given = headers.get("authorization")
    if not given:
        raise SignatureInvalid("missing bearer token", hint="send 'Authorization: Bearer <the hook's token>'")
    scheme, _, token = given.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), secret.strip().encode()):
        raise SignatureInvalid("wrong bearer token", hint="send the token stored under the hook's secret name")
    return _header(headers, "webhook-id", "idempotency-key", "x-request-id")


def standard_keys(secret: str) -> list[bytes]:
    """The HMAC keys of a Standard Webhooks secret entry (``whsec_...``, several by spaces)."""
    keys = []
    for part in secret.split():
        raw = part[len(_WHSEC) :] if part.startswith(_WHSEC) else part
        try:
            keys.append(base64.b64decode(raw, validate=True))
        except (binascii.Error, ValueError):
            continue
    return keys


def _standard_mac(key: bytes, msg_id: str, timestamp: str, body: bytes) -> bytes:
    return hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()


def verify_standard(
    secret: str, headers: Mapping[str, str], body: bytes, *, now: float, tolerance_s: float = DEFAULT_TOLERANCE_S
) -> str:
    msg_id = _header(headers, "webhook-id", "svix-id")
    timestamp = _header(headers, "webhook-timestamp", "svix-timestamp")
    signature = _header(headers, "webhook-signature", "svix-signature")
    if not msg_id or not timestamp or not signature:
        missing = [n for n, v in (("webhook-id", msg_id), ("webhook-timestamp", timestamp), ("webhook-signature", signature)) if not v]
        raise SignatureInvalid(
            f"missing Standard Webhooks header{'s' if len(missing) > 1 else ''} {', '.join(missing)}",
            hint="sign the delivery as Standard Webhooks do (webhook-id, webhook-timestamp, webhook-signature)",
        )
    keys = standard_keys(secret)
    if not keys:
        raise SignatureInvalid(
            "the hook's secret is not a Standard Webhooks key", hint="store the whsec_... key under the hook's secret name"
        )
    given = []
    for item in signature.split()[:_MAX_SIGNATURES]:
        version, _, value = item.partition(",")
        if version != "v1":
            continue
        try:
            given.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            continue
    expected = [_standard_mac(key, msg_id, timestamp, body) for key in keys]
    if not any(hmac.compare_digest(g, e) for g in given for e in expected):
        raise SignatureInvalid(
            "no webhook-signature matches the body", hint="sign id.timestamp.body with the hook's whsec_ key (v1,<base64>)"
        )
    sent = _unix_seconds(timestamp)
    if abs(now - sent) > tolerance_s:
        raise SignatureInvalid(
            f"webhook-timestamp is {now - sent:.0f} s old, more than the {tolerance_s:g} s tolerance" if sent <= now
            else f"webhook-timestamp is {sent - now:.0f} s in the future, more than the {tolerance_s:g} s tolerance",
            hint="send deliveries when they are made (and check the sender's clock); a replay is refused",
        )
    return msg_id


def _unix_seconds(timestamp: str) -> int:
    text = timestamp.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_TIMESTAMP_DIGITS):
        raise DeliveryMalformed(
            f"webhook-timestamp {text[:30]!r}{'...' if len(text) > 30 else ''} is not Unix seconds",
            hint=f"send the time the delivery was made as whole seconds since 1970 (at most {MAX_TIMESTAMP_DIGITS} digits)",
        )
    return int(text)


def verify_github(secret: str, headers: Mapping[str, str], body: bytes) -> str | None:
    given = headers.get("x-hub-signature-256")
    if not given:
        raise SignatureInvalid(
            "missing X-Hub-Signature-256", hint="set the webhook's secret on GitHub to the value stored under the hook's secret name"
        )
    scheme, _, digest = given.partition("=")
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if scheme != "sha256" or not hmac.compare_digest(digest.strip().lower().encode(), expected.encode()):
        raise SignatureInvalid(
            "X-Hub-Signature-256 does not match the body", hint="GitHub and pincer must share the same webhook secret"
        )
    return headers.get("x-github-delivery")


def sign_standard(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value, one ``v1,`` signature per key (``pincer hooks test``)."""
    return " ".join(
        "v1," + base64.b64encode(_standard_mac(key, msg_id, str(timestamp), body)).decode() for key in standard_keys(secret)
    )


def sign_github(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
