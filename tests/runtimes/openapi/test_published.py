"""Real descriptions as their publishers ship them on npm (installed by ``make builtins-deps``):
GitHub's (``@octokit/openapi``, 13 MB), Figma's, Blockfrost's, rclone's and Directus'. Each is
added with ``pincer openapi add`` as a user runs it (a subprocess), and gets one tool per
operation, every name within 64 characters, unique, stable from one add to the next, and in the
registry (``pincer tools list``), with every input schema a valid JSON Schema 2020-12.

Failed before the fix: GitHub's description was refused ("larger than 8388608 bytes", no config
key, no hint); minified it gave 40 names over 64 characters. Directus' ``schema: null`` was
refused ("expected a schema object, got NoneType").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

from pincer.core.schema import schema_problem
from pincer.runtimes.openapi import ServiceStore
from pincer.runtimes.openapi.operations import METHODS

CACHE = Path(__file__).resolve().parents[3] / ".cache"
GITHUB = CACHE / "npm-openapi" / "node_modules" / "@octokit" / "openapi" / "generated" / "api.github.com.json"
OTHERS = CACHE / "npm-openapi-docs" / "node_modules"
DESCRIPTIONS = {
    "github": GITHUB,
    "figma": OTHERS / "@figma" / "rest-api-spec" / "openapi" / "openapi.yaml",
    "blockfrost": OTHERS / "@blockfrost" / "openapi" / "openapi.yaml",
    "rclone": OTHERS / "rclone-openapi" / "openapi.json",
    "directus": OTHERS / "@directus" / "specs" / "dist" / "openapi.json",
}
CLI_TIMEOUT_S = 300
TOOL_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env.update({"PINCER_HOME": str(home), "PINCER_SECRET_KEY": "ab" * 32})
    return subprocess.run([sys.executable, "-m", "pincer.cli", *args], capture_output=True, text=True, env=env,
                          timeout=CLI_TIMEOUT_S)


def operation_count(path: Path) -> int:
    document: Any = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    return sum(1 for item in document["paths"].values() for method in METHODS if method in item)


@pytest.mark.parametrize("name", sorted(DESCRIPTIONS))
def test_a_published_description_imports_as_shipped(tmp_path: Path, name: str) -> None:
    path = DESCRIPTIONS[name]
    assert path.is_file(), f"run `make builtins-deps` ({path} is missing)"
    added = pincer(tmp_path, "openapi", "add", name, "--spec", str(path), "--base-url", "https://api.example.com", "--json")
    assert added.returncode == 0, added.stderr
    tools = json.loads(added.stdout)["tools"]
    assert len(tools) == len(set(tools)) == operation_count(path)
    assert all(TOOL_NAME.match(t) and t.startswith(f"{name}_") for t in tools), [t for t in tools if len(t) > 64]
    (service,) = ServiceStore(tmp_path).load()
    for operation in service.operations:
        Draft202012Validator.check_schema(operation.input_schema)
        assert schema_problem(operation.input_schema) is None, operation.name  # the chain's validator
    listed = pincer(tmp_path, "tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert set(tools) <= {t["name"] for t in json.loads(listed.stdout)}
    again = pincer(tmp_path, "openapi", "add", name, "--spec", str(path), "--base-url", "https://api.example.com",
                   "--replace", "--json")
    assert json.loads(again.stdout)["tools"] == tools  # the shortening is stable


def test_github_names_over_64_characters_are_shortened(tmp_path: Path) -> None:
    added = pincer(tmp_path, "openapi", "add", "gh", "--spec", str(GITHUB), "--base-url", "https://api.github.com", "--json")
    assert added.returncode == 0, added.stderr
    result = json.loads(added.stdout)
    (service,) = ServiceStore(tmp_path).load()
    long_ones = [op.name for op in service.operations if len(f"gh_{op.name}") > 64]
    assert long_ones and result["shortened"] == len(long_ones)
    # Names that fit are kept as written; shortened ones keep their start and end in 8 hex digits.
    by_operation = dict(zip((op.name for op in service.operations), result["tools"], strict=True))
    assert by_operation["meta_root"] == "gh_meta_root"  # operationId meta/root
    for operation in long_ones:
        tool = by_operation[operation]
        assert len(tool) == 64 and re.fullmatch(r"gh_[A-Za-z0-9_]{52}_[0-9a-f]{8}", tool), tool


def test_the_document_size_limit_is_a_config_key(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[openapi]\nmax_document_bytes = 8388608\n")
    refused = pincer(tmp_path, "openapi", "add", "gh", "--spec", str(GITHUB), "--base-url", "https://api.github.com")
    assert refused.returncode == 1
    text = " ".join(refused.stderr.split())
    assert "larger than 8388608 bytes" in text and "raise [openapi] max_document_bytes in config.toml" in text
    assert ServiceStore(tmp_path).load() == []
