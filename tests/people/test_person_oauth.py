"""Each person's own OAuth login (issue 41, item 3): ``pincer auth setup google --person WHO`` runs
the built-in's OAuth login and keeps both tokens as WHO's values; a call for gina refreshes gina's
login only (her refresh token, stored back as hers), never bo's nor the shared one, and two of her
calls at once refresh it once. Against the local authorization server and Google stand-in of
tests/builtins/fakegoogle.py (authlib's server side: real token endpoint shapes, PKCE required).

Attack first: the old code had one Google login for everyone, refused ``--person`` for an OAuth
login, and refreshed the shared login whoever the call was for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pincer.core.values import CallRequest
from tests.builtins import fakegoogle
from tests.builtins.fakegoogle import CLIENT_ID, CLIENT_SECRET, FakeGoogle
from tests.builtins.test_oauth_cli import BROWSER_SCRIPT

pytestmark = pytest.mark.anyio
KEY = "ab" * 32
HTTP_TIMEOUT_S = 30.0
CLI_TIMEOUT_S = 120.0
CALL_TIMEOUT_S = 60.0
GRANT = '\n[[grants]]\ntool = "gmail"\neffects = { network = "allow", use_secret = "allow", external_write = "allow" }\n'
PER_PERSON = '\n[secrets]\nper_person = ["google_oauth_token"]\n'
LIST = {"action": "list_labels"}


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    with fakegoogle.serve() as server:
        yield server


def _config(fake: FakeGoogle) -> str:
    return fake.config("gmail", extra=PER_PERSON + GRANT)


def home_holds_none_of(home: Path, values: list[str]) -> None:
    """No file under the home (databases, records, logs) holds any of ``values`` in the clear."""
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for value in values:
                assert value.encode() not in data, f"{path} holds a token"


# ---------------------------------------------------------------------------------- the refresh


async def _login(fake: FakeGoogle, home: Path, store: Any, person: str) -> None:
    """``person`` logs in to the local provider (the flow `pincer auth setup google --person` runs)."""
    from pincer.builtins.oauth import begin_login, code_from_redirect, exchange_code, provider_for
    from pincer.config import parse_config

    provider = provider_for("google", parse_config(_config(fake), home=home).builtins)
    start = begin_login(provider, client_id=CLIENT_ID, scopes=("https://www.googleapis.com/auth/gmail.modify",),
                        redirect_uri="http://127.0.0.1:4711/callback")  # fmt: skip
    answer = httpx.get(start.url, follow_redirects=False, timeout=HTTP_TIMEOUT_S)
    code = code_from_redirect(start, answer.headers["location"])
    await exchange_code(provider, start, code, client_id=CLIENT_ID, client_secret=CLIENT_SECRET, store=store, home=home,
                        person=person)  # fmt: skip


@pytest.fixture
async def team(tmp_path: Path, fake: FakeGoogle) -> AsyncIterator[Any]:
    """A Pincer whose Google login is per person; gina and bo each logged in, each with an access
    token inside the refresh leeway (their next call refreshes it)."""
    from pincer.config import parse_config
    from pincer.service import Pincer

    config = parse_config(_config(fake), home=tmp_path)
    async with Pincer.open(tmp_path, config=config, secret_key=bytes.fromhex(KEY), external=False, wasm=False) as pincer:
        pincer.secrets.set("google_oauth_client_id", CLIENT_ID)
        pincer.secrets.set("google_oauth_client_secret", CLIENT_SECRET)
        fake.access_ttl_s = 30  # inside the refresh leeway from the start
        for person in ("gina", "bo"):
            await _login(fake, tmp_path, pincer.secrets, person)
        fake.access_ttl_s = 3600
        yield pincer


def _refreshed_with(fake: FakeGoogle) -> list[str]:
    return [t["refresh_token"] for t in fake.token_requests if t["grant_type"] == "refresh_token"]


async def test_each_persons_call_carries_and_refreshes_their_own_login_only(
    team: Any, tmp_path: Path, fake: FakeGoogle
) -> None:
    from pincer.builtins.oauth import load_record

    pincer = team
    secrets = pincer.secrets
    gina_old, bo_old = secrets.find_for("gina", "google_oauth_token"), secrets.find_for("bo", "google_oauth_token")
    gina_refresh = secrets.find_for("gina", "google_oauth_refresh_token")
    bo_refresh = secrets.find_for("bo", "google_oauth_refresh_token")
    assert None not in (gina_old, bo_old, gina_refresh, bo_refresh) and gina_old != bo_old
    assert secrets.find("google_oauth_token") is None and secrets.find("google_oauth_refresh_token") is None
    bo_record = load_record(tmp_path, "google", "bo")
    assert load_record(tmp_path, "google") is None and bo_record is not None

    results = []

    async def gina_calls() -> None:
        results.append(await pincer.call(CallRequest(tool="gmail", args=LIST, person="gina")))

    with anyio.fail_after(CALL_TIMEOUT_S):
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(gina_calls)
    assert all(r.ok for r in results), [r.error for r in results]
    gina_new = secrets.find_for("gina", "google_oauth_token")
    # Three calls at once, one refresh, with gina's own refresh token; stored back as hers.
    assert _refreshed_with(fake) == [gina_refresh] and gina_new not in (gina_old, bo_old)
    assert [r.headers["Authorization"] for r in fake.requests] == [f"Bearer {gina_new}"] * 3
    # bo's login and the shared one: untouched.
    assert secrets.find_for("bo", "google_oauth_token") == bo_old and load_record(tmp_path, "google", "bo") == bo_record
    assert secrets.find("google_oauth_token") is None and load_record(tmp_path, "google") is None

    bo = await pincer.call(CallRequest(tool="gmail", args=LIST, person="bo"))
    bo_new = secrets.find_for("bo", "google_oauth_token")
    assert bo.ok, bo.error
    assert _refreshed_with(fake) == [gina_refresh, bo_refresh] and bo_new not in (bo_old, gina_new)
    assert fake.requests[-1].headers["Authorization"] == f"Bearer {bo_new}"
    assert secrets.find_for("gina", "google_oauth_token") == gina_new

    # Google stops taking every token: gina's 401 refreshes hers once, bo's stays as it was.
    fake.expire_access_tokens()
    again = await pincer.call(CallRequest(tool="gmail", args=LIST, person="gina"))
    assert again.ok, again.error
    assert _refreshed_with(fake) == [gina_refresh, bo_refresh, gina_refresh]
    assert secrets.find_for("bo", "google_oauth_token") == bo_new

    sent = len(fake.requests)
    nobody = await pincer.call(CallRequest(tool="gmail", args=LIST))
    assert not nobody.ok and "acts for no person" in nobody.error["message"]
    assert len(fake.requests) == sent and len(_refreshed_with(fake)) == 3  # nothing sent, nothing refreshed

    tokens = [v for v in (gina_old, bo_old, gina_new, bo_new, gina_refresh, bo_refresh,
                          secrets.find_for("gina", "google_oauth_token")) if v]  # fmt: skip
    records = json.dumps([r.to_dict() for r in await pincer.audit.records()], default=str)
    outputs = json.dumps([r.to_dict() for r in (*results, bo, again, nobody)], default=str)
    assert not any(t in records or t in outputs for t in tokens)
    home_holds_none_of(tmp_path, tokens)
    assert fake.errors == []


async def test_a_refused_refresh_asks_that_person_to_reconnect(team: Any, fake: FakeGoogle) -> None:
    pincer = team
    fake.revoke_all()
    result = await pincer.call(CallRequest(tool="gmail", args=LIST, person="bo"))
    assert not result.ok and result.error["code"] == "reauth_required", result.error
    assert result.error["hint"] == "reconnect with `pincer auth setup google --person bo`"
    assert "bo's own" in result.error["message"]


async def test_a_person_without_their_own_login_is_told_the_command_that_connects_it(team: Any, fake: FakeGoogle) -> None:
    pincer = team
    result = await pincer.call(CallRequest(tool="gmail", args=LIST, person="wes"))
    assert not result.ok and "wes has no value of the per-person secret 'google_oauth_token'" in result.error["message"]
    assert "`pincer auth setup google --person wes`" in result.error["hint"], result.error
    assert fake.requests == [] and _refreshed_with(fake) == []  # refused before anything was sent


# ------------------------------------------------------------------------------------- the CLI


def _env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PINCER_", "GOOGLE_", "SLACK_", "BROWSER"))}
    env.update({"PINCER_HOME": str(home), "PINCER_SECRET_KEY": KEY, "GOOGLE_OAUTH_CLIENT_ID": CLIENT_ID,
                "GOOGLE_OAUTH_CLIENT_SECRET": CLIENT_SECRET})  # fmt: skip
    env.update(extra or {})
    return env


def _pincer(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pincer.cli", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=env or _env(home), timeout=CLI_TIMEOUT_S)  # fmt: skip


def test_auth_setup_person_runs_the_oauth_login_and_keeps_the_tokens_as_theirs(tmp_path: Path, fake: FakeGoogle) -> None:
    from pincer.secrets.store import SecretStore

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(_config(fake))
    for person in ("gina", "bo"):
        assert _pincer(home, "people", "add", person, "--role", "viewer").returncode == 0
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER_SCRIPT)
    env = _env(home, {"BROWSER": f"{sys.executable} {browser} %s"})
    runs = [_pincer(home, "auth", "setup", "google", "--person", who, "--json", env=env) for who in ("gina", "bo")]
    for done, who in zip(runs, ("gina", "bo"), strict=True):
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["person"] == who and json.loads(done.stdout)["refreshable"] is True
    nobody = _pincer(home, "auth", "setup", "google", "--person", "zed", "--no-browser", env=env)
    assert nobody.returncode != 0 and "no person named 'zed'" in nobody.stderr
    assert len(fake.consents) == 2  # zed's login never began
    status = {r["tool"]: r for r in json.loads(_pincer(home, "auth", "status", "--json").stdout)}
    assert (status["google"]["kind"], status["google"]["people"]) == ("per-person", ["bo", "gina"])
    with SecretStore.open(home, key=bytes.fromhex(KEY)) as store:
        gina, bo = store.find_for("gina", "google_oauth_token"), store.find_for("bo", "google_oauth_token")
        refresh = [store.find_for(p, "google_oauth_refresh_token") for p in ("gina", "bo")]
        assert store.find("google_oauth_token") is None and store.find("google_oauth_refresh_token") is None
    assert gina != bo and {gina, bo} <= set(fake.live_access_tokens()) and None not in refresh

    revoked = _pincer(home, "auth", "revoke", "google", "--person", "gina", "--json")
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["revoked_at_server"] is True and fake.revocations == [refresh[0]]
    with SecretStore.open(home, key=bytes.fromhex(KEY)) as store:
        assert store.find_for("gina", "google_oauth_token") is None
        assert store.find_for("bo", "google_oauth_token") == bo  # bo's login stays
    assert bo in fake.live_access_tokens() and gina not in fake.live_access_tokens()

    tokens = [t for t in (gina, bo, *refresh) if t]
    outputs = "".join(p.stdout + p.stderr for p in (*runs, nobody, revoked))
    assert not any(t in outputs for t in tokens)
    home_holds_none_of(home, tokens)


def test_auth_setup_person_is_refused_for_a_login_that_is_not_per_person(tmp_path: Path, fake: FakeGoogle) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(fake.config("gmail"))
    assert _pincer(home, "people", "add", "gina", "--role", "viewer").returncode == 0
    done = _pincer(home, "auth", "setup", "google", "--person", "gina", "--no-browser")
    assert done.returncode != 0 and "not per person" in done.stderr and "[secrets] per_person" in done.stderr
    assert fake.consents == []


def test_auth_setup_github_oauth_person_keeps_the_login_as_theirs(tmp_path: Path) -> None:
    """``pincer auth setup github --oauth --person gina``: GitHub's OAuth (the local GitHub of
    tests/people/github_provider.py, PKCE checked, errors as HTTP 200) kept as gina's github_token."""
    from pincer.secrets.store import SecretStore
    from tests.people import github_provider
    from tests.people.github_provider import GitHubUserSpec, email

    home = tmp_path / "home"
    home.mkdir()
    browser = tmp_path / "browser.py"
    browser.write_text(BROWSER_SCRIPT)
    with github_provider.github_stand_in() as oauth:
        oauth.next_user = GitHubUserSpec(login="gina", emails=[email("gina@example.com", primary=True)])
        (home / "config.toml").write_text(
            f'[builtins.github]\nenabled = true\nauthorization_url = "{oauth.url}/login/oauth/authorize"\n'
            f'token_url = "{oauth.url}/login/oauth/access_token"\n\n[secrets]\nper_person = ["github_token"]\n'
        )  # fmt: skip
        assert _pincer(home, "people", "add", "gina", "--role", "viewer").returncode == 0
        env = _env(home, {"BROWSER": f"{sys.executable} {browser} %s", "GITHUB_OAUTH_CLIENT_ID": github_provider.CLIENT_ID,
                          "GITHUB_OAUTH_CLIENT_SECRET": github_provider.CLIENT_SECRET})  # fmt: skip
        done = _pincer(home, "auth", "setup", "github", "--oauth", "--person", "gina", "--json", env=env)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["person"] == "gina" and json.loads(done.stdout)["secret"] == "github_token"
        (token,) = oauth.issued
        assert [r["code_verifier"] != "" for r in oauth.token_requests] == [True]
    with SecretStore.open(home, key=bytes.fromhex(KEY)) as store:
        assert store.find_for("gina", "github_token") == token and store.find("github_token") is None
    assert token not in done.stdout + done.stderr
    home_holds_none_of(home, [token])
