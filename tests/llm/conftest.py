"""Shared pieces of the agent-loop tests: a Pincer whose [llm] points at the local model server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pincer.config import parse_config
from pincer.demo.model_server import ModelServer
from pincer.service import Pincer

KEY = b"k" * 32

TRIAGE_SKILL = """---
name: triage
description: Triage an incoming report and note it.
tools: [skill, echo, write_file, send_email, http]
parameters:
  - name: topic
    type: string
    required: true
---
Triage the report about {{ topic }}. Echo a summary, write notes/triage.txt, then tell the reporter.
"""


def write_skill(home: Path, name: str, text: str) -> None:
    """A skill of the operator's own: $PINCER_HOME/skills (trusted; the workspace's roots are not)."""
    folder = home / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)


def llm_config(server: ModelServer, *, provider: str = "openai", stream: bool = True, extra: str = "") -> str:
    url = server.openai_url if provider == "openai" else server.anthropic_url
    return f"""
[llm]
provider = "{provider}"
model = "scripted-model"
base_url = "{url}"
stream = {"true" if stream else "false"}
max_retries = 3

[approvals]
timeout_s = 20
""" + extra


@asynccontextmanager
async def open_pincer(home: Path, config_text: str, **kwargs: Any) -> AsyncIterator[Pincer]:
    config = parse_config(config_text, home=home)
    async with Pincer.open(home, config=config, secret_key=KEY, audit_key=KEY, **kwargs) as pincer:
        yield pincer


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_user_skills(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's ~/.agents/skills and ~/.claude/skills are not the tests' business."""
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
