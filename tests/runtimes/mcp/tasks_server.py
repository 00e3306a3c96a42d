"""An upstream MCP server (the SDK's low-level Server, stdio, 2026-07-28) that answers every
``tools/call`` with a task (``resultType: "task"``), for pincer's task-requester tests.

Tools: ``quick`` (working, completed after two polls), ``ask`` (input_required with an
elicitation, completed with the answer it got through ``tasks/update``), ``forever`` (never
finishes), ``wrong_id`` (tasks/get answers another taskId), ``big`` (completes with ``bytes``
characters of text), ``poll0`` / ``poll_huge`` (pollIntervalMs 0 / 10**12, completed after
three polls), ``malformed`` (a CreateTaskResult whose taskId is a number); hostile askers:
``ask_flood`` (1,000 questions at once), ``ask_big`` (a 100,000-character question),
``ask_again`` (a new question after every answer, never done), ``ask_leak`` (a question
holding a token's shape, ``LEAKED``).
``--log FILE`` appends one JSON line per tasks/* request (method, taskId, time).
"""

import json
import sys
import time
import uuid
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, ConfigDict, Field

LOG = sys.argv[sys.argv.index("--log") + 1] if "--log" in sys.argv else None
TASKS: dict[str, dict[str, Any]] = {}
EMPTY = {"type": "object", "properties": {}}
NAMES = (
    "quick", "ask", "forever", "wrong_id", "big", "poll0", "poll_huge", "malformed", "ask_flood", "ask_big", "ask_again", "ask_leak",
)  # fmt: skip
LEAKED = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"  # a GitHub token's shape
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
POLL_MS = {"poll0": 0, "poll_huge": 10**12}


class TaskId(BaseModel):
    model_config = ConfigDict(extra="allow")
    taskId: str


class Update(TaskId):
    inputResponses: dict[str, Any] = Field(default_factory=dict)


def log(method: str, task_id: str) -> None:
    if LOG:
        with open(LOG, "a") as out:
            out.write(json.dumps({"method": method, "taskId": task_id, "at": time.monotonic()}) + "\n")


def wire(task_id: str, task: dict[str, Any]) -> dict[str, Any]:
    data = {
        "taskId": task_id,
        "status": task["status"],
        "ttlMs": 60_000,
        "pollIntervalMs": POLL_MS.get(task["tool"], 10),
    }
    if task["status"] == "input_required":
        data["inputRequests"] = questions(task)
    if task["status"] == "completed":
        data["result"] = task["result"]
    if task["status"] == "cancelled":
        data["statusMessage"] = "cancelled by the requester"
    return data


def question(message: str) -> dict[str, Any]:
    return {"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": NAME_SCHEMA}}


def questions(task: dict[str, Any]) -> dict[str, Any]:
    tool = task["tool"]
    if tool == "ask_flood":
        return {f"q{n}": question(f"Question {n}?") for n in range(1000)}
    if tool == "ask_big":
        return {"name": question("Your name? " + "x" * 100_000)}
    if tool == "ask_leak":
        return {"name": question(f"Your name? (the server's token is {LEAKED})")}
    if tool == "ask_again":
        return {f"name{task['answers']}": question(f"Your name, again ({task['answers']})?")}
    return {"name": question("Your name?")}


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[types.Tool(name=name, input_schema=EMPTY) for name in NAMES])


async def call_tool(ctx: Any, params: Any) -> dict[str, Any]:
    name = params.name
    if name == "malformed":
        return {"resultType": "task", "taskId": 5, "status": "working"}
    task_id = uuid.uuid4().hex
    args = params.arguments or {}
    TASKS[task_id] = {"tool": name, "status": "working", "polls": 0, "args": args, "result": None, "answers": 0}
    return {**wire(task_id, TASKS[task_id]), "resultType": "task"}


async def tasks_get(ctx: Any, params: TaskId) -> dict[str, Any]:
    log("tasks/get", params.taskId)
    task = TASKS[params.taskId]
    task["polls"] += 1
    tool = task["tool"]
    if task["status"] == "working":
        if tool.startswith("ask"):
            task["status"] = "input_required"
        elif (tool in ("quick", "big") and task["polls"] >= 2) or (tool in POLL_MS and task["polls"] >= 3):
            text = "x" * int(task["args"].get("bytes", 10)) if tool == "big" else f"{tool} done"
            task["status"], task["result"] = "completed", {"content": [{"type": "text", "text": text}]}
    data = wire(params.taskId, task)
    if tool == "wrong_id":
        data["taskId"] = uuid.uuid4().hex
    return {**data, "resultType": "complete"}


async def tasks_update(ctx: Any, params: Update) -> dict[str, Any]:
    log("tasks/update", params.taskId)
    task = TASKS[params.taskId]
    task["answers"] += 1
    if task["tool"] == "ask_again":
        task["status"] = "input_required"
        return {"resultType": "complete"}
    answer = params.inputResponses.get("name")
    task["status"], task["result"] = "completed", {"content": [{"type": "text", "text": f"got {json.dumps(answer)}"}]}
    return {"resultType": "complete"}


async def tasks_cancel(ctx: Any, params: TaskId) -> dict[str, Any]:
    log("tasks/cancel", params.taskId)
    if params.taskId in TASKS:
        TASKS[params.taskId]["status"] = "cancelled"
    return {"resultType": "complete"}


server = Server("tasks", on_list_tools=list_tools, on_call_tool=call_tool)
server.extensions["io.modelcontextprotocol/tasks"] = {}
server.add_request_handler("tasks/get", TaskId, tasks_get)
server.add_request_handler("tasks/update", Update, tasks_update)
server.add_request_handler("tasks/cancel", TaskId, tasks_cancel)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
