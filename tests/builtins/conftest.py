"""Fixtures for the built-in tools: the OpenAPI-backed fake GitHub and a Pincer opened on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.builtins import fakegithub

TOKEN = "ghp_builtinsTestToken0123456789abcdefABCD"


@pytest.fixture
def fake_github() -> Iterator[fakegithub.FakeGitHub]:
    with fakegithub.serve() as fake:
        yield fake


@asynccontextmanager
async def pincer_on(home: Path, config_text: str, *, secrets: dict[str, str] | None = None) -> AsyncIterator[Any]:
    from pincer.config import parse_config
    from pincer.service import Pincer

    config = parse_config(config_text, home=home)
    async with Pincer.open(home, config=config, secret_key=b"b" * 32, external=False, wasm=False) as pincer:
        for name, value in (secrets or {}).items():
            pincer.secrets.set(name, value)
        yield pincer


def github_config(fake: fakegithub.FakeGitHub, extra: str = "", grant: str | None = None) -> str:
    grant = grant if grant is not None else 'effects = { network = "allow", use_secret = "allow", external_write = "allow" }'
    return f"""
[builtins.github]
enabled = true
base_url = "{fake.base_url}"
{extra}

[[grants]]
tool = "github"
{grant}
"""
