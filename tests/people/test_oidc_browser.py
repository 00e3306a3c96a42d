"""Single sign-on in Chromium (Playwright): the dashboard's sign-in page sends the browser to a
local OpenID Connect provider (tests/people/oidc_provider.py) and back; the person lands on the
page they asked for, signed in with the roles the provider's groups give, and a tampered id_token
leaves the browser signed out."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import browser  # noqa: F401 - a fixture
from tests.gateway.ui.test_dashboard_browser import context  # noqa: F401 - a fixture
from tests.people.oidc_provider import Provider
from tests.people.test_oidc_sign_in import _configure, provider  # noqa: F401 - a fixture


def test_a_person_signs_in_through_the_provider_in_chromium(pincer_home: Path, provider: Provider, context: BrowserContext) -> None:  # noqa: F811
    _configure(pincer_home, provider, token_sign_in=False)
    with pincer_serve(pincer_home) as server:
        url = server.info["url"]
        page = context.new_page()
        provider.next_user = {"email": "ann@example.test", "email_verified": True, "groups": ["approvers"]}
        page.goto(url + "/ui/approvals")
        expect(page).to_have_url(url + "/ui/login?next=/ui/approvals")
        expect(page.get_by_label("Token")).to_have_count(0)
        page.get_by_role("link", name="Sign in with Test IdP").click()
        expect(page).to_have_url(url + "/ui/approvals")
        expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
        page.context.clear_cookies()
        provider.tamper = "forged"
        page.goto(url + "/ui/login?next=/ui/approvals")
        page.get_by_role("link", name="Sign in with Test IdP").click()
        expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
        page.goto(url + "/ui/approvals")
        expect(page).to_have_url(url + "/ui/login?next=/ui/approvals")
