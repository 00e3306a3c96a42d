"""``pincer install tools/github`` works offline: the built-ins ship with pincer, and installing
one turns on ``[builtins.NAME] enabled = true`` in config.toml, keeping the rest of the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

PINCER = [sys.executable, "-m", "pincer.cli"]


def _pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=120)


def test_install_a_builtin_offline(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('# my settings\n[builtins.github]\nread_only = true  # only reads\n\n[output]\nmax_bytes = 50000\n')
    done = _pincer(home, "install", "tools/github", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["action"] == "installed"
    text = (home / "config.toml").read_text()
    assert text.startswith("# my settings\n") and "read_only = true  # only reads" in text
    data = tomllib.loads(text)
    assert data["builtins"]["github"] == {"enabled": True, "read_only": True} and data["output"]["max_bytes"] == 50000
    again = _pincer(home, "install", "tools/github", "--json")
    assert json.loads(again.stdout)["results"][0]["action"] == "unchanged"
    assert _pincer(home, "install", "tools/web_fetch").returncode == 0
    tools = {t["name"]: t for t in json.loads(_pincer(home, "tools", "list", "--json").stdout)}
    assert "github" in tools and "web_fetch" in tools
    assert "external_write" not in tools["github"]["effects"]  # read_only kept


def test_install_into_a_home_without_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _pincer(home, "install", "tools/web_search")
    assert done.returncode == 0, done.stderr
    assert tomllib.loads((home / "config.toml").read_text())["builtins"]["web_search"]["enabled"] is True


def test_a_configured_hub_source_keeps_its_own_tools_github(tmp_path: Path) -> None:
    """With a [hub] source, `pincer install tools/github` asks the hub (IronClaw's WASM build);
    `--source bundled` still takes the built-in."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[[hub.sources]]\nname = "empty"\npath = "{tmp_path / "nothing"}"\n')
    (tmp_path / "nothing").mkdir()
    from_hub = _pincer(home, "install", "tools/github", "--json")
    assert from_hub.returncode != 0 and "builtins" not in (home / "config.toml").read_text()
    bundled = _pincer(home, "install", "tools/github", "--source", "bundled", "--json")
    assert bundled.returncode == 0, bundled.stderr
    assert json.loads(bundled.stdout)["results"][0]["source"] == "bundled"


def test_listing_the_builtins_loads_no_http_stack_or_extractor(tmp_path: Path) -> None:
    """`pincer tools list` with every built-in on stays light: httpcore2, trafilatura and lxml load
    when a call makes a request or converts a page, not when tools are listed."""
    home = tmp_path / "home"
    home.mkdir()
    names = ("github", "web_fetch", "web_search", "llm_context", "slack", "telegram", "portfolio")
    (home / "config.toml").write_text("".join(f"[builtins.{n}]\nenabled = true\n" for n in names)
                                      + '[builtins.composio]\nenabled = true\nactions = ["A_B"]\neffects = { A_B = ["network"] }\n')
    code = (
        "import sys\nsys.argv = ['pincer', 'tools', 'list', '--json']\nfrom pincer.cli.main import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env["PINCER_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    listed = {t["name"] for t in json.loads(done.stdout)}
    assert {"github", "web_fetch", "web_search", "llm_context", "slack", "telegram", "portfolio", "composio"} <= listed
    loaded = done.stderr.split("MODULES", 1)[1].split()
    heavy = [m for m in loaded if m.split(".")[0] in ("httpx", "httpx2", "httpcore", "httpcore2", "trafilatura", "lxml", "jsonschema", "rich")]
    assert not heavy, heavy[:10]


def test_installing_composio_without_declared_actions_is_refused(tmp_path: Path) -> None:
    """composio needs its actions and their effects; `enabled = true` alone would not start, so
    install refuses and leaves config.toml as it was."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("# mine\n")
    refused = _pincer(home, "install", "tools/composio")
    assert refused.returncode != 0 and "[builtins.composio]" in refused.stderr
    assert (home / "config.toml").read_text() == "# mine\n"
    assert _pincer(home, "install", "tools/slack").returncode == 0
    assert tomllib.loads((home / "config.toml").read_text())["builtins"]["slack"]["enabled"] is True
