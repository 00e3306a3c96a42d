"""pincer as a task requester (issue 37 item 2): an upstream server (tasks_server.py, the SDK's
low-level Server on stdio, 2026-07-28) answers every ``tools/call`` with a task; pincer's MCP
runtime follows it to its result on both paths of ``tools/call`` (the SDK's and the lean one).
A task's questions go to the calling person through a real gateway (the official SDK client)."""

from __future__ import annotations

import itertools
import json
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from pincer.config import parse_config
from pincer.core.errors import ToolError, ToolTimeout
from pincer.core.values import CallRequest
from pincer.gateway.tokens import token_digest
from pincer.runtimes.mcp import ServerConfig, ServerConnection, ServerStore
from pincer.runtimes.mcp.upstream_tasks import (
    MAX_POLL_S,
    MAX_QUESTIONS,
    MAX_QUESTIONS_AT_ONCE,
    MIN_POLL_S,
    poll_delay_s,
)
from pincer.service import Pincer
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.test_tasks import Requester
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, WAIT_S

pytestmark = pytest.mark.anyio

TASKS_SERVER = Path(__file__).with_name("tasks_server.py")
BOTH_PATHS = pytest.mark.parametrize("lean", [False, True], ids=["sdk", "lean"])


def tasks_config(log: Path) -> ServerConfig:
    return ServerConfig(
        name="tasks", transport="stdio", command=sys.executable, args=("-u", str(TASKS_SERVER), "--log", str(log)),
        connect_timeout_s=20.0, protocol="2026-07-28",
    )  # fmt: skip


@asynccontextmanager
async def connected(log: Path, *, lean: bool) -> AsyncIterator[ServerConnection]:
    conn = ServerConnection(tasks_config(log), lean=lean)
    try:
        yield conn
    finally:
        await conn.aclose()


def seen(log: Path, method: str) -> list[dict]:
    if not log.exists():
        return []
    return [entry for line in log.read_text().splitlines() if (entry := json.loads(line))["method"] == method]


async def text_of(
    conn: ServerConnection, tool: str, args: dict | None = None, timeout_s: float = CALL_TIMEOUT_S
) -> str:
    result = await conn.call_tool(tool, args or {}, timeout_s=timeout_s)
    return "".join(block.text for block in result.content if block.type == "text")


@BOTH_PATHS
async def test_a_task_is_polled_to_its_result(lean: bool, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        assert await text_of(conn, "quick") == "quick done"
        assert len(seen(log, "tasks/get")) == 2
        assert seen(log, "tasks/cancel") == []


@BOTH_PATHS
async def test_an_input_request_outside_a_persons_call_is_refused_and_the_task_is_cancelled(
    lean: bool, tmp_path: Path
) -> None:
    # A call with nobody to ask (here: no pincer call at all, the connection used directly).
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        with pytest.raises(ToolError, match="no person can be asked"):
            await text_of(conn, "ask")
        assert seen(log, "tasks/update") == []
        assert len(seen(log, "tasks/cancel")) == 1


@BOTH_PATHS
async def test_a_task_that_never_finishes_is_bounded_by_the_deadline_and_cancelled_upstream(
    lean: bool, tmp_path: Path
) -> None:
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        await text_of(conn, "quick")  # started: the deadline below is the call's alone
        with anyio.fail_after(1.0 + WAIT_S), pytest.raises(ToolTimeout, match="did not answer within 1 s"):
            await text_of(conn, "forever", timeout_s=1.0)
        cancels = seen(log, "tasks/cancel")
        assert len(cancels) == 1
        assert cancels[0]["taskId"] in {entry["taskId"] for entry in seen(log, "tasks/get")}


@BOTH_PATHS
async def test_cancelling_the_pincer_call_cancels_the_upstream_task(lean: bool, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        await text_of(conn, "quick")
        async with anyio.create_task_group() as group:
            group.start_soon(text_of, conn, "forever")
            with anyio.fail_after(WAIT_S):
                while not [e for e in seen(log, "tasks/get") if e["taskId"] not in _quick_ids(log)]:
                    await anyio.sleep(0.02)
            group.cancel_scope.cancel()
        with anyio.fail_after(WAIT_S):
            while not seen(log, "tasks/cancel"):
                await anyio.sleep(0.02)
        assert len(seen(log, "tasks/cancel")) == 1


def _quick_ids(log: Path) -> set[str]:
    entries = seen(log, "tasks/get")
    return {entries[0]["taskId"]} if entries else set()


@BOTH_PATHS
async def test_an_answer_naming_another_task_is_refused_and_the_task_cancelled(lean: bool, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        with pytest.raises(ToolError, match="answer names another task"):
            await text_of(conn, "wrong_id")
        assert len(seen(log, "tasks/cancel")) == 1


@BOTH_PATHS
async def test_a_malformed_create_task_result_fails_closed(lean: bool, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        with pytest.raises(ToolError, match="not a valid MCP result"):
            await text_of(conn, "malformed")
        assert seen(log, "tasks/get") == []


@BOTH_PATHS
async def test_a_big_task_result_comes_back_as_a_direct_result_would(lean: bool, tmp_path: Path) -> None:
    # The output limit is the chain's (dispatch truncates/refuses as for any call): the runtime
    # hands the task's result over unchanged; the gateway test covers the limit.
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        assert await text_of(conn, "big", {"bytes": 300_000}) == "x" * 300_000


@BOTH_PATHS
async def test_a_zero_poll_interval_is_clamped(lean: bool, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    async with connected(log, lean=lean) as conn:
        assert await text_of(conn, "poll0") == "poll0 done"
        times = [entry["at"] for entry in seen(log, "tasks/get")]
        assert len(times) == 3
        assert all(later - earlier >= MIN_POLL_S * 0.9 for earlier, later in itertools.pairwise(times))


def test_poll_delays_are_clamped() -> None:
    assert poll_delay_s(0) == MIN_POLL_S
    assert poll_delay_s(-5) == MIN_POLL_S
    assert poll_delay_s(None) == MIN_POLL_S
    assert poll_delay_s(True) == MIN_POLL_S
    assert poll_delay_s(float("nan")) == MIN_POLL_S
    assert poll_delay_s(10**12) == MAX_POLL_S
    assert poll_delay_s(float("inf")) == MAX_POLL_S
    assert poll_delay_s(250) == 0.25


@BOTH_PATHS
async def test_through_the_chain_a_task_result_is_audited_and_bounded_by_the_output_limit(
    lean: bool, tmp_path: Path
) -> None:
    ServerStore(tmp_path).add(tasks_config(tmp_path / "tasks.log").with_changes(name="t"))
    config = parse_config(
        '[[grants]]\ntool = "t_*"\ndefault = "allow"\n[output]\nmax_bytes = 4096\n'
        f"[tools]\ntimeout_s = 10\nmcp_lean_calls = {str(lean).lower()}\n",
        home=tmp_path,
    )
    async with Pincer.open(tmp_path, config=config, secret_key=bytes(range(32)), builtins=False) as p:
        with anyio.fail_after(WAIT_S * 3):
            done = await p.call(CallRequest(tool="t_quick", args={}, caller="test"))
            big = await p.call(CallRequest(tool="t_big", args={"bytes": 300_000}, caller="test"))
            asked = await p.call(CallRequest(tool="t_ask", args={}, caller="test"))
        assert done.ok and done.output == "quick done" and done.audit_id is not None
        # As any call's: the chain cuts the output to [output] max_bytes and says so.
        assert big.ok and big.usage.truncated and big.audit_id is not None
        assert len(json.dumps(big.to_dict())) < 3 * 4096, len(json.dumps(big.to_dict()))
        # A call no MCP client made (here: the service itself; REST, a run, a trigger) has nobody to ask.
        assert not asked.ok and "no MCP client made it" in asked.error["message"], asked.error


# -- questions to a person, through a real gateway -----------------------------------------------

AGENT_TOKEN = secrets.token_urlsafe(24)
LEAKED = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"  # tasks_server.py's ask_leak puts it in its question
GATEWAY_CONFIG = (
    '[[grants]]\ntool = "t_*"\ndefault = "allow"\n[tools]\ntimeout_s = 20\n'
    f'[[gateway.tokens]]\nsha256 = "{token_digest(AGENT_TOKEN)}"\nsession = "agent"\n'
    '[sessions.agent]\nallow = ["t_*"]\n'
)


@asynccontextmanager
async def gateway_over_tasks(home: Path, log: Path) -> AsyncIterator[LiveGateway]:
    ServerStore(home).add(tasks_config(log).with_changes(name="t"))
    async with live_gateway(home, config=GATEWAY_CONFIG, extra_runtime=False) as live:
        yield live


class Person:
    """The calling client's elicitation handler: answers each question with a name."""

    def __init__(self, name: str = "Ada") -> None:
        self.name = name
        self.asked: list[str] = []

    async def __call__(self, context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": self.name})


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def test_a_tasks_question_goes_to_the_main_sessions_person_and_the_task_completes(
    pincer_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "tasks.log"
    person = Person()
    async with gateway_over_tasks(pincer_home, log) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("t_ask", {})
        records = [r for r in await live.pincer.audit.records() if r.tool == "t_ask"]
    assert not result.is_error, _text(result)
    assert json.loads(_text(result).removeprefix("got ")) == {"action": "accept", "content": {"name": "Ada"}}
    # The question says who asks, and what it asked.
    assert len(person.asked) == 1 and "t/ask" in person.asked[0] and "Your name?" in person.asked[0]
    assert len(seen(log, "tasks/update")) == 1 and seen(log, "tasks/cancel") == []
    assert [r.outcome for r in records] == ["ok"]


async def test_a_secret_in_the_persons_answer_is_not_sent_upstream(pincer_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    person = Person("ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")  # a GitHub token's shape
    async with gateway_over_tasks(pincer_home, log) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("t_ask", {})
    assert result.is_error and "looks like a secret" in _text(result)
    assert person.name not in _text(result)
    assert seen(log, "tasks/update") == [] and len(seen(log, "tasks/cancel")) == 1


async def test_a_secret_in_the_servers_question_never_reaches_the_person(pincer_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    person = Person()
    async with gateway_over_tasks(pincer_home, log) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("t_ask_leak", {})
    assert not result.is_error, _text(result)
    assert len(person.asked) == 1 and "the server's token is" in person.asked[0]
    assert LEAKED not in person.asked[0] and LEAKED[:12] not in person.asked[0]


@pytest.mark.parametrize(
    ("token", "mode", "elicits", "why"),
    [
        ("agent", "legacy", True, "not a main session"),
        ("main", "legacy", False, "cannot be asked"),
        ("main", "auto", True, "cannot be asked"),
    ],
    ids=["non-main-session", "client-without-elicitation", "2026-07-28-client"],
)
async def test_a_tasks_question_nobody_may_answer_fails_the_call_and_cancels_the_task(
    pincer_home: Path, tmp_path: Path, token: str, mode: str, elicits: bool, why: str
) -> None:
    log = tmp_path / "tasks.log"
    person = Person()
    async with gateway_over_tasks(pincer_home, log) as live:
        kwargs = {"elicitation_callback": person} if elicits else {}
        chosen = AGENT_TOKEN if token == "agent" else None
        async with live.mcp(mode=mode, token=chosen, **kwargs) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("t_ask", {})
    assert result.is_error and why in _text(result), _text(result)
    assert person.asked == []
    assert seen(log, "tasks/update") == [] and len(seen(log, "tasks/cancel")) == 1


async def test_a_hostile_upstream_asking_too_much_is_bounded_and_cancelled(pincer_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "tasks.log"
    person = Person()
    async with gateway_over_tasks(pincer_home, log) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 6):
                flood = await client.call_tool("t_ask_flood", {})
                big = await client.call_tool("t_ask_big", {})
                asked_before_again = len(person.asked)
                again = await client.call_tool("t_ask_again", {})
    # 1,000 questions at once and a 100,000-character question never reach the person.
    assert flood.is_error and f"at most {MAX_QUESTIONS_AT_ONCE}" in _text(flood), _text(flood)
    assert big.is_error and "question is too long" in _text(big), _text(big)
    assert asked_before_again == 0
    # A server that asks forever: the person answers at most MAX_QUESTIONS, then the call ends.
    assert again.is_error and f"more than {MAX_QUESTIONS} questions" in _text(again), _text(again)
    assert len(person.asked) == MAX_QUESTIONS
    assert len(seen(log, "tasks/cancel")) == 3


async def test_a_tasks_question_reaches_a_2026_client_that_called_as_a_task_through_tasks_update(
    pincer_home: Path, tmp_path: Path
) -> None:
    # Asking a 2026-07-28 client in a new round would run the tool again (a second upstream task);
    # a client that called pincer as a task is asked through the pincer task's own inputRequests.
    log = tmp_path / "tasks.log"
    async with gateway_over_tasks(pincer_home, log) as live:
        client = Requester(live)
        with anyio.fail_after(WAIT_S * 3):
            created = (await client.call("t_ask", {}))["result"]
            assert created["resultType"] == "task", created
            waiting = await client.until(created["taskId"], "input_required")
            ((key, question),) = waiting["inputRequests"].items()
            await client.update(created["taskId"], {key: {"action": "accept", "content": {"name": "Ada"}}})
            done = await client.until(created["taskId"], "completed", "failed")
    assert "t/ask: upstream task" in question["params"]["message"] and "Your name?" in question["params"]["message"]
    assert done["status"] == "completed" and not done["result"].get("isError"), done
    text = " ".join(block.get("text", "") for block in done["result"]["content"])
    assert json.loads(text.removeprefix("got ")) == {"action": "accept", "content": {"name": "Ada"}}
    assert len(seen(log, "tasks/update")) == 1 and seen(log, "tasks/cancel") == []
