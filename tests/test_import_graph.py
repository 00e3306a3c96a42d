"""The import graph: what a light entry point must not pull in, and DESIGN.md's direction of
imports (core and policy import nothing with I/O; nothing below the gateway imports it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "pincer"


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_gateway_tokens_do_not_import_the_mcp_sdk_or_the_web_stack() -> None:
    loaded = _modules_after("import pincer.gateway.tokens")
    heavy = {m for m in loaded if m.split(".")[0] in {"mcp", "mcp_types", "starlette", "fastapi", "uvicorn"}}
    assert not heavy, sorted(heavy)[:10]


def _imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


# Inner layers and the layers they may not import (DESIGN.md: imports point inward).
_FORBIDDEN = {
    "core": ("pincer.policy", "pincer.store", "pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "policy": ("pincer.store", "pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "safety": ("pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "store": ("pincer.runtimes", "pincer.gateway", "pincer.cli", "pincer.dispatch"),
    "runtimes": ("pincer.gateway", "pincer.cli"),
}


@pytest.mark.parametrize("layer", sorted(_FORBIDDEN))
def test_imports_point_inward(layer: str) -> None:
    bad = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for module in _imports_of(path):
            if module.startswith(_FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(SRC)} imports {module}")
    assert not bad, bad
