"""A person connects their own OAuth login on the dashboard (``/ui/credentials``, Connect), through
a real ``pincer serve`` and the local authorization server of tests/builtins/fakegoogle.py
(authlib's server side, PKCE required): the tokens are stored as the signed-in person's own, and a
call with their token carries theirs.

Attack first: the state is bound to the browser that began the login (a callback opened in
another browser, a forged state, a replayed callback, and a callback opened in a browser signed
in as another person are refused and store nothing); no form field names the person; a sign-in
with the shared token (nobody's) and a secret that is no login's are refused; no token reaches a
page, the server's output, the audit log or a file of the home in the clear."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import httpx
import pytest

from pincer.secrets.store import SecretStore
from tests.acts.support import audit_rows, last_id, rows_after
from tests.builtins import fakegoogle
from tests.builtins.fakegoogle import CLIENT_ID, CLIENT_SECRET, FakeGoogle
from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import WAIT_S, csrf_of, dashboard_config, pincer_cli, sign_in
from tests.people.test_people_paths import add_person
from tests.people.test_person_oauth import GRANT, PER_PERSON, home_holds_none_of

STATE_COOKIE = "pincer_connect_state"
CONNECT = "/ui/credentials/google_oauth_token/connect"


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    with fakegoogle.serve() as server:
        yield server


def _begin(browser: httpx.Client, **extra: str) -> str:
    """Press Connect: the page that goes on to the provider; returns the provider's URL."""
    page = browser.get("/ui/credentials")
    assert f'action="{CONNECT}"' in page.text and "Connect your Google" in page.text, page.text
    answer = browser.post(CONNECT, data={"csrf_token": csrf_of(page.text), **extra})
    assert answer.status_code == 200, answer.text
    found = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', answer.text)
    assert found is not None, answer.text
    return unescape(found.group(1))


def _consent(url: str) -> str:
    """The person consents at the provider: the callback URL it sends the browser back to."""
    answer = httpx.get(url, follow_redirects=False, timeout=WAIT_S)
    assert answer.status_code == 302, answer.text
    return str(answer.headers["location"])


def _path(url: str) -> str:
    parts = httpx.URL(url)
    return parts.raw_path.decode()


def _held(home: Path) -> dict[tuple[str, str], str | None]:
    with SecretStore.open(home) as store:
        return {(i.person, i.name): store.find_for(i.person, i.name) for i in store.person_names()}


def test_each_person_connects_their_own_login_bound_to_their_browser(pincer_home: Path, fake: FakeGoogle) -> None:
    (pincer_home / "config.toml").write_text(dashboard_config() + fake.config("gmail", extra=PER_PERSON + GRANT))
    people = {who: add_person(pincer_home, who, "viewer") for who in ("gina", "bo")}
    assert pincer_cli(pincer_home, "secrets", "set", "google_oauth_client_id", stdin=CLIENT_ID).returncode == 0
    assert pincer_cli(pincer_home, "secrets", "set", "google_oauth_client_secret", stdin=CLIENT_SECRET).returncode == 0
    pages: list[str] = []
    with pincer_serve(pincer_home) as server:
        base = server.info["url"]
        with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as gina, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as bo, \
                httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as owner:  # fmt: skip
            for browser, token in ((gina, people["gina"]), (bo, people["bo"]), (owner, server.token)):
                assert sign_in(browser, token).status_code == 303
            before = last_id(pincer_home)

            # Nobody's sign-in, a secret that is no login's, no CSRF token: refused, nothing begun.
            shared_page = owner.get("/ui/credentials")
            assert owner.post(CONNECT, data={"csrf_token": csrf_of(shared_page.text)}).status_code == 403
            gina_page = gina.get("/ui/credentials").text
            assert gina.post(CONNECT, data={"value": "x"}).status_code == 403
            other = gina.post("/ui/credentials/github_token/connect", data={"csrf_token": csrf_of(gina_page)})
            assert other.status_code == 400 and "[secrets] per_person" in other.text
            assert fake.consents == []

            # gina begins (a person field naming bo is nobody's business) and consents.
            callback = _consent(_begin(gina, person="bo"))
            state = httpx.URL(callback).params["state"]
            assert callback.startswith(f"{base}/ui/credentials/oauth/google/callback?")
            assert fake.consents[-1]["code_challenge_method"] == "S256"

            # Her callback opened in bo's browser (no state cookie of it): refused, hers stays open.
            elsewhere = bo.get(_path(callback))
            assert elsewhere.status_code == 400 and "another browser" in elsewhere.text
            # A forged state in her own browser: refused.
            forged = gina.get(_path(callback).replace(state, "forged-state"))
            assert forged.status_code == 400
            assert _held(pincer_home) == {} and list(fake.token_requests) == []

            done = gina.get(_path(callback))
            assert done.status_code == 200 and "connected as gina" in done.text, done.text
            pages += [elsewhere.text, forged.text, done.text]
            held = _held(pincer_home)
            gina_token = held[("gina", "google_oauth_token")]
            assert gina_token in fake.live_access_tokens() and held[("gina", "google_oauth_refresh_token")]
            assert ("bo", "google_oauth_token") not in held
            listed = gina.get("/ui/credentials?done=connected").text
            assert "your own login connected" in listed and "Reconnect your Google" in listed
            pages.append(listed)

            # Replayed (the cookie put back as it was): the login was taken, so nothing.
            gina.cookies.set(STATE_COOKIE, state, path="/ui/credentials/")
            replay = gina.get(_path(callback))
            assert replay.status_code == 400 and "finished already" in replay.text
            assert len([t for t in fake.token_requests if t["grant_type"] == "authorization_code"]) == 1

            # bo's login finished in gina's browser (his state cookie copied into it): refused.
            bo_callback = _consent(_begin(bo))
            gina.cookies.set(STATE_COOKIE, httpx.URL(bo_callback).params["state"], path="/ui/credentials/")
            crossed = gina.get(_path(bo_callback))
            assert crossed.status_code == 403 and "another person" in crossed.text
            assert _held(pincer_home)[("gina", "google_oauth_token")] == gina_token
            assert ("bo", "google_oauth_token") not in _held(pincer_home)

            # bo connects his own, in his own browser.
            bo_done = bo.get(_path(_consent(_begin(bo))))
            assert bo_done.status_code == 200 and "connected as bo" in bo_done.text
            held = _held(pincer_home)
            bo_token = held[("bo", "google_oauth_token")]
            assert bo_token not in (None, gina_token) and held[("gina", "google_oauth_token")] == gina_token
            pages += [replay.text, crossed.text, bo_done.text]

            # Each person's call carries their own token.
            for who in ("gina", "bo"):
                with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S,
                                  headers={"Authorization": f"Bearer {people[who]}"}) as rest:  # fmt: skip
                    answer = rest.post("/api/v1/tools/gmail/call", json={"args": {"action": "list_labels"}})
                assert answer.status_code == 200, answer.text
                pages.append(answer.text)
            # bo removes his: his refresh token and his login's record go with it; gina's stay.
            removed = bo.post("/ui/credentials/google_oauth_token/remove", data={"csrf_token": csrf_of(bo.get("/ui/credentials").text)})
            assert removed.status_code == 303
            assert [k for k in _held(pincer_home) if k[0] == "bo"] == []
            assert not (pincer_home / "oauth" / "people" / "bo" / "google.json").exists()
            assert (pincer_home / "oauth" / "people" / "gina" / "google.json").exists()
        server_output = "".join(server.stderr_lines.queue)
    assert [r.headers["Authorization"] for r in fake.requests] == [f"Bearer {gina_token}", f"Bearer {bo_token}"]
    acts = rows_after(pincer_home, before)
    secret_acts = [(r["tool"], r["outcome"], r["caller"], json.loads(r["args"])) for r in acts if r["kind"] == "secret"]
    assert secret_acts == [("google_oauth_token", "set", "ui:gina", {"person": "gina"}),
                           ("google_oauth_token", "set", "ui:bo", {"person": "bo"}),
                           ("google_oauth_token", "removed", "ui:bo", {"person": "bo"})]  # fmt: skip
    with SecretStore.open(pincer_home) as store:
        tokens = [v for i in store.person_names() if (v := store.find_for(i.person, i.name))] + [bo_token]
        assert store.find("google_oauth_token") is None
    every_record = json.dumps(audit_rows(pincer_home))
    for value in tokens:
        assert value not in every_record and value not in server_output
        assert not any(value in page for page in pages)
    home_holds_none_of(pincer_home, tokens)
    assert pincer_cli(pincer_home, "audit", "verify").returncode == 0


def test_each_person_connects_their_own_github_and_each_call_carries_theirs(pincer_home: Path) -> None:
    """GitHub's OAuth (the local GitHub of tests/people/github_provider.py: its authorize and
    access_token endpoints, PKCE checked, errors as HTTP 200) for the github built-in, whose API is
    tests/builtins/fakegithub.py's: gina's and bo's calls each carry their own token."""
    from tests.builtins import fakegithub
    from tests.people import github_provider
    from tests.people.github_provider import GitHubUserSpec, email

    with github_provider.github_stand_in() as oauth, fakegithub.serve() as api:
        (pincer_home / "config.toml").write_text(
            dashboard_config()
            + f'\n[builtins.github]\nenabled = true\nbase_url = "{api.base_url}"\n'
            f'authorization_url = "{oauth.url}/login/oauth/authorize"\ntoken_url = "{oauth.url}/login/oauth/access_token"\n'
            '\n[secrets]\nper_person = ["github_token"]\n'
            '\n[[grants]]\ntool = "github"\neffects = { network = "allow", use_secret = "allow" }\n'
        )  # fmt: skip
        people = {who: add_person(pincer_home, who, "viewer") for who in ("gina", "bo")}
        client = pincer_cli(pincer_home, "secrets", "set", "github_oauth_client_id", stdin=github_provider.CLIENT_ID)
        assert client.returncode == 0
        secret = pincer_cli(pincer_home, "secrets", "set", "github_oauth_client_secret", stdin=github_provider.CLIENT_SECRET)
        assert secret.returncode == 0
        pages: list[str] = []
        with pincer_serve(pincer_home) as server:
            base = server.info["url"]
            for who in ("gina", "bo"):
                oauth.next_user = GitHubUserSpec(login=who, emails=[email(f"{who}@example.com", primary=True)])
                with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S) as browser:
                    assert sign_in(browser, people[who]).status_code == 303
                    page = browser.get("/ui/credentials")
                    assert "Connect your GitHub" in page.text, page.text
                    answer = browser.post("/ui/credentials/github_token/connect", data={"csrf_token": csrf_of(page.text)})
                    found = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', answer.text)
                    assert answer.status_code == 200 and found is not None, answer.text
                    done = browser.get(_path(_consent(unescape(found.group(1)))))
                    assert done.status_code == 200 and f"connected as {who}" in done.text, done.text
                    pages.append(done.text)
                with httpx.Client(base_url=base, trust_env=False, timeout=WAIT_S,
                                  headers={"Authorization": f"Bearer {people[who]}"}) as rest:  # fmt: skip
                    call = rest.post("/api/v1/tools/github/call",
                                     json={"args": {"action": "get_repo", "owner": "octocat", "repo": "hello-world"}})  # fmt: skip
                assert call.status_code == 200, call.text
                pages.append(call.text)
            server_output = "".join(server.stderr_lines.queue)
    held = _held(pincer_home)
    gina, bo = held[("gina", "github_token")], held[("bo", "github_token")]
    assert oauth.issued == [gina, bo] and gina != bo
    assert [r.headers.get("Authorization") for r in api.requests] == [f"Bearer {gina}", f"Bearer {bo}"]
    challenge_sent = [r for r in oauth.token_requests if r.get("code_verifier")]
    assert len(challenge_sent) == 2  # PKCE: each exchange carried its verifier
    for value in (gina, bo):
        assert value not in server_output and not any(value in page for page in pages)
    home_holds_none_of(pincer_home, [v for v in (gina, bo) if v])
