"""The REST API's server-sent events (sse-starlette): every event has an id, ``Last-Event-ID``
resumes a run's events after the last one seen (from the kept events, or from the stored
transcript), a quiet stream sends keep-alive comments, and a follower that hangs up stops
following without stopping the run. A real uvicorn server and the local model server.

Failed before: events were f-strings without ids (no resume: a reconnect replayed everything),
and nothing was sent while a run waited, so proxies and clients dropped a quiet stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pincer.core.errors import UsageError
from pincer.demo.model_server import ScriptedCall, Turn, serve_models
from pincer.gateway.rest import events as rest_events
from pincer.llm.runner import RunCursor
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.test_runs import RUN_TIMEOUT_S, _config

pytestmark = pytest.mark.anyio
SCRIPT = [Turn(text="Saying it. ", calls=(ScriptedCall(name="say", arguments={"text": "hi"}),)), Turn(text="Said hi.")]


async def _stream(gateway: LiveGateway, run_id: str, last_event_id: str | None = None) -> list[dict[str, Any]]:
    """Every event (id, event, data) and comment of the run's stream, to its end."""
    headers = dict(gateway.headers)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    seen: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async with gateway.http(timeout=RUN_TIMEOUT_S) as http:
        async with http.stream("GET", f"/api/v1/runs/{run_id}/events", headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line.startswith(":"):
                    seen.append({"comment": line[1:].strip()})
                elif line.startswith("id: "):
                    current["id"] = line[4:]
                elif line.startswith("event: "):
                    current["event"] = line[7:]
                elif line.startswith("data: "):
                    current["data"] = json.loads(line[6:])
                elif not line and current:
                    seen.append(current)
                    current = {}
    return seen


async def test_every_event_has_an_id_and_last_event_id_resumes_after_it(tmp_path: Path) -> None:
    with serve_models(SCRIPT) as server:
        async with live_gateway(tmp_path / "home", config=_config(server)) as gateway:
            async with gateway.http() as http:
                run_id = (await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "say hi"})).json()["run_id"]
            with anyio.fail_after(RUN_TIMEOUT_S):
                whole = [e for e in await _stream(gateway, run_id) if "event" in e]
            ids = [e["id"] for e in whole]
            assert len(set(ids)) == len(ids) and all(ids), ids
            assert whole[0]["event"] == "started" and whole[-1]["event"] == "ended"
            # A follower that saw the first three events resumes with the fourth, nothing twice.
            with anyio.fail_after(RUN_TIMEOUT_S):
                rest = [e for e in await _stream(gateway, run_id, last_event_id=ids[2]) if "event" in e]
            assert rest == whole[3:]
            # After the last one, only the end is left to tell: nothing.
            with anyio.fail_after(RUN_TIMEOUT_S):
                after_end = [e for e in await _stream(gateway, run_id, last_event_id=ids[-1]) if "event" in e]
            assert after_end == []
            # An id told from the store (SEQ): the stored messages after that one, then the end.
            messages = await gateway.pincer.runs.messages(run_id)
            with anyio.fail_after(RUN_TIMEOUT_S):
                stored = [e for e in await _stream(gateway, run_id, last_event_id=str(messages[1].seq)) if "event" in e]
            assert [e["data"]["seq"] for e in stored if e["event"] == "message"] == [m.seq for m in messages[2:]]
            assert stored[-1]["event"] == "ended" and stored[-1]["data"]["status"] == "done"
            async with gateway.http() as http:
                bad = await http.get(f"/api/v1/runs/{run_id}/events", headers={**gateway.headers, "Last-Event-ID": "x; DROP"})
            assert bad.status_code == 400 and "Last-Event-ID" in bad.json()["error"]["message"]


async def test_a_quiet_stream_sends_keep_alive_comments_and_a_follower_that_leaves_leaves_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rest_events, "SSE_PING_INTERVAL_S", 0.2)
    with serve_models([Turn(text="slow", delay_s=3.0), Turn(text="done")]) as server:
        async with live_gateway(tmp_path / "home", config=_config(server)) as gateway:
            async with gateway.http(timeout=RUN_TIMEOUT_S) as http:
                run_id = (await http.post("/api/v1/runs", headers=gateway.headers, json={"message": "wait"})).json()["run_id"]
                comments = 0
                with anyio.fail_after(RUN_TIMEOUT_S):
                    async with http.stream("GET", f"/api/v1/runs/{run_id}/events", headers=gateway.headers) as response:
                        async for line in response.aiter_lines():
                            comments += line.startswith(":")
                            if comments >= 2:
                                break  # hang up mid-run
                assert comments >= 2
            with anyio.fail_after(RUN_TIMEOUT_S):
                while not (await gateway.pincer.runs.get(run_id)).is_final:
                    await anyio.sleep(0.05)
            assert (await gateway.pincer.runs.get(run_id)).status == "done"


@given(st.text(max_size=80))
def test_a_cursor_parses_what_it_wrote_and_refuses_anything_else(text: str) -> None:
    try:
        cursor = RunCursor.parse(text)
    except UsageError as exc:
        assert "Last-Event-ID" in exc.message
        return
    assert RunCursor.parse(cursor.to_id()) == cursor


@given(st.integers(min_value=-1, max_value=10**12), st.one_of(st.none(), st.integers(min_value=0, max_value=10**12)))
def test_every_cursor_round_trips(seq: int, index: int | None) -> None:
    cursor = RunCursor(seq=seq, index=index)
    assert RunCursor.parse(cursor.to_id()) == cursor
