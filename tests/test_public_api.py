"""The public face (issue 40 item 5): ``pincer`` is the namespace a Python program imports from.
Every name of ``__all__`` resolves to the object its module defines, ``dir(pincer)`` is exactly
``__all__``, the type stub states the same names, ``import pincer`` loads none of pincer's parts,
and docs/embedding.md's example runs and prints what the page says it prints."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import pincer

ROOT = Path(__file__).resolve().parents[1]
STUB = ROOT / "src" / "pincer" / "__init__.pyi"
EMBEDDING = ROOT / "docs" / "embedding.md"
EXAMPLE_TIMEOUT_S = 180  # opens a home (two SQLite stores, two keys) on a busy machine


def test_every_name_in_all_resolves_to_the_object_its_module_defines() -> None:
    assert pincer.__all__[0] == "__version__" and len(set(pincer.__all__)) == len(pincer.__all__)
    for name in pincer.__all__[1:]:
        defined = getattr(importlib.import_module(pincer._EXPORTS[name]), name)
        assert getattr(pincer, name) is defined, name
        assert getattr(defined, "__module__", pincer._EXPORTS[name]) == pincer._EXPORTS[name], (
            f"pincer.{name} is re-exported from {pincer._EXPORTS[name]}, not from where it is defined"
        )


def test_dir_is_the_namespace() -> None:
    """Like httpx's test of its exports: the public names of the module are ``__all__``, nothing
    more (no helper leaking out: ``importlib``, ``Any``), nothing less."""
    public = {name for name in dir(pincer) if not name.startswith("_")}
    submodules = {name for name in public if isinstance(getattr(pincer, name), types.ModuleType)}
    assert public - submodules == set(pincer.__all__) - {"__version__"}
    assert "__version__" in dir(pincer)


def test_an_unknown_name_is_an_attribute_error_that_names_it() -> None:
    with pytest.raises(AttributeError, match="'no_such_name'"):
        pincer.no_such_name  # noqa: B018 - the lookup is the test


def test_the_stub_states_the_same_names_from_the_same_modules() -> None:
    """``__init__.pyi`` is what type checkers read: a name only in one of the two is a name a user
    either cannot type-check or cannot import."""
    tree = ast.parse(STUB.read_text())
    stated: dict[str, str] = {}
    stub_all: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name}: a stub re-export is spelled `X as X`"
                stated[alias.name] = node.module or ""
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            stub_all = list(ast.literal_eval(node.value))
    assert stated == pincer._EXPORTS
    assert stub_all == pincer.__all__


def test_import_pincer_loads_none_of_its_parts() -> None:
    """What keeps ``import pincer`` at about a millisecond (and ``pincer --version`` light): not a
    time (tests never assert one), the modules it loads. Failed with eager re-exports: pincer.service
    pulls in the dispatcher, the stores, pydantic."""
    code = "import sys, pincer; print('\\n'.join(m for m in sys.modules if m.startswith('pincer')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["pincer"]


def _block(text: str, language: str) -> str:
    (block, *_) = [part.split("```", 1)[0] for part in text.split(f"```{language}\n")[1:]]
    return block


def test_the_embedding_example_runs_and_prints_what_the_page_says(tmp_path: Path) -> None:
    page = EMBEDDING.read_text()
    script = tmp_path / "example.py"
    script.write_text(_block(page, "python"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINCER_")}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "pincer-home")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=EXAMPLE_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == _block(page, "text")


def test_the_embedding_page_names_every_export() -> None:
    page = EMBEDDING.read_text()
    missing = [name for name in pincer.__all__[1:] if f"`{name}`" not in page]
    assert not missing, f"docs/embedding.md does not name {missing}"
