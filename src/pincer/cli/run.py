"""``pincer run`` and ``pincer chat``: the agent loop at the terminal.

The model's text streams to stdout; each tool call is one line on stderr, an approval a question
on stderr answered on stdin (y once, a always, n no; end of input leaves it to ``pincer
approvals``), and the end a summary line with tokens and cost. Ctrl-C cancels the current turn
(in ``chat``, the program goes on), and so does ``pincer runs cancel ID`` from another shell: a
prompt of that turn ends with it and its approval expires. The prompt lives here, never in the
call chain.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import typer

from pincer.cli.acts import cli_actor
from pincer.cli.common import EXIT_FAILURE, EXIT_OK, JsonOption, emit_json, fail, open_pincer, run, stderr
from pincer.core.errors import PincerError, UsageError

if TYPE_CHECKING:
    from pincer.service import Pincer

__all__ = ["run_command", "chat", "Display", "Prompter", "parse_budgets"]

# What a person is shown of a call's arguments in a tool line and in an approval question.
TOOL_LINE_ARGS_MAX_CHARS = 120
APPROVAL_ARGS_MAX_CHARS = 1_000
_ANSWERS = {
    "y": "allow_once", "yes": "allow_once", "once": "allow_once", "o": "allow_once",
    "a": "allow_always", "always": "allow_always",
    "n": "deny", "no": "deny", "deny": "deny", "d": "deny",
}  # fmt: skip


def parse_budgets(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    budgets: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageError(f"--budget {pair!r} is not NAME=VALUE", hint="e.g. --budget turns=5 --budget cost_usd=0.10")
        budgets[name.strip()] = value.strip()
    return budgets


STDIN_READ_BYTES = 4096
# How often an open prompt looks whether its approval was answered elsewhere or ran out of time.
PROMPT_SETTLED_POLL_S = 0.25
_SETTLED = object()  # what a prompt's read gives when its approval no longer waits for it
_unread = bytearray()  # what was read from stdin past the last line handed out


async def read_line() -> str | None:
    """The next line of stdin (None at the end of input), read on the event loop: a prompt
    cancelled with its run stops reading at once. (A worker thread blocked in ``readline`` would
    keep the process alive until the next Enter, and take that line from whoever reads next.)"""
    fd = sys.stdin.fileno()
    while b"\n" not in _unread:
        try:
            await anyio.wait_readable(fd)
        except OSError:
            pass  # a regular file (stdin < file) cannot be polled, and never blocks
        chunk = os.read(fd, STDIN_READ_BYTES)
        if not chunk:  # the end of input
            if not _unread:
                return None
            break
        _unread.extend(chunk)
    end = _unread.find(b"\n")
    end = len(_unread) if end < 0 else end + 1
    line = bytes(_unread[:end])
    del _unread[:end]
    return line.decode(sys.stdin.encoding or "utf-8", errors="replace")


class Display:
    """Run events at the terminal: text to stdout (unless ``quiet``), one line per tool call."""

    def __init__(self, *, quiet: bool = False) -> None:
        self.quiet = quiet
        self._mid_text = False
        self._args: dict[str, Any] = {}

    def _line(self, text: str) -> None:
        if self._mid_text:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._mid_text = False
        stderr.print(text, markup=False, highlight=False)

    def on_event(self, event: Any) -> None:
        from pincer.core.display import honest_json

        kind, data = event.kind, event.data
        if kind == "text":
            if not self.quiet:
                sys.stdout.write(data["text"])
                sys.stdout.flush()
                self._mid_text = not data["text"].endswith("\n")
        elif kind == "tool_call":
            self._args[data["call_id"]] = data["args"]
        elif kind == "tool_result":
            args = honest_json(self._args.pop(data["call_id"], {}), TOOL_LINE_ARGS_MAX_CHARS)
            if data["ok"]:
                outcome = "ok" + (" (cached)" if data.get("cached") else "")
            else:
                outcome = f"{data.get('error_code')}: {data.get('error') or ''}".strip()
            audit = f" [audit {data['audit_id']}]" if data.get("audit_id") else ""
            self._line(f"  > {data['tool']} {args} -> {outcome}{audit}")
        elif kind == "retrying":
            self._line(f"  (the model server failed: {data['reason']}; asking again in {data['after_s']:.1f} s)")
        elif kind == "tainted":
            verb = "are now refused" if data.get("mode") == "deny" else "now ask"
            asks = ", ".join(data.get("asks") or ()) or "a sensitive effect"
            source = data.get("what") if str(data.get("what", "")).startswith("the parameters") else None
            read = f"untrusted {source[4:]}" if source else f"untrusted output read from {data['tool']}"
            self._line(f"  ({read}: calls with {asks} {verb})")

    def finish_text(self) -> None:
        if self._mid_text:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self._mid_text = False


class Prompter:
    """Approval questions on the terminal, one at a time (parallel calls may ask together)."""

    def __init__(self, pincer: Pincer, display: Display) -> None:
        self.pincer = pincer
        self.display = display
        self._lock = anyio.Lock()
        self._stdin_closed = False

    async def ask(self, approval: Any) -> None:
        from pincer.core.display import honest_detail, honest_json, honest_text

        async with self._lock:
            see_all = f"`pincer approvals show {approval.id}`"
            lines = [
                f"approval {approval.id}: {approval.tool} (session {approval.session}) wants to run",
                f"  effects: {', '.join(approval.effects) or 'none'}",
                f"  hosts:   {', '.join(approval.hosts) or '-'}",
                f"  args:    {honest_json(approval.args, APPROVAL_ARGS_MAX_CHARS, see_all=see_all)}",
                f"  why:     {honest_text(approval.reason)}",
                *(f"  {line}" for line in honest_detail(approval.detail, APPROVAL_ARGS_MAX_CHARS, see_all=see_all)),
            ]
            self.display._line("\n".join(lines))
            for _ in range(3):
                if self._stdin_closed:
                    break
                stderr.print("allow? [y]es once / [a]lways / [n]o: ", end="", markup=False)
                line = await self._read_answer(approval)
                if line is _SETTLED:
                    return
                if not isinstance(line, str):
                    self._stdin_closed = True
                    break
                answer = _ANSWERS.get(line.strip().lower())
                if answer is not None:
                    try:
                        await self.pincer.dispatcher.answer(approval.id, answer, by=str(cli_actor()))
                    except PincerError as exc:
                        self.display._line(f"  {exc.message}")
                    return
            self.display._line(
                f"  no answer here: answer with `pincer approvals approve {approval.id}` (or `deny {approval.id}`)"
            )

    async def _read_answer(self, approval: Any) -> object:
        """A line of stdin (None at its end), or _SETTLED once the approval no longer waits for
        this prompt: answered elsewhere (``pincer approvals``, REST), or out of time (then it is
        expired here, as the chain's wait would have)."""
        from pincer.store.approvals import ApprovalStatus

        got: list[object] = []
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                got.append(await read_line())
                tg.cancel_scope.cancel()

            async def settled() -> None:
                while True:
                    current = await self.pincer.approvals.get(approval.id)
                    if current.status is ApprovalStatus.PENDING and current.expires_at <= time.time():
                        await self.pincer.approvals.expire(approval.id)
                        current = await self.pincer.approvals.get(approval.id)
                    if current.status is not ApprovalStatus.PENDING:
                        got.append(_SETTLED)
                        self.display._line(f"\n  approval {approval.id}: {current.status.value} (answered by {current.answered_by})"
                                           if current.answered_by else f"\n  approval {approval.id}: {current.status.value}")  # fmt: skip
                        tg.cancel_scope.cancel()
                        return
                    await anyio.sleep(PROMPT_SETTLED_POLL_S)

            tg.start_soon(read)
            tg.start_soon(settled)
        return got[0]


def summary(run_result: Any) -> str:
    data = run_result.to_dict()
    usage = data["usage"]
    status = data["status"] + (f" ({data['stop']})" if data["stop"] and data["status"] != "done" else "")
    cost = f"${data['cost_usd']:.4f}" if data["cost_usd"] is not None else f"cost unknown (no price for {data['model']})"
    line = (
        f"run {data['id']}: {status}; {usage['turns']} turns, {usage['tool_calls']} tool calls, "
        f"{usage['input_tokens']:,} input / {usage['output_tokens']:,} output tokens"
        + (f" ({usage['cached_input_tokens']:,} cached)" if usage["cached_input_tokens"] else "")
        + f", {cost}"
    )
    if data["error"]:
        line += f"\n{data['error'].get('code')}: {data['error'].get('message')}"
        if data["error"].get("hint"):
            line += f"\nhint: {data['error']['hint']}"
    return line


async def until_done(work: Callable[[], Awaitable[Any]], on_interrupt: Callable[[], None]) -> Any:
    """``work()``'s result; each Ctrl-C meanwhile calls ``on_interrupt`` (a run's cancel) instead
    of ending the program."""

    async def watch() -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                on_interrupt()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            return await work()
        finally:
            tg.cancel_scope.cancel()


async def drive(agent_run: Any, message: str, on_cancel: Callable[[], None] | None = None) -> Any:
    """One exchange of ``agent_run``; Ctrl-C cancels it (not the program)."""

    def interrupted() -> None:
        agent_run.cancel()
        if on_cancel is not None:
            on_cancel()

    return await until_done(lambda: agent_run.send(message), interrupted)


def run_command(
    skill: str | None = typer.Argument(
        None, help="The skill to run (`pincer skills list`); leave it out to run a plain prompt given with --message."
    ),
    param: list[str] = typer.Option(None, "--param", "-p", help="KEY=VALUE for a declared parameter (repeatable)."),
    message: str | None = typer.Option(
        None, "--message", "-m",
        help="What to do, in your words; without a skill, the prompt itself (with one, default: carry it out).",
    ),
    profile: str | None = typer.Option(None, "--profile", help="A [llm.profiles.NAME] of config.toml."),
    session: str | None = typer.Option(None, "--session", help="The session the run's calls go through (default: [agent] session)."),
    budget: list[str] = typer.Option(None, "--budget", help="NAME=VALUE: turns, tool_calls, input_tokens, output_tokens, cost_usd, deadline_s."),
    as_json: bool = JsonOption,
) -> None:
    """Run a skill, or a prompt (--message), with the agent loop: the model's text streams to stdout, each tool call is one line on stderr.

    Without a skill, --message is the prompt itself (as one turn of `pincer chat`)."""
    from pincer.llm.prompt import DEFAULT_MESSAGE
    from pincer.llm.run import RunRequest
    from pincer.skills.params import parse_param_pairs

    if skill is None and not (message or "").strip():
        fail(UsageError(
            "nothing to run: name a skill, or give the prompt with --message",
            hint="`pincer run --message 'what to do'` runs a plain prompt; `pincer run SKILL` runs a skill "
            "(`pincer skills list` lists them)",
        ), as_json=as_json)  # fmt: skip
    if skill is None and param:
        fail(UsageError("--param sets a skill's parameters, and no skill is named", hint="`pincer run SKILL --param KEY=VALUE`"),
             as_json=as_json)  # fmt: skip

    async def body() -> Any:
        request = RunRequest(
            skill=skill, params=parse_param_pairs(param or []), message=message, session=session, trigger="cli",
            profile=profile, budgets=parse_budgets(budget),
        )  # fmt: skip
        async with open_pincer(quiet=as_json) as pincer:
            display = Display(quiet=as_json)
            prompter = Prompter(pincer, display)
            agent_run = await pincer.agent.open_run(request, on_event=display.on_event, on_approval=prompter.ask)
            try:
                outcome = await drive(agent_run, message or DEFAULT_MESSAGE, lambda: display._line("  (cancelling the run)"))
            finally:
                display.finish_text()
            return await agent_run.close(outcome)

    result = run(body, as_json=as_json)
    if as_json:
        emit_json(result.to_dict())
    else:
        stderr.print(summary(result), markup=False, highlight=False)
    raise typer.Exit(EXIT_OK if result.status == "done" else EXIT_FAILURE)


def _chat_help(library: Any) -> str:
    """The chat's help line, its command example taken from the commands this home answers
    (a shadowed code-review takes /review away)."""
    from pincer.triggers.commands import command_table

    table = command_table(library.user_invocable()) if library is not None else {}
    if not table:
        commands = "/NAME args runs a skill's command (no skill here declares one)"
    else:
        name = "/review" if "/review" in table else min(table)
        params = [p for p in table[name].parameters if p.required] or list(table[name].parameters)
        example = f"{name} {params[0].name}=..." if params else name
        commands = f"/NAME args runs a skill's command ({example})"
    return f"/skills lists skills, /tools the tools, {commands}, /exit leaves"


def chat(
    skill: str | None = typer.Option(None, "--skill", help="Carry out this skill in the conversation."),
    param: list[str] = typer.Option(None, "--param", "-p", help="KEY=VALUE for the skill's parameters (repeatable)."),
    profile: str | None = typer.Option(None, "--profile", help="A [llm.profiles.NAME] of config.toml."),
    session: str | None = typer.Option(None, "--session", help="The session the calls go through (default: [agent] session)."),
) -> None:
    """Talk with the agent loop: each line is a message; /NAME runs a skill's command; /skills, /tools, /exit."""
    from pincer.llm.loop import Outcome
    from pincer.llm.run import RunRequest
    from pincer.skills.params import parse_param_pairs

    async def body() -> Any:
        async with open_pincer() as pincer:
            display = Display()
            prompter = Prompter(pincer, display)
            request = RunRequest(
                skill=skill, params=parse_param_pairs(param or []), session=session, trigger="chat", profile=profile
            )
            agent_run = await pincer.agent.open_run(request, on_event=display.on_event, on_approval=prompter.ask)
            stderr.print(
                f"chat {agent_run.id} with {agent_run.settings.model} ({_chat_help(pincer.skills)}; Ctrl-C stops a turn)",
                markup=False,
            )
            try:
                await _repl(pincer, agent_run, display, prompter, session=session, profile=profile)
            finally:
                with anyio.CancelScope(shield=True):
                    ended = await agent_run.close(Outcome(status="done"))
            return ended

    ended = run(body)
    stderr.print(summary(ended), markup=False, highlight=False)
    raise typer.Exit(EXIT_OK)


async def _repl(pincer: Pincer, agent_run: Any, display: Display, prompter: Prompter, *, session: str | None, profile: str | None) -> None:
    async def on_idle_interrupt() -> None:
        # At the prompt, Ctrl-C does not end the program: /exit or Ctrl-D does.
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                stderr.print("\n(type /exit or press Ctrl-D to leave)", markup=False)

    while True:
        async with anyio.create_task_group() as tg:
            tg.start_soon(on_idle_interrupt)
            stderr.print("you> ", end="", markup=False)
            line = await read_line()
            tg.cancel_scope.cancel()
        if line is None:
            stderr.print("", markup=False)
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return
        if text == "/help":
            stderr.print(_chat_help(pincer.skills), markup=False)
            continue
        if text == "/skills":
            _print_skills(pincer)
            continue
        if text == "/tools":
            names = sorted(agent_run.offered)
            shown = "lazy: the model finds and loads them" if agent_run.is_lazy else "all sent to the model"
            stderr.print(f"{len(names)} tools ({shown}): {', '.join(names)}", markup=False)
            continue
        if text.startswith("/"):
            await _command(pincer, text, display, prompter, session=session, profile=profile)
            continue
        outcome = await drive(agent_run, text, lambda: display._line("  (stopping this turn)"))
        display.finish_text()
        if outcome.status != "done":
            stop = f" ({outcome.stop})" if outcome.stop else ""
            detail = f": {outcome.error.get('message')}" if outcome.error else ""
            stderr.print(f"  [{outcome.status}{stop}{detail}]", markup=False)


def _print_skills(pincer: Pincer) -> None:
    library = pincer.skills
    if library is None:
        stderr.print("skills are turned off ([skills] enabled = false)", markup=False)
        return
    for s in library.user_invocable():
        commands = " ".join(t.value for t in s.triggers if t.kind == "command")
        stderr.print(f"{s.name}{(' ' + commands) if commands else ''}: {s.description}", markup=False)


async def _command(pincer: Pincer, text: str, display: Display, prompter: Prompter, *, session: str | None, profile: str | None) -> None:
    """``/NAME args``: fired as the skill's command trigger (recorded and audited as any
    firing), and run here, its events shown and its approvals asked on this terminal; ``k=v``
    words that name the skill's parameters are parameters. Ctrl-C stops that run."""
    engine = pincer.triggers
    try:
        firing = await engine.fire_command(
            text, session=session or pincer.config.agent.session, fired_by="pincer chat", here=True
        )
    except PincerError as exc:
        stderr.print(f"{exc.code}: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""), markup=False)
        return
    if firing.status != "queued":
        error = dict(firing.error or {})
        stderr.print(f"{error.get('code', 'error')}: {error.get('message', 'the command did not start')}", markup=False)
        return
    starter = engine.starter
    attach = getattr(starter, "attach", None)
    if callable(attach):
        attach(firing.run_id, on_event=display.on_event, on_approval=prompter.ask, profile=profile)

    def interrupted() -> None:
        cancel = getattr(starter, "cancel", None)
        if callable(cancel):
            cancel(firing.run_id)
        display._line("  (stopping this run)")

    outcome = None
    try:
        outcome = await until_done(lambda: engine.run_here(firing.id), interrupted)
    finally:
        display.finish_text()
    try:
        stderr.print(summary(await pincer.runs.get(firing.run_id)), markup=False, highlight=False)
    except PincerError:  # the run never started: the firing says why
        why = (outcome.error if outcome is not None else None) or "the run did not start"
        stderr.print(f"run {firing.run_id} did not start: {why}", markup=False)
