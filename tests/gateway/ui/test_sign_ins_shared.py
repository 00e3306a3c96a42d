"""A dashboard sign-in holds on every gateway of one store, and survives a gateway's restart.

Behind the documented load balancer (examples/scale-out/nginx.conf: ``least_conn`` over three
gateways) each page can land on another gateway. Before the sign-ins were stored, each process
kept its own in memory: the page after signing in landed elsewhere and was sent back to
``/ui/login``, a restart signed everyone out, and signing out on one gateway left the cookie good
on the others. Real ``pincer serve`` processes: two on one ``PINCER_HOME`` (SQLite), and two with
homes of their own on one PostgreSQL database.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from pincer.gateway.tokens import load_or_create_token, token_digest
from pincer.secrets.keys import AUDIT_KEY, load_or_create_key
from tests.backends import postgres_server
from tests.gateway.conftest import ServerProcess, pincer_serve
from tests.gateway.ui.conftest import WAIT_S, cli_env, csrf_of, sign_in

CLI_TIMEOUT_S = 120.0
PINCER_BIN = Path(sys.executable).with_name("pincer")
SHARED_TOKEN = "pincer-shared-dashboard-token-0123456789abcdef"


def _client(server: ServerProcess, cookie: str | None = None) -> httpx.Client:
    cookies = {"pincer_ui": cookie} if cookie is not None else None
    return httpx.Client(base_url=server.info["url"], trust_env=False, timeout=WAIT_S, cookies=cookies)


def _signed_in_on(server: ServerProcess, cookie: str) -> bool:
    with _client(server, cookie) as http:
        answer = http.get("/ui/approvals")
    if answer.status_code == 200:
        assert "Sign out" in answer.text
        return True
    assert answer.status_code == 303 and answer.headers["location"].startswith("/ui/login"), answer.status_code
    return False


def _sign_in(server: ServerProcess, token: str) -> str:
    with _client(server) as http:
        signed = sign_in(http, token)
        assert signed.status_code == 303, signed.text
        return signed.cookies["pincer_ui"]


def _sign_out(server: ServerProcess, cookie: str) -> None:
    with _client(server, cookie) as http:
        page = http.get("/ui/approvals")
        done = http.post("/ui/logout", data={"csrf_token": csrf_of(page.text)})
    assert done.status_code == 303 and done.headers["location"] == "/ui/login"


@contextmanager
def _two(homes: tuple[Path, Path]) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with ExitStack() as stack:
        yield stack.enter_context(pincer_serve(homes[0])), stack.enter_context(pincer_serve(homes[1]))


def _postgres_homes(tmp_path: Path) -> tuple[Path, Path]:
    """Two homes (two machines' worth: their own keys and files) on one PostgreSQL database, both
    accepting the one token a team hands its people."""
    url = postgres_server().new_database()
    homes = (tmp_path / "a", tmp_path / "b")
    for home in homes:
        home.mkdir()
        (home / "config.toml").write_text(
            f'[store]\nurl = "{url}"\n\n[triggers]\nenabled = false\n\n'
            f'[[gateway.tokens]]\nsha256 = "{token_digest(SHARED_TOKEN)}"\nsession = "main"\n'
        )
    done = subprocess.run([str(PINCER_BIN), "db", "upgrade", "--json"], capture_output=True, text=True,
                          env=cli_env(homes[0]), timeout=CLI_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True
    # One audit chain takes one key: the second machine gets the first one's (as docs/scale-out.md says).
    load_or_create_key(homes[0], None, place=AUDIT_KEY)
    shutil.copy2(homes[0] / AUDIT_KEY.file_name, homes[1] / AUDIT_KEY.file_name)
    return homes


def test_a_sign_in_on_one_gateway_holds_on_another_of_the_same_home(home: Path) -> None:
    token = load_or_create_token(home)
    with _two((home, home)) as (a, b):
        cookie = _sign_in(a, token)
        assert _signed_in_on(b, cookie)
        _sign_out(b, cookie)
        assert not _signed_in_on(a, cookie)  # signed out everywhere, not only where it was asked
        kept = _sign_in(b, token)
    with pincer_serve(home) as restarted:
        assert _signed_in_on(restarted, kept)  # a restart no longer signs everyone out
        assert not _signed_in_on(restarted, "not-a-cookie-anyone-was-given")


def test_a_sign_in_holds_across_gateways_on_one_postgresql(tmp_path: Path) -> None:
    with _two(_postgres_homes(tmp_path)) as (a, b):
        cookie = _sign_in(a, SHARED_TOKEN)
        assert _signed_in_on(b, cookie)
        _sign_out(b, cookie)
        assert not _signed_in_on(a, cookie)


def test_the_store_keeps_no_cookie_a_reader_of_it_could_sign_in_with(home: Path) -> None:
    """What is stored is the cookie's sha256 and the token's sha256: a copy of pincer.db signs
    nobody in."""
    import sqlite3

    token = load_or_create_token(home)
    with pincer_serve(home) as a:
        cookie = _sign_in(a, token)
    dump = "\n".join(sqlite3.connect(home / "pincer.db").iterdump())
    assert cookie not in dump and token not in dump


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home whose gateways start quickly (no scheduler)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[triggers]\nenabled = false\n")
    return home
