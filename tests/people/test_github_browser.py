"""GitHub sign-in in Chromium (Playwright): the sign-in page's GitHub button goes to the local
GitHub (tests/people/github_provider.py) and back; the person lands on the page they asked for
with the roles their org gives, and a person whose primary email GitHub has not verified sees
why and what to do, and stays signed out."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import BrowserContext, expect

from tests.gateway.conftest import pincer_serve
from tests.gateway.ui.conftest import browser  # noqa: F401 - a fixture
from tests.gateway.ui.test_dashboard_browser import context  # noqa: F401 - a fixture
from tests.people.github_provider import GitHub, GitHubUserSpec, email
from tests.people.test_github_sign_in import ANN, configure


def test_a_person_signs_in_with_github_in_chromium(pincer_home: Path, github: GitHub, context: BrowserContext) -> None:  # noqa: F811 - the fixtures
    configure(pincer_home, github)
    with pincer_serve(pincer_home) as server:
        url = server.info["url"]
        page = context.new_page()
        github.next_user = ANN
        page.goto(url + "/ui/approvals")
        expect(page).to_have_url(url + "/ui/login?next=/ui/approvals")
        page.get_by_role("link", name="Sign in with GitHub").click()
        expect(page).to_have_url(url + "/ui/approvals")
        expect(page.get_by_role("heading", name="Approvals")).to_be_visible()
        page.context.clear_cookies()
        github.next_user = GitHubUserSpec(login="mallory", emails=[email("ann@acme.test", primary=True, verified=False)], orgs=["acme"])
        page.goto(url + "/ui/login?next=/ui/approvals")
        page.get_by_role("link", name="Sign in with GitHub").click()
        expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("verify it on GitHub (Settings, Emails), then sign in again")
        page.goto(url + "/ui/approvals")
        expect(page).to_have_url(url + "/ui/login?next=/ui/approvals")
