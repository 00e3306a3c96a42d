"""docs/hub.md says what the code does (and the README links it): every command it shows
exists with the options shown, its TOML parses (config and lock), the scanner's rule table is
the scanner's, the API table is the server's OpenAPI document."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pincer.config import parse_config
from pincer.hub.lockfile import Lockfile
from pincer.hub.scanner import RULES
from tests.test_hints import _cli_problems

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "hub.md").read_text()
README = (ROOT / "README.md").read_text()


def _blocks(text: str, language: str) -> list[str]:
    return [part.split("```", 1)[0] for part in text.split(f"```{language}\n")[1:]]


def _commands(text: str) -> list[str]:
    found = []
    for block in _blocks(text, "sh"):
        for line in block.splitlines():
            code = line.split("  #", 1)[0].strip()
            for part in code.split(" | "):
                if part.startswith("pincer "):
                    found.append(part.strip())
    return found


COMMANDS = sorted(set(_commands(DOC)))


def test_the_readme_links_the_hub_page() -> None:
    assert "(docs/hub.md)" in README
    assert len(COMMANDS) > 25


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_shown_exists_with_its_options(command: str) -> None:
    shown = re.sub(r"\[(--[a-z-]+)[^\]]*\]", r"\1", command)  # [--kind K] -> --kind
    words = [w for w in shown.split() if not w.startswith("[") and w != "|"]
    assert _cli_problems(f"`{' '.join(words)}`") == [], command


def test_the_toml_examples_parse(tmp_path: Path) -> None:
    config_blocks = [b for b in _blocks(DOC, "toml") if "[[hub.sources]]" in b]
    assert len(config_blocks) == 2
    for block in config_blocks:
        assert [s.name for s in parse_config(block, home=tmp_path).hub.sources]
    (lock,) = [b for b in _blocks(DOC, "toml") if "[[artifact]]" in b]
    entry = Lockfile.parse(lock, path=tmp_path / "pincer.lock").entries[0]
    assert (str(entry.key), entry.signer, entry.allow_unsigned) == ("skills/code-review", "alice", False)


def test_the_scanner_table_is_the_scanners_rules() -> None:
    documented = set(re.findall(r"^\| `([a-z-]+)` \| (?:high|medium)", DOC, flags=re.M))
    assert documented == set(RULES) - {"unscanned"}


def test_the_api_table_is_the_servers_document(tmp_path: Path) -> None:
    from pincer.hub.server.app import create_hub_app
    from pincer.hub.server.store import HubStore

    store = HubStore(tmp_path / "hub")
    try:
        document = create_hub_app(store).app.openapi()
    finally:
        store.close()
    documented = set(re.findall(r"^\| `(GET|POST|PUT|DELETE) (/api/v1/[^`? ]+)", DOC, flags=re.M))
    served = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert documented - {("GET", "/api/v1/openapi.json")} == served
