"""A small stdio MCP server (handshake era, stdlib only) that misbehaves on command.

Tools: echo, pid, spawn_child, crash (exits mid-call), hang (never answers that call), freeze
(stops answering anything), garbage (writes a non-JSON line on stdout), set_description
(changes echo's description and sends tools/list_changed), mixed (every content block kind and
structured content), fail (an isError result), slow; for the lean path's attacks: progress (three
updates, then the answer), flood (``count`` progress updates and log messages before the answer),
wrong_id (answers another id), duplicate_id (answers twice), oversized (one line of ``bytes``
bytes), bad_envelope (a result that is not an object), elicit (asks the client, answers with
its reply), request_id (the call's own JSON-RPC id), input_required (a 2026-07-28 style
``InputRequiredResult``, then the input it is sent back with).

Flags: ``--silent-if FILE`` never answers initialize while FILE exists; ``--secret-env NAME``
makes the ``env`` tool report NAME's value; ``--description-file FILE`` reads echo's description
from FILE at start (a change that survives restarts); ``--die-saying-env NAME`` writes NAME's
value to stderr and exits at once; ``--no-version`` sends an empty ``serverInfo.version``;
``--cancel-log FILE`` appends the params of every ``notifications/cancelled`` to FILE;
``--linger FILE`` does not exit when its stdin closes, after creating FILE to say it saw the EOF.
"""

import json
import os
import subprocess
import sys
import threading
import time

STATE = {"description": "Echo the text back"}
CURRENT = {"meta": {}, "params": {}}  # the call being answered: its params and their _meta
LOCK = threading.Lock()


def send(message):
    with LOCK:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def tools():
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    empty = {"type": "object", "properties": {}}
    return [
        {"name": "echo", "description": STATE["description"], "inputSchema": schema,
         "annotations": {"readOnlyHint": True}},
        {"name": "pid", "description": "The server's process id", "inputSchema": empty},
        {"name": "spawn_child", "description": "Start a sleeping grandchild; its pid", "inputSchema": empty},
        {"name": "crash", "description": "Exit in the middle of the call", "inputSchema": empty},
        {"name": "hang", "description": "Never answer this call", "inputSchema": empty},
        {"name": "freeze", "description": "Stop answering anything", "inputSchema": empty},
        {"name": "garbage", "description": "Write garbage on stdout", "inputSchema": empty},
        {"name": "set_description", "description": "Change echo's description", "inputSchema": schema},
        {"name": "mixed", "description": "Every kind of content", "inputSchema": empty},
        {"name": "fail", "description": "A tool error", "inputSchema": empty},
        {"name": "env", "description": "Environment report", "inputSchema": empty},
        {"name": "delete_all", "description": "Pretend to delete everything", "inputSchema": empty,
         "annotations": {"destructiveHint": True, "readOnlyHint": False}},
        {"name": "progress", "description": "Three progress updates, then the answer", "inputSchema": empty},
        {"name": "flood", "description": "Many notifications, then the answer",
         "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}}},
        {"name": "wrong_id", "description": "Answer another id", "inputSchema": empty},
        {"name": "duplicate_id", "description": "Answer twice", "inputSchema": empty},
        {"name": "oversized", "description": "One very long line",
         "inputSchema": {"type": "object", "properties": {"bytes": {"type": "integer"}}}},
        {"name": "bad_envelope", "description": "A result that is not an object", "inputSchema": empty},
        {"name": "elicit", "description": "Ask the client, answer with its reply", "inputSchema": empty},
        {"name": "request_id", "description": "The JSON-RPC id of this call", "inputSchema": empty},
        {"name": "input_required", "description": "Ask for input inside the result, then answer with it",
         "inputSchema": empty},
        {"name": "slow", "description": "Sleep then answer",
         "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "marker": {"type": "string"}}}},
    ]


def text(value):
    return {"content": [{"type": "text", "text": value}]}


def progress_token(request_id):
    return CURRENT["meta"].get("progressToken")


def call(request_id, name, args):
    if name == "progress":
        token = progress_token(request_id)
        for step in (1, 2, 3):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": step, "total": 3, "message": f"step {step}"}})
        return text("done 3")
    if name == "flood":
        token = progress_token(request_id)
        count = int(args.get("count", 1000))
        for step in range(count):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": step}})
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": step}})
        return text(f"flooded {count}")
    if name == "wrong_id":
        send({"jsonrpc": "2.0", "id": 999_999_999, "result": text("for nobody")})
        return None
    if name == "duplicate_id":
        send({"jsonrpc": "2.0", "id": request_id, "result": text("first")})
        return text("second")
    if name == "oversized":
        with LOCK:
            sys.stdout.write("x" * int(args.get("bytes", 1024)) + "\n")
            sys.stdout.flush()
        return text("wrote a long line")
    if name == "bad_envelope":
        send({"jsonrpc": "2.0", "id": request_id, "result": 5})
        return None
    if name == "elicit":
        send({"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create", "params": {
            "message": "Your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}})
        for line in sys.stdin:
            reply = json.loads(line)
            if reply.get("id") == "elicit-1" and "method" not in reply:
                return text(json.dumps({key: reply[key] for key in ("result", "error") if key in reply}))
            note_cancel(reply)
        return None
    if name == "request_id":
        return text(json.dumps(request_id))
    if name == "input_required":
        if "inputResponses" in CURRENT["params"]:
            return text(json.dumps({key: CURRENT["params"].get(key) for key in ("inputResponses", "requestState")}))
        return {"resultType": "input_required", "requestState": "state-1", "inputRequests": {"name": {
            "method": "elicitation/create", "params": {"message": "Your name?", "requestedSchema": {
                "type": "object", "properties": {"name": {"type": "string"}}}}}}}
    if name == "echo":
        return text(args.get("text", ""))
    if name == "pid":
        return text(str(os.getpid()))
    if name == "spawn_child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        return text(str(child.pid))
    if name == "crash":
        os._exit(3)
    if name == "hang":
        return None
    if name == "freeze":
        time.sleep(3600)
    if name == "garbage":
        with LOCK:
            sys.stdout.write("this is not json-rpc\n")
            sys.stdout.flush()
        return text("wrote garbage")
    if name == "set_description":
        STATE["description"] = args.get("text", "")
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        return text("changed")
    if name == "mixed":
        return {
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "test://doc", "mimeType": "text/plain", "text": "doc body"}},
                {"type": "resource_link", "uri": "test://other", "name": "other"},
            ],
            "structuredContent": {"answer": 42},
        }
    if name == "fail":
        return {"content": [{"type": "text", "text": "it went wrong"}], "isError": True}
    if name == "env":
        names = sorted(os.environ)
        secret = os.environ.get(sys.argv[sys.argv.index("--secret-env") + 1]) if "--secret-env" in sys.argv else None
        return {"content": [{"type": "text", "text": json.dumps({"names": names, "secret": secret})}]}
    if name == "delete_all":
        return text("deleted nothing")
    if name == "slow":
        if args.get("marker"):
            open(args["marker"], "w").close()  # tells the test the call has arrived
        time.sleep(float(args.get("seconds", 1)))
        return text("done")
    raise KeyError(name)


def note_cancel(message):
    if message.get("method") == "notifications/cancelled" and "--cancel-log" in sys.argv:
        with open(sys.argv[sys.argv.index("--cancel-log") + 1], "a") as log:
            log.write(json.dumps(message.get("params")) + "\n")


def silent():
    if "--silent-if" in sys.argv:
        return os.path.exists(sys.argv[sys.argv.index("--silent-if") + 1])
    return False


def main():
    if "--die-saying-env" in sys.argv:  # a careless server: prints its token and exits
        name = sys.argv[sys.argv.index("--die-saying-env") + 1]
        sys.stderr.write(f"fatal: cannot log in with token {os.environ.get(name)}\n")
        sys.exit(1)
    if "--description-file" in sys.argv:
        with open(sys.argv[sys.argv.index("--description-file") + 1]) as handle:
            STATE["description"] = handle.read().strip()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        if request_id is None:
            note_cancel(message)
            continue
        if method == "initialize":
            if silent():
                continue
            version = message["params"].get("protocolVersion", "2025-11-25")
            if version not in ("2025-11-25", "2025-06-18", "2025-03-26"):
                version = "2025-11-25"
            send({"jsonrpc": "2.0", "id": request_id, "result": {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "faulty", "version": "" if "--no-version" in sys.argv else "1.0"},
            }})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools()}})
        elif method == "tools/call":
            params = message["params"]
            CURRENT["meta"] = params.get("_meta") or {}
            CURRENT["params"] = params
            try:
                result = call(request_id, params["name"], params.get("arguments") or {})
            except KeyError:
                send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": "unknown tool"}})
                continue
            if result is not None:
                send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})
    if "--linger" in sys.argv:  # a server that does not exit when its stdin closes; it says it saw EOF
        open(sys.argv[sys.argv.index("--linger") + 1], "w").close()
        time.sleep(600)


if __name__ == "__main__":
    main()
