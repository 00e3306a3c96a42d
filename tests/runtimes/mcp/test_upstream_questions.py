"""An upstream server's plain ``elicitation/create`` sent in the middle of a ``tools/call`` (no
task; asking_server.py, the official SDK's MCPServer on stdio, the handshake era) goes to the
person behind the pincer call by the same rule and checks as an upstream task's questions
(person_questions.py), on the SDK's path and the lean one (``[tools] mcp_lean_calls``), through a
real gateway and the official SDK client."""

from __future__ import annotations

import json
import secrets
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from pincer.core.errors import ToolError
from pincer.gateway.tokens import token_digest
from pincer.policy.roles import parse_roles
from pincer.runtimes.mcp import ServerConfig, ServerConnection, ServerStore
from pincer.runtimes.mcp.person_questions import MAX_QUESTIONS, MAX_QUESTIONS_AT_ONCE, MAX_SCHEMA_CHARS
from tests.gateway.conftest import LiveGateway, live_gateway
from tests.gateway.test_tasks import Requester
from tests.runtimes.mcp.conftest import CALL_TIMEOUT_S, WAIT_S

pytestmark = pytest.mark.anyio

ASKING_SERVER = Path(__file__).with_name("asking_server.py")
BOTH_PATHS = pytest.mark.parametrize("lean", [False, True], ids=["sdk", "lean"])
AGENT_TOKEN = secrets.token_urlsafe(24)
LEAKED = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"  # asking_server.py's ask_leak puts it in its question
SECRET_ANSWER = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape


def asking_config(log: Path, protocol: str = "legacy") -> ServerConfig:
    return ServerConfig(
        name="q", transport="stdio", command=sys.executable, args=("-u", str(ASKING_SERVER), "--log", str(log)),
        connect_timeout_s=20.0, protocol=protocol,
    )  # fmt: skip


def answers(log: Path, tool: str) -> list[dict]:
    if not log.exists():
        return []
    return [entry["outcome"] for line in log.read_text().splitlines() if (entry := json.loads(line))["tool"] == tool]


def config_text(*, lean: bool, session: str = "main") -> str:
    return (
        '[[grants]]\ntool = "q_*"\ndefault = "allow"\n'
        f"[tools]\ntimeout_s = 30\nmcp_lean_calls = {str(lean).lower()}\n"
        f'[gateway]\nsession = "{session}"\n'
        f'[[gateway.tokens]]\nsha256 = "{token_digest(AGENT_TOKEN)}"\nsession = "agent"\n'
        '[sessions.agent]\nallow = ["q_*"]\n'
    )


@asynccontextmanager
async def gateway_over(
    home: Path, log: Path, *, lean: bool, session: str = "main", protocol: str = "legacy"
) -> AsyncIterator[LiveGateway]:
    ServerStore(home).add(asking_config(log, protocol))
    async with live_gateway(home, config=config_text(lean=lean, session=session), extra_runtime=False) as live:
        yield live


class Person:
    """The calling client's elicitation handler: answers each question with a name (after
    ``hold`` is set, when given)."""

    def __init__(self, name: str = "Ada", hold: anyio.Event | None = None) -> None:
        self.name = name
        self.hold = hold
        self.asked: list[str] = []
        self.forms: list[str] = []

    async def __call__(self, context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        self.forms.append(json.dumps(getattr(params, "requested_schema", None)))
        if self.hold is not None:
            await self.hold.wait()
        return types.ElicitResult(action="accept", content={"name": self.name})


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


@BOTH_PATHS
async def test_a_plain_question_reaches_the_main_sessions_person_and_the_answer_the_server(
    lean: bool, pincer_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "asked.log"
    person = Person()
    async with gateway_over(pincer_home, log, lean=lean) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("q_ask", {})
                leak = await client.call_tool("q_ask_leak", {})
                leak_form = await client.call_tool("q_ask_leak_schema", {})
        records = [r for r in await live.pincer.audit.records() if r.tool == "q_ask"]
    assert not result.is_error, _text(result)
    accepted = {"action": "accept", "content": {"name": "Ada"}}
    assert json.loads(_text(result).removeprefix("got ")) == accepted
    assert answers(log, "ask") == [accepted]
    # The question says who asks (the server's, not pincer's), and what it asked.
    assert "q/ask asks (an upstream MCP server's question, not pincer's)" in person.asked[0]
    assert "Your name?" in person.asked[0]
    assert [r.outcome for r in records] == ["ok"]
    # A secret in the server's question never reaches the person.
    assert not leak.is_error, _text(leak)
    assert "the server's token is" in person.asked[1] and LEAKED[:12] not in person.asked[1]
    assert not leak_form.is_error, _text(leak_form)
    assert "token " in person.forms[2] and LEAKED[:12] not in person.forms[2], person.forms[2]


@BOTH_PATHS
@pytest.mark.parametrize(
    ("token", "elicits", "why"),
    [("agent", True, "not a main session"), ("main", False, "cannot be asked mid-call")],
    ids=["non-main-session", "client-without-elicitation"],
)
async def test_a_question_nobody_may_answer_fails_the_call_saying_why(
    lean: bool, token: str, elicits: bool, why: str, pincer_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "asked.log"
    person = Person()
    async with gateway_over(pincer_home, log, lean=lean) as live:
        kwargs = {"elicitation_callback": person} if elicits else {}
        async with live.mcp(mode="legacy", token=AGENT_TOKEN if token == "agent" else None, **kwargs) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("q_ask", {})
    assert result.is_error and "asked a question only a person may answer" in _text(result), _text(result)
    assert why in _text(result), _text(result)
    assert person.asked == []
    assert not [a for a in answers(log, "ask") if "action" in a]  # the server got no answer, only an error


@BOTH_PATHS
async def test_a_secret_in_the_answer_is_refused_and_never_sent(lean: bool, pincer_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "asked.log"
    person = Person(SECRET_ANSWER)
    async with gateway_over(pincer_home, log, lean=lean) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                result = await client.call_tool("q_ask", {})
    assert result.is_error and "looks like a secret" in _text(result), _text(result)
    assert SECRET_ANSWER not in _text(result)
    assert len(person.asked) == 1
    assert SECRET_ANSWER not in (log.read_text() if log.exists() else "")


@BOTH_PATHS
async def test_a_hostile_server_asking_too_much_is_bounded(lean: bool, pincer_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "asked.log"
    hold = anyio.Event()
    held = Person(hold=hold)  # answers nothing until the flood's call is over
    person = Person()
    async with gateway_over(pincer_home, log, lean=lean) as live:
        async with live.mcp(mode="legacy", elicitation_callback=held) as client:
            with anyio.fail_after(WAIT_S * 3):
                flood = await client.call_tool("q_ask_flood", {})
            hold.set()
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 6):
                big = await client.call_tool("q_ask_big", {})
                big_schema = await client.call_tool("q_ask_big_schema", {})
                url = await client.call_tool("q_ask_url", {})
                asked_before_again = len(person.asked)
                again = await client.call_tool("q_ask_again", {})
    # 20 questions at once: at most 8 wait for the person, the next ends the call.
    assert flood.is_error and f"at most {MAX_QUESTIONS_AT_ONCE}" in _text(flood), _text(flood)
    assert len(held.asked) <= MAX_QUESTIONS_AT_ONCE
    # A 100,000-character question and a form past 16,000 characters never reach the person.
    assert big.is_error and "question is too long" in _text(big), _text(big)
    assert big_schema.is_error and f"at most {MAX_SCHEMA_CHARS} as JSON" in _text(big_schema), _text(big_schema)
    assert url.is_error and "only passes on form questions" in _text(url), _text(url)
    assert asked_before_again == 0
    # A server that asks forever: the person answers at most MAX_QUESTIONS, then the call ends.
    assert again.is_error and f"more than {MAX_QUESTIONS} questions" in _text(again), _text(again)
    assert len(person.asked) == MAX_QUESTIONS
    assert len([a for a in answers(log, "ask_again") if "action" in a]) == MAX_QUESTIONS


async def test_a_persons_token_is_asked_where_its_session_is_not_main(pincer_home: Path, tmp_path: Path) -> None:
    # The gateway's own token runs in a non-main session here; a person's token in the same
    # session speaks for that person, so the person's client is asked.
    log = tmp_path / "asked.log"
    person = Person("Wes")
    async with gateway_over(pincer_home, log, lean=True, session="agent") as live:
        await live.pincer.people.add("wes", roles=parse_roles(["operator"]), email=None, by="cli:test", now=time.time())
        wes = (await live.pincer.people.new_token("wes", now=time.time())).value
        async with live.mcp(mode="legacy", token=wes, elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                answered = await client.call_tool("q_ask", {})
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                refused = await client.call_tool("q_ask", {})
    assert not answered.is_error, _text(answered)
    assert json.loads(_text(answered).removeprefix("got ")) == {"action": "accept", "content": {"name": "Wes"}}
    assert refused.is_error and "not a main session" in _text(refused), _text(refused)
    assert len(person.asked) == 1


@BOTH_PATHS
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"], ids=["handshake-server", "2026-07-28-server"])
async def test_a_servers_resolver_question_goes_the_same_way_in_both_eras(
    lean: bool, protocol: str, pincer_home: Path, tmp_path: Path
) -> None:
    # The SDK's Resolve/Elicit: a mid-call request to a handshake-era pincer, an
    # InputRequiredResult round (which the SDK's driver answers in the call's own task) on 2026-07-28.
    log = tmp_path / "asked.log"
    person = Person("Grace")
    async with gateway_over(pincer_home, log, lean=lean, protocol=protocol) as live:
        async with live.mcp(mode="legacy", elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                answered = await client.call_tool("q_ask_resolved", {})
        async with live.mcp(mode="legacy", token=AGENT_TOKEN, elicitation_callback=person) as client:
            with anyio.fail_after(WAIT_S * 3):
                refused = await client.call_tool("q_ask_resolved", {})
        assert live.pincer.mcp is not None
        (status,) = live.pincer.mcp.statuses()
    assert status.protocol_version == ("2026-07-28" if protocol == "2026-07-28" else "2025-11-25"), status
    assert not answered.is_error and _text(answered) == "got Grace", _text(answered)
    assert "q/ask_resolved asks (an upstream MCP server's question" in person.asked[0], person.asked
    assert refused.is_error and "not a main session" in _text(refused), _text(refused)
    assert len(person.asked) == 1 and answers(log, "ask_resolved") == [{"name": "Grace"}]


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"], ids=["handshake-server", "2026-07-28-server"])
async def test_pincer_declares_form_elicitation_upstream_and_not_url(protocol: str, tmp_path: Path) -> None:
    # pincer passes on form questions only: a server must not be told it may ask for a URL.
    conn = ServerConnection(asking_config(tmp_path / "asked.log", protocol), lean=True)
    try:
        with anyio.fail_after(CALL_TIMEOUT_S):
            result = await conn.call_tool("capabilities", {}, timeout_s=CALL_TIMEOUT_S)
    finally:
        await conn.aclose()
    declared = json.loads("".join(block.text for block in result.content if block.type == "text"))
    assert declared["elicitation"] == {"form": {}}, declared
    assert "sampling" not in declared and "roots" not in declared, declared


@BOTH_PATHS
async def test_a_question_on_a_call_no_client_made_is_refused(lean: bool, tmp_path: Path) -> None:
    log = tmp_path / "asked.log"
    conn = ServerConnection(asking_config(log), lean=lean)
    try:
        with anyio.fail_after(CALL_TIMEOUT_S), pytest.raises(ToolError, match="no person can be asked"):
            await conn.call_tool("ask", {}, timeout_s=CALL_TIMEOUT_S)
    finally:
        await conn.aclose()


# -- a 2026-07-28 client that called pincer as a task ----------------------------------------------


@BOTH_PATHS
async def test_a_2026_client_calling_as_a_task_answers_the_servers_question_with_tasks_update(
    lean: bool, pincer_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "asked.log"
    async with gateway_over(pincer_home, log, lean=lean) as live:
        client = Requester(live)
        with anyio.fail_after(WAIT_S * 3):
            created = (await client.call("q_ask", {}))["result"]
            assert created["resultType"] == "task", created
            waiting = await client.until(created["taskId"], "input_required")
            ((key, question),) = waiting["inputRequests"].items()
            await client.update(created["taskId"], {key: {"action": "accept", "content": {"name": "Ada"}}})
            done = await client.until(created["taskId"], "completed", "failed")
            # A secret in the answer is refused there too, and never sent.
            leaked = (await client.call("q_ask", {}))["result"]
            asked = await client.until(leaked["taskId"], "input_required")
            (leak_key,) = asked["inputRequests"]
            await client.update(leaked["taskId"], {leak_key: {"action": "accept", "content": {"name": SECRET_ANSWER}}})
            refused = await client.until(leaked["taskId"], "completed", "failed")
            # Not called as a task, a 2026-07-28 client cannot be asked (a new round would run the tool again).
            plain = (await Requester(live, tasks=False).call("q_ask", {}))["result"]
            # An agent's session is never asked, task or not.
            agent = (await Requester(live, AGENT_TOKEN).call("q_ask", {}))["result"]
            if agent.get("resultType") == "task":
                agent = await Requester(live, AGENT_TOKEN).until(agent["taskId"], "completed", "failed")
                agent = agent["result"]
    assert question["method"] == "elicitation/create", question
    assert "q/ask asks (an upstream MCP server's question, not pincer's)" in question["params"]["message"]
    assert done["status"] == "completed", done
    assert json.loads(_wire_text(done["result"]).removeprefix("got ")) == {"action": "accept", "content": {"name": "Ada"}}
    assert refused["result"].get("isError") and "looks like a secret" in _wire_text(refused["result"]), refused
    assert SECRET_ANSWER not in log.read_text()
    assert plain.get("isError") and "cannot be asked mid-call" in _wire_text(plain), plain
    assert agent.get("isError") and "not a main session" in _wire_text(agent), agent


def _wire_text(result: dict) -> str:
    return " ".join(block.get("text", "") for block in result.get("content", ()))


async def test_cancelling_a_task_waiting_on_its_servers_question_withdraws_it(pincer_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "asked.log"
    async with gateway_over(pincer_home, log, lean=True) as live:
        client = Requester(live)
        with anyio.fail_after(WAIT_S * 3):
            created = (await client.call("q_ask", {}))["result"]
            (key,) = (await client.until(created["taskId"], "input_required"))["inputRequests"]
            await client.cancel(created["taskId"])
            gone = await client.until(created["taskId"], "cancelled", "completed", "failed")
            late = await client.update(created["taskId"], {key: {"action": "accept", "content": {"name": "Ada"}}})
        records = [r for r in await live.pincer.audit.records() if r.tool == "q_ask"]
    assert gone["status"] == "cancelled", gone
    assert "error" not in late, late  # answering a question that is gone changes nothing
    assert not [a for a in answers(log, "ask") if "action" in a]
    assert [r.outcome for r in records] == ["cancelled"], records
