"""Single sign-on logins on both backends: begun on one gateway, taken once on another; the
state itself is never stored; ended logins are forgotten."""

from __future__ import annotations

import pytest

from pincer.store.oidc_logins import OidcLoginStore, PendingLogin
from pincer.store.sql import Sql
from tests.store.conftest import Backend

pytestmark = pytest.mark.anyio


def _login(created: float) -> PendingLogin:
    return PendingLogin(provider="corp", nonce="n" * 43, verifier="v" * 64, next_path="/ui/", created=created)


async def test_a_login_begun_on_one_gateway_is_taken_once_on_another(backend: Backend) -> None:
    mine, other = OidcLoginStore(await backend.db()), OidcLoginStore(await backend.db())
    await mine.add("state-value", _login(100.0), forget_before=0.0)
    assert "v" * 64 not in repr(_login(1.0))
    keys = await (await backend.db()).fetch_all(Sql("SELECT key FROM oidc_logins"))
    assert len(keys) == 1 and keys[0][0] != "state-value" and len(keys[0][0]) == 64
    assert await other.take("state-value") == _login(100.0)
    assert await mine.take("state-value") is None and await other.take("never-begun") is None


async def test_logins_past_their_time_are_forgotten_when_another_begins(backend: Backend) -> None:
    store = OidcLoginStore(await backend.db())
    await store.add("old", _login(10.0), forget_before=0.0)
    await store.add("new", _login(700.0), forget_before=100.0)
    assert await store.take("old") is None and await store.take("new") == _login(700.0)
