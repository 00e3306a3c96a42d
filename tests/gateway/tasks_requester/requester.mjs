// The official MCP Tasks requester (@modelcontextprotocol/ext-tasks) against a pincer gateway,
// over a session port of its own: one plain HTTP POST per request, 2026-07-28 framing, so that
// every request is a fresh connection (a client that went away and came back).
//
//   node requester.mjs call URL TOKEN TOOL ARGS_JSON   -> {"kind": ..., "reference": ...}, then the
//                                                         process exits without a word (a client gone)
//   node requester.mjs result URL TOKEN REFERENCE_JSON -> the task's final CallToolResult, by the
//                                                         package's recovery API (resumeTask)
import { resultFromTaskOutcome, withTasks } from "@modelcontextprotocol/ext-tasks/client";

const VERSION = "2026-07-28";
const TASKS = "io.modelcontextprotocol/tasks";
const [mode, url, token, ...rest] = process.argv.slice(2);

function port() {
  let nextId = 0;
  return {
    endpointId: "pincer-under-test", // one endpoint, whichever process serves it now
    taskCapabilities: { generation: "v2", capabilities: {} },
    invalidated: false,
    async dispatch(request, options) {
      const params = { ...(request.params ?? {}) };
      const meta = { ...(params._meta ?? {}) };
      const capabilities = { ...(meta["io.modelcontextprotocol/clientCapabilities"] ?? {}) };
      capabilities.extensions = { ...(capabilities.extensions ?? {}), [TASKS]: {} };
      meta["io.modelcontextprotocol/clientCapabilities"] = capabilities;
      meta["io.modelcontextprotocol/protocolVersion"] = VERSION;
      params._meta = meta;
      const response = await fetch(`${url}/mcp`, {
        method: "POST",
        signal: options?.signal,
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": VERSION,
          "mcp-method": request.method,
          "mcp-name": String(params.name ?? params.taskId ?? ""),
        },
        // The package hands over method and params; the port frames the JSON-RPC request.
        body: JSON.stringify({ jsonrpc: "2.0", id: ++nextId, method: request.method, params }),
      });
      let text = await response.text();
      if ((response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
        const data = text.split("\n").filter((line) => line.startsWith("data:") && line.slice(5).trim());
        text = data[data.length - 1].slice(5);
      }
      const message = JSON.parse(text);
      return message.error ? { kind: "error", error: message.error } : { kind: "result", result: message.result };
    },
    onServerRequest() { return () => {}; },
    onNotification() { return () => {}; },
    onInvalidated() { return () => {}; },
  };
}

const session = withTasks(port());
if (mode === "call") {
  const [tool, args] = rest;
  const execution = await session.callTool(tool, JSON.parse(args));
  let reference = null;
  if (execution.kind === "task") {
    await execution.handoff((ref) => { reference = ref; });
  }
  process.stdout.write(JSON.stringify({ kind: execution.kind, reference }) + "\n");
  // Gone without closing the session (closing would cancel the task it started): a client that
  // crashed or lost its connection.
  process.exit(0);
} else if (mode === "result") {
  const [reference] = rest;
  try {
    const execution = await session.resumeTask(JSON.parse(reference));
    const outcome = await execution.result();
    process.stdout.write(JSON.stringify(resultFromTaskOutcome(outcome)) + "\n");
  } finally {
    await session.close();
  }
} else {
  throw new Error(`unknown mode ${mode}`);
}
