"""Single sign-on to the dashboard against a local OpenID Connect provider (tests/people/
oidc_provider.py: discovery, JWKS, signed id_tokens, PKCE checked), through a real ``pincer
serve``: group and domain rules give the expected roles, a person the CLI made keeps the CLI's
roles, and a forged, expired, wrong-audience, wrong-issuer, nonce-less or replayed-nonce id_token,
or one whose at_hash is not the access token's, signs nobody in, nor does a replayed callback; the shared-token sign-in can be turned off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.conftest import ServerProcess, pincer_serve
from tests.gateway.ui.conftest import WAIT_S, pincer_cli
from tests.people.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider, oidc_provider

SESSION_COOKIE_NAME = "pincer_ui"


@pytest.fixture
def provider() -> Iterator[Provider]:
    with oidc_provider() as running:
        yield running


def _configure(home: Path, provider: Provider, *, token_sign_in: bool = True) -> None:
    (home / "config.toml").write_text(
        f"[auth]\ntoken_sign_in = {'true' if token_sign_in else 'false'}\n\n"
        f'[auth.oidc.test]\nissuer = "{provider.url}"\nclient_id = "{CLIENT_ID}"\nclient_secret_name = "oidc_secret"\n'
        'label = "Test IdP"\ngroup_roles = { approvers = ["approver:tool=write_*"] }\n'
        'domain_roles = { "example.test" = ["viewer"] }\n'
    )
    assert pincer_cli(home, "secrets", "set", "oidc_secret", stdin=CLIENT_SECRET + "\n").returncode == 0


def _sso(server: ServerProcess, client: httpx.Client, provider: Provider, user: dict[str, object], tamper: str | None = None) -> httpx.Response:
    provider.next_user = user
    provider.tamper = tamper
    return client.get("/ui/login/oidc/test", params={"next": "/ui/approvals"}, follow_redirects=True)


def _signed_in(client: httpx.Client) -> bool:
    return client.get("/ui/approvals", follow_redirects=False).status_code == 200


def test_group_and_domain_rules_give_roles_and_a_cli_person_keeps_theirs(pincer_home: Path, provider: Provider) -> None:
    _configure(pincer_home, provider)
    assert pincer_cli(pincer_home, "people", "add", "boss", "--role", "operator", "--email", "Boss@Corp.test").returncode == 0
    with pincer_serve(pincer_home) as server:
        login_page = httpx.get(server.info["url"] + "/ui/login", trust_env=False, timeout=WAIT_S).text
        assert 'href="/ui/login/oidc/test?next=' in login_page and "Sign in with Test IdP" in login_page
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as ann:
            done = _sso(server, ann, provider, {"email": "ann@example.test", "email_verified": True, "groups": ["approvers"]})
            assert done.status_code == 200 and "Signed in as ann" in done.text, done.text
            assert _signed_in(ann)
        request = provider.token_requests[-1]
        assert request["code_verifier"] and request["client_secret"] == CLIENT_SECRET
        # An email the provider does not say it verified is nobody's: not even the CLI's person
        # with that address (a provider that lets anyone set any email would hand over accounts).
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as mallory:
            unsaid = _sso(server, mallory, provider, {"email": "boss@corp.test", "groups": []})
            assert unsaid.status_code == 401 and not _signed_in(mallory)
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as boss:
            assert _sso(server, boss, provider, {"email": "boss@corp.test", "email_verified": True}).status_code == 200
            assert _signed_in(boss)
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as eve:
            refused = _sso(server, eve, provider, {"email": "eve@elsewhere.test", "email_verified": True, "groups": ["others"]})
            assert refused.status_code == 403 and "has no role here" in refused.text
            unverified = _sso(server, eve, provider, {"email": "eve@example.test", "email_verified": False})
            assert unverified.status_code == 401 and not _signed_in(eve)
        # The rules are the truth for a person single sign-on made: out of the group, a viewer.
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as ann:
            assert _sso(server, ann, provider, {"email": "ann@example.test", "email_verified": True, "groups": []}).status_code == 200
    people = {p["name"]: p for p in json.loads(pincer_cli(pincer_home, "people", "list", "--json").stdout)}
    assert people["ann"]["roles"] == ["viewer"] and people["ann"]["created_by"] == "oidc:test"
    assert people["boss"]["roles"] == ["operator"] and "eve" not in people


@pytest.mark.parametrize("tamper", ["forged", "expired", "wrong_audience", "wrong_issuer", "replayed_nonce", "no_nonce", "forged_at_hash", "no_access_token"])
def test_a_bad_id_token_signs_nobody_in(pincer_home: Path, provider: Provider, tamper: str) -> None:
    _configure(pincer_home, provider)
    user = {"email": "ann@example.test", "email_verified": True, "groups": ["approvers"]}
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as client:
        if tamper == "replayed_nonce":  # a login before, whose nonce the forged token carries
            with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as earlier:
                assert _sso(server, earlier, provider, user).status_code == 200
        refused = _sso(server, client, provider, user, tamper=tamper)
        assert refused.status_code == 401, (tamper, refused.text)
        if tamper == "forged_at_hash":
            assert "at_hash does not match the access token" in refused.text, refused.text
        assert SESSION_COOKIE_NAME not in client.cookies and not _signed_in(client)


def test_a_replayed_callback_is_refused_and_token_sign_in_can_be_turned_off(pincer_home: Path, provider: Provider) -> None:
    _configure(pincer_home, provider, token_sign_in=False)
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as client:
        page = client.get("/ui/login")
        assert 'name="token"' not in page.text and "Sign in with Test IdP" in page.text
        refused = client.post("/ui/login", data={"token": server.token, "csrf_token": client.cookies.get("pincer_ui_login", "")})
        assert refused.status_code == 403 and "turned off" in refused.text and not _signed_in(client)
        provider.next_user = {"email": "ann@example.test", "email_verified": True, "groups": ["approvers"]}
        to_provider = client.get("/ui/login/oidc/test", follow_redirects=False)
        back = httpx.get(to_provider.headers["location"], trust_env=False, timeout=WAIT_S)
        callback = back.headers["location"]
        assert client.get(callback).status_code == 200 and _signed_in(client)
        with httpx.Client(trust_env=False, timeout=WAIT_S) as thief:
            replayed = thief.get(callback)
        assert replayed.status_code == 400 and SESSION_COOKIE_NAME not in thief.cookies


def test_a_callback_opened_in_another_browser_signs_nobody_in(pincer_home: Path, provider: Provider) -> None:
    """Login CSRF: the attacker begins a login, stops at the provider's redirect back, and sends
    that URL to a victim; it must not sign the victim's browser in as the attacker. Failed before
    the state was bound to its browser: the victim's GET signed them in (200)."""
    _configure(pincer_home, provider)
    with pincer_serve(pincer_home) as server, httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as attacker:
        provider.next_user = {"email": "mallory@example.test", "email_verified": True}
        to_provider = attacker.get("/ui/login/oidc/test", follow_redirects=False)
        callback = httpx.get(to_provider.headers["location"], trust_env=False, timeout=WAIT_S).headers["location"]
        with httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S) as victim:
            refused = victim.get(callback)
            assert refused.status_code == 400 and "begun in another browser" in refused.text, refused.text
            assert SESSION_COOKIE_NAME not in victim.cookies and not _signed_in(victim)
        assert attacker.get(callback).status_code == 200 and _signed_in(attacker)  # its own browser: fine
