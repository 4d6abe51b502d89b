//! End-to-end: the stdio transport of `pincer acp` under input no editor
//! should send. Every line is answered or ignored as JSON-RPC 2.0 says, the
//! server keeps serving after each one, and closing stdin always ends the
//! process. The fuzz test at the end feeds thousands of mutated messages to
//! the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashMap;

use std::time::Duration;

use futures::FutureExt as _;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox};
use support::mock_model::{MockModel, Reply};
use support::prompt;
use support::sse::{anthropic_text, anthropic_tool_call};

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    // Titles are side calls the mock would have to answer; not the point.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    support::spawn_anthropic(sandbox, mock)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

fn parse_error_for_non_utf8() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32700, "message": "Parse error", "data": {"message": "the line is not valid UTF-8"}}
    })
}

/// The next message that is not a notification.
async fn next_answer(acp: &mut Acp) -> Value {
    loop {
        let message = acp.next().await;
        if message.get("method").is_none() || message.get("id").is_some() {
            return message;
        }
    }
}

fn invalid_request() -> Value {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "Invalid request"}})
}

/// Each of these used to hold back every later line (the transport waited
/// for an answer carrying the id, and the answer carries `null`), so the
/// valid `initialize` after it was never read and closing stdin never
/// ended pincer.
#[tokio::test]
async fn an_invalid_initialize_is_answered_and_a_valid_one_still_works() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    let bad = [
        r#"{"id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"1.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":[1],"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":true,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"initialize","params":{"protocolVersion":1}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":"protocolVersion"}"#,
    ];
    for line in bad {
        acp.send_raw(line).await;
        assert_eq!(acp.next().await, invalid_request(), "{line}");
    }
    // Well-formed, but params of the wrong shape: an error with its id.
    acp.send_raw(r#"{"jsonrpc":"2.0","id":-5,"method":"initialize","params":[1,2]}"#)
        .await;
    let wrong = acp.next().await;
    assert_eq!(wrong["id"], json!(-5));
    assert_eq!(wrong["error"]["code"], json!(-32602));
    // Unknown members are ignored.
    acp.send_raw(r#"{"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":1,"shiny":true},"extra":[1]}"#)
        .await;
    let extra = acp.next().await;
    assert_eq!(extra["id"], json!("x"));
    assert_eq!(extra["result"]["agentInfo"]["name"], json!("pincer"));

    acp.send_raw(INITIALIZE).await;
    let init = acp.next().await;
    assert_eq!(init["id"], json!("init"));
    assert_eq!(init["result"]["protocolVersion"], json!(1));
    let session = acp.new_session(&sandbox.work()).await;
    assert!(session.starts_with("sess_"));
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
}

#[tokio::test]
async fn a_line_that_is_not_utf8_gets_a_parse_error_and_the_server_keeps_serving() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("still here", 10)));
    let mut acp = spawn(&sandbox, &mock);
    // Before initialize, and in a request that is otherwise fine.
    acp.send_bytes(b"\xff\xfe{\"jsonrpc\":\"2.0\"}").await;
    assert_eq!(acp.next().await, parse_error_for_non_utf8());
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let mut line = serde_json::to_vec(
        &json!({"jsonrpc":"2.0","id":77,"method":"session/prompt","params": prompt(&session, "AB")}),
    )
    .unwrap();
    let at = line.windows(2).position(|w| w == b"AB").unwrap();
    line[at + 1] = 0xC0; // an overlong encoding's first byte
    acp.send_bytes(&line).await;
    assert_eq!(next_answer(&mut acp).await, parse_error_for_non_utf8());
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    // The broken prompt never reached the model.
    assert_eq!(mock.requests().len(), 1);
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
}

#[tokio::test]
async fn closing_stdin_before_initialize_ends_pincer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.send_raw(r#"{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{}}"#)
        .await;
    acp.send_bytes(b"\xff").await;
    acp.close_stdin();
    // Both answers go out before pincer ends (in either order: the
    // transport answers the line that is not text itself).
    let mut answers = vec![acp.next().await, acp.next().await];
    answers.sort_by_key(|a| a["error"]["code"].as_i64());
    assert_eq!(answers, vec![parse_error_for_non_utf8(), invalid_request()]);
    assert!(acp.wait_exit().await.success());
}

/// A permission question nobody can answer any more counts as rejected, the
/// prompt is answered and pincer ends.
#[tokio::test]
async fn closing_stdin_while_a_permission_question_is_open_ends_pincer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let target = sandbox.work().join("made.txt");
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_w",
        "write",
        &json!({"path": target, "content": "x"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "write")).await;
    loop {
        let message = acp.next().await;
        if message["method"] == "session/request_permission" {
            break;
        }
    }
    acp.close_stdin();
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert!(!target.exists());
    assert!(acp.wait_exit().await.success());
}

/// A line on stdout that is not JSON-RPC fails the test that reads it, in
/// the test's own task and with the line in the message; before, the check
/// panicked in the reader task and the test saw only "pincer closed
/// stdout" (or nothing, if it did not read again).
#[tokio::test]
async fn stdout_that_is_not_json_rpc_fails_the_test_in_its_own_task() {
    let sandbox = Sandbox::new();
    let mut cmd = tokio::process::Command::new("sh");
    cmd.args([
        "-c",
        r#"echo '{"jsonrpc":"2.0","id":0,"result":{}}'; echo 'debug: hello'; echo '{"jsonrpc":"2.0","id":1,"result":{}}'; echo '{"id":2}'"#,
    ])
    .current_dir(sandbox.work())
    .stdin(std::process::Stdio::piped())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true);
    let mut acp = Acp::spawn(cmd);
    assert_eq!(acp.next().await["id"], json!(0));
    let failure = std::panic::AssertUnwindSafe(acp.next())
        .catch_unwind()
        .await
        .expect_err("a line that is not JSON must fail the test");
    assert_eq!(
        failure.downcast_ref::<String>().map(String::as_str),
        Some(
            "pincer wrote a stdout line that is not JSON-RPC (not JSON: expected value at line 1 column 1): debug: hello"
        )
    );
    // The reader goes on: later lines still arrive, and wait_exit reports
    // the unread bad one too.
    assert_eq!(acp.next().await["id"], json!(1));
    let failure = std::panic::AssertUnwindSafe(acp.wait_exit())
        .catch_unwind()
        .await
        .expect_err("wait_exit must report lines that were not JSON-RPC");
    let message = failure.downcast_ref::<String>().unwrap();
    assert!(
        message.ends_with(
            "pincer wrote a stdout line that is not JSON-RPC (no \"jsonrpc\": \"2.0\"): {\"id\":2}"
        ),
        "{message}"
    );
}

// ---------------------------------------------------------------------------
// The fuzz test.

/// splitmix64: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn percent(&mut self, p: usize) -> bool {
        self.below(100) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Valid messages the mutations start from.
fn templates(session: &str, sandbox: &Sandbox, n: usize) -> Vec<Value> {
    let work = sandbox.work();
    let file = sandbox.work().join("notes.txt");
    let file_uri = format!("file://{}", file.display());
    let req = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": n as i64, "method": method, "params": params});
    let note =
        |method: &str, params: Value| json!({"jsonrpc": "2.0", "method": method, "params": params});
    vec![
        req(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false}}, "clientInfo": {"name": "fuzz", "version": "1"}}),
        ),
        req("session/new", json!({"cwd": work, "mcpServers": []})),
        req("session/prompt", prompt(session, "hello there")),
        req(
            "session/prompt",
            json!({"sessionId": session, "prompt": [
                {"type": "text", "text": "see"},
                {"type": "resource_link", "name": "notes.txt", "uri": file_uri},
                {"type": "resource", "resource": {"uri": file_uri, "text": "inline", "mimeType": "text/plain"}}
            ]}),
        ),
        note("session/cancel", json!({"sessionId": session})),
        req("session/list", json!({})),
        req(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "default"}),
        ),
        req(
            "session/load",
            json!({"sessionId": "sess_missing", "cwd": work, "mcpServers": []}),
        ),
        req(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "anthropic/claude-sonnet-4-5"}),
        ),
        req("authenticate", json!({"methodId": "anthropic-api-key"})),
        req("fuzz/unknown", json!({"a": [1, 2, {"b": null}]})),
        note("$/cancel_request", json!({"requestId": n as i64})),
        json!({"jsonrpc": "2.0", "id": n as i64, "result": {}}),
    ]
}

const RAW_ID: &str = "\u{1}raw-id\u{1}";
const RAW_IDS: &[&str] = &[
    "1.5",
    "1.0",
    "-0",
    "1e400",
    "123456789012345678901234567890",
    "9223372036854775808",
    "-9223372036854775809",
    "-9223372036854775808",
    "9223372036854775807",
    "-5",
    "true",
    "{\"a\":1}",
    "[1]",
    "\"\"",
    "\"\\u0000id\"",
];

fn raw_id(rng: &mut Rng) -> &'static str {
    RAW_IDS[rng.below(RAW_IDS.len())]
}

/// A random value somewhere inside `value`, to change.
fn random_slot<'a>(rng: &mut Rng, value: &'a mut Value) -> &'a mut Value {
    let len = match &*value {
        Value::Object(map) => map.len(),
        Value::Array(items) => items.len(),
        _ => 0,
    };
    if len == 0 || !rng.percent(70) {
        return value;
    }
    let i = rng.below(len);
    match value {
        Value::Object(map) => random_slot(rng, map.values_mut().nth(i).unwrap()),
        Value::Array(items) => random_slot(rng, &mut items[i]),
        _ => unreachable!(),
    }
}

fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(-1),
        3 => json!(1.25),
        4 => json!("x"),
        5 => json!([]),
        6 => json!({}),
        _ => json!({"nested": [null, {"deeper": "y"}]}),
    }
}

/// One structural mutation of a message.
fn mutate_value(rng: &mut Rng, message: &mut Value, ids_seen: &[Value]) {
    let Some(object) = message.as_object_mut() else {
        // An earlier mutation replaced the whole message.
        return;
    };
    match rng.below(12) {
        0 => {
            object.remove("jsonrpc");
        }
        1 => {
            object.insert(
                "jsonrpc".into(),
                rng.pick(&[json!("1.0"), json!(2.0), Value::Null, json!("2.0 ")])
                    .clone(),
            );
        }
        2 => {
            // Null ids for prompts would be answered late and with `null`,
            // which the batch accounting below cannot tell from an error.
            let is_prompt = object.get("method") == Some(&json!("session/prompt"));
            if rng.percent(20) && !is_prompt {
                object.insert("id".into(), Value::Null);
            } else {
                object.insert("id".into(), json!(RAW_ID));
            }
        }
        3 => {
            object.remove("id");
        }
        4 => {
            if !ids_seen.is_empty() {
                object.insert("id".into(), rng.pick(ids_seen).clone());
            }
        }
        5 => {
            object.insert("unknownMember".into(), odd_value(rng));
            if let Some(Value::Object(params)) = object.get_mut("params") {
                params.insert("_meta_fuzz".into(), odd_value(rng));
            }
        }
        6 => {
            if rng.percent(25) {
                object.remove("params");
            } else {
                object.insert("params".into(), odd_value(rng));
            }
        }
        7 => {
            let slot = random_slot(rng, message);
            *slot = odd_value(rng);
        }
        8 => {
            let depth = 1 + rng.below(300);
            let slot = random_slot(rng, message);
            let mut nested = slot.take();
            for level in 0..depth {
                nested = if level % 2 == 0 {
                    json!([nested])
                } else {
                    json!({"n": nested})
                };
            }
            *slot = nested;
        }
        9 => {
            let size = rng.pick(&[1_000usize, 70_000, 300_000]);
            let slot = random_slot(rng, message);
            *slot = Value::String("ä".repeat(*size / 2));
        }
        10 => {
            let method = rng
                .pick(&[
                    json!(""),
                    json!("initialize"),
                    json!("session/nope"),
                    json!(5),
                    Value::Null,
                    json!("m".repeat(5000)),
                ])
                .clone();
            object.insert("method".into(), method);
        }
        _ => {
            object.insert(
                rng.pick(&["result", "error"]).to_string(),
                rng.pick(&[json!({}), json!({"code": 1, "message": "m"}), Value::Null])
                    .clone(),
            );
            if rng.percent(50) {
                object.remove("method");
            }
        }
    }
}

const BROKEN_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xc3",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\xf8\x88\x80\x80\x80",
    b"\xe2\x82",
];

/// One byte-level mutation.
fn mutate_bytes(rng: &mut Rng, bytes: &mut Vec<u8>) {
    let at = |rng: &mut Rng, bytes: &Vec<u8>| rng.below(bytes.len() + 1);
    match rng.below(7) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                if !bytes.is_empty() {
                    let i = rng.below(bytes.len());
                    bytes[i] ^= 1 << rng.below(8);
                }
            }
        }
        1 => {
            let byte = *rng.pick(&[
                0xff, 0xc3, 0x00, b'\n', b'"', b'{', b'}', b'[', b'\\', b',', b'\r',
            ]);
            let i = at(rng, bytes);
            bytes.insert(
                i,
                if rng.percent(20) {
                    rng.next() as u8
                } else {
                    byte
                },
            );
        }
        2 => {
            if !bytes.is_empty() {
                let start = rng.below(bytes.len());
                let end = (start + 1 + rng.below(16)).min(bytes.len());
                bytes.drain(start..end);
            }
        }
        3 => {
            let end = rng.below(bytes.len() + 1);
            bytes.truncate(end);
        }
        4 => {
            if !bytes.is_empty() {
                let start = rng.below(bytes.len());
                let end = (start + 1 + rng.below(32)).min(bytes.len());
                let slice = bytes[start..end].to_vec();
                let i = at(rng, bytes);
                bytes.splice(i..i, slice);
            }
        }
        5 => {
            let broken = rng.pick(BROKEN_UTF8);
            let i = at(rng, bytes);
            bytes.splice(i..i, broken.iter().copied());
        }
        _ => {
            let i = at(rng, bytes);
            bytes.splice(i..i, b"\r\n".iter().copied());
        }
    }
}

/// How JSON-RPC 2.0 (as the ACP crate reads it) must treat one line.
#[derive(Debug, PartialEq)]
enum Expect {
    /// Not UTF-8 or not JSON: a -32700 error with id null.
    ParseError,
    /// JSON, but neither a request, a notification nor a response: a
    /// -32600 error with id null.
    InvalidRequest,
    /// A notification or a response: no answer.
    Nothing,
    /// A request: exactly one response with this id (JSON text).
    Response(String),
}

fn expect(line: &[u8]) -> Expect {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return Expect::ParseError;
    };
    let Value::Object(object) = value else {
        return Expect::InvalidRequest;
    };
    let method = object.get("method");
    if method.is_none() && (object.contains_key("result") || object.contains_key("error")) {
        // Response-shaped: a response is never answered, a broken one
        // neither (there is nobody to tell).
        return Expect::Nothing;
    }
    if method.is_some() && (object.contains_key("result") || object.contains_key("error")) {
        // Both a call and a response: not a valid request.
        return Expect::InvalidRequest;
    }
    let params_ok = object
        .get("params")
        .is_none_or(|p| p.is_object() || p.is_array() || p.is_null());
    let envelope_ok = object.get("jsonrpc") == Some(&json!("2.0"))
        && method.is_some_and(Value::is_string)
        && params_ok;
    if !envelope_ok {
        return Expect::InvalidRequest;
    }
    match object.get("id") {
        None => Expect::Nothing,
        Some(id) if id.is_null() || id.is_string() || id.is_i64() => {
            Expect::Response(id.to_string())
        }
        Some(_) => Expect::InvalidRequest,
    }
}

#[test]
fn the_fuzz_oracle_reads_json_rpc_as_the_spec_says() {
    let cases: [(&[u8], Expect); 13] = [
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"result\":{}}",
            Expect::InvalidRequest,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\"}\r",
            Expect::Response("1".into()),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"m\",\"params\":[]}",
            Expect::Response("\"a\"".into()),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"m\"}",
            Expect::Response("null".into()),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"params\":{}}",
            Expect::Nothing,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
            Expect::Nothing,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"m\"}",
            Expect::InvalidRequest,
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":9223372036854775808,\"method\":\"m\"}",
            Expect::InvalidRequest,
        ),
        (b"{\"id\":1,\"method\":\"m\"}", Expect::InvalidRequest),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":5}",
            Expect::InvalidRequest,
        ),
        (b"[]", Expect::InvalidRequest),
        (b"", Expect::ParseError),
        (
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xff\"}",
            Expect::ParseError,
        ),
    ];
    for (line, expected) in cases {
        assert_eq!(expect(line), expected, "{}", String::from_utf8_lossy(line));
    }
}

/// What came back for a batch of lines, or for the whole run.
#[derive(Debug, Default, PartialEq)]
struct NullAnswers {
    parse_errors: usize,
    invalid_requests: usize,
    /// Answers to requests whose id is `null`.
    other: usize,
}

/// Thousands of mutated messages (bit flips, inserted and deleted bytes,
/// truncation, wrong types, odd and duplicate ids, deep nesting, huge
/// strings, invalid UTF-8, bad `initialize`s) fed to the real binary: each
/// request gets exactly one response with its id, notifications and
/// responses get none, unreadable lines get -32700 with id null, stdout
/// carries only JSON-RPC, pincer stays up and answers a valid request
/// afterwards, and it exits when stdin closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_messages_are_each_answered_or_ignored_as_json_rpc_says() {
    const MESSAGES: usize = 4000;
    const BATCH: usize = 25;
    let seed: u64 = std::env::var("PINCER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_ac9f);
    let mut rng = Rng(seed);

    let sandbox = Sandbox::new();
    sandbox.write("notes.txt", "notes\n");
    let mock = MockModel::start().await;
    // More than enough answers for every prompt that survives mutation.
    for _ in 0..MESSAGES {
        mock.push(Reply::sse(anthropic_text("ok", 10)));
    }
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;

    // Requests sent and not yet answered, per id (JSON text).
    let mut pending: HashMap<String, usize> = HashMap::new();
    let mut ids_seen: Vec<Value> = vec![json!(1)];
    let mut total_expected = NullAnswers::default();
    let mut total_seen = NullAnswers::default();
    let mut sent = 0;
    let mut batch_number = 0;
    while sent < MESSAGES {
        let mut batch: Vec<u8> = Vec::new();
        let mut expected = NullAnswers::default();
        let mut shown: Vec<String> = Vec::new();
        for _ in 0..BATCH {
            let n = 1_000 + sent;
            let all = templates(&session, &sandbox, n);
            let mut message = rng.pick(&all).clone();
            let mutations = if rng.percent(15) { 0 } else { 1 + rng.below(3) };
            let mut bytes = None;
            for _ in 0..mutations {
                if bytes.is_none() && rng.percent(55) {
                    mutate_value(&mut rng, &mut message, &ids_seen);
                    continue;
                }
                let text = bytes.get_or_insert_with(|| {
                    let text = serde_json::to_string(&message).unwrap();
                    text.replace(&serde_json::to_string(RAW_ID).unwrap(), raw_id(&mut rng))
                        .into_bytes()
                });
                mutate_bytes(&mut rng, text);
            }
            let bytes = bytes.unwrap_or_else(|| {
                serde_json::to_string(&message)
                    .unwrap()
                    .replace(&serde_json::to_string(RAW_ID).unwrap(), raw_id(&mut rng))
                    .into_bytes()
            });
            if let Some(id) = message.get("id") {
                ids_seen.push(id.clone());
            }
            for line in bytes.split(|&b| b == b'\n') {
                let expectation = expect(line);
                let text = String::from_utf8_lossy(line);
                let text: String = text.chars().take(300).collect();
                shown.push(format!("{expectation:?}: {text}"));
                match expectation {
                    Expect::ParseError => expected.parse_errors += 1,
                    Expect::InvalidRequest => expected.invalid_requests += 1,
                    Expect::Nothing => {}
                    Expect::Response(id) if id == "null" => expected.other += 1,
                    Expect::Response(id) => *pending.entry(id).or_default() += 1,
                }
            }
            batch.extend_from_slice(&bytes);
            batch.push(b'\n');
            sent += 1;
        }
        // A request after the batch: once it is answered, every error for
        // the batch's lines has gone out (the server handles lines in
        // order; only prompts answer later).
        let sync = format!("sync-{batch_number}");
        batch_number += 1;
        batch.extend_from_slice(
            json!({"jsonrpc": "2.0", "id": sync, "method": "session/list", "params": {}})
                .to_string()
                .as_bytes(),
        );
        acp.send_bytes(&batch).await;
        let mut seen = NullAnswers::default();
        loop {
            let message = acp.next().await;
            if answer_client_request(&mut acp, &message).await {
                continue;
            }
            if message["id"] == json!(sync) {
                break;
            }
            count_answer(&message, &mut pending, &mut seen);
        }
        // Answers to requests with a null id may come later (a prompt
        // answers when its turn ends); they are counted over the whole run.
        assert_eq!(
            (seen.parse_errors, seen.invalid_requests),
            (expected.parse_errors, expected.invalid_requests),
            "batch {} (seed {seed}) got other null-id errors than its lines need (parse errors, invalid requests):\n{}",
            batch_number - 1,
            shown.join("\n")
        );
        total_expected.parse_errors += expected.parse_errors;
        total_expected.invalid_requests += expected.invalid_requests;
        total_expected.other += expected.other;
        total_seen.parse_errors += seen.parse_errors;
        total_seen.invalid_requests += seen.invalid_requests;
        total_seen.other += seen.other;
        assert!(
            acp.is_running(),
            "pincer exited during batch {batch_number}"
        );
    }
    // Prompts still running answer in their own time.
    while !pending.is_empty() || total_seen.other < total_expected.other {
        let message = acp.next().await;
        if !answer_client_request(&mut acp, &message).await {
            count_answer(&message, &mut pending, &mut total_seen);
        }
    }
    assert_eq!(total_seen, total_expected);
    // Plenty of each kind was exercised.
    assert!(
        total_expected.parse_errors > MESSAGES / 10,
        "{total_expected:?}"
    );
    assert!(
        total_expected.invalid_requests > MESSAGES / 10,
        "{total_expected:?}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());

    // Still serving.
    assert!(acp.is_running());
    let list = acp.call("session/list", json!({})).await;
    assert!(list["sessions"].is_array(), "{list}");
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
}

/// Answers a request pincer makes of the client (a permission question, a
/// file read); returns whether `message` was one.
async fn answer_client_request(acp: &mut Acp, message: &Value) -> bool {
    let Some(method) = message["method"].as_str() else {
        return false;
    };
    if let Some(id) = message.get("id") {
        let result = if method == "session/request_permission" {
            json!({"outcome": {"outcome": "cancelled"}})
        } else {
            json!(null)
        };
        acp.respond(id, result).await;
    }
    true
}

/// Books one response: an id'd one against `pending`, a null one in `seen`.
fn count_answer(message: &Value, pending: &mut HashMap<String, usize>, seen: &mut NullAnswers) {
    let id = &message["id"];
    if id.is_null() {
        match message["error"]["code"].as_i64() {
            Some(-32700) => seen.parse_errors += 1,
            Some(-32600) => seen.invalid_requests += 1,
            _ => seen.other += 1,
        }
        return;
    }
    let key = id.to_string();
    match pending.get_mut(&key) {
        Some(count) => {
            *count -= 1;
            if *count == 0 {
                pending.remove(&key);
            }
        }
        None => panic!("a response to id {key}, which no unanswered request carried: {message}"),
    }
}

/// The editor is gone altogether (stdin and stdout closed) while a prompt
/// waits on a model that never finishes: pincer ends instead of waiting
/// for an answer nobody can read.
#[tokio::test]
async fn closing_stdin_and_stdout_while_a_prompt_waits_ends_pincer() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::Stall {
        body: anthropic_text("never finished", 10),
        events: 2,
    });
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let work = sandbox.work();
    for line in [
        INITIALIZE.to_string(),
        json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd": work,"mcpServers":[]}}).to_string(),
    ] {
        stdin.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    }
    let session = loop {
        let line: Value =
            serde_json::from_str(&stdout.next_line().await.unwrap().unwrap()).unwrap();
        if line["id"] == json!(1) {
            break line["result"]["sessionId"].as_str().unwrap().to_string();
        }
    };
    let prompt =
        json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params": prompt(&session, "hi")});
    stdin
        .write_all(format!("{prompt}\n").as_bytes())
        .await
        .unwrap();
    mock.wait_for_requests(1, Duration::from_secs(10)).await;
    drop(stdin);
    drop(stdout);
    let status = tokio::time::timeout(support::acp_client::TIMEOUT, child.wait())
        .await
        .expect("pincer did not exit after its editor went away")
        .unwrap();
    assert!(status.success(), "{status:?}");
}
