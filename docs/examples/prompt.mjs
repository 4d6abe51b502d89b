#!/usr/bin/env node
// Sends one prompt to `pincer acp`, prints the answer as it streams, asks
// you (y/n on stdin) before pincer acts, and cancels the prompt on Ctrl-C.
//
// No SDK: JSON-RPC 2.0, one JSON object per line, over the child's stdin
// and stdout. Usage: node prompt.mjs "your prompt"
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

// Its own process group, so that Ctrl-C reaches this script only and
// pincer hears about it as a `session/cancel`.
const agent = spawn("pincer", ["acp"], {
  stdio: ["pipe", "pipe", "inherit"],
  detached: true,
});
const waiting = new Map(); // request id -> resolve
let nextId = 0;
let sessionId;
let pendingPermission; // the permission request not yet answered

const send = (message) =>
  agent.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...message }) + "\n");

const request = (method, params) =>
  new Promise((resolve) => {
    const id = ++nextId;
    waiting.set(id, resolve);
    send({ id, method, params });
  });

const answers = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function askPermission(message) {
  pendingPermission = message;
  const { toolCall, options } = message.params;
  process.stderr.write(`[permission] ${toolCall.title} (y/n)\n`);
  const line = await answers.next();
  if (pendingPermission !== message) return; // cancelled meanwhile
  pendingPermission = undefined;
  const kind = !line.done && line.value.trim() === "y" ? "allow_once" : "reject_once";
  const option = options.find((o) => o.kind === kind);
  send({
    id: message.id,
    result: { outcome: { outcome: "selected", optionId: option.optionId } },
  });
}

createInterface({ input: agent.stdout }).on("line", (line) => {
  const message = JSON.parse(line);
  if (!("method" in message)) {
    const resolve = waiting.get(message.id);
    waiting.delete(message.id);
    if (message.error) {
      console.error(`pincer: ${message.error.message}`);
      process.exit(1);
    }
    resolve(message.result);
  } else if (message.method === "session/update") {
    const update = message.params.update;
    if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
      process.stdout.write(update.content.text);
    } else if (update.sessionUpdate === "tool_call") {
      process.stderr.write(`[tool] ${update.title}\n`);
    }
  } else if (message.method === "session/request_permission") {
    askPermission(message);
  } else if ("id" in message) {
    send({ id: message.id, error: { code: -32601, message: "not supported" } });
  }
});

process.on("SIGINT", () => {
  if (!sessionId) process.exit(130);
  // The prompt still answers, with stopReason "cancelled"; a permission
  // request still open is answered "cancelled" too.
  send({ method: "session/cancel", params: { sessionId } });
  if (pendingPermission) {
    send({ id: pendingPermission.id, result: { outcome: { outcome: "cancelled" } } });
    pendingPermission = undefined;
  }
});

await request("initialize", { protocolVersion: 1, clientCapabilities: {} });
({ sessionId } = await request("session/new", { cwd: process.cwd(), mcpServers: [] }));
const prompt = process.argv.slice(2).join(" ");
const { stopReason } = await request("session/prompt", {
  sessionId,
  prompt: [{ type: "text", text: prompt }],
});
process.stdout.write("\n");
process.stderr.write(`[stop] ${stopReason}\n`);
agent.stdin.end();
process.exit(stopReason === "end_turn" ? 0 : 1);
