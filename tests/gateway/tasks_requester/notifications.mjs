// Checks what a pincer gateway sent on a subscriptions/listen stream with the official Tasks
// package's own V2 parsers (@modelcontextprotocol/ext-tasks/core/v2): the task ids the
// acknowledgement accepted (readAcceptedTaskIdsV2) and each notifications/tasks frame against
// TaskStatusNotificationV2Schema, the schema its client session parses them with.
//
//   node notifications.mjs < {"ack": ACK_PARAMS, "frames": [FRAME, ...]}
//     -> {"accepted": [...], "frames": [{"ok": true} | {"ok": false, "error": ...}, ...]}
import { readFileSync } from "node:fs";
import { TaskStatusNotificationV2Schema, readAcceptedTaskIdsV2 } from "@modelcontextprotocol/ext-tasks/core/v2";

const input = JSON.parse(readFileSync(0, "utf8"));
const frames = input.frames.map((frame) => {
  const parsed = TaskStatusNotificationV2Schema.safeParse(frame);
  return parsed.success ? { ok: true, status: parsed.data.params.status } : { ok: false, error: parsed.error.message };
});
process.stdout.write(JSON.stringify({ accepted: readAcceptedTaskIdsV2(input.ack), frames }) + "\n");
