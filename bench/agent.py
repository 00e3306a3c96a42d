"""The agent loop's own cost per turn, next to pydantic-ai's Agent over the same local model server,
and the input tokens a task costs with and without find_tools for a 300-tool registry (the first
turn alone, and the whole task with the model turns find_tools adds: search, load, then call).

Both loops run the same two-turn conversation against ``pincer.demo.model_server`` (a real HTTP
server on 127.0.0.1 that answers at once): turn 1 calls a no-op tool, turn 2 answers. The model's
time is taken out by replaying, with the bare ``openai`` SDK client, the very requests each loop
sent (same bodies, same client type, same server); what is left is the loop's own work per turn
(building requests, parsing the stream, dispatching the call, recording). The tool call's own
time is then taken out on both sides alike: for pincer the call's time in the chain (its audit
record's duration: policy, validation, execution, scan, audit), for pydantic-ai the time its
toolset's ``call_tool`` takes (a ``WrapperToolset`` times it; pydantic-ai validates the arguments
before that, so its validation stays in its loop figure). The figure is the loop "on top of the
tool calls"; the same figure with the tool calls left in, on both sides, is printed beside it.
pincer records every run (the runs table, its transcript, two audit records); pydantic-ai records
nothing.

    .venv/bin/python bench/agent.py [--runs N]

Nothing here gates CI; the figures go to README.md's "Measured here" table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pincer.config import parse_config
from pincer.demo.model_server import ReceivedRequest, ScriptedCall, Turn, serve_models
from pincer.llm.prompt import RULES
from pincer.llm.run import RunRequest
from pincer.runtimes.native import NativeRuntime, tool
from pincer.service import Pincer

WARMUP_RUNS = 20
TOOLS_IN_REGISTRY = 300


def responder(request: ReceivedRequest) -> Turn:
    """Turn 1 calls noop; once a tool result is in the conversation, the answer."""
    messages = request.body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return Turn(text="All done.", input_tokens=200, output_tokens=5)
    return Turn(calls=(ScriptedCall(name="noop", arguments={"text": "hi"}),), input_tokens=150, output_tokens=10)


@tool(name="noop", trusted_output=True)
async def noop(text: str = "") -> str:
    """Return the text unchanged."""
    return text


async def noop_fn(text: str = "") -> str:
    """Return the text unchanged."""
    return text


def timed_toolset(wrapped: Any) -> Any:
    """pydantic-ai's own seam for tool execution, timed: the seconds of every ``call_tool``."""
    from pydantic_ai.toolsets import WrapperToolset

    @dataclass
    class TimedToolset(WrapperToolset[Any]):
        # dataclasses.replace (for_run) copies the reference: every run appends to this one list.
        seconds: list[float] = field(default_factory=list)

        async def call_tool(self, name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
            started = time.perf_counter()
            try:
                return await super().call_tool(name, tool_args, ctx, tool)
            finally:
                self.seconds.append(time.perf_counter() - started)

    return TimedToolset(wrapped)


async def replay(client: Any, bodies: list[dict[str, Any]]) -> float:
    """Seconds the bare SDK takes for these requests (streamed ones consumed to the end)."""
    started = time.perf_counter()
    for body in bodies:
        response = await client.chat.completions.create(**body)
        if body.get("stream"):
            async for _ in response:
                pass
    return time.perf_counter() - started


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def loop_overhead(runs: int) -> None:
    import openai
    from pydantic_ai import Agent, Tool
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.toolsets import FunctionToolset

    with serve_models(responder) as server, tempfile.TemporaryDirectory(prefix="pincer-bench-") as tmp:
        sdk = openai.AsyncOpenAI(api_key="bench", base_url=server.openai_url, max_retries=0)
        results: dict[str, dict[str, list[float]]] = {}
        for stream in (False, True):
            home = Path(tmp) / f"home-{stream}"
            config = parse_config(
                f'[llm]\nmodel = "gpt-4o-mini"\nbase_url = "{server.openai_url}"\nstream = {str(stream).lower()}\n',
                home=home,
            )
            async with Pincer.open(home, config=config, secret_key=b"b" * 32, builtins=False, skills=False, scripts=False) as pincer:
                await pincer.add_runtime(NativeRuntime([noop], name="bench"))
                # Named as the model calls it: by its function name (noop_fn) pydantic-ai answered
                # "Unknown tool name" and never ran the tool (an earlier version of this bench did).
                toolset = timed_toolset(FunctionToolset([Tool(noop_fn, name="noop")]))
                agent = Agent(
                    OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(openai_client=sdk)),
                    system_prompt=RULES,
                    toolsets=[toolset],
                )

                async def pincer_once() -> tuple[float, float, float]:
                    before = len(server.requests)
                    t0 = time.perf_counter()
                    run = await pincer.agent.run(RunRequest(message="call noop, then say done"))
                    took = time.perf_counter() - t0
                    if run.status != "done" or run.turns != 2:
                        raise SystemExit(f"bench run failed: {run.status} {run.error}")
                    bodies = [dict(r.body) for r in server.requests[before:]]
                    tool_s = sum(r.duration_ms for r in await pincer.audit.records(run_id=run.id) if r.kind == "call") / 1000
                    return took, await replay(sdk, bodies), tool_s

                async def pydantic_once(agent: Any = agent, stream: bool = stream, toolset: Any = toolset) -> tuple[float, float, float]:
                    before = len(server.requests)
                    toolset.seconds.clear()
                    t0 = time.perf_counter()
                    if stream:
                        async with agent.run_stream("call noop, then say done") as result:
                            async for _ in result.stream_text():
                                pass
                    else:
                        result = await agent.run("call noop, then say done")
                        if result.output != "All done.":
                            raise SystemExit(f"pydantic-ai run failed: {result.output!r}")
                    took = time.perf_counter() - t0
                    returned = [p for m in result.all_messages() for p in getattr(m, "parts", ()) if p.part_kind == "tool-return"]
                    if [p.content for p in returned] != ["hi"]:
                        raise SystemExit(f"pydantic-ai's tool call did not run as pincer's does: {returned!r}")
                    bodies = [dict(r.body) for r in server.requests[before:]]
                    if len(toolset.seconds) != 1:
                        raise SystemExit(f"pydantic-ai made {len(toolset.seconds)} tool calls, not 1")
                    return took, await replay(sdk, bodies), sum(toolset.seconds)

                for _ in range(WARMUP_RUNS):
                    await pincer_once()
                    await pydantic_once()
                mode = "stream" if stream else "whole"
                samples: dict[str, list[float]] = {
                    name: [] for name in ("pincer", "pydantic-ai", "pincer with tool", "pydantic-ai with tool",
                                          "pincer model", "pydantic-ai model")
                }  # fmt: skip
                for _ in range(runs):  # interleaved, so load on the machine falls on both alike
                    for name, once in (("pincer", pincer_once), ("pydantic-ai", pydantic_once)):
                        took, model, tool_s = await once()
                        samples[name].append((took - model - tool_s) / 2)
                        samples[f"{name} with tool"].append((took - model) / 2)
                        samples[f"{name} model"].append(model / 2)
                results[mode] = samples
        await sdk.close()

    print(f"\nloop overhead per turn (model time taken out), median of {runs} two-turn runs each, interleaved")
    print(f"  {'':40} {'pincer ms':>10} {'pydantic-ai ms':>15} {'ratio':>7} {'model round trip ms':>21}")
    for mode, samples in results.items():
        for suffix, label in (("", "tool call taken out"), (" with tool", "tool call left in")):
            ours, theirs = median_ms(samples["pincer" + suffix]), median_ms(samples["pydantic-ai" + suffix])
            print(
                f"  {mode + ' responses, ' + label:40} {ours:10.3f} {theirs:15.3f} {theirs / ours:6.1f}x "
                f"{median_ms(samples['pincer model']):10.3f} / {median_ms(samples['pydantic-ai model']):.3f}"
            )


def registry_tools() -> list[Any]:
    """300 tools shaped like a large MCP setup: GitHub-, Slack-, calendar- and file-like."""
    from pincer.runtimes.native.decorator import NativeTool

    areas = {
        "github": ["issue", "pull_request", "comment", "branch", "release", "label", "workflow_run", "repository", "commit", "review"],
        "slack": ["message", "channel", "user", "reaction", "file", "reminder"],
        "calendar": ["event", "calendar", "attendee", "reminder"],
        "drive": ["file", "folder", "permission", "comment", "revision"],
        "jira": ["issue", "sprint", "board", "comment", "worklog"],
    }
    verbs = ["create", "get", "list", "update", "delete", "search"]
    made: list[NativeTool] = []
    for area, nouns in areas.items():
        for noun in nouns:
            for verb in verbs:
                if len(made) >= TOOLS_IN_REGISTRY:
                    return made

                async def fn(id: str = "", query: str = "", limit: int = 30, fields: list[str] | None = None) -> str:
                    return "ok"

                name = f"{area}_{verb}_{noun}"
                fn.__doc__ = (
                    f"{verb.title()} a {noun.replace('_', ' ')} in {area.title()}. Use this when the user asks to "
                    f"{verb} {noun.replace('_', ' ')}s; returns the {noun.replace('_', ' ')} as JSON with its id and fields.\n\n"
                    "Args:\n    id: The identifier of the item.\n    query: Free text to match.\n"
                    "    limit: How many results at most.\n    fields: Which fields to return."
                )
                made.append(tool(name=name)(fn))
    while len(made) < TOOLS_IN_REGISTRY:  # pad with more areas if the table above is short
        index = len(made)

        async def extra(id: str = "") -> str:
            return "ok"

        extra.__doc__ = f"Extra tool number {index}.\n\nArgs:\n    id: The identifier."
        made.append(tool(name=f"extra_tool_{index}")(extra))
    return made


# What the scripted model does for the task "open an issue", turn by turn: with every definition
# sent it calls the tool at once; with find_tools it must search, then load the definition it
# found, then call: two more model turns, each sending the whole conversation again.
TASK_TOOL = "github_create_issue"
TASK_STEPS = {
    "every definition": [ScriptedCall(name=TASK_TOOL, arguments={"query": "crash on start"})],
    "find_tools (default 40)": [
        ScriptedCall(name="find_tools", arguments={"query": "open a github issue"}),
        ScriptedCall(name="load_tools", arguments={"names": [TASK_TOOL]}),
        ScriptedCall(name=TASK_TOOL, arguments={"query": "crash on start"}),
    ],
}


async def tokens_per_turn() -> None:
    """Input tokens of the first turn alone, and of the whole task with every turn it takes
    (the turns find_tools adds counted: each sends the conversation again)."""
    label_of: dict[str, str] = {}  # the run's model name -> its label (the two runs share one server)

    def answer(request: ReceivedRequest) -> Turn:
        steps = TASK_STEPS[label_of[request.body["model"]]]
        done = sum(1 for m in request.body.get("messages") or [] if m.get("role") == "tool")
        if done < len(steps):
            return Turn(calls=(steps[done],), output_tokens=10)
        return Turn(text="Opened it.", output_tokens=3)

    figures = {}
    with serve_models(answer) as server, tempfile.TemporaryDirectory(prefix="pincer-bench-") as tmp:
        for n, (label, threshold) in enumerate((("every definition", 10_000), ("find_tools (default 40)", 40))):
            home = Path(tmp) / label.split()[0]
            model = f"bench-model-{n}"
            label_of[model] = label
            config = parse_config(
                f'[llm]\nmodel = "{model}"\nbase_url = "{server.openai_url}"\n[agent]\nmax_tool_definitions = {threshold}\n',
                home=home,
            )
            async with Pincer.open(home, config=config, secret_key=b"b" * 32, builtins=False, skills=False, scripts=False) as pincer:
                await pincer.add_runtime(NativeRuntime(registry_tools(), name="big"))
                before = len(server.requests)
                run = await pincer.agent.run(RunRequest(message="open an issue"))
                sent = server.requests[before:]
                if run.status != "done" or run.turns != len(TASK_STEPS[label]) + 1:
                    raise SystemExit(f"{label}: the task ran {run.turns} turns ({run.status}), not the scripted ones")
                tools = sent[0].body.get("tools") or []
                figures[label] = {
                    "first": _estimate(sent[0].body),
                    "tools": len(json.dumps(tools)) // 4,
                    "count": len(tools),
                    "turns": run.turns,
                    "task": run.usage.input_tokens,
                }
    print(f'\ninput tokens with {TOOLS_IN_REGISTRY} tools in the registry (4 characters a token), task "open an issue"')
    print(f"  {'':26} {'first turn':>11} {'tool definitions':>17} {'definitions':>12} {'turns':>6} {'whole task':>11}")
    for label, f in figures.items():
        print(f"  {label:26} {f['first']:11,} {f['tools']:17,} {f['count']:12} {f['turns']:6} {f['task']:11,}")
    every, lazy = figures["every definition"], figures["find_tools (default 40)"]
    print(
        f"  find_tools: {every['first'] / lazy['first']:.0f}x fewer input tokens in the first turn; over the whole "
        f"task, its {lazy['turns'] - every['turns']} extra model turns counted, {every['task'] / lazy['task']:.1f}x fewer"
    )


def _estimate(body: dict[str, Any]) -> int:
    """As the model server estimates a request it is not told the tokens of: 4 characters a token."""
    return len(json.dumps(body)) // 4


async def main(runs: int) -> None:
    await loop_overhead(runs)
    await tokens_per_turn()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    anyio.run(main, args.runs)
