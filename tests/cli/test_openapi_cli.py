"""`pincer openapi list` shows each service's operations as its help says: tool, method, path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PINCER = [sys.executable, "-m", "pincer.cli"]
CLI_TIMEOUT_S = 60
PETSTORE = Path(__file__).resolve().parents[1] / "runtimes" / "openapi" / "specs" / "petstore.yaml"
DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "Odd paths", "version": "1"},
    "servers": [{"url": "https://odd.example.com"}],
    "paths": {"/v1/[legacy]/items": {"get": {"operationId": "list-items", "summary": "List [all] items"}}},
}


def pincer(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    env.update({"PINCER_HOME": str(home), "COLUMNS": "200"})
    return subprocess.run([*PINCER, *args], capture_output=True, text=True, env=env, timeout=CLI_TIMEOUT_S)


def test_list_shows_every_operation_with_its_tool_name(tmp_path: Path) -> None:
    """Failed on main before: the table showed only a count of operations."""
    added = pincer(tmp_path, "openapi", "add", "pets", "--spec", str(PETSTORE), "--base-url", "https://pets.example.com", "--json")
    assert added.returncode == 0, added.stderr
    listed = pincer(tmp_path, "openapi", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (service,) = json.loads(listed.stdout)
    operations = {(op["method"], op["path"]): op["tool"] for op in service["operations"]}
    assert operations[("GET", "/pets/{petId}")] == "pets_getPet"
    assert sorted(operations.values()) == sorted(json.loads(added.stdout)["tools"])
    registry = {t["name"] for t in json.loads(pincer(tmp_path, "tools", "list", "--json").stdout)}
    assert set(operations.values()) <= registry  # one naming rule for the list, add and the registry
    human = pincer(tmp_path, "openapi", "list")
    assert human.returncode == 0 and human.stdout == ""
    for (method, path), tool in operations.items():
        row = next(line for line in human.stderr.splitlines() if tool in line)
        assert method in row and path in row


def test_names_and_paths_are_shown_as_written(tmp_path: Path) -> None:
    """Failed on main before: `openapi add` reported "odd-svc_list-items", a name the registry
    (which turns "-" into "_") does not have."""
    spec = tmp_path / "odd.json"
    spec.write_text(json.dumps(DOCUMENT))
    added = pincer(tmp_path, "openapi", "add", "odd-svc", "--spec", str(spec), "--json")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["tools"] == ["odd_svc_list_items"]
    human = pincer(tmp_path, "openapi", "list").stderr
    assert "/v1/[legacy]/items" in human and "List [all] items" in human  # not eaten as markup


def test_list_with_no_services_says_how_to_add_one(tmp_path: Path) -> None:
    empty = pincer(tmp_path, "openapi", "list")
    assert empty.returncode == 0 and "pincer openapi add" in empty.stderr
    assert json.loads(pincer(tmp_path, "openapi", "list", "--json").stdout) == []
