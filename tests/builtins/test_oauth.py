"""The OAuth 2.0 flow (:mod:`pincer.builtins.oauth`) against a real authorization server: authlib's
server side on 127.0.0.1:0 (tests/builtins/fakegoogle.py). Consent, the code exchange with PKCE
(a wrong verifier refused), the state check (a forged redirect refused, on the loopback listener
too), refresh, revocation, and a refused refresh giving the reconnect message, never a loop."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest

from pincer.builtins import oauth
from pincer.builtins.oauth import (
    begin_login,
    code_from_redirect,
    exchange_code,
    load_record,
    provider_for,
    refresh_tokens,
    revoke_login,
)
from pincer.builtins.oauth_loopback import LoopbackRedirect
from pincer.config import parse_config
from pincer.core.errors import OAuthCallbackRefused, ReauthRequired, ToolError
from pincer.secrets.store import SecretStore
from tests.builtins import fakegoogle
from tests.builtins.fakegoogle import CLIENT_ID, CLIENT_SECRET, FakeGoogle

pytestmark = pytest.mark.anyio
HTTP_TIMEOUT_S = 30.0
SCOPES = ("https://www.googleapis.com/auth/gmail.modify", "https://www.googleapis.com/auth/drive")


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    with fakegoogle.serve() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SecretStore]:
    with SecretStore.open(tmp_path, key=b"k" * 32) as s:
        s.set("google_oauth_client_id", CLIENT_ID)
        s.set("google_oauth_client_secret", CLIENT_SECRET)
        yield s


def _provider(fake: FakeGoogle, tmp_path: Path, name: str = "google") -> oauth.OAuthProvider:
    return provider_for(name, parse_config(fake.config(), home=tmp_path).builtins)


def _consent(url: str) -> str:
    """The person consents: the authorization server answers with the redirect to the loopback."""
    answer = httpx.get(url, follow_redirects=False, timeout=HTTP_TIMEOUT_S)
    assert answer.status_code == 302, answer.text
    return answer.headers["location"]


async def _login(fake: FakeGoogle, tmp_path: Path, store: SecretStore, name: str = "google") -> Any:
    provider = _provider(fake, tmp_path, name)
    start = begin_login(provider, client_id=CLIENT_ID, scopes=SCOPES, redirect_uri="http://127.0.0.1:4711/callback")
    code = code_from_redirect(start, _consent(start.url))
    return await exchange_code(provider, start, code, client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                               store=store, home=tmp_path)


async def test_consent_and_code_exchange_with_pkce(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    record = await _login(fake, tmp_path, store)
    asked = fake.consents[-1]
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    assert asked["scope"] == " ".join(SCOPES)
    assert asked["access_type"] == "offline" and asked["prompt"] == "consent"
    exchange = fake.token_requests[-1]
    assert exchange["grant_type"] == "authorization_code" and 43 <= len(exchange["code_verifier"]) <= 128
    access = store.get("google_oauth_token")
    assert access in fake.live_access_tokens()
    assert store.get("google_oauth_refresh_token").startswith("1//test-refresh-")
    assert record.has_refresh and record.expires_at is not None
    assert record.expires_at == pytest.approx(time.time() + fake.access_ttl_s, abs=120)
    on_disk = (tmp_path / "oauth" / "google.json").read_text()
    assert access not in on_disk and "refresh" not in on_disk.replace("has_refresh", "")


async def test_a_wrong_verifier_is_refused(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    """PKCE: a code stolen on its way back is useless without the verifier that stayed here."""
    provider = _provider(fake, tmp_path)
    start = begin_login(provider, client_id=CLIENT_ID, scopes=SCOPES, redirect_uri="http://127.0.0.1:4711/callback")
    code = code_from_redirect(start, _consent(start.url))
    thief = dataclasses.replace(start, code_verifier="x" * 64)
    with pytest.raises(ToolError, match="invalid_grant"):
        await exchange_code(provider, thief, code, client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                            store=store, home=tmp_path)
    assert store.find("google_oauth_token") is None and fake.live_access_tokens() == []


async def test_a_forged_redirect_is_refused(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    provider = _provider(fake, tmp_path)
    start = begin_login(provider, client_id=CLIENT_ID, scopes=SCOPES, redirect_uri="http://127.0.0.1:4711/callback")
    redirect = _consent(start.url)
    forged = redirect.replace(f"state={start.state}", "state=forged-by-another-page")
    with pytest.raises(OAuthCallbackRefused, match="state does not match"):
        code_from_redirect(start, forged)
    stateless = redirect.replace(f"&state={start.state}", "").replace(f"state={start.state}&", "")
    with pytest.raises(OAuthCallbackRefused):
        code_from_redirect(start, stateless)
    denied = f"http://127.0.0.1:4711/callback?error=access_denied&state={start.state}"
    with pytest.raises(OAuthCallbackRefused, match="access_denied"):
        code_from_redirect(start, denied)


async def test_the_loopback_listener_refuses_a_forged_redirect_and_takes_the_real_one(
    fake: FakeGoogle, tmp_path: Path
) -> None:
    provider = _provider(fake, tmp_path)
    async with LoopbackRedirect() as loop:
        start = begin_login(provider, client_id=CLIENT_ID, scopes=SCOPES, redirect_uri=loop.redirect_uri)
        redirect = await anyio.to_thread.run_sync(_consent, start.url)
        assert redirect.startswith(loop.redirect_uri + "?")
        answers: list[int] = []

        async def browser() -> None:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as client:
                forged = redirect.replace(f"state={start.state}", "state=forged")
                answers.append((await client.get(forged)).status_code)
                answers.append((await client.get(f"{loop.redirect_uri.rsplit('/', 1)[0]}/other")).status_code)
                answers.append((await client.get(redirect)).status_code)

        async with anyio.create_task_group() as group:
            group.start_soon(browser)
            code = await loop.wait(lambda url: code_from_redirect(start, url), timeout_s=HTTP_TIMEOUT_S)
    assert answers == [400, 404, 200]
    assert loop.refused == 1
    assert code == parse_qs(urlsplit(redirect).query)["code"][0]


async def test_refresh_gives_a_new_access_token(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    await _login(fake, tmp_path, store)
    first = store.get("google_oauth_token")
    refresh = store.get("google_oauth_refresh_token")
    record = await refresh_tokens(_provider(fake, tmp_path), store=store, home=tmp_path)
    assert fake.token_requests[-1]["grant_type"] == "refresh_token"
    assert store.get("google_oauth_token") != first and store.get("google_oauth_token") in fake.live_access_tokens()
    assert store.get("google_oauth_refresh_token") == refresh  # Google keeps it; so do we
    assert record.scopes == SCOPES and load_record(tmp_path, "google") == record


async def test_a_refused_refresh_asks_to_reconnect_once(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    """Google's 7-day revocation for apps in testing status: the refresh answers invalid_grant."""
    await _login(fake, tmp_path, store)
    fake.revoke_all()
    before = len(fake.token_requests)
    with pytest.raises(ReauthRequired) as caught:
        await refresh_tokens(_provider(fake, tmp_path), store=store, home=tmp_path)
    assert "invalid_grant" in caught.value.message and "7 days" in caught.value.message
    assert caught.value.hint == "reconnect with `pincer auth setup google`"
    assert len(fake.token_requests) == before + 1  # one attempt, no loop
    assert store.get("google_oauth_refresh_token") not in caught.value.message


async def test_revocation_at_the_server_and_here(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    await _login(fake, tmp_path, store)
    refresh = store.get("google_oauth_refresh_token")
    outcome = await revoke_login(_provider(fake, tmp_path), store=store, home=tmp_path)
    assert outcome == {"revoked_at_server": True, "server_error": None, "forgot_locally": True}
    assert fake.revocations == [refresh] and fake.live_access_tokens() == []
    assert store.find("google_oauth_token") is None and store.find("google_oauth_refresh_token") is None
    assert load_record(tmp_path, "google") is None
    assert store.find("google_oauth_client_id") == CLIENT_ID  # the app's client stays for the next login


async def test_slack_oauth_v2_stores_the_bot_token(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    store.set("slack_oauth_client_id", CLIENT_ID)
    store.set("slack_oauth_client_secret", CLIENT_SECRET)
    record = await _login(fake, tmp_path, store, "slack")
    assert fake.consents[-1]["scope"] == ",".join(SCOPES)  # Slack separates scopes with commas
    token = store.get("slack_bot_token")
    assert token in fake.live_access_tokens()
    assert record.expires_at is None and not record.has_refresh  # Slack's bot tokens do not expire
    outcome = await revoke_login(_provider(fake, tmp_path, "slack"), store=store, home=tmp_path)
    assert outcome["revoked_at_server"] is True and fake.revocations == [token]
    assert store.find("slack_bot_token") is None


async def test_slack_refusing_a_code_is_an_error_not_a_token(fake: FakeGoogle, tmp_path: Path, store: SecretStore) -> None:
    """Slack answers HTTP 200 with ok: false; that must not be read as a token."""
    provider = _provider(fake, tmp_path, "slack")
    start = begin_login(provider, client_id=CLIENT_ID, scopes=SCOPES, redirect_uri="http://127.0.0.1:4711/callback")
    with pytest.raises(ToolError, match="invalid_grant"):
        await exchange_code(provider, start, "not-a-code", client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                            store=store, home=tmp_path)
    assert store.find("slack_bot_token") is None


async def test_a_declined_consent_ends_the_wait(fake: FakeGoogle, tmp_path: Path) -> None:
    provider = _provider(fake, tmp_path)
    async with LoopbackRedirect() as loop:
        start = begin_login(provider, client_id=CLIENT_ID, scopes=SCOPES, redirect_uri=loop.redirect_uri)

        async def browser() -> None:
            async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as client:
                await client.get(f"{loop.redirect_uri}?error=access_denied&state={start.state}")

        async with anyio.create_task_group() as group:
            group.start_soon(browser)
            with pytest.raises(OAuthCallbackRefused, match="access_denied") as caught:
                await loop.wait(lambda url: code_from_redirect(start, url), timeout_s=HTTP_TIMEOUT_S)
    assert caught.value.declined and loop.refused == 0
