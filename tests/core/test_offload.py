"""off_loop: small values inline, large ones in a bounded worker thread; cancelling leaves safely."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pincer.core.offload import LARGE_CHARS, LARGE_THREADS, is_large, off_loop, off_loop_limiter
from pincer.safety.scanner import LeakScanner

pytestmark = pytest.mark.anyio

WAIT_S = 60.0  # a bounded wait for a thread on a loaded machine; never reached when things work
SECRET = "sk-live-0123456789abcdefXYZ"


def _where(value: Any) -> tuple[Any, int]:
    return value, threading.get_ident()


async def _poll(condition: Any, what: str) -> None:
    with anyio.fail_after(WAIT_S):
        while not condition():
            await anyio.sleep(0.01)
    assert condition(), what


@pytest.mark.parametrize(
    ("value", "large"),
    [
        ("x" * LARGE_CHARS, False),
        ("x" * (LARGE_CHARS + 1), True),
        ({"a": "x" * (LARGE_CHARS // 2), "b": ["y" * (LARGE_CHARS // 2)]}, True),
        ({"a": "x" * 100, "b": [1, 2, 3]}, False),
        (list(range(LARGE_CHARS + 5)), True),  # many small items count too
        (b"z" * (LARGE_CHARS + 1), True),
        (42, False),
    ],
)
def test_what_counts_as_large(value: Any, large: bool) -> None:
    assert is_large(value) is large


def test_a_cyclic_or_deep_value_is_measured_without_recursion() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    assert is_large(cyclic) and is_large(deep)


async def test_small_values_run_inline_and_large_ones_in_a_worker_thread() -> None:
    here = threading.get_ident()
    _, small = await off_loop(_where, "x", over="x")
    big = "x" * (LARGE_CHARS + 1)
    _, large = await off_loop(_where, big, over=big)
    assert small == here, "a small value must not pay for a thread hop"
    assert large != here, "a large value must be worked on off the event loop"


async def test_exceptions_pass_through_and_the_token_returns() -> None:
    def fail(_: str) -> None:
        raise ValueError("bad value")

    big = "x" * (LARGE_CHARS + 1)
    with pytest.raises(ValueError, match="bad value"):
        await off_loop(fail, big, over=big)
    assert off_loop_limiter().borrowed_tokens == 0


async def test_a_cancelled_caller_leaves_at_once_and_its_job_keeps_its_place_until_it_ends() -> None:
    release = threading.Event()
    running = threading.Event()
    finished = threading.Event()

    def held(_: str) -> str:
        running.set()
        assert release.wait(WAIT_S), "the test never released the job"
        finished.set()
        return "dropped"

    big = "x" * (LARGE_CHARS + 1)
    limiter = off_loop_limiter()
    outcome: list[str] = []
    async with anyio.create_task_group() as tg:

        async def caller() -> None:
            try:
                outcome.append(await off_loop(held, big, over=big))
            except anyio.get_cancelled_exc_class():
                outcome.append("cancelled")
                raise

        tg.start_soon(caller)
        await _poll(running.is_set, "the job to start in its thread")
        tg.cancel_scope.cancel()
    # The caller is gone while the job still runs: it holds its token, so abandoned jobs never
    # run more threads than the limit.
    assert outcome == ["cancelled"]
    assert not finished.is_set()
    assert limiter.borrowed_tokens == 1
    release.set()
    await _poll(lambda: limiter.borrowed_tokens == 0, "the finished job to give its token back")


async def test_no_more_than_the_limit_of_jobs_run_at_once() -> None:
    release = threading.Event()
    started: list[int] = []
    lock = threading.Lock()

    def held(_: str) -> None:
        with lock:
            started.append(1)
        assert release.wait(WAIT_S), "the test never released the jobs"

    big = "x" * (LARGE_CHARS + 1)
    limiter = off_loop_limiter()
    async with anyio.create_task_group() as tg:
        for _ in range(LARGE_THREADS + 3):
            tg.start_soon(lambda: off_loop(held, big, over=big))
        await _poll(lambda: len(started) == LARGE_THREADS, "the first jobs to start")
        await _poll(lambda: limiter.statistics().tasks_waiting == 3, "the rest to queue for the limit")
        assert len(started) == LARGE_THREADS
        release.set()
    assert len(started) == LARGE_THREADS + 3


async def test_a_cancelled_job_that_never_started_gives_its_token_back() -> None:
    release = threading.Event()

    def held(_: str) -> None:
        assert release.wait(WAIT_S), "the test never released the jobs"

    big = "x" * (LARGE_CHARS + 1)
    limiter = off_loop_limiter()
    async with anyio.create_task_group() as outer:
        for _ in range(LARGE_THREADS):
            outer.start_soon(lambda: off_loop(held, big, over=big))
        await _poll(lambda: limiter.borrowed_tokens == LARGE_THREADS, "the limit to fill")
        with anyio.CancelScope() as waiting:
            waiting.cancel()
            await off_loop(held, big, over=big)  # cancelled while it queues for a token
        assert limiter.borrowed_tokens == LARGE_THREADS
        release.set()
    assert limiter.borrowed_tokens == 0


# Values around the threshold, with and without a secret in them, in a string or in a JSON value.
_TEXT = st.text(alphabet=st.sampled_from("ab -_\n{}"), min_size=0, max_size=200)
_AROUND = st.integers(min_value=LARGE_CHARS - 64, max_value=LARGE_CHARS + 64)


@settings(max_examples=40, deadline=None)
@given(size=_AROUND, head=_TEXT, secret=st.booleans(), wrapped=st.booleans())
def test_results_and_redactions_are_the_same_inline_or_in_a_thread(
    size: int, head: str, secret: bool, wrapped: bool
) -> None:
    scanner = LeakScanner([SECRET])
    text = (head + (SECRET if secret else "") + "z" * size)[:size] if size > len(head) + len(SECRET) else head
    value: Any = {"out": [text, {"k": head}]} if wrapped else text

    async def both() -> tuple[Any, Any, bool]:
        where: list[int] = []

        def scan(v: Any) -> tuple[Any, int]:
            where.append(threading.get_ident())
            return scanner.scan(v)

        through = await off_loop(scan, value, over=value)
        return through, scanner.scan(value), where[0] != threading.get_ident()

    through, direct, hopped = anyio.run(both)
    assert through == direct
    assert hopped is is_large(value)
    if secret and SECRET in str(value):
        assert SECRET not in str(through[0]) and through[1] >= 1


async def test_a_shielded_job_answers_a_cancelled_caller_and_an_unshielded_one_does_not() -> None:
    big = "x" * (LARGE_CHARS + 1)
    answers: list[Any] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        answers.append(await off_loop(len, big, over=big, shield=True))  # what must be recorded
        answers.append(await off_loop(len, big, over=big))
    assert scope.cancelled_caught
    assert answers == [LARGE_CHARS + 1]
    assert off_loop_limiter().borrowed_tokens == 0
