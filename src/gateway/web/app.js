// pincer's web chat page: a client of the gateway protocol (docs/gateway.md)
// on the page's own origin. No framework, no build step, no remote source:
// the gateway serves this file from its binary. Model text is turned into
// DOM nodes with textContent only, never parsed as HTML.

import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const STORE = "pincer.gateway.credential";

const state = {
  ws: null,
  nextId: 1,
  pending: new Map(),
  credential: null,
  sessions: [],
  current: null,
  runs: new Map(),
  backoff: 250,
  signedIn: false,
};

// ---- protocol ----------------------------------------------------------

function request(method, params) {
  return new Promise((resolve, reject) => {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
      reject(new Error("not connected"));
      return;
    }
    const id = String(state.nextId++);
    state.pending.set(id, { resolve, reject });
    state.ws.send(JSON.stringify({ type: "req", id, method, params }));
  });
}

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/`);
  state.ws = ws;
  ws.onmessage = (message) => {
    let frame;
    try {
      frame = JSON.parse(message.data);
    } catch {
      return;
    }
    if (frame.type === "res") {
      const waiter = state.pending.get(frame.id);
      if (!waiter) return;
      state.pending.delete(frame.id);
      if (frame.ok) waiter.resolve(frame.payload);
      else waiter.reject(new Error(frame.error?.message || "the gateway refused"));
    } else if (frame.type === "event") {
      onEvent(frame.event, frame.payload || {});
    }
  };
  ws.onclose = () => {
    for (const waiter of state.pending.values()) waiter.reject(new Error("connection lost"));
    state.pending.clear();
    if (state.signedIn) {
      status(`Connection lost; reconnecting…`);
      setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 30000);
    }
  };
}

function onEvent(name, payload) {
  if (name === "connect.challenge") {
    const auth = state.credential.kind === "password"
      ? { password: state.credential.secret }
      : { token: state.credential.secret };
    request("connect", {
      minProtocol: 4,
      maxProtocol: 4,
      client: { id: "webchat", displayName: "pincer web", version: "web", platform: "browser", mode: "webchat" },
      caps: ["tool-events", "exec-approvals"],
      role: "operator",
      scopes: ["operator.admin"],
      auth,
    }).then(onHello, onRefused);
  } else if (name === "chat") {
    onChat(payload);
  } else if (name === "agent" && payload.stream === "tool") {
    onTool(payload);
  } else if (name === "session.message") {
    if (payload.sessionKey === state.current && !state.runs.get(payload.runId)?.ours) {
      addMessage("user", joined(payload.message?.content, "text"));
    }
  } else if (name === "exec.approval.requested") {
    onApproval(payload);
  }
}

function onHello() {
  const first = !state.signedIn;
  state.signedIn = true;
  state.backoff = 250;
  if ($("stay").checked) sessionStorage.setItem(STORE, JSON.stringify(state.credential));
  $("login").hidden = true;
  $("app").hidden = false;
  status("");
  loadSessions();
  if (first) $("message-input").focus();
  else if (state.current) openSession(state.current);
}

function onRefused(error) {
  state.signedIn = false;
  sessionStorage.removeItem(STORE);
  $("login").hidden = false;
  $("app").hidden = true;
  $("login-error").textContent = error.message;
  state.ws?.close();
}

// ---- sessions ----------------------------------------------------------

async function loadSessions() {
  const listed = await request("sessions.list", { limit: 200, includeDerivedTitles: true });
  state.sessions = Array.isArray(listed?.sessions) ? listed.sessions : [];
  renderSessions();
}

function renderSessions() {
  const list = $("session-list");
  const search = $("session-search").value.trim().toLowerCase();
  list.replaceChildren();
  for (const row of state.sessions) {
    const title = row.derivedTitle || row.displayName || row.key;
    if (search && !`${title} ${row.key}`.toLowerCase().includes(search)) continue;
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.testid = "session-item";
    button.dataset.key = row.key;
    if (row.key === state.current) button.setAttribute("aria-current", "true");
    const name = document.createElement("span");
    name.textContent = title;
    const meta = document.createElement("small");
    const when = row.updatedAt ? new Date(row.updatedAt).toLocaleString() : "";
    meta.textContent = [when, row.spawnedCwd, row.model].filter(Boolean).join(" · ");
    button.append(name, meta);
    button.addEventListener("click", () => openSession(row.key));
    item.append(button);
    list.append(item);
  }
}

async function openSession(key) {
  state.current = key;
  renderSessions();
  const row = state.sessions.find((r) => r.key === key);
  $("session-title").textContent = row?.derivedTitle || key;
  $("messages").replaceChildren();
  const history = await request("chat.history", { sessionKey: key, limit: 200 });
  for (const message of history?.messages || []) {
    if (message.role === "user") addMessage("user", joined(message.content, "text"));
    else if (message.role === "assistant") {
      const text = joined(message.content, "text");
      if (text) renderMarkdown(addMessage("assistant", ""), text);
    }
  }
}

function newSession() {
  state.current = `web:${crypto.randomUUID()}`;
  $("session-title").textContent = "New session";
  $("messages").replaceChildren();
  renderSessions();
  $("message-input").focus();
}

// ---- chat --------------------------------------------------------------

async function send(event) {
  event.preventDefault();
  const input = $("message-input");
  const text = input.value;
  if (!text.trim()) return;
  if (!state.current) newSession();
  input.value = "";
  addMessage("user", text);
  const runId = crypto.randomUUID();
  state.runs.set(runId, { ours: true, key: state.current, text: "", seq: 0, element: null, tools: new Map() });
  busy(true);
  try {
    await request("chat.send", { sessionKey: state.current, message: text, idempotencyKey: runId });
  } catch (error) {
    status(error.message);
    busy(false);
  }
}

function runOf(payload) {
  let run = state.runs.get(payload.runId);
  if (!run && payload.sessionKey === state.current) {
    run = { ours: false, key: payload.sessionKey, text: "", seq: 0, element: null, tools: new Map() };
    state.runs.set(payload.runId, run);
  }
  return run;
}

function onChat(payload) {
  const run = runOf(payload);
  if (!run) return;
  if (Number.isInteger(payload.seq)) {
    if (payload.seq <= run.seq) return;
    run.seq = payload.seq;
  }
  const message = payload.message;
  if (message && typeof message === "object") {
    const text = joined(message.content, "text");
    // The run's whole text so far: what extends what is shown is news.
    if (text.startsWith(run.text) || !run.text.startsWith(text)) run.text = text;
  }
  if (run.key === state.current && run.text) {
    if (!run.element) run.element = addMessage("assistant", "");
    renderMarkdown(run.element, run.text);
  }
  if (["final", "aborted", "error"].includes(payload.state)) {
    if (payload.state === "error") status(payload.errorMessage || "the turn failed");
    if (payload.state === "aborted") status("Stopped.");
    state.runs.delete(payload.runId);
    busy([...state.runs.values()].some((r) => r.ours));
    loadSessions();
  }
}

function onTool(payload) {
  const run = runOf(payload);
  const data = payload.data || {};
  if (!run || typeof data.toolCallId !== "string" || run.key !== state.current) return;
  let card = run.tools.get(data.toolCallId);
  if (!card) {
    card = document.createElement("li");
    card.className = "message tool";
    card.dataset.testid = "tool-card";
    card.dataset.toolCallId = data.toolCallId;
    const title = document.createElement("strong");
    title.textContent = data.title || data.name || "tool";
    const status = document.createElement("span");
    status.className = "tool-status";
    const output = document.createElement("pre");
    card.append(title, document.createTextNode(" "), status, output);
    run.tools.set(data.toolCallId, card);
    $("messages").append(card);
    run.element = null;
  }
  card.querySelector(".tool-status").textContent =
    data.phase === "result" ? (data.isError ? "failed" : "done") : "running";
  const result = data.phase === "result" ? data.result : data.partialResult;
  if (result) card.querySelector("pre").textContent = joined(result.content, "text");
}

function onApproval(payload) {
  const request_ = payload.request || {};
  if (typeof payload.id !== "string" || !payload.id || request_.sessionKey !== state.current) return;
  const card = document.createElement("li");
  card.className = "message approval";
  card.dataset.testid = "approval";
  const question = document.createElement("p");
  question.textContent = `Allow: ${request_.commandPreview || request_.command || request_.toolName || "a tool call"}?`;
  card.append(question);
  const decisions = Array.isArray(payload.allowedDecisions) ? payload.allowedDecisions : ["allow-once", "allow-always", "deny"];
  const labels = { "allow-once": "Allow once", "allow-always": "Always allow", deny: "Reject" };
  for (const decision of decisions.filter((d) => labels[d])) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = labels[decision];
    button.dataset.testid = `approval-${decision === "deny" ? "reject" : decision}`;
    button.addEventListener("click", async () => {
      for (const b of card.querySelectorAll("button")) b.disabled = true;
      try {
        await request("exec.approval.resolve", { id: payload.id, decision });
        question.textContent += ` (${labels[decision]})`;
      } catch (error) {
        question.textContent += ` (${error.message})`;
      }
    });
    card.append(button);
  }
  $("messages").append(card);
}

async function stop() {
  for (const [runId, run] of state.runs) {
    if (run.ours) await request("chat.abort", { sessionKey: run.key, runId }).catch(() => {});
  }
}

// ---- rendering ---------------------------------------------------------

function joined(content, kind) {
  if (typeof content === "string") return kind === "text" ? content : "";
  if (!Array.isArray(content)) return "";
  return content.filter((b) => b && b.type === kind && typeof b[kind] === "string").map((b) => b[kind]).join("\n");
}

function addMessage(role, text) {
  const item = document.createElement("li");
  item.className = "message";
  item.dataset.testid = "message";
  item.dataset.role = role;
  item.textContent = text;
  $("messages").append(item);
  item.scrollIntoView({ block: "end" });
  return item;
}

function status(text) {
  $("status").textContent = text;
}

function busy(on) {
  $("stop").disabled = !on;
}

// ---- start -------------------------------------------------------------

$("login-form").addEventListener("submit", (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  const kind = document.querySelector('input[name="kind"]:checked').value;
  state.credential = { kind, secret: $("login-secret").value };
  $("login-secret").value = "";
  connect();
});
$("composer").addEventListener("submit", send);
$("message-input").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) send(event);
});
$("stop").addEventListener("click", stop);
$("session-new").addEventListener("click", newSession);
$("session-search").addEventListener("input", renderSessions);

const stored = sessionStorage.getItem(STORE);
if (stored) {
  try {
    state.credential = JSON.parse(stored);
    $("stay").checked = true;
    connect();
  } catch {
    sessionStorage.removeItem(STORE);
  }
}
