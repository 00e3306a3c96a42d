"""The manifests in docs/script-tools.md run as written."""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from pincer.core.values import HostContext
from pincer.runtimes.script import ScriptRuntime, parse_manifest

from .helpers import sandbox_owned_dir

pytestmark = pytest.mark.anyio

DOC = Path(__file__).resolve().parents[3] / "docs" / "script-tools.md"


def doc_manifests() -> list[dict]:
    return [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", DOC.read_text(), re.S)]


async def test_word_count_counts_the_text_it_is_given(settings) -> None:
    manifest = parse_manifest(doc_manifests()[0], source=str(DOC))
    assert manifest.name == "word_count"
    runtime = ScriptRuntime([manifest], settings, include_exec=False)
    spec = runtime.tools()[0]
    out = await runtime.invoke(spec, {"text": "one two three"}, HostContext(session="agent", tool="word_count"))
    assert out.value["stdout"] == "3\n"
    out = await runtime.invoke(spec, {"text": "a; rm -rf /"}, HostContext(session="agent", tool="word_count"))
    assert out.value["stdout"] == "4\n"  # four words, and nothing ran


async def test_word_count_file_reads_the_workspace_with_use_workspace(settings, public_dir: Path) -> None:
    manifest = parse_manifest(doc_manifests()[1], source=str(DOC))
    assert manifest.name == "word_count_file"
    workspace = sandbox_owned_dir(public_dir / "workspace")
    (workspace / "notes.txt").write_text("alpha beta\n")
    host = HostContext(session="agent", tool="word_count_file", workspace=workspace)
    scratch = ScriptRuntime([manifest], settings, include_exec=False)
    out = await scratch.invoke(scratch.tools()[0], {"path": "notes.txt"}, host)
    assert out.is_error and "No such file or directory" in out.value  # the fresh scratch /work is empty
    runtime = ScriptRuntime([manifest], replace(settings, use_workspace=True), include_exec=False)
    out = await runtime.invoke(runtime.tools()[0], {"path": "notes.txt"}, host)
    assert out.value["stdout"] == "2 notes.txt\n"
