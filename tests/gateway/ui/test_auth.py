"""The dashboard's sign-ins (``gateway/ui/auth.py``) over a real TokenBook and config, with a
clock the test moves: they expire, and end when their token leaves config.toml."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pincer.config import parse_config
from pincer.gateway.refusals import UnauthenticatedRefusals
from pincer.gateway.tokens import TokenBook, token_digest
from pincer.gateway.ui.auth import TOUCH_EVERY_S, UI_SESSION_IDLE_S, UI_SESSION_TTL_S, UiAuth
from pincer.store.sign_ins import SignInStore
from pincer.store.sql import open_sqlite
from pincer.triggers.failures import FailureWindow

PRIMARY = "pcr_primary_token_for_auth_tests_0123456789"
AGENT = "pcr_agent_token_for_auth_tests_0123456789ab"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "dashboard.md"


@pytest.fixture
async def sign_ins(tmp_path: Path) -> AsyncIterator[SignInStore]:
    db = await open_sqlite(tmp_path)
    try:
        yield SignInStore(db)
    finally:
        await db.aclose()


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _auth(store: SignInStore, tmp_path: Path, config_text: str, clock: _Clock) -> tuple[UiAuth, list]:
    holder = [parse_config(config_text, home=tmp_path)]
    tokens = TokenBook(config=lambda: holder[0], primary_token=PRIMARY)
    auth = UiAuth(tokens=tokens, store=store, refusals=UnauthenticatedRefusals(),
                  failures=FailureWindow(limit=lambda: 3), max_failures=lambda: 3, clock=clock)  # fmt: skip
    return auth, holder


@pytest.mark.anyio
async def test_a_sign_in_ends_after_its_idle_time_and_its_whole_time(tmp_path: Path, sign_ins: SignInStore) -> None:
    clock = _Clock()
    auth, _ = _auth(sign_ins, tmp_path, "", clock)
    made = await auth.sign_in(PRIMARY)
    assert made is not None
    cookie, identity = made
    assert identity.is_main and identity.name == "main"
    clock.now += UI_SESSION_IDLE_S - 1
    assert await auth.identity(cookie) is not None  # used: the idle time starts again
    clock.now += UI_SESSION_IDLE_S - 1
    assert await auth.identity(cookie) is not None
    clock.now += UI_SESSION_IDLE_S
    assert await auth.identity(cookie) is None  # idle too long
    cookie, _ = await auth.sign_in(PRIMARY) or ("", None)
    started = clock.now
    while clock.now - started < UI_SESSION_TTL_S - UI_SESSION_IDLE_S:
        clock.now += UI_SESSION_IDLE_S / 2
        assert await auth.identity(cookie) is not None
    clock.now = started + UI_SESSION_TTL_S
    assert await auth.identity(cookie) is None  # kept busy, but a working day is the most


@pytest.mark.anyio
async def test_a_sign_in_ends_when_its_token_is_removed_from_the_config(tmp_path: Path, sign_ins: SignInStore) -> None:
    clock = _Clock()
    with_agent = f'[[gateway.tokens]]\nsha256 = "{token_digest(AGENT)}"\nsession = "agent"\n'
    auth, holder = _auth(sign_ins, tmp_path, with_agent, clock)
    cookie, identity = await auth.sign_in(AGENT) or ("", None)
    assert identity is not None and not identity.is_main and identity.name == "agent"
    assert await auth.identity(cookie) is not None
    holder[0] = parse_config("", home=tmp_path)
    assert await auth.identity(cookie) is None


@pytest.mark.anyio
async def test_wrong_tokens_and_unknown_cookies_get_nothing(tmp_path: Path, sign_ins: SignInStore) -> None:
    auth, _ = _auth(sign_ins, tmp_path, "", _Clock())
    assert await auth.sign_in("pcr_not_a_token_0123456789") is None
    assert await auth.identity("made-up-cookie") is None and await auth.identity(None) is None
    for _ in range(3):
        auth.failed("203.0.113.9", "/ui/login")
    assert auth.retry_after("203.0.113.9") is not None and auth.retry_after("203.0.113.10") is None
    assert auth.refusals.snapshot()["by_code"] == {"ui_sign_in_failed": 3}


def test_the_docs_name_the_real_expiry_times() -> None:
    text = DOCS.read_text()
    assert UI_SESSION_IDLE_S == 3600 and "after an hour without use" in text
    assert UI_SESSION_TTL_S == 8 * 3600 and "eight hours in all" in text
    assert TOUCH_EVERY_S == 30 and "at most every 30 s" in text


@pytest.mark.anyio
async def test_the_cookie_is_secure_when_the_dashboard_is_served_over_https(pincer_home: Path) -> None:
    """Over https (TLS in front, as ``allow_remote`` asks) the session cookie is Secure."""
    import re

    import httpx

    from pincer.gateway.app import create_gateway
    from pincer.service import Pincer
    from tests.gateway.conftest import SECRET_KEY

    config = parse_config("", home=pincer_home)
    async with Pincer.open(pincer_home, config=config, secret_key=SECRET_KEY, builtins=False) as pincer:
        gateway = create_gateway(pincer, settings=config.gateway, token=PRIMARY)
        transport = httpx.ASGITransport(app=gateway.app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="https://localhost") as http:
            form = (await http.get("/ui/login")).text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
            assert csrf
            signed = await http.post("/ui/login", data={"token": PRIMARY, "csrf_token": csrf.group(1)})
    assert signed.status_code == 303
    cookie = next(c for c in signed.headers.get_list("set-cookie") if c.startswith("pincer_ui="))
    parts = {p.strip().lower() for p in cookie.split(";")}
    assert {"secure", "httponly", "samesite=strict"} <= parts


@pytest.mark.anyio
async def test_looking_without_touching_does_not_keep_a_sign_in_alive(tmp_path: Path, sign_ins: SignInStore) -> None:
    """An open approvals page checks its sign-in on every tick of its event stream; before
    ``touch=False`` that check kept an unattended tab signed in until the whole time ran out."""
    clock = _Clock()
    auth, _ = _auth(sign_ins, tmp_path, "", clock)
    cookie, _ = await auth.sign_in(PRIMARY) or ("", None)
    for _ in range(3):
        clock.now += UI_SESSION_IDLE_S / 2
        looked = await auth.identity(cookie, touch=False)
        if looked is None:
            break
    assert looked is None


@pytest.mark.anyio
async def test_after_sign_in_only_a_dashboard_path_is_followed(pincer_home: Path) -> None:
    """``next`` is the client's text: a sign-in must not send the browser to another site."""
    import re

    import httpx

    from pincer.gateway.app import create_gateway
    from pincer.service import Pincer
    from tests.gateway.conftest import SECRET_KEY

    config = parse_config("", home=pincer_home)
    landed = {}
    async with Pincer.open(pincer_home, config=config, secret_key=SECRET_KEY, builtins=False) as pincer:
        gateway = create_gateway(pincer, settings=config.gateway, token=PRIMARY)
        transport = httpx.ASGITransport(app=gateway.app, client=("127.0.0.1", 50001))
        for target in ("//evil.example/x", "https://evil.example", "/ui/../api/v1/tools", "/ui/audit"):
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
                form = (await http.get("/ui/login")).text
                csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
                assert csrf
                signed = await http.post("/ui/login", data={"token": PRIMARY, "csrf_token": csrf.group(1), "next": target})
                landed[target] = signed.headers["location"]
    assert landed == {"//evil.example/x": "/ui/", "https://evil.example": "/ui/", "/ui/../api/v1/tools": "/ui/",
                      "/ui/audit": "/ui/audit"}  # fmt: skip
