//! End-to-end: the prompt cache stays warm. The real binary talks to the
//! mock model while its clock (`PINCER_CLOCK_FILE`) is moved between
//! prompts, never slept: every request must start with the previous one
//! byte for byte (tools, system prompt, earlier messages), with Anthropic's
//! breakpoints where the previous request wrote its cache, OpenAI's
//! `prompt_cache_key` naming the session, and cached tokens priced as such
//! in `usage_update`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

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
    spawn_with(sandbox, mock, clock, config, &[])
}

/// [`spawn`] with more environment variables.
fn spawn_with(
    sandbox: &Sandbox,
    mock: &MockModel,
    clock: &Path,
    config: &str,
    env: &[(&str, &str)],
) -> Acp {
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
    for (name, value) in env {
        cmd.env(name, value);
    }
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
        .rfind(|u| u["sessionUpdate"] == "usage_update")
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

/// A session through OpenRouter with `model`: a tool call, its answer,
/// then an answer whose usage reports cache reads and writes. The request
/// bodies and the last cost the editor was shown.
async fn openrouter_session(model: &str) -> (Vec<Value>, f64) {
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("openai/tool_read.sse"));
    mock.push(Reply::fixture("openai/after_tool.sse"));
    // 10,019 prompt tokens: 8,000 read from the cache, 2,000 written.
    mock.push(Reply::sse(
        support::mock_model::fixture("openai/text.sse")
            .replace("\"prompt_tokens\":19,", "\"prompt_tokens\":10019,")
            .replace(
                "\"cached_tokens\":0,",
                "\"cached_tokens\":8000,\"cache_write_tokens\":2000,",
            ),
    ));
    let config = format!(
        "model = \"openrouter/{model}\"\n\
         [providers.openrouter]\n\
         base_url = \"{}\"\n\
         [[providers.openrouter.models]]\n\
         id = \"{model}\"\n\
         pricing = {{ input = 3.0, output = 15.0, cache_read = 0.3, cache_write = 3.75 }}\n",
        mock.openai_url()
    );
    let mut acp = spawn_with(
        &sandbox,
        &mock,
        &clock,
        &config,
        &[("OPENROUTER_API_KEY", "sk-or-test")],
    );
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let first = acp
        .call("session/prompt", prompt(&session, "Read hello.txt"))
        .await;
    assert_eq!(first, json!({"stopReason": "end_turn"}));
    let id = acp.send("session/prompt", prompt(&session, "Again")).await;
    let (response, messages) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(mock.violations(), Vec::<String>::new());
    let bodies = mock.requests().into_iter().map(|r| r.body).collect();
    (bodies, last_cost(&messages))
}

#[tokio::test]
async fn claude_through_openrouter_gets_cache_breakpoints_and_its_cache_usage_priced() {
    let (bodies, cost) = openrouter_session("anthropic/claude-sonnet-4.5").await;
    assert_eq!(bodies.len(), 3);
    let five = json!({"type": "ephemeral"});
    // The system prompt, and the newest user or tool message of the two
    // newest turns: [system, user, assistant (call), tool, assistant, user].
    let marked = |body: &Value| -> Vec<usize> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .filter(|(_, m)| {
                m["content"]
                    .as_array()
                    .is_some_and(|parts| parts.last().unwrap().get("cache_control").is_some())
            })
            .map(|(i, _)| i)
            .collect()
    };
    assert_eq!(marked(&bodies[0]), vec![0, 1]);
    assert_eq!(marked(&bodies[1]), vec![0, 1, 3]);
    assert_eq!(marked(&bodies[2]), vec![0, 3, 5]);
    assert_eq!(
        cache_controls(&bodies[2]),
        vec![five.clone(), five.clone(), five]
    );
    // The system prompt became one text part carrying the breakpoint.
    let system = &bodies[2]["messages"][0]["content"];
    assert_eq!(system.as_array().unwrap().len(), 1);
    assert_eq!(system[0]["type"], "text");
    // The previous request's prefix is this one's, the marks aside.
    assert_prefix_kept_openai(&bodies[1], &bodies[2]);
    // The session's cost so far, per million tokens at $3 input, $15
    // output, $0.30 cache read, $3.75 cache write: the call (2,150 prompt
    // tokens, 1,920 of them cached, 17 out), the answer after it (2,204,
    // 2,048 cached, 6 out), and the last answer (19 new input tokens,
    // 8,000 read, 2,000 written, 7 out).
    let expected = (230.0 * 3.0 + 17.0 * 15.0 + 1_920.0 * 0.3)
        + (156.0 * 3.0 + 6.0 * 15.0 + 2_048.0 * 0.3)
        + (19.0 * 3.0 + 7.0 * 15.0 + 8_000.0 * 0.3 + 2_000.0 * 3.75);
    let expected = expected / 1e6;
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
}

#[tokio::test]
async fn other_models_through_openrouter_get_no_cache_breakpoints() {
    let (bodies, _) = openrouter_session("openai/gpt-4.1").await;
    for body in &bodies {
        assert_eq!(cache_controls(body), Vec::<Value>::new());
        assert!(body["messages"][0]["content"].is_string(), "{body}");
    }
}

/// Chat Completions' form of [`assert_prefix_kept`]: the tools and the
/// earlier messages (the system prompt first) repeat.
fn assert_prefix_kept_openai(previous: &Value, next: &Value) {
    let (previous, next) = (without_cache_marks(previous), without_cache_marks(next));
    assert_eq!(next["tools"].to_string(), previous["tools"].to_string());
    let old = previous["messages"].as_array().unwrap();
    let new = next["messages"].as_array().unwrap();
    assert!(new.len() > old.len());
    for (index, (old, new)) in old.iter().zip(new).enumerate() {
        // A breakpoint turned text into a part; the text is the same.
        let text = |m: &Value| match &m["content"] {
            Value::Array(parts) if parts.len() == 1 => parts[0]["text"].clone(),
            other => other.clone(),
        };
        assert_eq!(text(new), text(old), "message {index}");
    }
}

/// Where `body` has Bedrock cache checkpoints, as JSON pointers.
fn cache_points(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut walk = |list: &Value, at: &str| {
        for (i, block) in list.as_array().into_iter().flatten().enumerate() {
            if block.get("cachePoint").is_some() {
                assert_eq!(block, &json!({"cachePoint": {"type": "default"}}));
                out.push(format!("{at}/{i}"));
            }
        }
    };
    walk(&body["system"], "/system");
    walk(&body["toolConfig"]["tools"], "/toolConfig/tools");
    for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
        walk(&message["content"], &format!("/messages/{m}/content"));
    }
    out
}

/// `body` without Bedrock's checkpoints.
fn without_cache_points(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), without_cache_points(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| item.get("cachePoint").is_none())
                .map(without_cache_points)
                .collect(),
        ),
        other => other.clone(),
    }
}

#[tokio::test]
async fn claude_on_bedrock_gets_cache_points_and_its_cache_usage_priced() {
    let sandbox = Sandbox::new();
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    let cached = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/bedrock/cached.bin"
    ))
    .unwrap();
    for _ in 0..2 {
        mock.push(Reply::Bytes {
            body: cached.clone(),
            content_type: "application/vnd.amazon.eventstream".to_string(),
            chunk: 64,
        });
    }
    let endpoint = format!("http://{}", mock.addr);
    let mut acp = spawn_with(
        &sandbox,
        &mock,
        &clock,
        "model = \"amazon-bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0\"\n",
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            (
                "AWS_SECRET_ACCESS_KEY",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint),
        ],
    );
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let first = acp.call("session/prompt", prompt(&session, "hi")).await;
    assert_eq!(first, json!({"stopReason": "end_turn"}));
    set_clock(&clock, "2026-11-24T09:03:00Z");
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (response, messages) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(mock.violations(), Vec::<String>::new());

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let (before, after) = (&requests[0].body, &requests[1].body);
    let tools = after["toolConfig"]["tools"].as_array().unwrap().len() - 1;
    // After the system prompt, after the tools, closing the newest user
    // turn (after its time line) ...
    assert_eq!(
        cache_points(before),
        vec![
            "/system/1".to_string(),
            format!("/toolConfig/tools/{tools}"),
            "/messages/0/content/2".to_string(),
        ]
    );
    // ... and, in the next request, also where the previous one ended:
    // four, Bedrock's limit as Anthropic's.
    assert_eq!(
        cache_points(after),
        vec![
            "/system/1".to_string(),
            format!("/toolConfig/tools/{tools}"),
            "/messages/0/content/2".to_string(),
            "/messages/2/content/2".to_string(),
        ]
    );
    // The earlier request is this one's prefix, checkpoints aside.
    let (before, after) = (without_cache_points(before), without_cache_points(after));
    assert_eq!(after["system"], before["system"]);
    assert_eq!(after["toolConfig"], before["toolConfig"]);
    assert_eq!(after["messages"][0], before["messages"][0]);
    // Both calls: 500 new input tokens at $3 a million, 10 output at $15,
    // 40,000 read from the cache at $0.30, 3,000 written at $3.75.
    let expected = 2.0 * (500.0 * 3.0 + 10.0 * 15.0 + 40_000.0 * 0.3 + 3_000.0 * 3.75) / 1e6;
    let cost = last_cost(&messages);
    assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
}

/// One prompt with `config` and `env`, answered by `reply`; the cost the
/// editor was shown.
async fn one_prompt_cost(config: &str, env: &[(&str, &str)], reply: Reply) -> f64 {
    let sandbox = Sandbox::new();
    let clock = clock_file(&sandbox);
    set_clock(&clock, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    mock.push(reply);
    let base = format!("http://{}/v1beta", mock.addr);
    let mut env = env.to_vec();
    env.push(("GEMINI_BASE_URL", &base));
    let mut acp = spawn_with(&sandbox, &mock, &clock, config, &env);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, messages) = acp.until_response(id).await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "end_turn"}),
        "{config}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    last_cost(&messages)
}

/// Anthropic's and Bedrock's cached tokens are priced by the tests above;
/// these are the providers that report cache reads inside the prompt count.
#[tokio::test]
async fn cached_tokens_of_openai_and_gemini_are_priced_in_usage_update() {
    use support::mock_model::fixture;
    // GPT-4.1: $2 input, $8 output, $0.50 cached input per million; 10,019
    // prompt tokens of which 10,000 cached, 7 out.
    let gpt = (19.0 * 2.0 + 7.0 * 8.0 + 10_000.0 * 0.5) / 1e6;
    let chat = fixture("openai/text.sse")
        .replace("\"prompt_tokens\":19,", "\"prompt_tokens\":10019,")
        .replace("\"cached_tokens\":0,", "\"cached_tokens\":10000,");
    let responses = fixture("openai_responses/text.sse").replace(
        "\"input_tokens\":19,\"input_tokens_details\":{\"cached_tokens\":0}",
        "\"input_tokens\":10019,\"input_tokens_details\":{\"cached_tokens\":10000}",
    );
    // Gemini 2.5 Flash: $0.30 input, $2.50 output, $0.03 cached; 10,021
    // prompt tokens of which 10,000 cached, 6 out.
    let flash = (21.0 * 0.3 + 6.0 * 2.5 + 10_000.0 * 0.03) / 1e6;
    let gemini = fixture("google/text.sse").replace(
        "\"promptTokenCount\": 21,\"candidatesTokenCount\": 6,",
        "\"promptTokenCount\": 10021,\"candidatesTokenCount\": 6,\"cachedContentTokenCount\": 10000,",
    );
    let openai =
        |api: &str| format!("model = \"openai/gpt-4.1\"\n[providers.openai]\napi = \"{api}\"\n");
    let cases = [
        (openai("openai-completions"), Vec::new(), chat, gpt),
        (openai("openai-responses"), Vec::new(), responses, gpt),
        (
            "model = \"google/gemini-2.5-flash\"\n".to_string(),
            vec![("GEMINI_API_KEY", "gm-test")],
            gemini,
            flash,
        ),
    ];
    for (config, env, body, expected) in cases {
        let cost = one_prompt_cost(&config, &env, Reply::sse(body)).await;
        assert!(
            (cost - expected).abs() < 1e-9,
            "{config}: {cost} != {expected}"
        );
    }
}
