// pincer's web chat page: a client of the gateway protocol (docs/gateway.md)
// on the page's own origin. No framework, no build step, no remote source:
// the gateway serves this file from its binary. Model and tool text is
// turned into DOM nodes with textContent only, never parsed as HTML.

import { renderMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const STORE = "pincer.gateway.credential";
/// Images larger than this are refused before upload (the gateway's frames
/// hold 32 MiB; base64 grows a file by a third).
const MAX_IMAGE = 10 * 1024 * 1024;
const QUEUE_MODES = [
  ["steer", "Steer: tell the running turn"],
  ["followup", "Follow up: run after the turn"],
  ["collect", "Collect: one follow-up for all"],
  ["interrupt", "Interrupt: stop the turn, run this"],
];

const state = {
  ws: null,
  nextId: 1,
  pending: new Map(),
  credential: null,
  signedIn: false,
  backoff: 250,
  retry: null,
  bootId: null,
  defaults: {},
  models: [],
  sessions: [],
  current: null,
  // The current session is in the gateway's list (or only on this page).
  runs: new Map(),
  approvals: new Map(),
  attachments: [],
  refreshTimer: null,
};

// ---- protocol ----------------------------------------------------------

function request(method, params) {
  return new Promise((resolve, reject) => {
    if (!state.ws || state.ws.readyState !== WebSocket.OPEN) {
      reject(new Error("not connected to the gateway"));
      return;
    }
    const id = String(state.nextId++);
    state.pending.set(id, { resolve, reject });
    state.ws.send(JSON.stringify({ type: "req", id, method, params }));
  });
}

function connect() {
  clearTimeout(state.retry);
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const ws = new WebSocket(`${scheme}://${location.host}/`);
  state.ws = ws;
  let opened = false;
  ws.onopen = () => {
    opened = true;
  };
  ws.onmessage = (message) => {
    if (ws !== state.ws) return;
    let frame;
    try {
      frame = JSON.parse(message.data);
    } catch {
      return;
    }
    if (!frame || typeof frame !== "object") return;
    if (frame.type === "res") {
      const waiter = state.pending.get(frame.id);
      if (!waiter) return;
      state.pending.delete(frame.id);
      if (frame.ok) waiter.resolve(frame.payload);
      else waiter.reject(new Error(frame.error?.message || "the gateway refused"));
    } else if (frame.type === "event" && typeof frame.event === "string") {
      try {
        onEvent(frame.event, frame.payload && typeof frame.payload === "object" ? frame.payload : {});
      } catch (error) {
        console.error("pincer: an event could not be shown", error);
      }
    }
  };
  ws.onclose = () => {
    if (ws !== state.ws) return;
    for (const waiter of state.pending.values()) waiter.reject(new Error("connection lost"));
    state.pending.clear();
    for (const run of state.runs.values()) run.gap = true;
    if (state.credential) {
      const wait = `${Math.round(state.backoff / 100) / 10} s`;
      if (state.signedIn) connection("reconnecting", `Connection lost; reconnecting in ${wait}…`);
      else if (opened) $("login-error").textContent = `The gateway closed the connection; trying again in ${wait}…`;
      else {
        $("login-error").textContent =
          `Cannot reach the gateway, or it refused this page's origin (${location.origin}: a gateway reached by a host name lists it in [gateway] allowed_origins); trying again in ${wait}…`;
      }
      state.retry = setTimeout(connect, state.backoff);
      state.backoff = Math.min(state.backoff * 2, 30000);
    }
  };
}

function onEvent(name, payload) {
  switch (name) {
    case "connect.challenge":
      return hello();
    case "chat":
      return onChat(payload);
    case "agent":
      // A run another client started: busy from its start, not its first words.
      if (payload.stream === "lifecycle" && payload.data?.phase === "start") runOf(payload);
      else if (payload.stream === "thinking") onThinking(payload);
      else if (payload.stream === "tool") onTool(payload);
      else if (payload.stream === "usage") onUsage(payload.sessionKey, payload.data);
      else if (payload.stream === "subagent") onHelper(payload);
      return;
    case "session.message":
      return onSessionMessage(payload);
    case "sessions.changed":
      return refreshSessionsSoon();
    case "exec.approval.requested":
      return onApproval(payload);
    case "exec.approval.resolved":
      return onApprovalResolved(payload);
  }
}

function hello() {
  if (!state.credential) return;
  const auth = state.credential.kind === "password"
    ? { password: state.credential.secret }
    : { token: state.credential.secret };
  request("connect", {
    minProtocol: 4,
    maxProtocol: 4,
    client: { id: "webchat", displayName: "pincer web", version: "web", platform: "browser", mode: "webchat" },
    // The events of the sessions this page shows only, and chat deltas
    // with the new text only (the page builds the run's text from them).
    caps: ["tool-events", "exec-approvals", "session-scoped-events", "pincer.chat-deltas"],
    role: "operator",
    scopes: ["operator.admin"],
    auth,
  }).then(onHello, onRefused);
}

async function onHello(payload) {
  const again = state.signedIn;
  const bootId = payload?.server?.bootId ?? null;
  const restarted = again && bootId !== state.bootId;
  const shownBefore = state.current;
  state.bootId = bootId;
  state.signedIn = true;
  state.backoff = 250;
  state.defaults = payload?.snapshot?.sessionDefaults || {};
  if ($("stay").checked) sessionStorage.setItem(STORE, JSON.stringify(state.credential));
  $("login").hidden = true;
  $("app").hidden = false;
  connection("connected", "");
  // The message box, at once (not after the loads below, when the user
  // may have moved on: focus is never taken from where they are).
  if (!again && !$("app").contains(document.activeElement)) $("message-input").focus();
  request("sessions.subscribe", {}).catch(() => {});
  request("models.list", {}).then((r) => {
    state.models = Array.isArray(r?.models) ? r.models : [];
    renderSettings();
  }, () => {});
  await loadSessions().catch((error) => status(error.message));
  loadScheduled();
  await loadApprovals();
  if (!again) {
    // The address names the session shown before a reload. Only one the
    // gateway lists is opened: a link someone sent must not point the
    // user's next message at a session of their choosing (a chat
    // channel's, say); an unknown or malformed one opens the latest.
    let wanted = null;
    try {
      if (location.hash.startsWith("#s=")) wanted = decodeURIComponent(location.hash.slice(3));
    } catch {
      wanted = null;
    }
    const listed = state.sessions.some((r) => r.key === wanted);
    const first = listed ? wanted : state.sessions[0]?.key;
    // A session the user started (a message sent) or opened while the
    // lists above loaded stays shown: opening another would hide it.
    if (state.current !== shownBefore) return;
    if (first) await openSession(first);
    else newSession(false);
  } else {
    await reconcile(restarted);
  }
}

/// After a reconnect: runs that ended while the line was down are settled
/// from the gateway (and the session reloaded from its history, which has
/// their whole text); runs still going carry on, and their end (which
/// carries the run's whole text) fills in what the line missed. A
/// restarted gateway ran nothing of ours to its end.
async function reconcile(restarted) {
  let reload = false;
  for (const [runId, run] of [...state.runs]) {
    let ended = restarted;
    if (!ended) {
      const waited = await request("agent.wait", { runId, timeoutMs: 0 }).catch(() => ({ status: "error" }));
      ended = waited?.status !== "timeout";
    }
    if (ended) {
      endRun(runId, run);
      if (run.key === state.current) reload = true;
    }
  }
  if (restarted) status("The gateway restarted.");
  if (state.current && reload) await openSession(state.current);
  else if (state.current) await request("chat.subscribe", { sessionKey: state.current }).catch(() => {});
  updateBusy();
}

function onRefused(error) {
  state.signedIn = false;
  state.credential = null;
  sessionStorage.removeItem(STORE);
  $("login").hidden = false;
  $("app").hidden = true;
  $("login-error").textContent = error.message;
  state.ws?.close();
  $("login-secret").focus();
}

function signOut() {
  state.signedIn = false;
  state.credential = null;
  sessionStorage.removeItem(STORE);
  clearTimeout(state.retry);
  state.ws?.close();
  state.ws = null;
  $("app").hidden = true;
  $("login").hidden = false;
  $("login-secret").focus();
}

// ---- sessions ----------------------------------------------------------

async function loadSessions() {
  const listed = await request("sessions.list", { limit: 500, includeDerivedTitles: true });
  state.sessions = Array.isArray(listed?.sessions) ? listed.sessions.filter((r) => r && typeof r.key === "string") : [];
  renderSessions();
  renderHeader();
  if (state.shown) showHelpers(state.shown);
}

function refreshSessionsSoon() {
  clearTimeout(state.refreshTimer);
  state.refreshTimer = setTimeout(() => {
    loadSessions().catch(() => {});
    loadScheduled();
  }, 150);
}

/// The gateway's scheduled runs (`cron.list`): each job and the heartbeat
/// with its next run. A gateway without the method (OpenClaw's) shows none.
async function loadScheduled() {
  let listed;
  try {
    listed = await request("cron.list", {});
  } catch {
    $("scheduled").hidden = true;
    return;
  }
  const rows = Array.isArray(listed?.jobs) ? listed.jobs.filter((j) => j && typeof j.name === "string") : [];
  const items = rows.map((job) => ({ name: job.name, detail: nextText(job.state?.nextRunAtMs) }));
  for (const job of Array.isArray(listed?.invalid) ? listed.invalid : []) {
    if (job && typeof job.name === "string") items.push({ name: job.name, detail: "not running: see the gateway's log" });
  }
  const beat = listed?.heartbeat;
  if (beat && typeof beat === "object") {
    items.push({ name: "Heartbeat", detail: beat.error ? "not running: see the gateway's log" : nextText(beat.nextRun?.atMs) });
  }
  const list = $("scheduled-list");
  list.replaceChildren();
  for (const item of items) {
    const li = document.createElement("li");
    li.dataset.testid = "scheduled-item";
    const name = document.createElement("span");
    name.className = "scheduled-name";
    name.textContent = item.name;
    const detail = document.createElement("small");
    detail.textContent = item.detail;
    li.append(name, detail);
    list.append(li);
  }
  $("scheduled").hidden = items.length === 0;
}

function nextText(at) {
  return typeof at === "number" ? `next ${new Date(at).toLocaleString()}` : "no run to come";
}

function currentRow() {
  return state.sessions.find((r) => r.key === state.current);
}

function titleOf(row) {
  return (row && (row.label || row.derivedTitle || row.displayName)) || "";
}

function renderSessions() {
  const list = $("session-list");
  const search = $("session-search").value.trim().toLowerCase();
  list.replaceChildren();
  for (const [row, depth] of nestedRows(state.sessions)) {
    const title = titleOf(row) || row.key;
    const haystack = `${title} ${row.key} ${row.spawnedCwd || ""} ${row.model || ""}`.toLowerCase();
    if (search && !haystack.includes(search)) continue;
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.testid = "session-item";
    button.dataset.key = row.key;
    if (depth) {
      item.className = `helper-row depth-${Math.min(depth, 3)}`;
      button.setAttribute("aria-label", `${title} (helper)`);
    }
    if (row.key === state.current) button.setAttribute("aria-current", "true");
    const name = document.createElement("span");
    name.className = "session-title";
    name.textContent = title;
    const meta = document.createElement("small");
    const when = typeof row.updatedAt === "number" ? new Date(row.updatedAt).toLocaleString() : "";
    // A chat's session says which chat it is (`telegram:dm:123`).
    const chat = /^(telegram|slack|discord|whatsapp):(dm|group|thread):/.test(row.key) ? row.key : "";
    meta.textContent = [chat, when, row.spawnedCwd, row.model].filter(Boolean).join(" · ");
    button.append(name, meta);
    button.addEventListener("click", () => {
      openSession(row.key);
      $("app").classList.remove("show-sessions");
    });
    item.append(button);
    list.append(item);
  }
  if (!list.children.length) {
    const empty = document.createElement("li");
    empty.className = "empty";
    empty.textContent = search ? "No session matches." : "No sessions yet.";
    list.append(empty);
  }
}

/// The rows with each helper right under the session that started it, and
/// its depth (0 for a session of its own); a helper whose parent is not
/// listed stands on its own.
function nestedRows(rows) {
  const keys = new Set(rows.map((r) => r.key));
  const children = new Map();
  const roots = [];
  for (const row of rows) {
    const parent = row.parentSessionKey;
    if (typeof parent === "string" && parent !== row.key && keys.has(parent)) {
      if (!children.has(parent)) children.set(parent, []);
      children.get(parent).push(row);
    } else {
      roots.push(row);
    }
  }
  const out = [];
  const seen = new Set();
  const visit = (row, depth) => {
    if (seen.has(row.key)) return;
    seen.add(row.key);
    out.push([row, depth]);
    for (const child of children.get(row.key) || []) visit(child, depth + 1);
  };
  for (const row of roots) visit(row, 0);
  return out;
}

async function openSession(key) {
  const left = state.shown;
  state.current = key;
  history.replaceState(null, "", `#s=${encodeURIComponent(key)}`);
  const switched = state.shown !== key;
  state.shown = key;
  if (switched) leave(left);
  renderSessions();
  renderHeader();
  // Another session's messages go at once; the same session's stay until
  // its history replaces them (a reload after a reconnect does not flash).
  if (switched) $("messages").replaceChildren();
  for (const run of state.runs.values()) run.segment = null;
  let loaded;
  try {
    loaded = await request("chat.history", { sessionKey: key, limit: 500 });
  } catch (error) {
    status(error.message);
    return;
  }
  if (state.current !== key) return;
  $("messages").replaceChildren();
  renderHistory(Array.isArray(loaded?.messages) ? loaded.messages : []);
  showHelpers(key);
  for (const approval of state.approvals.values()) {
    if (approval.sessionKey === key && !approval.card.isConnected) $("messages").append(approval.card);
  }
  // A run of this session that went on while another was shown: its
  // finished messages are in the history, and the whole of it will be
  // once it ends.
  for (const run of state.runs.values()) {
    run.segment = null;
    if (run.key === key) run.gap = true;
  }
  updateBusy();
  scrollDown();
}

function newSession(focus = true) {
  const left = state.shown;
  state.current = `web:${crypto.randomUUID()}`;
  state.shown = state.current;
  leave(left);
  history.replaceState(null, "", `#s=${encodeURIComponent(state.current)}`);
  $("messages").replaceChildren();
  renderSessions();
  renderHeader();
  updateBusy();
  if (focus) $("message-input").focus();
}

async function renameSession() {
  const row = currentRow();
  const dialog = $("rename-dialog");
  $("rename-input").value = titleOf(row);
  dialog.showModal();
  $("rename-input").select();
}

async function submitRename(event) {
  event.preventDefault();
  const label = $("rename-input").value.trim();
  $("rename-dialog").close();
  if (!label) return;
  try {
    await request("sessions.patch", { key: state.current, label });
    await loadSessions();
  } catch (error) {
    status(`Rename failed: ${error.message}`);
  }
}

async function deleteSession() {
  const row = currentRow();
  if (!row) return;
  $("delete-name").textContent = titleOf(row) || row.key;
  $("delete-dialog").showModal();
}

async function submitDelete(event) {
  event.preventDefault();
  $("delete-dialog").close();
  const key = state.current;
  try {
    await request("sessions.delete", { key });
  } catch (error) {
    status(`Delete failed: ${error.message}`);
    return;
  }
  await loadSessions();
  const next = state.sessions.find((r) => r.key !== key);
  if (next) await openSession(next.key);
  else newSession();
  status("Session deleted.");
}

// ---- settings: model, mode, thinking, queue; usage ---------------------

function renderHeader() {
  const row = currentRow();
  $("session-title").textContent = titleOf(row) || (row ? row.key : "New session");
  $("session-rename").disabled = !row;
  $("session-delete").disabled = !row;
  // A helper's session leads back to the one that started it.
  const parent = $("session-parent");
  parent.hidden = typeof row?.parentSessionKey !== "string";
  parent.dataset.key = row?.parentSessionKey || "";
  renderSettings();
  renderUsage(row);
}

function fill(select, options, value) {
  select.replaceChildren();
  for (const [id, label] of options) {
    const option = document.createElement("option");
    option.value = id;
    option.textContent = label;
    select.append(option);
  }
  if (value && !options.some(([id]) => id === value)) {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value;
    select.append(option);
  }
  if (value) select.value = value;
}

function renderSettings() {
  const row = currentRow();
  const d = state.defaults;
  const model = row?.model ? (row.modelProvider ? `${row.modelProvider}/${row.model}` : row.model) : d.model;
  fill($("model-select"), state.models.map((m) => [m.id, m.name ? `${m.name} (${m.provider})` : m.id]), model);
  const modes = Array.isArray(d.permissionModes) ? d.permissionModes : [];
  fill($("mode-select"), modes.map((m) => [m.id, m.name || m.id]), row?.mode || d.permissionMode);
  const levels = Array.isArray(row?.thinkingLevels) ? row.thinkingLevels : Array.isArray(d.thinkingLevels) ? d.thinkingLevels : [];
  fill($("thinking-select"), levels.map((l) => [l.id, l.label || l.id]), row?.thinkingLevel || d.thinkingLevel);
  fill($("queue-select"), QUEUE_MODES, row?.queueMode || d.queueMode || "steer");
}

async function changeSetting(field, value) {
  try {
    const result = await request("sessions.patch", { key: state.current, [field]: value });
    if (result?.entry) {
      const at = state.sessions.findIndex((r) => r.key === state.current);
      if (at >= 0) state.sessions[at] = result.entry;
      else state.sessions.unshift(result.entry);
      renderSessions();
    }
    renderHeader();
    status("");
  } catch (error) {
    status(`Could not change the ${field}: ${error.message}`);
    renderSettings();
  }
}

function onUsage(key, usage) {
  if (!usage || typeof usage !== "object") return;
  const row = state.sessions.find((r) => r.key === key);
  if (row) {
    if (Number.isFinite(usage.contextTokens)) row.totalTokens = usage.contextTokens;
    if (Number.isFinite(usage.contextWindow)) row.contextTokens = usage.contextWindow;
    if (Number.isFinite(usage.costUsd)) row.costUsd = usage.costUsd;
  }
  if (key === state.current) renderUsage(row || { totalTokens: usage.contextTokens, contextTokens: usage.contextWindow, costUsd: usage.costUsd });
}

function renderUsage(row) {
  const used = row?.totalTokens;
  const window = row?.contextTokens;
  const parts = [];
  if (Number.isFinite(used)) {
    let text = `Context: ${used.toLocaleString()}`;
    if (Number.isFinite(window) && window > 0) text += ` / ${window.toLocaleString()} tokens (${Math.round((used / window) * 100)}%)`;
    else text += " tokens";
    parts.push(text);
  }
  if (Number.isFinite(row?.costUsd)) parts.push(`Cost: $${row.costUsd.toFixed(4)}`);
  $("usage").textContent = parts.join(" · ");
}

// ---- chat --------------------------------------------------------------

async function send(event) {
  event?.preventDefault();
  const input = $("message-input");
  const text = input.value;
  const images = state.attachments;
  if (!text.trim() && !images.length) return;
  if (!state.current) newSession();
  const key = state.current;
  input.value = "";
  state.attachments = [];
  renderAttachments();
  const item = addMessage("user", text);
  for (const image of images) item.append(imageNode(image.dataUrl, image.name));
  const runId = crypto.randomUUID();
  state.runs.set(runId, newRun(key, true));
  updateBusy();
  const params = { sessionKey: key, message: text, idempotencyKey: runId };
  if (images.length) params.attachments = images.map((i) => ({ type: "image", mimeType: i.mimeType, content: i.base64 }));
  try {
    await request("chat.send", params);
    if (!currentRow()) refreshSessionsSoon();
  } catch (error) {
    status(`Not sent: ${error.message}`);
    state.runs.delete(runId);
    item.classList.add("failed");
    updateBusy();
  }
}

function newRun(key, ours) {
  return { ours, key, text: "", thinking: "", seq: 0, segment: null, textStart: 0, thinkingStart: 0, tools: new Map(), gap: false };
}

function runOf(payload) {
  if (typeof payload.runId !== "string") return null;
  let run = state.runs.get(payload.runId);
  if (!run && typeof payload.sessionKey === "string" && payload.sessionKey === state.current) {
    run = newRun(payload.sessionKey, false);
    state.runs.set(payload.runId, run);
    updateBusy();
  }
  return run;
}

function onSessionMessage(payload) {
  if (payload.sessionKey !== state.current) return;
  if (state.runs.get(payload.runId)?.ours) return;
  runOf(payload);
  const content = payload.message?.content;
  addMessage("user", joined(content, "text"));
}

function onChat(payload) {
  // A helper's run that ended: its card in its parent's call says so.
  if (typeof payload.spawnedBy === "string" && HELPER_END[payload.state]) {
    const helper = helperOf(payload.sessionKey);
    if (helper) setHelperState(helper, HELPER_END[payload.state]);
  }
  const run = runOf(payload);
  if (!run) return;
  if (Number.isInteger(payload.seq)) {
    if (payload.seq <= run.seq) return;
    run.seq = payload.seq;
  }
  const message = payload.message;
  if (payload.state === "delta" && typeof payload.deltaText === "string" && !(message && typeof message === "object")) {
    // The new text only (`pincer.chat-deltas`); `replace` starts it over.
    if (payload.replace === true) run.text = payload.deltaText;
    else run.text += payload.deltaText;
  } else if (message && typeof message === "object") {
    // The run's whole text so far: what extends what is shown is news, and
    // a shorter snapshot never takes text away.
    const text = joined(message.content, "text");
    if (text.startsWith(run.text) || !run.text.startsWith(text)) run.text = text;
    const thinking = joined(message.content, "thinking");
    if (thinking.startsWith(run.thinking) || !run.thinking.startsWith(thinking)) run.thinking = thinking;
  }
  if (run.key === state.current) showRun(run);
  if (payload.usage) onUsage(run.key, payload.usage);
  if (["final", "aborted", "error"].includes(payload.state)) {
    if (payload.state === "error") status(payload.errorMessage || "The turn failed.");
    else if (payload.state === "aborted") status("Stopped.");
    else status("");
    endRun(payload.runId, run);
    if (run.gap && run.key === state.current) openSession(run.key);
    refreshSessionsSoon();
  }
}

/// Thinking arrives as deltas of the run's `agent` `thinking` stream.
function onThinking(payload) {
  const run = runOf(payload);
  const delta = payload.data?.delta;
  if (!run || typeof delta !== "string" || !delta) return;
  run.thinking += delta;
  if (run.key === state.current) showRun(run);
}

function endRun(runId, run) {
  state.runs.delete(runId);
  if (run.segment) run.segment.removeAttribute("aria-busy");
  leave(run.key);
  updateBusy();
  if (run.key === state.shown) refreshTurnActions(run.key);
}

/// A turn that ended is one the page can go back to: the user messages
/// shown live get their actions once the history numbers them.
async function refreshTurnActions(key) {
  let loaded;
  try {
    loaded = await request("chat.history", { sessionKey: key, limit: 500 });
  } catch {
    return;
  }
  if (state.shown !== key) return;
  const users = (Array.isArray(loaded?.messages) ? loaded.messages : []).filter((m) => m?.role === "user");
  const shown = [...$("messages").querySelectorAll("[data-testid=message][data-role=user]")];
  // The page may show fewer than the history holds (a long one): the
  // last ones match.
  const offset = users.length - shown.length;
  shown.forEach((item, i) => {
    const message = users[i + offset];
    if (message && Number.isInteger(message.turn) && message.turn > 0 && !item.querySelector(".turn-actions")) {
      addTurnActions(item, message.turn);
    }
  });
}

/// The page hears the session it shows: one it left stops sending it
/// events once no run of it that the page follows is still going (that
/// run's end unsubscribes it).
function leave(key) {
  if (!key || key === state.shown || !state.signedIn) return;
  for (const run of state.runs.values()) if (run.key === key) return;
  request("chat.unsubscribe", { sessionKey: key }).catch(() => {});
}

/// The run's text and thinking since its last tool call, in the message
/// after that call's card.
function showRun(run) {
  const text = run.text.slice(run.textStart);
  const thinking = run.thinking.slice(run.thinkingStart);
  if (!text && !thinking) return;
  if (!run.segment || !run.segment.isConnected) {
    run.segment = addMessage("assistant", "");
    run.segment.setAttribute("aria-busy", "true");
  }
  renderAssistant(run.segment, text, thinking);
  scrollDown();
}

function renderAssistant(element, text, thinking) {
  let details = element.querySelector(":scope > details.thinking");
  if (thinking) {
    if (!details) {
      details = document.createElement("details");
      details.className = "thinking";
      details.dataset.testid = "thinking";
      const summary = document.createElement("summary");
      summary.textContent = "Thinking";
      const body = document.createElement("div");
      body.className = "thinking-text";
      details.append(summary, body);
      element.prepend(details);
    }
    details.querySelector(".thinking-text").textContent = thinking;
  }
  let body = element.querySelector(":scope > .body");
  if (!body) {
    body = document.createElement("div");
    body.className = "body";
    element.append(body);
  }
  if (body.dataset.source !== text) {
    body.dataset.source = text;
    renderMarkdown(body, text);
  }
}

function onTool(payload) {
  const run = runOf(payload);
  const data = payload.data;
  if (!run || !data || typeof data.toolCallId !== "string" || run.key !== state.current) return;
  let card = run.tools.get(data.toolCallId) || findCard(data.toolCallId);
  if (!card) {
    card = toolCard(data.toolCallId);
    run.tools.set(data.toolCallId, card);
    // A question about this call that came first stays below its card.
    const question = [...$("messages").querySelectorAll("[data-testid=approval]")].find((q) => q.dataset.toolCallId === data.toolCallId);
    if (question) question.before(card);
    else $("messages").append(card);
    // Text after the call is a new message below its card.
    if (run.segment) run.segment.removeAttribute("aria-busy");
    run.segment = null;
    run.textStart = run.text.length;
    run.thinkingStart = run.thinking.length;
  }
  updateCard(card, {
    title: data.title,
    name: data.name,
    kind: data.kind,
    args: data.phase === "start" ? data.args : undefined,
    status: data.phase === "result" ? (data.isError ? "failed" : "completed") : data.phase === "start" ? "pending" : "in_progress",
    result: data.phase === "result" ? data.result : data.partialResult,
    diffs: data.diffs,
    output: data.output,
  });
  scrollDown();
}

// ---- helpers: the sessions a `task` call started -------------------------

const HELPER_TEXT = { running: "running", done: "done", stopped: "stopped", failed: "failed", interrupted: "interrupted" };
const HELPER_END = { final: "done", aborted: "stopped", error: "failed" };

/// A helper started or ended (the parent run's `subagent` stream): a card
/// inside its `task` call's, which opens the helper's session or stops it.
function onHelper(payload) {
  const data = payload.data;
  if (!data || payload.sessionKey !== state.current || typeof data.childSessionKey !== "string") return;
  const card = findCard(data.toolCallId);
  if (!card) return;
  const helper = helperCard(card, data.childSessionKey, data);
  setHelperState(helper, data.phase === "end" ? data.state : "running");
}

/// The helpers of the session shown, from its rows: cards in the calls
/// of its history.
function showHelpers(key) {
  if (key !== state.shown) return;
  for (const row of state.sessions) {
    if (row.parentSessionKey !== key || typeof row.parentToolCallId !== "string") continue;
    const card = findCard(row.parentToolCallId);
    if (!card) continue;
    const helper = helperCard(card, row.key, { title: titleOf(row), agent: row.subagent });
    // What the page heard live wins over a listing that may be older: a
    // listing cannot bring an ended helper back to running, nor call one
    // the page has heard start "interrupted" (a listing made before the
    // gateway heard of it); only an end it has not heard yet is news.
    const ended = ["done", "stopped", "failed"].includes(row.helperState);
    if (!helper.dataset.state || ended) setHelperState(helper, row.helperState);
  }
}

function helperOf(key) {
  return [...$("messages").querySelectorAll("[data-testid=helper-card]")].find((c) => c.dataset.key === key);
}

function helperCard(card, key, info) {
  let list = card.querySelector(":scope > .helpers");
  if (!list) {
    list = document.createElement("ul");
    list.className = "helpers";
    list.setAttribute("aria-label", "Helpers");
    card.append(list);
  }
  let item = [...list.children].find((c) => c.dataset.key === key);
  if (item) return item;
  const name = typeof info.title === "string" && info.title ? info.title : "Helper";
  item = document.createElement("li");
  item.className = "helper";
  item.dataset.testid = "helper-card";
  item.dataset.key = key;
  const title = document.createElement("strong");
  title.dataset.testid = "helper-title";
  title.textContent = name;
  const agent = document.createElement("small");
  agent.dataset.testid = "helper-agent";
  agent.textContent = [typeof info.agent === "string" ? info.agent : "", info.background === true ? "in the background" : ""].filter(Boolean).join(" · ");
  const shown = document.createElement("span");
  shown.className = "helper-status";
  shown.dataset.testid = "helper-status";
  const open = document.createElement("button");
  open.type = "button";
  open.dataset.testid = "helper-open";
  open.textContent = "Open";
  open.setAttribute("aria-label", `Open helper: ${name}`);
  open.addEventListener("click", () => openSession(key));
  const stop = document.createElement("button");
  stop.type = "button";
  stop.className = "danger";
  stop.dataset.testid = "helper-stop";
  stop.textContent = "Stop";
  stop.setAttribute("aria-label", `Stop helper: ${name}`);
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    try {
      await request("chat.abort", { sessionKey: key });
    } catch (error) {
      status(error.message);
      stop.disabled = false;
    }
  });
  item.append(title, agent, shown, open, stop);
  list.append(item);
  return item;
}

function setHelperState(item, name) {
  const known = HELPER_TEXT[name] ? name : "done";
  item.dataset.state = known;
  item.querySelector("[data-testid=helper-status]").textContent = HELPER_TEXT[known];
  item.querySelector("[data-testid=helper-stop]").hidden = known !== "running";
}

function findCard(id) {
  return [...$("messages").querySelectorAll("[data-testid=tool-card]")].find((c) => c.dataset.toolCallId === id);
}

function toolCard(id) {
  const card = document.createElement("li");
  card.className = "message tool";
  card.dataset.testid = "tool-card";
  card.dataset.toolCallId = id;
  const head = document.createElement("div");
  head.className = "tool-head";
  const kind = document.createElement("span");
  kind.className = "tool-kind";
  kind.dataset.testid = "tool-kind";
  const title = document.createElement("strong");
  title.className = "tool-title";
  title.dataset.testid = "tool-title";
  const status = document.createElement("span");
  status.className = "tool-status";
  status.dataset.testid = "tool-status";
  head.append(kind, title, status);
  const args = document.createElement("details");
  args.className = "tool-args";
  args.hidden = true;
  const summary = document.createElement("summary");
  summary.textContent = "Arguments";
  const argsText = document.createElement("pre");
  argsText.dataset.testid = "tool-args";
  args.append(summary, argsText);
  const output = document.createElement("div");
  output.className = "tool-output";
  card.append(head, args, output);
  return card;
}

const STATUS_TEXT = { pending: "pending", in_progress: "running", completed: "done", failed: "failed" };

function updateCard(card, update) {
  const kind = typeof update.kind === "string" ? update.kind : card.dataset.kind || kindOf(update.name);
  card.dataset.kind = kind;
  card.querySelector(".tool-kind").textContent = kind;
  // A call's title comes with its start; later updates name only the tool.
  const titled = card.querySelector(".tool-title");
  if (typeof update.title === "string" && update.title) titled.textContent = update.title;
  else if (!titled.textContent && typeof update.name === "string") titled.textContent = update.name;
  if (update.status) {
    card.dataset.status = update.status;
    card.querySelector(".tool-status").textContent = STATUS_TEXT[update.status];
  }
  if (update.args && typeof update.args === "object" && Object.keys(update.args).length) {
    const args = card.querySelector(".tool-args");
    args.hidden = false;
    args.querySelector("pre").textContent = JSON.stringify(update.args, null, 2);
  }
  const output = card.querySelector(".tool-output");
  const diffs = Array.isArray(update.diffs) ? update.diffs.filter((d) => d && typeof d.path === "string") : [];
  if (diffs.length) {
    output.replaceChildren(...diffs.map(diffView));
  } else if (kind === "execute" && typeof update.output === "string") {
    // A command's output as it prints (the gateway sends the tail so far),
    // then as the model read it.
    const pre = document.createElement("pre");
    pre.className = "terminal";
    pre.dataset.testid = "tool-terminal";
    pre.textContent = update.output;
    output.replaceChildren(pre);
  } else if (update.result && typeof update.result === "object") {
    const text = joined(update.result.content, "text");
    if (text) {
      const pre = document.createElement("pre");
      if (kind === "execute") {
        pre.className = "terminal";
        pre.dataset.testid = "tool-terminal";
      } else {
        pre.dataset.testid = "tool-output";
      }
      pre.textContent = text;
      output.replaceChildren(pre);
    }
  }
}

/// OpenClaw's clients infer a kind from the tool's name; so does the page
/// when the gateway does not say.
function kindOf(name) {
  const kinds = { read: "read", edit: "edit", write: "edit", delete: "delete", move: "move", grep: "search", find: "search", ls: "search", bash: "execute", exec: "execute", fetch: "fetch", think: "think" };
  return kinds[name] || "other";
}

/// An edit as a unified diff of its lines, with three lines of context.
function diffView(diff) {
  const figure = document.createElement("figure");
  figure.className = "diff";
  figure.dataset.testid = "tool-diff";
  const caption = document.createElement("figcaption");
  caption.textContent = diff.path;
  const pre = document.createElement("pre");
  const oldLines = typeof diff.oldText === "string" && diff.oldText !== "" ? diff.oldText.split("\n") : [];
  const newLines = typeof diff.newText === "string" && diff.newText !== "" ? diff.newText.split("\n") : [];
  const lines = lineDiff(oldLines, newLines);
  const keep = lines.map((l, i) => l.op !== " " || lines.slice(Math.max(0, i - 3), i + 4).some((n) => n.op !== " "));
  let skipped = false;
  lines.forEach((line, i) => {
    if (!keep[i]) {
      if (!skipped) {
        const gap = document.createElement("span");
        gap.className = "diff-gap";
        gap.textContent = "⋯\n";
        pre.append(gap);
      }
      skipped = true;
      return;
    }
    skipped = false;
    const span = document.createElement("span");
    span.className = line.op === "+" ? "diff-add" : line.op === "-" ? "diff-del" : "diff-ctx";
    span.textContent = `${line.op}${line.text}\n`;
    pre.append(span);
  });
  figure.append(caption, pre);
  return figure;
}

/// Lines removed, added and kept, by longest common subsequence; very large
/// edits are shown as all old lines removed and all new ones added.
function lineDiff(a, b) {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const head = a.slice(0, start).map((text) => ({ op: " ", text }));
  const tail = a.slice(endA).map((text) => ({ op: " ", text }));
  const x = a.slice(start, endA);
  const y = b.slice(start, endB);
  let middle = [];
  if (x.length * y.length > 4_000_000) {
    middle = [...x.map((text) => ({ op: "-", text })), ...y.map((text) => ({ op: "+", text }))];
  } else {
    const table = Array.from({ length: x.length + 1 }, () => new Uint32Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i--) {
      for (let j = y.length - 1; j >= 0; j--) {
        table[i][j] = x[i] === y[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) {
        middle.push({ op: " ", text: x[i] });
        i++;
        j++;
      } else if (j < y.length && (i === x.length || table[i][j + 1] > table[i + 1][j])) {
        middle.push({ op: "+", text: y[j++] });
      } else {
        middle.push({ op: "-", text: x[i++] });
      }
    }
  }
  return [...head, ...middle, ...tail];
}

// ---- history -----------------------------------------------------------

function renderHistory(messages) {
  const cards = new Map();
  for (const message of messages) {
    if (!message || typeof message !== "object") continue;
    if (message.role === "user") {
      const item = addMessage("user", joined(message.content, "text"));
      if (Number.isInteger(message.turn) && message.turn > 0) addTurnActions(item, message.turn);
      for (const block of Array.isArray(message.content) ? message.content : []) {
        if (block?.type === "image") {
          const note = document.createElement("span");
          note.className = "image-note";
          note.textContent = `[image${typeof block.mimeType === "string" ? `: ${block.mimeType}` : ""}]`;
          item.append(note);
        }
      }
    } else if (message.role === "assistant") {
      let segment = null;
      let text = "";
      let thinking = "";
      for (const block of Array.isArray(message.content) ? message.content : []) {
        if (block?.type === "text" && typeof block.text === "string") {
          text += (text ? "\n" : "") + block.text;
        } else if (block?.type === "thinking" && typeof block.thinking === "string") {
          thinking += block.thinking;
        } else if (block?.type === "toolCall" && typeof block.id === "string") {
          if (text || thinking) {
            segment = addMessage("assistant", "");
            renderAssistant(segment, text, thinking);
            text = "";
            thinking = "";
          }
          const card = toolCard(block.id);
          updateCard(card, { name: block.name, title: block.title || block.name, kind: block.kind, args: block.arguments, status: "pending" });
          cards.set(block.id, card);
          $("messages").append(card);
        }
      }
      if (text || thinking) renderAssistant(addMessage("assistant", ""), text, thinking);
    } else if (message.role === "toolResult") {
      const card = cards.get(message.toolCallId);
      if (card) {
        updateCard(card, {
          name: message.toolName,
          kind: message.kind,
          status: message.isError ? "failed" : "completed",
          result: { content: message.content },
          diffs: message.diffs,
        });
      }
    }
  }
}

// A user message that started a turn can be gone back to: its files and
// the conversation after it (the session asks before files change, as an
// approval), or forked into a new session that holds what came before it.
function addTurnActions(item, turn) {
  const actions = document.createElement("div");
  actions.className = "turn-actions";
  const rewind = document.createElement("button");
  rewind.type = "button";
  rewind.textContent = "Rewind to here";
  rewind.dataset.testid = "rewind-here";
  rewind.title = "Put the files back as they were before this message, and take it and what followed out of the conversation";
  const fork = document.createElement("button");
  fork.type = "button";
  fork.textContent = "Fork from here";
  fork.dataset.testid = "fork-here";
  fork.title = "A new session with the conversation before this message";
  const key = state.current;
  rewind.addEventListener("click", async () => {
    rewind.disabled = true;
    status(`Rewinding to before turn ${turn}…`);
    try {
      await request("sessions.rewind", { key, turn });
      if (state.current === key) await openSession(key);
    } catch (error) {
      status(`The rewind failed: ${error.message}`);
    } finally {
      rewind.disabled = false;
    }
  });
  fork.addEventListener("click", async () => {
    fork.disabled = true;
    try {
      const forked = await request("sessions.fork", { key, turn });
      await loadSessions();
      if (typeof forked?.key === "string") await openSession(forked.key);
      status("Forked into a new session.");
    } catch (error) {
      status(`The fork failed: ${error.message}`);
    } finally {
      fork.disabled = false;
    }
  });
  actions.append(rewind, fork);
  item.append(actions);
}

// ---- approvals ---------------------------------------------------------

async function loadApprovals() {
  const listed = await request("exec.approval.list", {}).catch(() => null);
  const pending = Array.isArray(listed) ? listed : [];
  const open = new Set(pending.map((a) => a?.id));
  for (const [id, approval] of state.approvals) {
    if (!open.has(id)) settleApproval(approval, "no longer pending");
  }
  for (const a of pending) {
    if (a && typeof a.id === "string" && !state.approvals.has(a.id)) {
      onApproval({ id: a.id, allowedDecisions: a.allowedDecisions, labels: a.labels, request: { sessionKey: a.sessionKey, commandPreview: a.commandPreview, command: a.commandText, toolName: a.toolName, toolCallId: a.toolCallId, details: a.details, diffs: a.diffs } });
    }
  }
}

const DECISIONS = { "allow-once": "Allow once", "allow-always": "Always allow", deny: "Reject" };

function onApproval(payload) {
  const asked = payload.request && typeof payload.request === "object" ? payload.request : {};
  if (typeof payload.id !== "string" || !payload.id || typeof asked.sessionKey !== "string") return;
  if (state.approvals.has(payload.id)) return;
  const card = document.createElement("li");
  card.className = "message approval";
  card.dataset.testid = "approval";
  card.dataset.approvalId = payload.id;
  if (typeof asked.toolCallId === "string") card.dataset.toolCallId = asked.toolCallId;
  const group = document.createElement("div");
  group.setAttribute("role", "group");
  const question = document.createElement("p");
  question.id = `approval-${payload.id}`;
  const what = asked.commandPreview || asked.command || asked.toolName || "a tool call";
  // A question of its own (a restore) names its choices, and its title
  // is the question; a tool's is a command to run.
  const own = payload.labels && typeof payload.labels === "object" && Object.keys(payload.labels).length > 0;
  question.textContent = own ? what : `pincer asks to run: ${what}`;
  group.setAttribute("aria-labelledby", question.id);
  const buttons = document.createElement("div");
  buttons.className = "approval-buttons";
  const offered = Array.isArray(payload.allowedDecisions) ? payload.allowedDecisions : Object.keys(DECISIONS);
  const approval = { id: payload.id, sessionKey: asked.sessionKey, card, question };
  // The question's own words for its choices when it has them (a restore
  // offers "Restore", not "Allow once").
  const labels = payload.labels && typeof payload.labels === "object" ? payload.labels : {};
  const labelOf = (decision) => (typeof labels[decision] === "string" && labels[decision]) || DECISIONS[decision];
  for (const decision of offered.filter((d) => DECISIONS[d])) {
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = labelOf(decision);
    button.dataset.testid = `approval-${decision === "deny" ? "reject" : decision}`;
    if (decision === "deny") button.className = "danger";
    button.addEventListener("click", async () => {
      for (const b of card.querySelectorAll("button")) b.disabled = true;
      try {
        await request("exec.approval.resolve", { id: payload.id, decision });
        settleApproval(approval, labelOf(decision));
      } catch (error) {
        for (const b of card.querySelectorAll("button")) b.disabled = false;
        status(`The answer did not reach the gateway: ${error.message}`);
      }
    });
    buttons.append(button);
  }
  group.append(question);
  // What the question says besides its title (the files a restore puts
  // back, what overwriting would lose) and its diffs, unless the card of
  // the call it asks about shows them already.
  if (typeof asked.details === "string" && asked.details) {
    const details = document.createElement("p");
    details.className = "approval-details";
    details.dataset.testid = "approval-details";
    details.textContent = asked.details;
    group.append(details);
  }
  const shownAlready = typeof asked.toolCallId === "string" && findCard(asked.toolCallId)?.querySelector("[data-testid=tool-diff]");
  if (Array.isArray(asked.diffs) && !shownAlready) {
    for (const diff of asked.diffs.filter((d) => d && typeof d.path === "string")) group.append(diffView(diff));
  }
  group.append(buttons);
  card.append(group);
  state.approvals.set(payload.id, approval);
  if (asked.sessionKey === state.current) {
    // The question goes below the card of the call it asks about, whichever
    // of the two events came first (see onTool).
    const asksAbout = typeof asked.toolCallId === "string" ? findCard(asked.toolCallId) : undefined;
    if (asksAbout) asksAbout.after(card);
    else $("messages").append(card);
    scrollDown();
    // Announced, not focused: a key pressed while typing must never answer.
    status(own ? `pincer asks: ${what}` : `pincer asks to run: ${what}`);
  } else {
    status(`A session is waiting for your approval: ${titleOf(state.sessions.find((r) => r.key === asked.sessionKey)) || asked.sessionKey}`);
  }
}

function onApprovalResolved(payload) {
  const approval = state.approvals.get(payload.id);
  if (!approval) return;
  const label = DECISIONS[payload.decision] || payload.decision;
  settleApproval(approval, payload.resolvedBy === "editor" ? `${label}, in the editor` : label);
}

function settleApproval(approval, outcome) {
  state.approvals.delete(approval.id);
  // Our own answer and the gateway's announcement of it both settle it.
  if (approval.card.dataset.resolved) return;
  approval.card.dataset.resolved = "true";
  for (const b of approval.card.querySelectorAll("button")) b.remove();
  const done = document.createElement("p");
  done.className = "approval-outcome";
  done.dataset.testid = "approval-outcome";
  done.textContent = outcome;
  approval.card.firstChild.append(done);
}

// ---- stop, busy --------------------------------------------------------

async function stop() {
  if (!state.current) return;
  try {
    await request("chat.abort", { sessionKey: state.current });
  } catch (error) {
    status(`Could not stop: ${error.message}`);
  }
}

function updateBusy() {
  const busy = [...state.runs.values()].some((r) => r.key === state.current);
  // Stop disables itself when the run ends: the focus it had goes to the
  // message box, not to the top of the page.
  if (!busy && document.activeElement === $("stop")) $("message-input").focus();
  $("stop").disabled = !busy;
  $("send").textContent = busy ? "Queue" : "Send";
  $("send").title = busy ? "The agent is working: this message follows the session's queue mode" : "";
}

// ---- images ------------------------------------------------------------

async function addImages(files) {
  for (const file of files) {
    if (!file.type.startsWith("image/")) {
      status(`${file.name} is not an image.`);
      continue;
    }
    if (file.size > MAX_IMAGE) {
      status(`${file.name} is larger than 10 MB.`);
      continue;
    }
    const dataUrl = await new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(reader.result);
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
    const base64 = String(dataUrl).slice(String(dataUrl).indexOf(",") + 1);
    state.attachments.push({ name: file.name || "pasted image", mimeType: file.type, base64, dataUrl });
  }
  renderAttachments();
}

function renderAttachments() {
  const list = $("attachments");
  list.replaceChildren();
  state.attachments.forEach((image, i) => {
    const item = document.createElement("li");
    item.dataset.testid = "attachment";
    item.append(imageNode(image.dataUrl, image.name));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "×";
    remove.dataset.testid = "attachment-remove";
    remove.setAttribute("aria-label", `Remove ${image.name}`);
    remove.addEventListener("click", () => {
      state.attachments.splice(i, 1);
      renderAttachments();
      $("message-input").focus();
    });
    item.append(remove);
    list.append(item);
  });
  list.hidden = !state.attachments.length;
}

/// The user's own image (a data: URL read from their file), never a
/// remote one.
function imageNode(dataUrl, name) {
  const img = document.createElement("img");
  img.className = "thumb";
  if (typeof dataUrl === "string" && dataUrl.startsWith("data:image/")) img.src = dataUrl;
  img.alt = name;
  return img;
}

// ---- rendering helpers -------------------------------------------------

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
  if (role === "user") {
    const body = document.createElement("div");
    body.className = "body";
    body.textContent = text;
    item.append(body);
  }
  $("messages").append(item);
  scrollDown();
  return item;
}

function scrollDown() {
  const list = $("log");
  if (list.scrollHeight - list.scrollTop - list.clientHeight < 200) list.scrollTop = list.scrollHeight;
}

function status(text) {
  $("status").textContent = text;
}

function connection(kind, text) {
  $("connection").dataset.state = kind;
  $("connection").textContent = text;
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
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) send(event);
  else if (event.key === "Escape" && !$("stop").disabled) stop();
});
$("message-input").addEventListener("paste", (event) => {
  const files = [...(event.clipboardData?.files || [])].filter((f) => f.type.startsWith("image/"));
  if (files.length) {
    event.preventDefault();
    addImages(files);
  }
});
$("attach-input").addEventListener("change", (event) => {
  addImages([...event.target.files]);
  event.target.value = "";
});
$("stop").addEventListener("click", stop);
$("attach").addEventListener("click", () => $("attach-input").click());
$("session-new").addEventListener("click", () => {
  newSession();
  $("app").classList.remove("show-sessions");
});
$("session-search").addEventListener("input", renderSessions);
$("session-rename").addEventListener("click", renameSession);
$("session-delete").addEventListener("click", deleteSession);
$("session-parent").addEventListener("click", () => {
  const key = $("session-parent").dataset.key;
  if (key) openSession(key);
});
$("rename-form").addEventListener("submit", submitRename);
$("rename-cancel").addEventListener("click", () => $("rename-dialog").close());
$("delete-form").addEventListener("submit", submitDelete);
$("delete-cancel").addEventListener("click", () => $("delete-dialog").close());
$("sessions-toggle").addEventListener("click", () => {
  const shown = $("app").classList.toggle("show-sessions");
  $("sessions-toggle").setAttribute("aria-expanded", String(shown));
});
$("sessions-close").addEventListener("click", () => {
  $("app").classList.remove("show-sessions");
  $("sessions-toggle").setAttribute("aria-expanded", "false");
  $("sessions-toggle").focus();
});
$("sign-out").addEventListener("click", signOut);
for (const [id, field] of [["model-select", "model"], ["mode-select", "permissionMode"], ["thinking-select", "thinkingLevel"], ["queue-select", "queueMode"]]) {
  $(id).addEventListener("change", (event) => changeSetting(field, event.target.value));
}

const stored = sessionStorage.getItem(STORE);
if (stored) {
  try {
    state.credential = JSON.parse(stored);
    $("stay").checked = true;
    connect();
  } catch {
    sessionStorage.removeItem(STORE);
  }
} else {
  $("login-secret").focus();
}
