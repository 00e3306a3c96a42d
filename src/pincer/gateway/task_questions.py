"""An upstream server's questions during a call that runs as a pincer task (2026-07-28).

A 2026-07-28 client cannot be asked in the middle of a call: its next round would run the tool
again. A client that called pincer as a task can be: the question becomes the task's own
``input_required`` state, its ``inputRequests`` the question, and the client answers with
``tasks/update``, as it answers pincer's approvals. Who may be asked and how the question and
the answer are checked is decided in the MCP runtime (``runtimes/mcp/person_questions.py``);
this box only carries a question there and its answer back.

The questions live in the process running the call (the call itself does: a call running when
its process dies is failed, never resumed), so only the gateway running it shows them; another
gateway polling the task sees it ``working``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio

__all__ = ["TaskQuestions", "QUESTION_PREFIX"]

QUESTION_PREFIX = "upstream:"


class TaskQuestions:
    """The questions of one call's upstream server, waiting for the task's client. ``on_ask``
    runs at each question (the call becomes a task then, if it is not one yet)."""

    def __init__(self, on_ask: Callable[[], None]) -> None:
        self._on_ask = on_ask
        self._asked = 0
        self.pending: dict[str, dict[str, Any]] = {}  # key -> its input request, as tasks/get shows it
        self._answers: dict[str, Any] = {}
        self._waiting: dict[str, anyio.Event] = {}

    async def ask(self, message: str, schema: Mapping[str, Any]) -> dict[str, Any]:
        """Put one question to the task's client; its answer (an ElicitResult, unchecked: the
        runtime checks it). Waits until ``answer`` brings it or the call ends."""
        self._asked += 1
        key = f"{QUESTION_PREFIX}{self._asked}"
        params = {"mode": "form", "message": message, "requestedSchema": dict(schema)}
        self.pending[key] = {"method": "elicitation/create", "params": params}
        done = self._waiting[key] = anyio.Event()
        self._on_ask()
        try:
            await done.wait()
            reply = self._answers.pop(key)
        finally:
            self.pending.pop(key, None)
            self._waiting.pop(key, None)
        return dict(reply) if isinstance(reply, Mapping) else {}

    def answer(self, responses: Mapping[str, Any]) -> bool:
        """A ``tasks/update``'s ``inputResponses``: the answers to questions still open are
        taken; whether any was."""
        took = False
        for key, reply in responses.items():
            done = self._waiting.get(key)
            if done is None or done.is_set():
                continue
            self._answers[key] = reply
            self.pending.pop(key, None)
            done.set()
            took = True
        return took
