"""An upstream MCP server's questions to the person behind one pincer call: one rule, one check.

A server asks in three ways, and all three come here: a plain ``elicitation/create`` request
sent during a ``tools/call`` (the handshake era), an ``InputRequiredResult`` of a ``tools/call``
(2026-07-28; the SDK's driver asks, then calls again), and the ``inputRequests`` of an upstream
task (``upstream_tasks.py``). :func:`asker_for` decides who may be asked; :class:`CallQuestions`
puts every question of one call to them under the same bounds and checks.

Who: the same rule as pincer's own elicitations. Only a person's or a main session's client is
asked (an agent must not answer for the person it works for), and only a client that can be
asked in the middle of the call (MCP 2025-11-25 with ``elicitation``; a 2026-07-28 call cannot
be, as its next round would run the tool again, unless it is a task: the gateway then puts the
question in the task's ``inputRequests``, ``gateway/task_questions.py``). The question, its
message and its form, is named as the server's and leak-scanned on its way to the client as any
output is; the answer is validated as an
``ElicitResult`` and leak-scanned on its way to the untrusted server too, and an answer holding a
secret is refused, never sent redacted. A question nobody may answer, or one past a bound, fails
the pincer call saying why (the server gets an error answer, never a made-up "decline").

Bounds, per call: ``MAX_QUESTIONS`` in all, ``MAX_QUESTIONS_AT_ONCE`` waiting for the person at
once, ``MAX_QUESTION_CHARS`` a message and ``MAX_SCHEMA_CHARS`` its form as JSON, and the call's
deadline (a question still open when the call ends is withdrawn).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import Context, ContextVar, copy_context
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from pydantic import ValidationError

from pincer.core.display import honest_text
from pincer.core.errors import ToolError
from pincer.core.offload import off_loop
from pincer.core.values import HostContext
from pincer.safety.scanner import LeakScanner

__all__ = [
    "PersonAsker", "CallQuestions", "asker_for", "asking", "current_call", "detached_context", "answer_request",
    "MAX_QUESTIONS", "MAX_QUESTIONS_AT_ONCE", "MAX_QUESTION_CHARS", "MAX_SCHEMA_CHARS",
]  # fmt: skip

MAX_QUESTIONS = 32  # questions put to a person over one call
MAX_QUESTIONS_AT_ONCE = 8  # waiting for the person at the same time (or in one task's round)
MAX_QUESTION_CHARS = 4_000  # a question's message
MAX_SCHEMA_CHARS = 4 * MAX_QUESTION_CHARS  # its requestedSchema, as JSON
HOSTILE_HINT = "the server is broken or hostile; check it with `pincer mcp test`"

# Puts one question (message, requestedSchema) to the person; their ElicitResult as a dict.
Ask = Callable[[str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True, kw_only=True, slots=True)
class PersonAsker:
    """Who answers the server's questions during one pincer call: ``ask`` puts a question to the
    calling person; without it, ``why_not`` says why nobody may be asked. ``who``: the caller
    (session, person), so questions on a shared connection are put to the right caller only."""

    ask: Ask | None = None
    why_not: str = "no person can be asked on this call"
    who: tuple[str, str | None] | None = None


def asker_for(host: HostContext, scanner: LeakScanner) -> PersonAsker:
    """The asker for the call ``host`` describes; ``scanner``: the leak scanner of the chain."""
    client: Any = host.client  # the gateway's MCP channel, when an MCP client made the call
    who = (host.session, host.person)
    if client is None:
        return PersonAsker(why_not="no person can be asked on this call (no MCP client made it)", who=who)
    if not host.speaks_for_person:
        return PersonAsker(
            why_not=f"session {host.session!r} is not a main session, and an agent does not answer for a person",
            who=who,
        )
    mid_call = bool(getattr(client, "can_ask", False))
    # A 2026-07-28 client that called pincer as a task is asked through the task instead.
    through_task = None if mid_call else getattr(client, "task_asker", None)
    if not mid_call and through_task is None:
        return PersonAsker(
            why_not="the calling client cannot be asked mid-call (an MCP 2025-11-25 client with elicitation can, "
            "and a 2026-07-28 client that calls as a task)",
            who=who,
        )
    injected = tuple(host.secrets.injected) if host.secrets is not None else ()
    scan = scanner.with_values(injected) if injected else scanner

    async def ask(message: str, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        shown, _ = await off_loop(scan.scan, message, over=message)
        # its titles, descriptions and defaults are the server's words too
        form, _ = await off_loop(scan.scan, dict(schema), over=schema)
        form = dict(form) if isinstance(form, Mapping) else {}
        if through_task is not None:
            reply = await through_task(str(shown), form)
        else:
            reply = await client.elicit(str(shown), form, key="upstream-question")
        _, found = await off_loop(scan.scan, reply, over=reply)
        if found:
            raise ToolError(
                f"the answer to {host.tool}'s upstream question looks like a secret ({found} finding(s)); "
                "it is not sent to the server",
                hint="store it with `pincer secrets set` and give it to the server with `pincer mcp add --env`",
            )
        return dict(reply) if isinstance(reply, Mapping) else {}

    return PersonAsker(ask=ask, who=who)


class CallQuestions:
    """The questions of one pincer call's upstream server, in whichever way it asks. ``what``
    names the call to the person ("server/tool"). Mutable by design: it counts and holds the
    call's cancel scope so a question refused in another task ends the call."""

    def __init__(self, asker: PersonAsker, what: str) -> None:
        self.asker = asker
        self.what = what
        self.asked = 0  # questions put to the person so far (MAX_QUESTIONS)
        self.open = 0  # questions waiting for the person now (MAX_QUESTIONS_AT_ONCE)
        self.failure: ToolError | None = None  # why the call was ended by a question
        self.scope: anyio.CancelScope | None = None  # the call's, set while it runs
        self._asking: set[anyio.CancelScope] = set()
        self._ended = False

    async def answer(self, params: types.ElicitRequestParams, *, what: str | None = None) -> dict[str, Any]:
        """Put one question to the person, bounded and shown honestly; their ElicitResult as a
        dict. Raises ToolError when nobody may answer, a bound is passed, or the answer is bad.
        ``what``: a longer name for the asker (an upstream task's)."""
        what = what or self.what
        if self.asker.ask is None:
            raise ToolError(f"{what} asked a question only a person may answer: {self.asker.why_not}")
        if not isinstance(params, types.ElicitRequestFormParams):
            raise ToolError(
                f"{what} asked the person to open a URL; pincer only passes on form questions",
                hint="the server is broken or needs another client; check it with `pincer mcp test`",
            )
        self.asked += 1
        if self.asked > MAX_QUESTIONS:
            raise ToolError(f"{what} asked more than {MAX_QUESTIONS} questions; the call is ended", hint=HOSTILE_HINT)
        schema = params.requested_schema
        if len(params.message) > MAX_QUESTION_CHARS or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            raise ToolError(
                f"{what}: its question is too long for a person ({len(params.message)} characters; "
                f"at most {MAX_QUESTION_CHARS}, its form at most {MAX_SCHEMA_CHARS} as JSON)",
                hint=HOSTILE_HINT,
            )
        if self._ended:
            raise ToolError(f"{what} asked after its call ended; nobody is asked")
        self.open += 1
        try:
            if self.open > MAX_QUESTIONS_AT_ONCE:
                raise ToolError(
                    f"{what} asked {self.open} questions at once; pincer puts at most {MAX_QUESTIONS_AT_ONCE} to a person",
                    hint=HOSTILE_HINT,
                )
            # Who asks comes first, in pincer's words: the question itself is the server's, untrusted.
            message = f"{what} asks (an upstream MCP server's question, not pincer's): {honest_text(params.message)}"
            reply = await self._ask(message, schema, what)
        finally:
            self.open -= 1
        try:
            answer = types.ElicitResult.model_validate(reply, by_name=False)
        except ValidationError as exc:
            raise ToolError(f"{what}: the answer is not a valid ElicitResult: {exc.error_count()} problem(s)") from None
        return answer.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def _ask(self, message: str, schema: Mapping[str, Any], what: str) -> Mapping[str, Any]:
        assert self.asker.ask is not None
        reply: Mapping[str, Any] | None = None
        with anyio.CancelScope() as scope:  # withdrawn when the call ends (end())
            self._asking.add(scope)
            try:
                reply = await self.asker.ask(message, schema)
            except ToolError:
                raise
            except Exception as exc:  # noqa: BLE001  # the client refused, went away or timed out
                raise ToolError(
                    f"{what}: the question could not be put to the person ({type(exc).__name__})",
                    hint="the calling client did not answer the elicitation; call again",
                ) from None
            finally:
                self._asking.discard(scope)
        if reply is None:
            raise ToolError(f"{what}: the call ended before the person answered")
        return reply

    def fail(self, error: ToolError) -> None:
        """End the call with ``error`` (the first one counts), from whichever task found it."""
        if self.failure is None:
            self.failure = error
        if self.scope is not None:
            self.scope.cancel()

    def end(self) -> None:
        """The call is over: questions still waiting for the person are withdrawn."""
        self._ended = True
        for scope in list(self._asking):
            scope.cancel()


_CALL: ContextVar[CallQuestions | None] = ContextVar("pincer_upstream_questions", default=None)


def current_call() -> CallQuestions | None:
    """The call whose task this code runs in (None: a task of the connection's own)."""
    return _CALL.get()


def detached_context() -> Context:
    """A copy of the current context belonging to no call (for a task that outlives the call)."""
    context = copy_context()
    context.run(_CALL.set, None)
    return context


@contextmanager
def asking(call: CallQuestions | None) -> Iterator[None]:
    """Within the block (one call), questions asked in this task are ``call``'s."""
    token = _CALL.set(call)
    try:
        yield
    finally:
        _CALL.reset(token)


async def answer_request(
    call: CallQuestions | None, params: types.ElicitRequestParams, *, unattributed: str = ""
) -> types.ElicitResult | types.ErrorData:
    """An ``elicitation/create`` of the server, answered (the SDK client's elicitation callback):
    the person's ElicitResult, or an error saying why nobody was asked, which also fails ``call``.
    ``call`` None: no call it belongs to (``unattributed`` says why), nobody is asked."""
    if call is None:
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"pincer asks nobody: {unattributed}")
    try:
        return types.ElicitResult.model_validate(await call.answer(params), by_name=False)
    except ToolError as exc:
        call.fail(exc)
        return types.ErrorData(code=types.INVALID_REQUEST, message=exc.message)
