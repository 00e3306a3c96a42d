"""Ids a client may hold are 128 random bits, on every path that mints one.

How it broke: approval ids were 32 bits (issue 34); the same kind of handle elsewhere was
short too: an agent run's id 48 bits (``llm/loop.py``), a trigger's run and firing ids 64 bits,
a canvas eval's id 48 bits. Each is a handle a client can ask about, cancel or answer.
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from pincer.canvas.board import CanvasBoard
from pincer.canvas.drawing import Author
from pincer.demo.model_server import Turn, serve_models
from pincer.llm import RunRequest
from pincer.triggers.requests import new_firing_id, new_run_id
from tests.llm.conftest import llm_config, open_pincer

HEX_128 = r"[0-9a-f]{32}"


def test_trigger_run_and_firing_ids_are_128_bits() -> None:
    runs = {new_run_id() for _ in range(200)}
    firings = {new_firing_id() for _ in range(200)}
    assert len(runs) == 200 and len(firings) == 200
    assert all(re.fullmatch("run-" + HEX_128, r) for r in runs)
    assert all(re.fullmatch("fire-" + HEX_128, f) for f in firings)


@pytest.mark.anyio
async def test_an_agent_runs_id_is_128_bits(tmp_path: Path) -> None:
    with serve_models([Turn(text="done", input_tokens=1, output_tokens=1)]) as server:
        async with open_pincer(tmp_path / "home", llm_config(server)) as pincer:
            with anyio.fail_after(60):
                run = await pincer.agent.run(RunRequest(message="hello"))
    assert run.status == "done", run.error
    assert re.fullmatch(HEX_128, run.id), run.id


@pytest.mark.anyio
async def test_a_canvas_evals_id_is_128_bits() -> None:
    board = CanvasBoard(scan=lambda value: (value, 0))
    author = Author(session="main", run_id=None, main=True)
    ids = {await board.add_eval("main", f"return {n};", author) for n in range(3)}
    assert len(ids) == 3 and all(re.fullmatch(HEX_128, i) for i in ids), ids
