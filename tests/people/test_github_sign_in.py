"""Single sign-on with GitHub's OAuth (``[auth.oidc.NAME] kind = "github"``) against a local
GitHub (tests/people/github_provider.py: the OAuth endpoints, and /user, /user/emails, /user/orgs,
/user/teams in the shapes of GitHub's published description), through a real ``pincer serve``
with a real cookie jar: org and team rules give roles, only a verified primary email is who it
is, the state is single-use and bound to the browser that began it, a replayed code is GitHub's
200-with-error and signs nobody in, and neither the access token nor the client secret is
shown, logged or kept."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.builtins import fakegithub
from tests.gateway.conftest import ServerProcess, pincer_serve
from tests.gateway.ui.conftest import WAIT_S, pincer_cli
from tests.people.github_provider import CLIENT_ID, CLIENT_SECRET, GitHub, GitHubUserSpec, email, github_stand_in

SESSION_COOKIE_NAME = "pincer_ui"
ANN = GitHubUserSpec(login="ann-gh", emails=[email("ann@acme.test", primary=True)], orgs=["acme"], teams=[("acme", "ops")])


def configure(home: Path, github: GitHub) -> None:
    (home / "config.toml").write_text(
        f'[auth.oidc.gh]\nkind = "github"\nclient_id = "{CLIENT_ID}"\nclient_secret_name = "gh_secret"\n'
        f'web_url = "{github.url}"\napi_url = "{github.api_url}"\nlabel = "GitHub"\n'
        'group_roles = { "org:Acme" = ["viewer"], "team:acme/ops" = ["approver:tool=write_*"] }\n'
    )
    assert pincer_cli(home, "secrets", "set", "gh_secret", stdin=CLIENT_SECRET + "\n").returncode == 0


def _client(server: ServerProcess) -> httpx.Client:
    return httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S)


def _sso(client: httpx.Client, github: GitHub, user: GitHubUserSpec) -> httpx.Response:
    github.next_user = user
    return client.get("/ui/login/oidc/gh", params={"next": "/ui/approvals"}, follow_redirects=True)


def _callback_url(client: httpx.Client, github: GitHub, user: GitHubUserSpec) -> str:
    """Begin a login in ``client``'s browser and stop at GitHub's redirect back (not followed)."""
    github.next_user = user
    to_github = client.get("/ui/login/oidc/gh", follow_redirects=False)
    assert to_github.status_code == 303 and to_github.headers["location"].startswith(github.url + "/login/oauth/authorize?")
    back = httpx.get(to_github.headers["location"], trust_env=False, timeout=WAIT_S)
    assert back.status_code == 302, back.text
    return back.headers["location"]


def _signed_in(client: httpx.Client) -> bool:
    return client.get("/ui/approvals", follow_redirects=False).status_code == 200


def _people(home: Path) -> dict[str, Any]:
    return {p["name"]: p for p in json.loads(pincer_cli(home, "people", "list", "--json").stdout)}


def _drain(server: ServerProcess) -> str:
    lines = []
    while True:
        try:
            lines.append(server.stderr_lines.get_nowait())
        except queue.Empty:
            return "".join(lines)


def test_org_and_team_rules_give_roles_and_nothing_secret_is_kept_or_shown(pincer_home: Path, github: GitHub) -> None:
    configure(pincer_home, github)
    assert pincer_cli(pincer_home, "people", "add", "boss", "--role", "operator", "--email", "Boss@Corp.test").returncode == 0
    pages = []
    with pincer_serve(pincer_home) as server:
        login_page = httpx.get(server.info["url"] + "/ui/login", trust_env=False, timeout=WAIT_S).text
        assert 'href="/ui/login/oidc/gh?next=' in login_page and "Sign in with GitHub" in login_page
        with _client(server) as ann:
            done = _sso(ann, github, ANN)
            pages.append(done.text)
            assert done.status_code == 200 and "Signed in as ann" in done.text, done.text
            assert _signed_in(ann) and "pincer_sso_state" not in ann.cookies
        request = github.token_requests[-1]
        assert request["code_verifier"] and request["client_secret"] == CLIENT_SECRET and request["redirect_uri"].endswith("/ui/oidc/gh/callback")
        # A person the CLI made, known by their verified primary email: the CLI's roles.
        with _client(server) as boss:
            boss_user = GitHubUserSpec(login="the-boss", emails=[email("boss@corp.test", primary=True)], orgs=["acme"])
            pages.append(_sso(boss, github, boss_user).text)
            assert _signed_in(boss)
        # The rules are the truth for a person single sign-on made: out of the team, a viewer.
        with _client(server) as ann:
            pages.append(_sso(ann, github, GitHubUserSpec(login="ann-gh", emails=ANN.emails, orgs=["ACME"])).text)
            assert _signed_in(ann)
        logs = _drain(server)
    people = _people(pincer_home)
    assert people["ann"]["roles"] == ["viewer"] and people["ann"]["created_by"] == "oidc:gh"
    assert people["boss"]["roles"] == ["operator"]
    assert set(github.api_calls) == {"/user", "/user/emails", "/user/orgs", "/user/teams"}
    assert github.errors == [], github.errors  # every answer was in GitHub's published shapes
    assert len(github.issued) == 3
    for secret in [*github.issued, CLIENT_SECRET]:
        assert secret not in logs and not any(secret in page for page in pages)
    for path in pincer_home.rglob("*"):  # the store, the audit, the logs: no access token kept
        if path.is_file():
            data = path.read_bytes()
            assert not any(token.encode() in data for token in github.issued), path


def test_a_rule_not_met_or_an_unknown_verified_email_gets_no_role(pincer_home: Path, github: GitHub) -> None:
    configure(pincer_home, github)
    with pincer_serve(pincer_home) as server, _client(server) as eve:
        outsider = GitHubUserSpec(login="eve", emails=[email("eve@elsewhere.test", primary=True)], orgs=["acme-fan"], teams=[("other", "ops")])
        refused = _sso(eve, github, outsider)
        assert refused.status_code == 403 and "eve@elsewhere.test has no role here" in refused.text
        assert "pincer people add NAME --role viewer --email EMAIL" in refused.text  # what to do
        assert not _signed_in(eve) and SESSION_COOKIE_NAME not in eve.cookies
    assert "eve" not in _people(pincer_home)


@pytest.mark.parametrize(
    "emails",
    [
        # only an unverified address, the CLI person's
        [email("boss@corp.test", primary=True, verified=False)],
        # the primary changed to the CLI person's address, not verified; the verified one is another
        [email("mallory@acme.test", verified=True), email("boss@corp.test", primary=True, verified=False)],
    ],
    ids=["unverified-only", "primary-changed-to-anothers-unverified"],
)
def test_an_unverified_primary_email_signs_nobody_in(pincer_home: Path, github: GitHub, emails: list[dict[str, Any]]) -> None:
    configure(pincer_home, github)
    assert pincer_cli(pincer_home, "people", "add", "boss", "--role", "operator", "--email", "boss@corp.test").returncode == 0
    with pincer_serve(pincer_home) as server, _client(server) as mallory:
        refused = _sso(mallory, github, GitHubUserSpec(login="mallory", emails=emails, orgs=["acme"]))
        assert refused.status_code == 401 and "primary email on GitHub is not verified" in refused.text, refused.text
        assert not _signed_in(mallory)
    assert set(_people(pincer_home)) == {"boss"}


def test_the_profile_email_is_not_who_it_is(pincer_home: Path, github: GitHub) -> None:
    """GET /user's ``email`` is the public profile address, which the user types: the stand-in puts
    the CLI person's address there, the verified primary is the user's own (with no role)."""
    configure(pincer_home, github)
    assert pincer_cli(pincer_home, "people", "add", "boss", "--role", "operator", "--email", "boss@corp.test").returncode == 0
    with pincer_serve(pincer_home) as server, _client(server) as mallory:
        user = GitHubUserSpec(login="mallory", emails=[email("boss@corp.test", verified=False), email("mallory@evil.test", primary=True)])
        refused = _sso(mallory, github, user)
        assert refused.status_code == 403 and "mallory@evil.test has no role here" in refused.text
        assert not _signed_in(mallory)


def test_the_state_is_bound_to_its_browser_and_used_once(pincer_home: Path, github: GitHub) -> None:
    configure(pincer_home, github)
    with pincer_serve(pincer_home) as server:
        # Login CSRF: the attacker's own callback URL opened in the victim's browser.
        with _client(server) as attacker, _client(server) as victim:
            callback = _callback_url(attacker, github, GitHubUserSpec(login="mallory", emails=[email("mallory@acme.test", primary=True)], orgs=["acme"]))
            refused = victim.get(callback)
            assert refused.status_code == 400 and "begun in another browser" in refused.text
            assert not _signed_in(victim)
            # A state the browser does not hold (tampered), then the right one: it was not used up.
            assert attacker.get(callback.replace("state=", "state=x")).status_code == 400
            state = attacker.cookies["pincer_sso_state"]
            assert attacker.get(callback).status_code == 200 and _signed_in(attacker)
            assert "pincer_sso_state" not in attacker.cookies  # the sign-in ends the binding
            # Replayed, even with the state's cookie put back: taken already.
            attacker.cookies.set("pincer_sso_state", state, path="/ui/oidc/")
            replayed = attacker.get(callback)
            assert replayed.status_code == 400 and "finished already" in replayed.text
        # The code replayed under a fresh state of the thief's: GitHub answers HTTP 200 with
        # {"error": "bad_verification_code"}, which signs nobody in.
        with _client(server) as thief:
            _callback_url(thief, github, ANN)  # the thief's own login: a state cookie of theirs
            fresh_state = thief.cookies["pincer_sso_state"]
            old_code = callback.split("code=")[1].split("&")[0]
            again = thief.get("/ui/oidc/gh/callback", params={"code": old_code, "state": fresh_state})
            assert again.status_code == 401 and "GitHub refused the code (bad_verification_code)" in again.text, again.text
            assert not _signed_in(thief)
        refusal = server.wait_for_log("single sign-on gh refused: GitHub refused the code")
        logs = refusal + _drain(server)
    assert not any(secret in logs for secret in [*github.issued, CLIENT_SECRET, old_code])


def test_the_stand_in_answers_in_githubs_published_shapes() -> None:
    """The validator the stand-in runs is not a rubber stamp: an /user/emails item without
    ``verified`` and a /user without ``login`` are out of GitHub's description."""
    good = json.dumps([email("a@b.test", primary=True)]).encode()
    assert fakegithub.validate_exchange("GET", "/user/emails?per_page=100", b"", 200, good) == []
    bad = json.dumps([{"email": "a@b.test", "primary": True}]).encode()
    assert fakegithub.validate_exchange("GET", "/user/emails", b"", 200, bad)
    with github_stand_in():
        user = fakegithub.conform(fakegithub.example_answer(fakegithub.operation("GET", "/user")[1])[1],  # type: ignore[index]
                                  fakegithub.success_schema(fakegithub.operation("GET", "/user")[1]))  # type: ignore[index]  # fmt: skip
    assert fakegithub.validate_exchange("GET", "/user", b"", 200, json.dumps(user).encode()) == []
    del user["login"]
    assert fakegithub.validate_exchange("GET", "/user", b"", 200, json.dumps(user).encode())
