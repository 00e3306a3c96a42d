"""What the GitHub sign-in makes of GitHub's answers (gateway/ui/github_sign_in.py), in-process
against the local GitHub (tests/people/github_provider.py): an oversized, non-JSON or login-less
``GET /user``, a refused client secret, memberships on a second page, and a next page on another
origin. Each refusal names what was wrong and never the access token or the client secret."""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import httpx
import pytest

from pincer.config import OidcProvider, parse_config
from pincer.gateway.ui.github_sign_in import GitHubRefused, GitHubUser, authorize_url, sign_in
from tests.people.github_provider import CLIENT_ID, CLIENT_SECRET, GitHub, GitHubUserSpec, email

REDIRECT = "http://127.0.0.1:1/ui/oidc/gh/callback"
ANN = GitHubUserSpec(login="ann-gh", emails=[email("Ann@Acme.test", primary=True)], orgs=["acme"], teams=[("acme", "ops")])


def _config(github: GitHub, tmp_path: Path) -> OidcProvider:
    text = (f'[auth.oidc.gh]\nkind = "github"\nclient_id = "{CLIENT_ID}"\nclient_secret_name = "gh"\n'
            f'web_url = "{github.url}/"\napi_url = "{github.api_url}"\n'
            'group_roles = { "org:acme" = ["viewer"], "team:ACME/ops" = ["operator"], "org:other" = ["admin"] }\n')  # fmt: skip
    return parse_config(text, home=tmp_path).auth.oidc["gh"]


def _code(github: GitHub, config: OidcProvider, user: GitHubUserSpec, verifier: str) -> str:
    github.next_user = user
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    url = authorize_url(config, redirect_uri=REDIRECT, state="s1", challenge=challenge)
    assert url.startswith(github.url + "/login/oauth/authorize?") and "code_challenge_method=S256" in url
    back = httpx.get(url, trust_env=False, timeout=10.0)
    assert back.status_code == 302, back.text
    return back.headers["location"].split("code=")[1].split("&")[0]


async def _sign_in(github: GitHub, config: OidcProvider, user: GitHubUserSpec, *, secret: str = CLIENT_SECRET) -> GitHubUser:
    verifier = secrets.token_urlsafe(48)
    code = _code(github, config, user, verifier)
    async with httpx.AsyncClient(trust_env=False, timeout=10.0) as http:
        return await sign_in(http, config, code=code, redirect_uri=REDIRECT, verifier=verifier, client_secret=secret)


@pytest.mark.anyio
async def test_who_it_is_and_the_rules_met(github: GitHub, tmp_path: Path) -> None:
    config = _config(github, tmp_path)
    user = await _sign_in(github, config, ANN)
    assert repr(user) == "GitHubUser(login='ann-gh', email='ann@acme.test', groups=('org:acme', 'team:ACME/ops'))"
    assert github.errors == []


@pytest.mark.anyio
async def test_a_membership_on_the_second_page_counts_and_another_origins_page_is_not_read(github: GitHub, tmp_path: Path) -> None:
    config = _config(github, tmp_path)
    many = GitHubUserSpec(login="busy", emails=ANN.emails, orgs=[f"org{i}" for i in range(120)] + ["other"])
    user = await _sign_in(github, config, many)
    assert user.groups == ("org:other",) and github.api_calls.count("/user/orgs") == 2
    github.tamper = "foreign_next"
    github.api_calls.clear()
    assert (await _sign_in(github, config, many)).groups == ()  # fewer roles, never another host's word
    assert github.api_calls.count("/user/orgs") == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tamper", "said"),
    [("oversized", "GitHub's GET /user answered more than 1000000 bytes"), ("not_json", "GitHub's GET /user is not JSON"),
     ("no_login", "GitHub's GET /user answered no login")],
)  # fmt: skip
async def test_a_bad_user_answer_signs_nobody_in(github: GitHub, tmp_path: Path, tamper: str, said: str) -> None:
    config = _config(github, tmp_path)
    github.tamper = tamper
    with pytest.raises(GitHubRefused) as refused:
        await _sign_in(github, config, ANN)
    assert str(refused.value) == said and github.issued[-1] not in str(refused.value)


@pytest.mark.anyio
async def test_a_refused_secret_or_a_missing_primary_email_says_so(github: GitHub, tmp_path: Path) -> None:
    config = _config(github, tmp_path)
    with pytest.raises(GitHubRefused, match=r"GitHub refused the code \(incorrect_client_credentials\).*client_id") as refused:
        await _sign_in(github, config, ANN, secret="wrong-" + CLIENT_SECRET)
    assert CLIENT_SECRET not in str(refused.value)
    with pytest.raises(GitHubRefused, match="names no primary email"):
        await _sign_in(github, config, GitHubUserSpec(login="x", emails=[email("x@acme.test")]))
