//! End-to-end: the prompt cache stays warm. The real binary talks to the
//! mock model while its clock (`PINCER_CLOCK_FILE`) is moved between
//! prompts, never slept: every request must start with the previous one
//! byte for byte (tools, system prompt, earlier messages), with Anthropic's
//! breakpoints where the previous request wrote its cache, OpenAI's
//! `prompt_cache_key` naming the session, and cached tokens priced as such
//! in `usage_update`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::prompt;
use support::sse::{anthropic_text, anthropic_tool_call};

/// Sets the agent's clock of a running pincer to `instant` (RFC 3339).
fn set_clock(file: &Path, instant: &str) {
    std::fs::write(file, instant).unwrap();
}

/// `pincer acp` with an Anthropic key, the clock in `clock`, UTC and no
/// title model (whose side requests would only add noise).
fn spawn(sandbox: &Sandbox, mock: &MockModel, clock: &Path, config: &str) -> Acp {
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("title_model = \"none\"\n{config}"),
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", mock.openai_url())
        .env("TZ", "UTC")
        .env("PINCER_CLOCK_FILE", clock);
    Acp::spawn(cmd)
}

fn clock_file(sandbox: &Sandbox) -> PathBuf {
    sandbox.dir.path().join("clock")
}

/// A request body without Anthropic's cache breakpoints, which move to the
/// newest messages by design and are not part of the cached content.
fn without_cache_marks(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_marks(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_marks).collect()),
        other => other.clone(),
    }
}

/// Asserts that `next` repeats `previous` as its prefix: the same tools and
/// system prompt, and `previous`'s messages as its first messages, byte for
/// byte in their serialised form.
fn assert_prefix_kept(previous: &Value, next: &Value, what: &str) {
    let (previous, next) = (without_cache_marks(previous), without_cache_marks(next));
    assert_eq!(
        next["tools"].to_string(),
        previous["tools"].to_string(),
        "{what}: tools"
    );
    assert_eq!(
        next["system"].to_string(),
        previous["system"].to_string(),
        "{what}: system"
    );
    let old = previous["messages"].as_array().unwrap();
    let new = next["messages"].as_array().unwrap();
    assert!(new.len() > old.len(), "{what}: no new messages");
    for (index, (old, new)) in old.iter().zip(new).enumerate() {
        assert_eq!(new.to_string(), old.to_string(), "{what}: message {index}");
    }
}

/// The time line that closes the last user message of `body`.
fn last_time_line(body: &Value) -> String {
    let last = body["messages"].as_array().unwrap().last().unwrap();
    last["content"].as_array().unwrap().last().unwrap()["text"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Where `body` has cache breakpoints, as JSON pointers.
fn breakpoints(body: &Value) -> Vec<String> {
    fn walk(value: &Value, path: String, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if map.contains_key("cache_control") {
                    out.push(path.clone());
                }
                for (k, v) in map {
                    walk(v, format!("{path}/{k}"), out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, format!("{path}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, String::new(), &mut out);
    out.sort();
    out
}

#[tokio::test]
async fn two_prompts_an_hour_apart_send_identical_prefixes() {
    let sandbox = Sandbox::new();
    sandbox.write("notes.txt", "remember the milk\n");
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_1",
        "read",
        &json!({"path": "notes.txt"}),
    )));
    mock.push(Reply::sse(anthropic_text(
        "It says remember the milk.",
        100,
    )));
    mock.push(Reply::sse(anthropic_text("Still the milk.", 120)));
    let mut acp = spawn(&sandbox, &mock, &clock, "");
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let first = acp
        .call("session/prompt", prompt(&session, "What do my notes say?"))
        .await;
    assert_eq!(first, json!({"stopReason": "end_turn"}));
    set_clock(&clock, "2026-11-24T10:00:00Z");
    let second = acp
        .call("session/prompt", prompt(&session, "And an hour later?"))
        .await;
    assert_eq!(second, json!({"stopReason": "end_turn"}));

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let bodies: Vec<&Value> = requests.iter().map(|r| &r.body).collect();
    assert_prefix_kept(bodies[0], bodies[1], "after the tool call");
    assert_prefix_kept(bodies[1], bodies[2], "an hour later");
    // The model is told the time with each prompt, and the moved clock.
    assert_eq!(
        last_time_line(bodies[0]),
        "Current time: 2026-11-24 09:00 (UTC, UTC+00:00)"
    );
    assert_eq!(
        last_time_line(bodies[2]),
        "Current time: 2026-11-24 10:00 (UTC, UTC+00:00)"
    );
    let system = bodies[2]["system"][0]["text"].as_str().unwrap();
    assert!(!system.contains("2026-11-24"), "{system}");
    // Breakpoints: the tools, the system prompt, where the previous request
    // ended (so this one reads what that one wrote) and the newest turn.
    let messages = bodies[2]["messages"].as_array().unwrap();
    let last_block = |m: usize| messages[m]["content"].as_array().unwrap().len() - 1;
    let tools = bodies[2]["tools"].as_array().unwrap().len() - 1;
    let previous_end = bodies[1]["messages"].as_array().unwrap().len() - 1;
    let newest = messages.len() - 1;
    let mut expected = vec![
        format!("/tools/{tools}"),
        "/system/0".to_string(),
        format!(
            "/messages/{previous_end}/content/{}",
            last_block(previous_end)
        ),
        format!("/messages/{newest}/content/{}", last_block(newest)),
    ];
    expected.sort();
    assert_eq!(breakpoints(bodies[2]), expected);
    // The previous request's last breakpoint is one of this request's.
    let previous_last = breakpoints(bodies[1])
        .into_iter()
        .filter(|p| p.starts_with("/messages/"))
        .max_by_key(|p| p.split('/').nth(2).unwrap().parse::<usize>().unwrap())
        .unwrap();
    assert!(expected.contains(&previous_last), "{previous_last}");
    // What the editor shows and replays is what the user wrote.
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn old_tool_results_are_trimmed_only_once_the_cache_expired() {
    let sandbox = Sandbox::new();
    // Over the 4,000 characters from which an old result is trimmed.
    sandbox.write("big.txt", &"a line of the big file\n".repeat(400));
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_1",
        "read",
        &json!({"path": "big.txt"}),
    )));
    mock.push(Reply::sse(anthropic_text("Read it.", 100)));
    for turn in 0..5 {
        mock.push(Reply::sse(anthropic_text(&format!("Answer {turn}."), 100)));
    }
    let mut acp = spawn(&sandbox, &mock, &clock, "");
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call("session/prompt", prompt(&session, "Read big.txt"))
        .await;
    // Four prompts four minutes apart: the 5-minute cache stays warm.
    for (turn, minute) in ["04", "08", "12", "16"].iter().enumerate() {
        set_clock(&clock, &format!("2026-11-24T09:{minute}:00Z"));
        acp.call("session/prompt", prompt(&session, &format!("Turn {turn}")))
            .await;
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    for pair in 1..requests.len() {
        assert_prefix_kept(
            &requests[pair - 1].body,
            &requests[pair].body,
            &format!("request {pair} while warm"),
        );
    }
    // Ten idle minutes: the cache expired; the old result is cut.
    set_clock(&clock, "2026-11-24T09:26:00Z");
    acp.call("session/prompt", prompt(&session, "Back")).await;
    let requests = mock.requests();
    let result = &requests[6].body["messages"][2]["content"][0]["content"][0]["text"];
    assert!(
        result
            .as_str()
            .unwrap()
            .contains("characters of this old tool result were trimmed"),
        "{result}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// One prompt through OpenAI's `api`; the request's body.
async fn openai_request(api: &str, fixture: &str) -> (Value, String) {
    let sandbox = Sandbox::new();
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture(fixture));
    let mut acp = spawn(
        &sandbox,
        &mock,
        &clock,
        &format!("model = \"openai/gpt-4.1\"\n[providers.openai]\napi = \"{api}\"\n"),
    );
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let result = acp.call("session/prompt", prompt(&session, "hi")).await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    (mock.requests()[0].body.clone(), session)
}

#[tokio::test]
async fn openai_requests_carry_the_session_as_prompt_cache_key() {
    for (api, fixture) in [
        ("openai-completions", "openai/text.sse"),
        ("openai-responses", "openai_responses/text.sse"),
    ] {
        let (body, session) = openai_request(api, fixture).await;
        assert_eq!(body["prompt_cache_key"], json!(session), "{api}");
    }
}

#[tokio::test]
async fn cached_tokens_are_priced_as_cache_reads_and_writes_in_usage_update() {
    let sandbox = Sandbox::new();
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    // 1,000 new input tokens, 100,000 read from the cache, 2,000 written.
    let body = anthropic_text("Cached.", 1_000).replace(
        "\"input_tokens\":1000,",
        "\"input_tokens\":1000,\"cache_read_input_tokens\":100000,\"cache_creation_input_tokens\":2000,",
    );
    mock.push(Reply::sse(body));
    let mut acp = spawn(&sandbox, &mock, &clock, "");
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (_, before) = acp.until_response(id).await;
    let usage: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .collect();
    // Claude Sonnet 4.5: $3 input, $15 output, $0.30 cache read, $3.75
    // cache write per million tokens.
    let expected = (1_000.0 * 3.0 + 12.0 * 15.0 + 100_000.0 * 0.3 + 2_000.0 * 3.75) / 1e6;
    let cost = usage.last().unwrap()["cost"]["amount"].as_f64().unwrap();
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
}

/// The messages of a `session/load` replay the user wrote, as text.
fn replayed_user_texts(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_first_request_after_a_load_in_a_new_process_repeats_the_last_prefix() {
    let sandbox = Sandbox::new();
    sandbox.write("notes.txt", "remember the milk\n");
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_1",
        "read",
        &json!({"path": "notes.txt"}),
    )));
    mock.push(Reply::sse(anthropic_text(
        "It says remember the milk.",
        100,
    )));
    mock.push(Reply::sse(anthropic_text("Still the milk.", 120)));
    mock.push(Reply::sse(anthropic_text("Yes, the milk.", 140)));
    let mut acp = spawn(&sandbox, &mock, &clock, "");
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let first = acp
        .call("session/prompt", prompt(&session, "What do my notes say?"))
        .await;
    assert_eq!(first, json!({"stopReason": "end_turn"}));
    set_clock(&clock, "2026-11-24T09:07:00Z");
    let second = acp
        .call("session/prompt", prompt(&session, "And now?"))
        .await;
    assert_eq!(second, json!({"stopReason": "end_turn"}));
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());

    // Another pincer, minutes later, loads it: its clock must not rewrite
    // the time lines the model already read.
    set_clock(&clock, "2026-11-24T09:09:00Z");
    let mut acp = spawn(&sandbox, &mock, &clock, "");
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, replay) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    // The replay shows what the user wrote, never the time lines.
    assert_eq!(
        replayed_user_texts(&updates_of(&replay)),
        vec!["What do my notes say?", "And now?"]
    );
    let third = acp
        .call("session/prompt", prompt(&session, "After the load?"))
        .await;
    assert_eq!(third, json!({"stopReason": "end_turn"}));

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let before = &requests[2].body;
    let after = &requests[3].body;
    assert_prefix_kept(before, after, "the first request after the load");
    // The earlier messages kept the times they were sent at (the load
    // rebuilt nothing from the clock), and the new one has the new time.
    let first_user = &after["messages"][0]["content"];
    assert_eq!(
        first_user.as_array().unwrap().last().unwrap()["text"],
        "Current time: 2026-11-24 09:00 (UTC, UTC+00:00)"
    );
    assert_eq!(
        last_time_line(after),
        "Current time: 2026-11-24 09:09 (UTC, UTC+00:00)"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// Every `cache_control` in `body`, in document order.
fn cache_controls(body: &Value) -> Vec<Value> {
    fn walk(value: &Value, out: &mut Vec<Value>) {
        match value {
            Value::Object(map) => {
                if let Some(control) = map.get("cache_control") {
                    out.push(control.clone());
                }
                map.values().for_each(|v| walk(v, out));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(body, &mut out);
    out
}

/// The cost of the last `usage_update` of a prompt's updates.
fn last_cost(messages: &[Value]) -> f64 {
    updates_of(messages)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "usage_update")
        .last()
        .expect("a usage_update")["cost"]["amount"]
        .as_f64()
        .unwrap()
}

/// One prompt to Claude Sonnet 4.5 with `config`; the request body and
/// the cost the editor was shown.
async fn anthropic_prompt(config: &str, answer: String) -> (Value, f64) {
    let sandbox = Sandbox::new();
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(answer));
    let mut acp = spawn(&sandbox, &mock, &clock, config);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, messages) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(mock.violations(), Vec::<String>::new());
    (mock.requests()[0].body.clone(), last_cost(&messages))
}

#[tokio::test]
async fn a_cache_ttl_of_an_hour_asks_anthropic_for_the_hour_and_prices_its_writes() {
    // 1,000 new input tokens, 50,000 read, 4,000 written: 1,000 of them to
    // the five-minute cache, 3,000 to the hour's.
    let answer = anthropic_text("Cached.", 1_000).replace(
        "\"input_tokens\":1000,",
        "\"input_tokens\":1000,\"cache_read_input_tokens\":50000,\"cache_creation_input_tokens\":4000,\
         \"cache_creation\":{\"ephemeral_5m_input_tokens\":1000,\"ephemeral_1h_input_tokens\":3000},",
    );
    let (body, cost) = anthropic_prompt("cache_ttl = \"1h\"\n", answer.clone()).await;
    let hour = json!({"type": "ephemeral", "ttl": "1h"});
    // Tools, system prompt, the newest user turn.
    assert_eq!(
        cache_controls(&body),
        vec![hour.clone(), hour.clone(), hour]
    );
    // Claude Sonnet 4.5: $3 input, $15 output, $0.30 cache read, $3.75 a
    // five-minute cache write and $6 (2× input) an hour's.
    let expected =
        (1_000.0 * 3.0 + 12.0 * 15.0 + 50_000.0 * 0.3 + 1_000.0 * 3.75 + 3_000.0 * 6.0) / 1e6;
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");

    // By default: five minutes, which is Anthropic's default: no ttl.
    let plain = anthropic_text("Cached.", 1_000).replace(
        "\"input_tokens\":1000,",
        "\"input_tokens\":1000,\"cache_creation_input_tokens\":4000,",
    );
    let (body, cost) = anthropic_prompt("", plain).await;
    let five = json!({"type": "ephemeral"});
    assert_eq!(
        cache_controls(&body),
        vec![five.clone(), five.clone(), five]
    );
    let expected = (1_000.0 * 3.0 + 12.0 * 15.0 + 4_000.0 * 3.75) / 1e6;
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
}
