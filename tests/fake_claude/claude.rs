//! A scripted stand-in for the `claude` CLI (Claude Code 2.1.197), for the
//! tests of pincer's Claude Code runtime. It speaks the real CLI's
//! stream-json output and control protocol (`control_request` /
//! `control_response`, the in-process MCP server tunnelled as
//! `mcp_message`, `can_use_tool` permission prompts), with the line shapes
//! recorded from the real CLI, so the runtime can be tested for every
//! invariant and failover path without a network, a login or a 245 MB npm
//! package. What the model "does" comes from a JSON script; everything the
//! fake receives is logged so tests can check what pincer sent.
//!
//! Environment: `FAKE_CLAUDE_SCRIPT` (path of the script), `FAKE_CLAUDE_LOG`
//! (JSONL log, appended, one object per line).
//!
//! Script: `{"logged_in": true, "processes": [PROCESS, ...]}`. Each
//! conversation spawn (argv with `-p`/`--print`) takes the next PROCESS, by
//! counting the `-p` `argv` entries already in the log; past the end, the
//! last one. `claude auth status` and `claude --version` answer from
//! `logged_in` and never take a PROCESS.
//!
//! PROCESS: `{"exit_at_start": {"code", "stderr"}?, "no_conversation": bool,
//! "context_window": 200000, "turns": [[STEP, ...], ...]}`. Turn N runs for
//! the N-th user line the process gets (queued while a turn runs, as the
//! real CLI does); a user line past the script gets one text step saying
//! the turn is not scripted.
//!
//! STEP, one of:
//! - an assistant message: any of `"thinking"`, `"text"`, `"tool_uses":
//!   [{"id", "name", "input"}]` (streamed in that order; stop reason
//!   `tool_use` when there are tool uses, else `end_turn`), with optional
//!   `"model"`, `"usage": {"input_tokens", "output_tokens", ...}`,
//!   `"calls": [CALL, ...]` (default: one CALL per tool use, in order),
//!   `"concurrent": true` (all `tools/call` requests sent before any answer
//!   is awaited; results emitted in the order the answers come),
//!   `"late_permission": true` (ask `can_use_tool` right before each call
//!   instead of while the tool-use block streams, which is what the real
//!   CLI does);
//! - `{"line": {...}}`: emit the line as is (string values `"$SESSION"`
//!   become the session id);
//! - `{"result": {...}}`: emit that result line (with `"$SESSION"`) and end
//!   the turn;
//! - `{"exit": {"code", "stderr"}}`: write stderr, exit now;
//! - `{"wait_for_file": "/path"}`: wait (30 s at most) until the file exists.
//!
//! CALL: `{"id", "meta_id": id (null: no `_meta` at all), "permission":
//! true, "name"?, "input"?}` or `{"id", "claude_answers": {"content",
//! "is_error"}}` (the CLI answers the tool use itself, pincer is not asked).
//!
//! An `interrupt` control request is answered at once and ends the running
//! turn at the next step boundary (or while waiting for pincer or a file)
//! with an `error_during_execution` result.
//!
//! Log lines: `{"argv", "cwd", "env": {"ANTHROPIC_API_KEY": bool,
//! "IS_SANDBOX": value|null}}`, `{"stdin": line}`, `{"mcp_initialize":
//! result}`, `{"tools": tools/list result}`, `{"call_result":
//! {"tool_use_id", "arguments", "response"}}`, `{"interrupted": true}`,
//! `{"exit": code}`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

const VERSION: &str = "2.1.197";
/// How long the fake waits for pincer (or a file) before it gives up loudly.
const PATIENCE: Duration = Duration::from_secs(30);
const DEFAULT_MODEL: &str = "claude-opus-4-8[1m]";

#[derive(Default)]
struct State {
    users: VecDeque<Value>,
    /// Control responses by request id, with their arrival order.
    responses: HashMap<String, (u64, Value)>,
    arrivals: u64,
    /// Request ids of pincer's `initialize` requests not yet answered.
    initialize: Vec<String>,
    eof: bool,
    busy: bool,
    interrupted: bool,
}

struct Io {
    out: Mutex<std::io::Stdout>,
    log: Option<Mutex<File>>,
    state: Mutex<State>,
    changed: Condvar,
}

fn io() -> &'static Io {
    static IO: OnceLock<Io> = OnceLock::new();
    IO.get_or_init(|| Io {
        out: Mutex::new(std::io::stdout()),
        log: std::env::var_os("FAKE_CLAUDE_LOG").map(|path| {
            let file = File::options().create(true).append(true).open(&path);
            Mutex::new(file.unwrap_or_else(|e| panic!("fake claude: log {path:?}: {e}")))
        }),
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
    })
}

fn log(value: Value) {
    if let Some(log) = &io().log {
        let mut file = log.lock().unwrap();
        file.write_all(format!("{value}\n").as_bytes()).unwrap();
        file.flush().unwrap();
    }
}

/// One protocol line on stdout; nothing else is ever printed there.
fn emit(value: Value) {
    if value["type"] == "result" {
        // The order of stdin lines and results in the log shows when a
        // message arrived relative to the turn it followed.
        log(json!({"result_sent": value["subtype"]}));
    }
    let mut out = io().out.lock().unwrap();
    if out
        .write_all(format!("{value}\n").as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        drop(out);
        log(json!({"stdout_closed": true}));
        exit_with(1);
    }
}

fn exit_with(code: i32) -> ! {
    log(json!({"exit": code}));
    let _ = io().out.lock().map(|mut out| out.flush());
    std::process::exit(code)
}

fn fail(message: &str) -> ! {
    eprintln!("fake claude: {message}");
    exit_with(3)
}

fn uuid_like() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut x = (nanos as u64)
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let hex = format!("{:016x}{:016x}", next(), next());
    format!(
        "{}-{}-4{}-a{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// `2026-11-25T01:13:17.039Z`, the CLI's `timestamp` format.
fn timestamp() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, millis) = (now.as_secs() as i64, now.subsec_millis());
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `--flag value` or `--flag=value`.
fn flag(args: &[String], names: &[&str]) -> Option<String> {
    args.iter().enumerate().find_map(|(i, arg)| {
        names.iter().find_map(|name| {
            if arg == name {
                args.get(i + 1).cloned()
            } else {
                arg.strip_prefix(&format!("{name}=")).map(str::to_owned)
            }
        })
    })
}

fn is_conversation(argv: &[String]) -> bool {
    argv.iter().any(|a| a == "-p" || a == "--print")
}

/// How many conversation processes were spawned before this one.
fn spawn_index() -> usize {
    let Some(path) = std::env::var_os("FAKE_CLAUDE_LOG") else {
        return 0;
    };
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| {
            entry["argv"].as_array().is_some_and(|argv| {
                is_conversation(
                    &argv
                        .iter()
                        .filter_map(|a| a.as_str().map(str::to_owned))
                        .collect::<Vec<_>>(),
                )
            })
        })
        .count()
}

fn replace_session(value: &Value, session: &str) -> Value {
    match value {
        Value::String(s) if s == "$SESSION" => json!(session),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| replace_session(v, session)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), replace_session(v, session)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn usage_line(input: u64, output: u64, cache_read: u64, cache_creation: u64) -> Value {
    json!({"input_tokens": input, "cache_creation_input_tokens": cache_creation, "cache_read_input_tokens": cache_read,
        "output_tokens": output, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 0},
        "inference_geo": "", "iterations": [], "speed": "standard"})
}

/// The stdin reader: user lines are queued, control responses filed by
/// request id, interrupts answered at once (the turn notices the flag).
fn read_stdin() {
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            log(json!({"stdin_unparsed": line}));
            eprintln!("fake claude: stdin line is not JSON: {line}");
            continue;
        };
        log(json!({"stdin": value}));
        let mut state = io().state.lock().unwrap();
        match value["type"].as_str() {
            Some("user") => state.users.push_back(value),
            Some("control_response") => {
                let id = value["response"]["request_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                state.arrivals += 1;
                let arrival = state.arrivals;
                state
                    .responses
                    .insert(id, (arrival, value["response"].clone()));
            }
            Some("control_request") => {
                let id = value["request_id"].clone();
                match value["request"]["subtype"].as_str() {
                    Some("initialize") => state
                        .initialize
                        .push(id.as_str().unwrap_or_default().to_owned()),
                    Some("interrupt") => {
                        if state.busy || !state.users.is_empty() {
                            state.interrupted = true;
                        }
                        emit(
                            json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": {}}}),
                        );
                    }
                    _ => emit(
                        json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": {}}}),
                    ),
                }
            }
            _ => {} // control_cancel_request and anything else: ignored
        }
        io().changed.notify_all();
    }
    io().state.lock().unwrap().eof = true;
    io().changed.notify_all();
}

enum Decision {
    Allow(Value),
    Deny(String),
}

struct Call {
    id: String,
    name: String,
    input: Value,
    meta_id: Option<String>,
    permission: bool,
    claude_answers: Option<Value>,
}

#[derive(Default)]
struct Turn {
    last_text: String,
    requests: u64,
    input_tokens: u64,
    output_tokens: u64,
    cache_read: u64,
    cache_creation: u64,
    denials: Vec<Value>,
}

struct Conversation {
    session: String,
    model: String,
    cwd: String,
    permission_mode: String,
    api_key_source: &'static str,
    context_window: u64,
    tools: Vec<String>,
    mcp_ready: bool,
    mcp_initialized: bool,
    next_rpc_id: u64,
    messages: u64,
    total_in: u64,
    total_out: u64,
    total_cost: f64,
    started: Instant,
}

/// Why a wait ended without the awaited thing.
struct Aborted;

impl Conversation {
    fn send_request(&self, request: Value) -> String {
        let id = uuid_like();
        emit(json!({"type": "control_request", "request_id": id, "request": request}));
        id
    }

    fn mcp_request(&mut self, method: &str, params: Option<Value>) -> String {
        let id = self.next_rpc_id;
        self.next_rpc_id += 1;
        // The real CLI's key order: method, params, jsonrpc, id.
        let message = match params {
            Some(params) => json!({"method": method, "params": params, "jsonrpc": "2.0", "id": id}),
            None => json!({"method": method, "jsonrpc": "2.0", "id": id}),
        };
        self.send_request(
            json!({"subtype": "mcp_message", "server_name": "pincer", "message": message}),
        )
    }

    /// Waits for the first (in arrival order) control response to one of
    /// `ids`; an interrupt or closed stdin aborts the wait (pending requests
    /// are cancelled the way the CLI does).
    fn wait_any(&self, ids: &[String], interruptible: bool) -> Result<(String, Value), Aborted> {
        let deadline = Instant::now() + PATIENCE;
        let mut state = io().state.lock().unwrap();
        loop {
            let found = ids
                .iter()
                .filter_map(|id| state.responses.get(id).map(|(n, _)| (*n, id.clone())))
                .min();
            if let Some((_, id)) = found {
                let (_, response) = state.responses.remove(&id).unwrap();
                return Ok((id, response));
            }
            if state.eof || (interruptible && state.interrupted) {
                drop(state);
                for id in ids {
                    emit(json!({"type": "control_cancel_request", "request_id": id}));
                }
                return Err(Aborted);
            }
            let now = Instant::now();
            if now >= deadline {
                drop(state);
                fail(&format!(
                    "no control_response to request(s) {ids:?} within {PATIENCE:?}"
                ));
            }
            state = io().changed.wait_timeout(state, deadline - now).unwrap().0;
        }
    }

    fn mcp_result(response: &Value) -> Result<Value, String> {
        if response["subtype"] != "success" {
            return Err(response["error"]
                .as_str()
                .unwrap_or("control error")
                .to_owned());
        }
        let rpc = &response["response"]["mcp_response"];
        if !rpc["error"].is_null() {
            return Err(rpc["error"]["message"]
                .as_str()
                .unwrap_or("JSON-RPC error")
                .to_owned());
        }
        Ok(rpc["result"].clone())
    }

    /// MCP `initialize`, sent (as the real CLI does) before pincer's own
    /// `initialize` is answered.
    fn mcp_initialize(&mut self) {
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-code",
            "title": "Claude Code", "version": VERSION, "description": "Anthropic's agentic coding tool",
            "websiteUrl": "https://claude.com/claude-code"}});
        let id = self.mcp_request("initialize", Some(params));
        let Ok((_, response)) = self.wait_any(&[id], false) else {
            exit_with(0)
        };
        log(
            json!({"mcp_initialize": Self::mcp_result(&response).unwrap_or_else(|e| json!({"error": e}))}),
        );
        self.mcp_initialized = true;
    }

    fn answer_initialize(&mut self) {
        let pending = std::mem::take(&mut io().state.lock().unwrap().initialize);
        for id in pending {
            if !self.mcp_initialized {
                self.mcp_initialize();
            }
            emit(
                json!({"type": "control_response", "response": {"subtype": "success", "request_id": id, "response": {
                "commands": [{"name": "compact", "description": "Free up context by summarizing the conversation so far",
                    "argumentHint": "<optional custom summarization instructions>"},
                    {"name": "clear", "description": "Start a new session with empty context; previous session stays on disk (resumable with /resume)",
                    "argumentHint": "[name]", "aliases": ["reset", "new"]}],
                "agents": [], "output_style": "default", "available_output_styles": ["default"],
                "models": [{"value": "default", "resolvedModel": self.model, "displayName": "Default (recommended)", "description": "fake"}],
                "account": {"tokenSource": "none", "apiKeySource": self.api_key_source, "apiProvider": "firstParty"},
                "pid": std::process::id()}}}),
            );
        }
    }

    /// The rest of the MCP handshake, before the first turn.
    fn mcp_handshake(&mut self) {
        if !self.mcp_initialized {
            self.mcp_initialize();
        }
        let note = self.send_request(json!({"subtype": "mcp_message", "server_name": "pincer",
            "message": {"method": "notifications/initialized", "jsonrpc": "2.0"}}));
        if self.wait_any(&[note], false).is_err() {
            exit_with(0);
        }
        let id = self.mcp_request("tools/list", None);
        let Ok((_, response)) = self.wait_any(&[id], false) else {
            exit_with(0)
        };
        let result = Self::mcp_result(&response).unwrap_or_else(|e| json!({"error": e}));
        log(json!({"tools": result}));
        self.tools = result["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| {
                tool["name"]
                    .as_str()
                    .map(|name| format!("mcp__pincer__{name}"))
            })
            .collect();
        self.mcp_ready = true;
    }

    fn take_interrupt(&self) -> bool {
        std::mem::take(&mut io().state.lock().unwrap().interrupted)
    }

    fn stream(&self, event: Value) {
        emit(
            json!({"type": "stream_event", "event": event, "session_id": self.session, "parent_tool_use_id": null, "uuid": uuid_like()}),
        );
    }

    fn init_line(&self) -> Value {
        let home = std::env::var("HOME").unwrap_or_default();
        json!({"type": "system", "subtype": "init", "cwd": self.cwd, "session_id": self.session, "tools": self.tools,
            "mcp_servers": [{"name": "pincer", "status": "connected"}], "model": self.model,
            "permissionMode": self.permission_mode, "slash_commands": ["clear", "compact", "context", "usage"],
            "apiKeySource": self.api_key_source, "claude_code_version": VERSION, "output_style": "default",
            "agents": ["claude"], "skills": [], "plugins": [], "analytics_disabled": false,
            "product_feedback_disabled": false, "uuid": uuid_like(),
            "memory_paths": {"auto": format!("{home}/.claude/projects/{}/memory/", self.cwd.replace('/', "-"))},
            "fast_mode_state": "off"})
    }

    fn result_line(&self, turn: &Turn, subtype: &str) -> Value {
        let cost = (turn.input_tokens as f64 * 3.0 + turn.output_tokens as f64 * 15.0) / 1e6;
        let elapsed = self.started.elapsed().as_millis() as u64;
        let line = json!({"type": "result", "subtype": subtype, "is_error": false, "api_error_status": null,
            "duration_ms": elapsed, "duration_api_ms": elapsed, "num_turns": turn.requests, "result": turn.last_text,
            "stop_reason": "end_turn", "session_id": self.session, "total_cost_usd": cost,
            "usage": usage_line(turn.input_tokens, turn.output_tokens, turn.cache_read, turn.cache_creation),
            "modelUsage": {self.model.clone(): {"inputTokens": self.total_in, "outputTokens": self.total_out,
                "cacheReadInputTokens": 0, "cacheCreationInputTokens": 0, "webSearchRequests": 0,
                "costUSD": self.total_cost, "contextWindow": self.context_window, "maxOutputTokens": 64000}},
            "permission_denials": turn.denials, "terminal_reason": "completed", "fast_mode_state": "off", "uuid": uuid_like()});
        if subtype == "success" {
            return line;
        }
        // An error result (the SDK's SDKResultError) has no `result` text,
        // but an `errors` list.
        let mut map: serde_json::Map<String, Value> = line
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(key, _)| *key != "result" && *key != "terminal_reason")
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        map.insert("stop_reason".into(), Value::Null);
        map.insert("errors".into(), json!([]));
        Value::Object(map)
    }

    fn interrupted(&self, turn: &Turn) {
        log(json!({"interrupted": true}));
        emit(self.result_line(turn, "error_during_execution"));
    }

    fn run_turn(&mut self, steps: &[Value]) {
        self.started = Instant::now();
        emit(self.init_line());
        let mut turn = Turn::default();
        for step in steps {
            if self.take_interrupt() {
                return self.interrupted(&turn);
            }
            if let Some(line) = step.get("line") {
                emit(replace_session(line, &self.session));
            } else if let Some(result) = step.get("result") {
                return emit(replace_session(result, &self.session));
            } else if let Some(exit) = step.get("exit") {
                eprint!("{}", exit["stderr"].as_str().unwrap_or_default());
                exit_with(exit["code"].as_i64().unwrap_or(1) as i32);
            } else if let Some(path) = step.get("wait_for_file") {
                if self
                    .wait_for_file(path.as_str().unwrap_or_default())
                    .is_err()
                {
                    return self.interrupted(&turn);
                }
            } else if ["text", "thinking", "tool_uses"]
                .iter()
                .any(|k| step.get(k).is_some())
            {
                if self.assistant_step(step, &mut turn).is_err() {
                    return self.interrupted(&turn);
                }
            } else {
                fail(&format!("unknown script step {step}"));
            }
        }
        if self.take_interrupt() {
            return self.interrupted(&turn);
        }
        emit(self.result_line(&turn, "success"));
    }

    fn wait_for_file(&self, path: &str) -> Result<(), Aborted> {
        let deadline = Instant::now() + PATIENCE;
        while !std::path::Path::new(path).exists() {
            if io().state.lock().unwrap().interrupted {
                return Err(Aborted);
            }
            if Instant::now() >= deadline {
                fail(&format!("{path} did not appear within {PATIENCE:?}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// One model call: the streamed message, then its tool calls.
    fn assistant_step(&mut self, step: &Value, turn: &mut Turn) -> Result<(), Aborted> {
        emit(
            json!({"type": "system", "subtype": "status", "status": "requesting", "uuid": uuid_like(), "session_id": self.session}),
        );
        self.messages += 1;
        let id = format!("msg_fake_{}", self.messages);
        let model = step["model"].as_str().map_or_else(
            || self.model.trim_end_matches("[1m]").to_owned(),
            str::to_owned,
        );
        let usage = step
            .get("usage")
            .cloned()
            .unwrap_or_else(|| json!({"input_tokens": 10, "output_tokens": 5}));
        let output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
        let mut start_usage = usage.clone();
        start_usage["output_tokens"] = json!(1);
        let message = json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null, "usage": start_usage});
        emit(
            json!({"type": "stream_event", "event": {"type": "message_start", "message": message},
            "session_id": self.session, "parent_tool_use_id": null, "uuid": uuid_like(), "ttft_ms": 5}),
        );

        let calls = self.calls(step);
        let late = step["late_permission"].as_bool().unwrap_or(false);
        let mut decisions: HashMap<String, Decision> = HashMap::new();
        let mut index = 0;
        let mut block = |this: &Self, start: Value, deltas: Vec<Value>, full: Value| {
            this.stream(
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            );
            for delta in deltas {
                this.stream(json!({"type": "content_block_delta", "index": index, "delta": delta}));
            }
            let mut message = message.clone();
            message["content"] = json!([full]);
            message["context_management"] = Value::Null;
            let mut line = json!({"type": "assistant", "message": message, "parent_tool_use_id": null,
                "session_id": this.session, "uuid": uuid_like()});
            if full["type"] == "tool_use" {
                line["tool_use_meta"] = json!([{"id": full["id"], "display_name": display_name(&full["name"]), "server_display_name": "pincer"}]);
            }
            emit(line);
            index += 1;
            index - 1
        };
        if let Some(thinking) = step["thinking"].as_str() {
            let signature = format!("sig_fake_{}", self.messages);
            let (a, b) = halves(thinking);
            let deltas = [a, b]
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(|s| json!({"type": "thinking_delta", "thinking": s}))
                .chain([json!({"type": "signature_delta", "signature": signature})])
                .collect();
            let i = block(
                self,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                deltas,
                json!({"type": "thinking", "thinking": thinking, "signature": signature}),
            );
            self.stream(json!({"type": "content_block_stop", "index": i}));
        }
        if let Some(text) = step["text"].as_str() {
            let (a, b) = halves(text);
            let deltas = [a, b]
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(|s| json!({"type": "text_delta", "text": s}))
                .collect();
            let i = block(
                self,
                json!({"type": "text", "text": ""}),
                deltas,
                json!({"type": "text", "text": text}),
            );
            self.stream(json!({"type": "content_block_stop", "index": i}));
            turn.last_text = text.to_owned();
        }
        let tool_uses = step["tool_uses"].as_array().cloned().unwrap_or_default();
        for tool_use in &tool_uses {
            let name = format!(
                "mcp__pincer__{}",
                tool_use["name"].as_str().unwrap_or_default()
            );
            let input = tool_use.get("input").cloned().unwrap_or_else(|| json!({}));
            let json_text = input.to_string();
            let (a, b) = halves(&json_text);
            let deltas = [a, b]
                .into_iter()
                .map(|s| json!({"type": "input_json_delta", "partial_json": s}))
                .collect();
            let i = block(
                self,
                json!({"type": "tool_use", "id": tool_use["id"], "name": name, "input": {}}),
                deltas,
                json!({"type": "tool_use", "id": tool_use["id"], "name": name, "input": input}),
            );
            // The real CLI asks for permission as soon as the block is
            // complete, before its content_block_stop.
            let asks_now = calls
                .iter()
                .find(|c| c.id == tool_use["id"].as_str().unwrap_or_default())
                .filter(|c| {
                    !late
                        && c.permission
                        && c.claude_answers.is_none()
                        && !decisions.contains_key(&c.id)
                });
            if let Some(call) = asks_now {
                let decision = self.ask_permission(call)?;
                decisions.insert(call.id.clone(), decision);
            }
            self.stream(json!({"type": "content_block_stop", "index": i}));
        }
        let stop_reason = if tool_uses.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        self.stream(json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}}));
        self.stream(json!({"type": "message_stop"}));
        let input_tokens = usage["input_tokens"].as_u64().unwrap_or(0);
        turn.requests += 1;
        turn.input_tokens += input_tokens;
        turn.output_tokens += output_tokens;
        turn.cache_read += usage["cache_read_input_tokens"].as_u64().unwrap_or(0);
        turn.cache_creation += usage["cache_creation_input_tokens"].as_u64().unwrap_or(0);
        self.total_in += input_tokens;
        self.total_out += output_tokens;
        self.total_cost += (input_tokens as f64 * 3.0 + output_tokens as f64 * 15.0) / 1e6;

        let concurrent = step["concurrent"].as_bool().unwrap_or(false);
        let mut pending: Vec<(String, usize, Value)> = Vec::new(); // (request id, call, arguments)
        for (n, call) in calls.iter().enumerate() {
            if self.take_interrupt() {
                return Err(Aborted);
            }
            if let Some(answer) = &call.claude_answers {
                let is_error = answer["is_error"].as_bool().unwrap_or(false);
                let content = answer["content"].clone();
                let shown = if is_error {
                    json!(format!("Error: {}", content.as_str().unwrap_or_default()))
                } else {
                    content.clone()
                };
                self.tool_result(json!({"type": "tool_result", "content": content, "is_error": is_error, "tool_use_id": call.id}), shown);
                continue;
            }
            let decision = match decisions.remove(&call.id) {
                Some(decision) => decision,
                None if call.permission => self.ask_permission(call)?,
                None => Decision::Allow(call.input.clone()),
            };
            let arguments = match decision {
                Decision::Deny(message) => {
                    turn.denials.push(json!({"tool_name": format!("mcp__pincer__{}", call.name), "tool_use_id": call.id, "tool_input": call.input}));
                    self.tool_result(json!({"type": "tool_result", "content": message, "is_error": true, "tool_use_id": call.id}),
                        json!(format!("Error: {message}")));
                    continue;
                }
                Decision::Allow(arguments) => arguments,
            };
            let rpc_id = self.next_rpc_id;
            let mut params = json!({"name": call.name, "arguments": arguments});
            if let Some(meta_id) = &call.meta_id {
                params["_meta"] = json!({"claudecode/toolUseId": meta_id, "progressToken": rpc_id});
            }
            let request = self.mcp_request("tools/call", Some(params));
            pending.push((request, n, arguments));
            if !concurrent {
                self.finish_calls(&mut pending, &calls)?;
            }
        }
        self.finish_calls(&mut pending, &calls)
    }

    fn finish_calls(
        &self,
        pending: &mut Vec<(String, usize, Value)>,
        calls: &[Call],
    ) -> Result<(), Aborted> {
        while !pending.is_empty() {
            let ids: Vec<String> = pending.iter().map(|(id, _, _)| id.clone()).collect();
            let (id, response) = self.wait_any(&ids, true)?;
            let position = pending.iter().position(|(p, _, _)| *p == id).unwrap();
            let (_, n, arguments) = pending.remove(position);
            let call = &calls[n];
            log(
                json!({"call_result": {"tool_use_id": call.id, "arguments": arguments, "response": response}}),
            );
            match Self::mcp_result(&response) {
                Ok(result) if result["isError"] != true => {
                    let content = result["content"].clone();
                    self.tool_result(
                        json!({"tool_use_id": call.id, "type": "tool_result", "content": content}),
                        content,
                    );
                }
                outcome => {
                    // The CLI flattens a failed call's content to its text.
                    let text = match outcome {
                        Ok(result) => result["content"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|b| b["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        Err(error) => error,
                    };
                    self.tool_result(json!({"type": "tool_result", "content": text, "is_error": true, "tool_use_id": call.id}),
                        json!(format!("Error: {text}")));
                }
            }
        }
        Ok(())
    }

    fn tool_result(&self, block: Value, shown: Value) {
        emit(
            json!({"type": "user", "message": {"role": "user", "content": [block]}, "parent_tool_use_id": null,
            "session_id": self.session, "uuid": uuid_like(), "timestamp": timestamp(), "tool_use_result": shown}),
        );
    }

    fn ask_permission(&self, call: &Call) -> Result<Decision, Aborted> {
        let name = format!("mcp__pincer__{}", call.name);
        let request = self.send_request(json!({"subtype": "can_use_tool", "tool_name": name,
            "display_name": display_name(&json!(call.name)), "input": call.input,
            "permission_suggestions": [{"type": "addRules", "rules": [{"toolName": name}], "behavior": "allow", "destination": "localSettings"}],
            "tool_use_id": call.id}));
        let (_, response) = self.wait_any(&[request], true)?;
        if response["subtype"] != "success" {
            return Ok(Decision::Deny(
                response["error"]
                    .as_str()
                    .unwrap_or("permission request failed")
                    .to_owned(),
            ));
        }
        let answer = &response["response"];
        Ok(match answer["behavior"].as_str() {
            Some("allow") => Decision::Allow(
                answer
                    .get("updatedInput")
                    .cloned()
                    .unwrap_or_else(|| call.input.clone()),
            ),
            _ => Decision::Deny(answer["message"].as_str().unwrap_or_default().to_owned()),
        })
    }

    fn calls(&self, step: &Value) -> Vec<Call> {
        let tool_uses = step["tool_uses"].as_array().cloned().unwrap_or_default();
        let listed = step
            .get("calls")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_else(|| tool_uses.iter().map(|t| json!({"id": t["id"]})).collect());
        listed
            .iter()
            .map(|call| {
                let id = call["id"]
                    .as_str()
                    .unwrap_or_else(|| fail(&format!("a CALL without an id: {call}")))
                    .to_owned();
                let tool_use = tool_uses.iter().find(|t| t["id"] == id.as_str());
                let name = call["name"]
                    .as_str()
                    .or_else(|| tool_use.and_then(|t| t["name"].as_str()))
                    .unwrap_or_else(|| fail(&format!("CALL {id} has no tool use and no name")))
                    .to_owned();
                let input = call
                    .get("input")
                    .or_else(|| tool_use.and_then(|t| t.get("input")))
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                let meta_id = match call.get("meta_id") {
                    None => Some(id.clone()),
                    Some(Value::Null) => None,
                    Some(other) => Some(
                        other
                            .as_str()
                            .map_or_else(|| other.to_string(), str::to_owned),
                    ),
                };
                Call {
                    permission: call["permission"].as_bool().unwrap_or(true),
                    claude_answers: call.get("claude_answers").cloned(),
                    id,
                    name,
                    input,
                    meta_id,
                }
            })
            .collect()
    }
}

/// `read` → `Read`: how the CLI shows an MCP tool's name.
fn display_name(name: &Value) -> String {
    let name = name
        .as_str()
        .unwrap_or_default()
        .trim_start_matches("mcp__pincer__");
    let mut chars = name.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// A text split in the middle (on a char boundary), like two stream deltas.
fn halves(text: &str) -> (&str, &str) {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    text.split_at(middle)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let script: Value = match std::env::var_os("FAKE_CLAUDE_SCRIPT") {
        Some(path) => {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| fail(&format!("script {path:?}: {e}")));
            serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("script {path:?}: {e}")))
        }
        None => json!({}),
    };
    let index = spawn_index();
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    log(
        json!({"argv": args, "cwd": cwd, "env": {"ANTHROPIC_API_KEY": std::env::var_os("ANTHROPIC_API_KEY").is_some(),
        "IS_SANDBOX": std::env::var("IS_SANDBOX").ok(),
        "PINCER": std::env::vars().map(|(k, _)| k).filter(|k| k.starts_with("PINCER_")).collect::<Vec<_>>()}}),
    );

    if args.first().map(String::as_str) == Some("auth") {
        if script["logged_in"].as_bool().unwrap_or(true) {
            println!(
                r#"{{"loggedIn": true, "authMethod": "claude.ai", "apiProvider": "firstParty"}}"#
            );
            exit_with(0);
        }
        println!(r#"{{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}}"#);
        exit_with(1);
    }
    if !is_conversation(&args) {
        if args.iter().any(|a| a == "--version" || a == "-v") {
            println!("{VERSION} (Claude Code)");
            exit_with(0);
        }
        fail(&format!(
            "only -p conversations, `auth status` and --version are faked, not {args:?}"
        ));
    }

    let processes = script["processes"].as_array().cloned().unwrap_or_default();
    let process = processes
        .get(index)
        .or(processes.last())
        .cloned()
        .unwrap_or_else(|| json!({}));
    if let Some(exit) = process.get("exit_at_start").filter(|e| !e.is_null()) {
        eprint!("{}", exit["stderr"].as_str().unwrap_or_default());
        exit_with(exit["code"].as_i64().unwrap_or(1) as i32);
    }
    let resume = flag(&args, &["--resume", "-r"]);
    if let (Some(id), true) = (
        &resume,
        process["no_conversation"].as_bool().unwrap_or(false),
    ) {
        let message = format!("No conversation found with session ID: {id}");
        emit(
            json!({"type": "result", "subtype": "error_during_execution", "duration_ms": 0, "duration_api_ms": 0,
            "is_error": true, "num_turns": 0, "stop_reason": null, "session_id": id, "total_cost_usd": 0,
            "usage": usage_line(0, 0, 0, 0), "modelUsage": {}, "permission_denials": [], "uuid": uuid_like(), "errors": [message]}),
        );
        eprintln!("{message}");
        exit_with(1);
    }

    let mut conversation = Conversation {
        session: flag(&args, &["--session-id"])
            .or(resume)
            .unwrap_or_else(uuid_like),
        model: flag(&args, &["--model"]).unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        cwd,
        permission_mode: flag(&args, &["--permission-mode"])
            .unwrap_or_else(|| "default".to_owned()),
        api_key_source: if std::env::var_os("ANTHROPIC_API_KEY").is_some() {
            "ANTHROPIC_API_KEY"
        } else {
            "none"
        },
        context_window: process["context_window"].as_u64().unwrap_or(200_000),
        tools: Vec::new(),
        mcp_ready: false,
        mcp_initialized: false,
        next_rpc_id: 0,
        messages: 0,
        total_in: 0,
        total_out: 0,
        total_cost: 0.0,
        started: Instant::now(),
    };
    std::thread::spawn(read_stdin);
    let turns = process["turns"].as_array().cloned().unwrap_or_default();
    let mut turn_index = 0;
    loop {
        let user = {
            let mut state = io().state.lock().unwrap();
            loop {
                if !state.initialize.is_empty() {
                    break None;
                }
                if let Some(user) = state.users.pop_front() {
                    state.busy = true;
                    break Some(user);
                }
                if state.eof {
                    drop(state);
                    exit_with(0);
                }
                state = io().changed.wait(state).unwrap();
            }
        };
        let Some(_user) = user else {
            conversation.answer_initialize();
            continue;
        };
        if !conversation.mcp_ready {
            conversation.mcp_handshake();
        }
        let steps = turns
            .get(turn_index)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_else(|| {
                vec![json!({"text": format!("fake claude: turn {turn_index} is not scripted")})]
            });
        conversation.run_turn(&steps);
        turn_index += 1;
        let mut state = io().state.lock().unwrap();
        state.busy = false;
        state.interrupted = false;
    }
}
