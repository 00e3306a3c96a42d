"""Single sign-on with GitHub's OAuth (``[auth.oidc.NAME] kind = "github"``): GitHub is not an
OpenID Connect provider, so there is no id_token; who signs in is what GitHub's REST API says of
the access token the code is traded for.

The shared flow (state, PKCE, the callback, the person and their roles) is gateway/ui/oidc.py's;
this module is what differs: the authorize URL (``WEB/login/oauth/authorize``), the code traded
at ``WEB/login/oauth/access_token`` (JSON asked for; GitHub answers a refused code with HTTP 200
and ``{"error": "bad_verification_code"}``, so the body decides, not the status), then
``GET /user``, ``GET /user/emails`` and, when a rule names one, ``GET /user/orgs`` and
``GET /user/teams``.

Only the primary email, and only when GitHub marks it verified, is who it is: the profile's
public ``email`` is whatever the user typed, and another verified address of theirs is not the
one they chose to be known by. The access token lives in this call only: never stored, logged
or put in an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx

if TYPE_CHECKING:
    from pincer.config import OidcProvider

__all__ = ["GitHubRefused", "GitHubUser", "authorize_url", "sign_in"]

WEB_URL = "https://github.com"
API_URL = "https://api.github.com"
MAX_BODY_BYTES = 1_000_000  # one page of 100 teams is ~200 kB; more is not GitHub answering
MAX_PAGES = 10  # of 100 orgs or teams each; a membership past them gives no role (fail closed)
_ERROR_CODE = re.compile(r"[a-z_]{1,64}")
_API_HEADERS = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}


class GitHubRefused(Exception):
    """GitHub's answers sign nobody in; the message says why, never a token or the secret."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GitHubUser:
    login: str
    email: str  # the verified primary one, lowercased
    groups: tuple[str, ...]  # the keys of group_roles this person meets, as written


def authorize_url(config: OidcProvider, *, redirect_uri: str, state: str, challenge: str) -> str:
    query = urlencode({
        "client_id": config.client_id, "redirect_uri": redirect_uri, "scope": " ".join(config.scope_list()),
        "state": state, "code_challenge": challenge, "code_challenge_method": "S256", "allow_signup": "false",
    })  # fmt: skip
    return f"{(config.web_url or WEB_URL).rstrip('/')}/login/oauth/authorize?{query}"


async def sign_in(
    http: httpx.AsyncClient, config: OidcProvider, *, code: str, redirect_uri: str, verifier: str, client_secret: str
) -> GitHubUser:
    """Who the code is: GitHubRefused naming the first thing wrong."""
    form = {"client_id": config.client_id, "client_secret": client_secret, "code": code,
            "redirect_uri": redirect_uri, "code_verifier": verifier}  # fmt: skip
    url = f"{(config.web_url or WEB_URL).rstrip('/')}/login/oauth/access_token"
    answer = await _json(http, "POST", url, "token endpoint", data=form, headers={"Accept": "application/json"})
    if not isinstance(answer, dict):
        raise GitHubRefused("GitHub's token endpoint answered something other than a JSON object")
    if "error" in answer:
        said = str(answer["error"])
        raise GitHubRefused(
            f"GitHub refused the code ({said if _ERROR_CODE.fullmatch(said) else 'an error'}): it was used, "
            "expired, or not issued to this client_id; sign in again"
        )
    token = answer.get("access_token")
    if not isinstance(token, str) or not token:
        raise GitHubRefused("GitHub's token endpoint sent no access_token")
    headers = _API_HEADERS | {"Authorization": f"Bearer {token}"}
    api = (config.api_url or API_URL).rstrip("/")
    user = await _json(http, "GET", api + "/user", "GET /user", headers=headers)
    login = user.get("login") if isinstance(user, dict) else None
    if not isinstance(login, str) or not login:
        raise GitHubRefused("GitHub's GET /user answered no login")
    return GitHubUser(login=login, email=_verified_primary(await _pages(http, api + "/user/emails", headers)),
                      groups=await _groups(http, api, headers, config))  # fmt: skip


def _verified_primary(emails: list[Any]) -> str:
    primary = [e for e in emails if isinstance(e, dict) and e.get("primary") is True]
    email = primary[0].get("email") if len(primary) == 1 else None
    if not isinstance(email, str) or "@" not in email:
        raise GitHubRefused("GitHub's GET /user/emails names no primary email (the user:email scope is needed)")
    if primary[0].get("verified") is not True:
        # Fail closed: an unverified primary could be anyone's address, a pincer person's included.
        raise GitHubRefused("your primary email on GitHub is not verified: verify it on GitHub (Settings, Emails), then sign in again")
    return email.lower()


async def _groups(http: httpx.AsyncClient, api: str, headers: dict[str, str], config: OidcProvider) -> tuple[str, ...]:
    """The group_roles keys this person meets (GitHub's names compare case-insensitively)."""
    wanted = {key.lower(): key for key in config.group_roles}
    met: set[str] = set()
    if any(key.startswith("org:") for key in wanted):
        for org in await _pages(http, api + "/user/orgs", headers):
            login = org.get("login") if isinstance(org, dict) else None
            if isinstance(login, str):
                met.add(f"org:{login.lower()}")
    if any(key.startswith("team:") for key in wanted):
        for team in await _pages(http, api + "/user/teams", headers):
            slug = team.get("slug") if isinstance(team, dict) else None
            owner = team.get("organization") if isinstance(team, dict) else None
            org = owner.get("login") if isinstance(owner, dict) else None
            if isinstance(slug, str) and isinstance(org, str):
                met.add(f"team:{org.lower()}/{slug.lower()}")
    return tuple(key for low, key in wanted.items() if low in met)


async def _pages(http: httpx.AsyncClient, url: str, headers: dict[str, str]) -> list[Any]:
    """Every item of a listing, following ``Link: rel="next"`` on the API's own origin only."""
    api, _, path = url.rpartition("/user")
    what = "GET /user" + path
    items: list[Any] = []
    next_url: str | None = url + "?per_page=100"
    for _ in range(MAX_PAGES):
        if next_url is None:
            break
        page, links = await _fetch(http, "GET", next_url, what, headers=headers)
        if not isinstance(page, list):
            raise GitHubRefused(f"GitHub's {what} answered something other than a JSON list")
        items.extend(page)
        found = links.get("next", {}).get("url")
        next_url = found if isinstance(found, str) and found.startswith(api + "/user") else None
    return items


async def _json(http: httpx.AsyncClient, method: str, url: str, what: str, **kwargs: Any) -> Any:
    return (await _fetch(http, method, url, what, **kwargs))[0]


async def _fetch(http: httpx.AsyncClient, method: str, url: str, what: str, **kwargs: Any) -> tuple[Any, dict[Any, Any]]:
    """The JSON body of a 200 answer of at most MAX_BODY_BYTES, and its Link header."""
    async with http.stream(method, url, **kwargs) as response:
        if response.status_code != 200:
            raise GitHubRefused(f"GitHub's {what} answered HTTP {response.status_code}; sign in again, or check the app's client_id and secret")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise GitHubRefused(f"GitHub's {what} answered more than {MAX_BODY_BYTES} bytes")
        links = dict(response.links)
    try:
        return json.loads(body), links
    except ValueError:
        raise GitHubRefused(f"GitHub's {what} is not JSON") from None
