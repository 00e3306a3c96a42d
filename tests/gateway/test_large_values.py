"""A large value's scan does not stall the gateway: other calls are answered while it runs.

The large value is a string whose text the leak scanner reads with ``str()`` (as it reads every
leaf of a JSON value that is not a plain ``str``), and that reading waits for the test to let it
go. While it waits, an echo call goes through the same gateway. When the scan runs on the event
loop, the loop waits with it: nothing is answered until the hold times out (``HOLD_S``), and the
test says so.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest

from pincer.core.offload import LARGE_CHARS
from pincer.core.values import CallRequest, HostContext, ToolOutput
from tests.gateway.conformance.fixtures.runtime import FixtureRuntime, fixture
from tests.gateway.conftest import LIVE_HTTP_TIMEOUT_S, LiveGateway, live_gateway, make_test_runtime

pytestmark = pytest.mark.anyio

# How long the held scan waits to be let go: longer than an echo call takes on a loaded machine,
# so only a stalled loop reaches it.
HOLD_S = 90.0
SECRET = "sk-live-held-0123456789abcdef"


class Hold:
    """The gate one held text waits at, and what happened there."""

    def __init__(self) -> None:
        self.reading = threading.Event()
        self.release = threading.Event()
        self.released_in_time: bool | None = None

    def text(self, body: str) -> str:
        hold = self

        class HeldText(str):
            def __str__(self) -> str:
                hold.reading.set()
                if hold.released_in_time is None:
                    hold.released_in_time = hold.release.wait(HOLD_S)
                return str.__str__(self)

        return HeldText(body)


def _big_body() -> str:
    # Over the threshold, with a secret inside that must still be redacted.
    return "line of tool output\n" * (LARGE_CHARS // 10) + SECRET


async def _wait_reading(hold: Hold) -> None:
    reading = await anyio.to_thread.run_sync(hold.reading.wait, HOLD_S)
    assert reading, f"the scan of the large value did not begin within {HOLD_S} s"


async def _echo_while_held(live: LiveGateway, hold: Hold) -> dict[str, Any]:
    """An echo over REST while the large scan is held; then the hold is let go."""
    try:
        async with live.http(headers=live.headers) as http:
            with anyio.fail_after(LIVE_HTTP_TIMEOUT_S):
                response = await http.post("/api/v1/tools/say/call", json={"args": {"text": "still here"}})
        echo: dict[str, Any] = response.json()
        return echo
    finally:
        hold.release.set()


def _held_runtime(hold: Hold) -> FixtureRuntime:
    @fixture("big_output", "Returns a large output whose scan is held")
    async def big_output(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        return ToolOutput(value={"text": hold.text(_big_body())})

    runtime = make_test_runtime()
    runtime.add(big_output)
    return runtime


async def test_an_echo_is_answered_while_a_large_output_is_scanned(pincer_home: Path) -> None:
    hold = Hold()
    async with live_gateway(pincer_home, extra_runtime=False) as live:
        await live.pincer.add_runtime(_held_runtime(hold))
        big: list[dict[str, Any]] = []
        async with anyio.create_task_group() as tg:

            async def call_big() -> None:
                async with live.http(headers=live.headers) as http:
                    big.append((await http.post("/api/v1/tools/big_output/call", json={"args": {}})).json())

            tg.start_soon(call_big)
            await _wait_reading(hold)
            echo = await _echo_while_held(live, hold)
    assert hold.released_in_time, (
        f"the leak scan of the large output held the event loop: the echo call was not answered "
        f"while the scan waited, which gave up after {HOLD_S} s"
    )
    assert echo["ok"] and echo["output"] == "still here"
    (result,) = big
    assert result["ok"], result
    assert SECRET not in str(result) and "[REDACTED:" in result["output"]["text"]


async def test_an_echo_is_answered_while_large_arguments_are_scanned(pincer_home: Path) -> None:
    """Arguments a caller in the process hands the chain (the agent loop, a trigger): the scan
    for the audit record and the approval runs off the loop too."""
    hold = Hold()
    async with live_gateway(pincer_home) as live:
        results: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def call_big() -> None:
                request = CallRequest(tool="say", args={"text": hold.text(_big_body())}, session="main", caller="test")
                results.append(await live.pincer.dispatcher.call(request))

            tg.start_soon(call_big)
            await _wait_reading(hold)
            echo = await _echo_while_held(live, hold)
        records = await live.pincer.audit.records(tool="say", limit=10)
    assert hold.released_in_time, (
        f"the leak scan of the large arguments held the event loop: the echo call was not answered "
        f"while the scan waited, which gave up after {HOLD_S} s"
    )
    assert echo["ok"] and echo["output"] == "still here"
    (result,) = results
    # Validation (after the scan) takes only plain JSON, which the held text is not: refused.
    assert not result.ok and result.error["code"] == "invalid_arguments", result.error
    recorded = next(r for r in records if r.tool == "say" and r.caller == "test")
    assert SECRET not in str(recorded.args) and "[REDACTED:" in recorded.args["text"]


class Witness(str):
    """Text that notes which thread the leak scanner read it on."""

    threads: ClassVar[list[int]]

    def __str__(self) -> str:
        type(self).threads.append(threading.get_ident())
        return str.__str__(self)


@pytest.mark.parametrize("size", [100, LARGE_CHARS - 200, LARGE_CHARS + 1, 4 * LARGE_CHARS])
async def test_small_outputs_are_scanned_inline_and_large_ones_off_the_loop(pincer_home: Path, size: int) -> None:
    class Seen(Witness):
        threads: ClassVar[list[int]] = []

    body = "x" * (size - len(SECRET) - 1) + " " + SECRET

    @fixture("sized_output", "Returns an output of a given size with a secret in it")
    async def sized_output(args: Mapping[str, Any], host: HostContext) -> ToolOutput:
        return ToolOutput(value={"text": Seen(body)})

    runtime = make_test_runtime()
    runtime.add(sized_output)
    async with live_gateway(pincer_home, extra_runtime=False) as live:
        await live.pincer.add_runtime(runtime)
        result = await live.pincer.dispatcher.call(CallRequest(tool="sized_output", args={}, caller="test"))
    # The same redaction either way, and the same as the scanner's own answer.
    expected, count = live.pincer.scanner().scan({"text": body})
    assert result.ok and result.output == expected and result.usage.redactions == count == 1
    assert Seen.threads, "the scanner never read the output"
    on_loop = Seen.threads[0] == threading.get_ident()
    assert on_loop is (size <= LARGE_CHARS - 200), f"an output of {size} characters was scanned {'on' if on_loop else 'off'} the loop"
