"""Fixtures of the people tests: the local GitHub the GitHub sign-in tests sign in with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.people.github_provider import GitHub, github_stand_in


@pytest.fixture
def github() -> Iterator[GitHub]:
    with github_stand_in() as running:
        yield running
