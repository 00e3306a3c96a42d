"""Webhook signatures against the official Standard Webhooks signer and GitHub's recipe;
arbitrary headers and bodies only ever raise SignatureInvalid."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from pincer.core.errors import SignatureInvalid
from pincer.triggers.signatures import sign_github, sign_standard, verify, verify_github, verify_standard

KEY = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
OTHER = "whsec_" + base64.b64encode(b"another key, another key, anoth").decode()
BODY = b'{"type": "invoice.paid", "data": {"id": 7}}'


def _official(secret: str, msg_id: str, when: float, body: bytes) -> dict[str, str]:
    stamp = dt.datetime.fromtimestamp(int(when), dt.UTC)
    signature = Webhook(secret).sign(msg_id, stamp, body.decode())
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(when)), "webhook-signature": signature}


def test_a_delivery_signed_by_the_official_package_verifies() -> None:
    now = time.time()
    headers = _official(KEY, "msg_2Lq", now, BODY)
    assert verify_standard(KEY, headers, BODY, now=now) == "msg_2Lq"
    # and ours signs what the official verifier accepts
    ours = {"webhook-id": "msg_x", "webhook-timestamp": str(int(now)),
            "webhook-signature": sign_standard(KEY, "msg_x", int(now), BODY)}  # fmt: skip
    assert Webhook(KEY).verify(BODY, ours) is not None


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"body": BODY.replace(b"7", b"8")}, "no webhook-signature matches"),
        ({"secret": OTHER}, "no webhook-signature matches"),
        ({"age_s": 301}, "more than the 300 s tolerance"),
        ({"age_s": -400}, "more than the 300 s tolerance"),
        ({"drop": "webhook-signature"}, "missing Standard Webhooks header webhook-signature"),
        ({"drop": "webhook-id"}, "missing Standard Webhooks header webhook-id"),
    ],
)
def test_what_a_standard_delivery_must_hold(change: dict[str, object], says: str) -> None:
    now = time.time()
    headers = _official(KEY, "msg_1", now - float(change.get("age_s", 0)), BODY)  # type: ignore[arg-type]
    headers.pop(str(change.get("drop", "")), None)
    with pytest.raises(SignatureInvalid) as info:
        verify_standard(str(change.get("secret", KEY)), headers, change.get("body", BODY), now=now)  # type: ignore[arg-type]
    assert says in info.value.message


def test_key_rotation_either_side() -> None:
    now = time.time()
    old, new = _official(OTHER, "m", now, BODY), _official(KEY, "m", now, BODY)
    both = {**new, "webhook-signature": f"{old['webhook-signature']} {new['webhook-signature']}"}
    assert verify_standard(KEY, both, BODY, now=now) == "m"  # the sender signs with the old and the new key
    assert verify_standard(f"{OTHER} {KEY}", new, BODY, now=now) == "m"  # the receiver holds both
    assert sign_standard(f"{OTHER} {KEY}", "m", int(now), BODY).count("v1,") == 2


def test_github_signatures() -> None:
    secret = "gh-webhook-secret"
    digest = hmac.new(secret.encode(), BODY, hashlib.sha256).hexdigest()
    headers = {"x-hub-signature-256": f"sha256={digest}", "x-github-delivery": "72d3162e"}
    assert verify_github(secret, headers, BODY) == "72d3162e"
    assert sign_github(secret, BODY) == f"sha256={digest}"
    for bad in ({"x-hub-signature-256": "sha256=" + "0" * 64}, {"x-hub-signature-256": f"sha1={digest}"}, {}):
        with pytest.raises(SignatureInvalid):
            verify_github(secret, bad, BODY)
    with pytest.raises(SignatureInvalid):
        verify_github("other", headers, BODY)


def test_bearer() -> None:
    assert verify("bearer", "tok-1", {"authorization": "Bearer tok-1", "webhook-id": "d1"}, b"", now=0) == "d1"
    for bad in ({"authorization": "Bearer tok-2"}, {"authorization": "Basic tok-1"}, {}):
        with pytest.raises(SignatureInvalid):
            verify("bearer", "tok-1", bad, b"", now=0)
    for auth in ("bearer", "github", "standard"):  # an empty secret is one anyone can sign with
        with pytest.raises(SignatureInvalid, match="empty"):
            verify(auth, " ", {"authorization": "Bearer  ", "x-hub-signature-256": sign_github("", b"")}, b"", now=0)


_HEADER_NAMES = st.sampled_from([
    "webhook-id", "webhook-timestamp", "webhook-signature", "svix-signature", "x-hub-signature-256", "authorization",
    "x-github-delivery",
])  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["bearer", "standard", "github"]),
    st.sampled_from([KEY, "plain", "", "whsec_!!", f"{KEY} junk"]),
    st.dictionaries(_HEADER_NAMES, st.text(max_size=80), max_size=6),
    st.binary(max_size=200),
)
def test_arbitrary_deliveries_only_raise_signature_invalid(auth: str, secret: str, headers: dict[str, str], body: bytes) -> None:
    try:
        verify(auth, secret, headers, body, now=time.time())
    except SignatureInvalid:
        pass
