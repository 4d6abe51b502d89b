//! The agent loop through the library API, against the mock model server:
//! event order and the invariants of ARCHITECTURE.md (every call gets a start, an
//! end and a result; pairing by id; cancellation; what each assistant
//! message records).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use pincer::agent::{self, AgentConfig, AgentEvent, AgentHost, AgentMessage, Answer, RunStop};
use pincer::llm::{Api, AssistantContent, Content, LlmError, Message, StopReason, ToolCall};
use pincer::tools::{self, CallInfo, Display};
use pretty_assertions::assert_eq;
use serde_json::json;
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_tool_call, anthropic_tool_calls};
use tokio_util::sync::CancellationToken;

struct Recorder {
    events: Mutex<Vec<AgentEvent>>,
    permission: Answer,
    /// Cancelled when a permission is asked, to cancel mid-batch.
    cancel_on_permission: Option<CancellationToken>,
}

impl Recorder {
    fn new(permission: Answer) -> Self {
        Self {
            events: Mutex::new(Vec::new()),
            permission,
            cancel_on_permission: None,
        }
    }

    /// Event names, with tool events tagged by call id.
    fn names(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                !matches!(
                    e,
                    AgentEvent::TextDelta(_)
                        | AgentEvent::ThinkingDelta(_)
                        | AgentEvent::Checkpoint(_)
                )
            })
            .map(|e| match e {
                AgentEvent::AgentStart => "agent_start".to_string(),
                AgentEvent::TurnStart => "turn_start".to_string(),
                AgentEvent::MessageStart => "message_start".to_string(),
                AgentEvent::MessageEnd(_) => "message_end".to_string(),
                AgentEvent::ToolExecutionStart { call, .. } => format!("tool_start {}", call.id),
                AgentEvent::ToolExecutionUpdate { call_id, .. } => format!("tool_update {call_id}"),
                AgentEvent::ToolExecutionEnd {
                    call_id, output, ..
                } => format!("tool_end {call_id} error={}", output.is_error),
                AgentEvent::TurnEnd { .. } => "turn_end".to_string(),
                AgentEvent::Retry { .. } => "retry".to_string(),
                AgentEvent::Failover { text } => format!("failover {text}"),
                AgentEvent::CompactionStart { reason } => format!("compaction_start {reason:?}"),
                AgentEvent::CompactionEnd { result, .. } => {
                    format!("compaction_end ok={}", result.is_ok())
                }
                AgentEvent::UserMessage { .. } => "user_message".to_string(),
                AgentEvent::AgentEnd { .. } => "agent_end".to_string(),
                AgentEvent::Runtime { runtime, .. } => format!("runtime {runtime}"),
                AgentEvent::Notice { text } => format!("notice {text}"),
                AgentEvent::TextDelta(_)
                | AgentEvent::ThinkingDelta(_)
                | AgentEvent::Checkpoint(_) => unreachable!(),
            })
            .collect()
    }
}

impl AgentHost for Recorder {
    fn emit(&self, event: AgentEvent) {
        self.events.lock().unwrap().push(event);
    }

    fn request_permission<'a>(
        &'a self,
        _call: &'a ToolCall,
        _info: &'a CallInfo,
        _reason: &'a str,
        _preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        if let Some(token) = &self.cancel_on_permission {
            token.cancel();
        }
        let answer = self.permission;
        Box::pin(async move { answer })
    }
}

/// Runs one prompt with the built-in tools in `project`.
async fn run(
    project: &std::path::Path,
    config: &AgentConfig,
    history: &mut Vec<AgentMessage>,
    prompt: &str,
    host: &Recorder,
    cancel: &CancellationToken,
) -> RunStop {
    agent::run(
        &reqwest::Client::new(),
        config,
        &tools::builtin(),
        project,
        history,
        vec![Content::text(prompt)],
        host,
        cancel,
    )
    .await
}

fn tool_results(history: &[AgentMessage]) -> Vec<(String, bool, String)> {
    history
        .iter()
        .filter_map(|m| match m {
            AgentMessage::Llm {
                message: Message::ToolResult(r),
            } => {
                let text = match &r.content[0] {
                    Content::Text { text } => text.clone(),
                    Content::Image { .. } => "<image>".to_string(),
                };
                Some((r.tool_call_id.clone(), r.is_error, text))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn events_come_in_order_and_every_call_gets_a_result() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("call_ok", "read", r#"{"path":"a.txt"}"#),
        ("call_unknown", "teleport", r#"{"to":"mars"}"#),
        ("call_badjson", "read", r#"{"path": "a.t"#),
        ("call_badargs", "read", r#"{"offset": 3}"#),
    ])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let host = Recorder::new(Answer::AllowOnce);
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &support::agent_config(&mock, project.path()),
        &mut history,
        "go",
        &host,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(stop, RunStop::EndTurn);
    assert_eq!(
        host.names(),
        vec![
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "tool_start call_ok",
            "tool_end call_ok error=false",
            "tool_start call_unknown",
            "tool_end call_unknown error=true",
            "tool_start call_badjson",
            "tool_end call_badjson error=true",
            "tool_start call_badargs",
            "tool_end call_badargs error=true",
            "turn_end",
            "turn_start",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end",
        ]
    );
    let results = tool_results(&history);
    assert_eq!(
        results
            .iter()
            .map(|(id, err, _)| (id.as_str(), *err))
            .collect::<Vec<_>>(),
        vec![
            ("call_ok", false),
            ("call_unknown", true),
            ("call_badjson", true),
            ("call_badargs", true),
        ]
    );
    assert_eq!(results[0].2, "alpha");
    assert_eq!(
        results[1].2,
        "Tool teleport not found. Available tools: read, write, edit, bash, process, grep, find, ls, ask_user, todo."
    );
    assert!(
        results[2].2.contains("could not be parsed"),
        "{}",
        results[2].2
    );
    assert!(
        results[3].2.starts_with("Invalid arguments for read"),
        "{}",
        results[3].2
    );
    // The model saw all four results, paired by id.
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn assistant_messages_record_where_they_came_from() {
    let project = tempfile::tempdir().unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let host = Recorder::new(Answer::AllowOnce);
    let mut history = Vec::new();
    run(
        project.path(),
        &support::agent_config(&mock, project.path()),
        &mut history,
        "hi",
        &host,
        &CancellationToken::new(),
    )
    .await;
    let AgentMessage::Llm {
        message: Message::Assistant(message),
    } = &history[2]
    // after the time line and the prompt
    else {
        panic!("expected the assistant message, got {:?}", history[2]);
    };
    assert_eq!(message.provider, "anthropic");
    assert_eq!(message.api, Api::AnthropicMessages);
    assert_eq!(message.model, "claude-sonnet-4-5");
    assert_eq!(message.stop_reason, StopReason::Stop);
    assert_eq!(message.error_message, None);
    assert_eq!(
        message.content,
        vec![AssistantContent::Text {
            text: "Hello from the mock model.".to_string()
        }]
    );
    assert!(message.usage.input > 0 && message.usage.output > 0);
    assert!(message.usage.cost.total > 0.0);
}

#[tokio::test]
async fn cancelling_mid_batch_still_answers_every_call() {
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let far = outside.path().join("x.txt");
    std::fs::write(&far, "x").unwrap();
    std::fs::write(project.path().join("a.txt"), "alpha\n").unwrap();
    let mock = MockModel::start().await;
    let far_args = json!({"path": far}).to_string();
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("call_1", "read", r#"{"path":"a.txt"}"#),
        ("call_2", "read", &far_args),
        ("call_3", "read", r#"{"path":"a.txt"}"#),
    ])));
    let cancel = CancellationToken::new();
    let mut host = Recorder::new(Answer::Cancelled);
    host.cancel_on_permission = Some(cancel.clone());
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &support::agent_config(&mock, project.path()),
        &mut history,
        "go",
        &host,
        &cancel,
    )
    .await;
    assert_eq!(stop, RunStop::Cancelled);
    let results = tool_results(&history);
    assert_eq!(
        results,
        vec![
            ("call_1".to_string(), false, "alpha".to_string()),
            (
                "call_2".to_string(),
                true,
                "Cancelled by the user before this tool ran.".to_string()
            ),
            (
                "call_3".to_string(),
                true,
                "Cancelled by the user before this tool ran.".to_string()
            ),
        ]
    );
    let names = host.names();
    assert_eq!(
        names.iter().filter(|n| n.starts_with("tool_start")).count(),
        3
    );
    assert_eq!(
        names.iter().filter(|n| n.starts_with("tool_end")).count(),
        3
    );
    assert_eq!(names.last().map(String::as_str), Some("agent_end"));
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_failure_after_streaming_began_is_not_retried_and_keeps_the_text() {
    let project = tempfile::tempdir().unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/overloaded_midstream.sse"));
    let mut cfg = support::agent_config(&mock, project.path());
    cfg.max_retries = 3;
    let host = Recorder::new(Answer::AllowOnce);
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &cfg,
        &mut history,
        "hi",
        &host,
        &CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(&stop, RunStop::Failed(LlmError::CutOff { cause, .. })
            if matches!(**cause, LlmError::Overloaded { .. })),
        "{stop:?}"
    );
    assert_eq!(mock.requests().len(), 1);
    let AgentMessage::Llm {
        message: Message::Assistant(message),
    } = &history[2]
    // after the time line and the prompt
    else {
        panic!("expected the assistant message");
    };
    assert_eq!(message.stop_reason, StopReason::Error);
    assert!(
        message
            .error_message
            .as_deref()
            .unwrap()
            .contains("Overloaded")
    );
    assert!(!message.text().is_empty());
}

#[tokio::test]
async fn a_stream_cut_off_before_its_end_is_an_error() {
    let project = tempfile::tempdir().unwrap();
    let mock = MockModel::start().await;
    let full = support::mock_model::fixture("anthropic/text.sse");
    let cut = &full[..full.find("event: message_delta").unwrap()];
    mock.push(Reply::sse(cut));
    let host = Recorder::new(Answer::AllowOnce);
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &support::agent_config(&mock, project.path()),
        &mut history,
        "hi",
        &host,
        &CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(&stop, RunStop::Failed(LlmError::CutOff { cause, .. })
            if matches!(**cause, LlmError::MalformedStream { .. })),
        "{stop:?}"
    );
}

#[tokio::test]
async fn a_silent_provider_hits_the_idle_timeout() {
    let project = tempfile::tempdir().unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::Stall {
        body: support::mock_model::fixture("anthropic/text.sse"),
        events: 2,
    });
    let mut cfg = support::agent_config(&mock, project.path());
    cfg.stream.idle_timeout = Duration::from_millis(300);
    let host = Recorder::new(Answer::AllowOnce);
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &cfg,
        &mut history,
        "hi",
        &host,
        &CancellationToken::new(),
    )
    .await;
    assert!(
        matches!(stop, RunStop::Failed(LlmError::Timeout { .. })),
        "{stop:?}"
    );
}

#[tokio::test]
async fn notices_never_reach_the_model() {
    let history = vec![
        AgentMessage::Llm {
            message: Message::User {
                content: vec![Content::text("hi")],
            },
        },
        AgentMessage::Notice {
            text: "retrying".to_string(),
        },
    ];
    assert_eq!(
        agent::convert_to_llm(agent::transform_context(&history)),
        vec![Message::User {
            content: vec![Content::text("hi")]
        }]
    );
}

#[tokio::test]
async fn permission_rejected_becomes_an_error_result_the_model_sees() {
    let project = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let far = outside.path().join("x.txt");
    std::fs::write(&far, "x").unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "call_far",
        "read",
        &json!({"path": far}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let host = Recorder::new(Answer::RejectOnce);
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &support::agent_config(&mock, project.path()),
        &mut history,
        "go",
        &host,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(stop, RunStop::EndTurn);
    let results = tool_results(&history);
    assert_eq!(results.len(), 1);
    assert!(results[0].1);
    assert!(results[0].2.contains("declined"), "{}", results[0].2);
}

fn text_deltas(host: &Recorder) -> Vec<String> {
    host.events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// An Anthropic text reply streamed as `n` deltas `t0 t1 …`.
fn many_deltas(n: usize) -> String {
    let mut body = String::from(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n\
event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    for i in 0..n {
        body.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"t{i} \"}}}}\n\n"
        ));
    }
    body.push_str(
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n\
event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    body
}

async fn run_text(mock: &MockModel) -> Recorder {
    let project = tempfile::tempdir().unwrap();
    let host = Recorder::new(Answer::AllowOnce);
    let mut history = Vec::new();
    let stop = run(
        project.path(),
        &support::agent_config(mock, project.path()),
        &mut history,
        "hi",
        &host,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(stop, RunStop::EndTurn);
    host
}

#[tokio::test]
async fn a_fast_stream_reaches_the_frontend_in_fewer_bigger_updates() {
    let mock = MockModel::start().await;
    mock.push(Reply::sse(many_deltas(3000)));
    let host = run_text(&mock).await;
    let deltas = text_deltas(&host);
    let expected: String = (0..3000).map(|i| format!("t{i} ")).collect();
    assert_eq!(deltas.concat(), expected);
    assert!(
        deltas.len() < 1000,
        "3000 deltas arriving at once were sent as {} updates",
        deltas.len()
    );
}

#[tokio::test]
async fn a_slow_stream_is_passed_on_delta_by_delta() {
    let mock = MockModel::start().await;
    mock.push(Reply::Sse {
        body: many_deltas(5),
        delay: Duration::from_millis(100),
        gate: None,
    });
    let host = run_text(&mock).await;
    assert_eq!(text_deltas(&host), vec!["t0 ", "t1 ", "t2 ", "t3 ", "t4 "]);
}

/// The model-visible shape of a history: role, tool call ids and names,
/// result ids and error flags, text.
fn shape_of(history: &[AgentMessage]) -> Vec<String> {
    history
        .iter()
        .filter_map(|m| match m {
            AgentMessage::Llm {
                message: Message::User { content },
            } => Some(format!(
                "user {}",
                match &content[0] {
                    Content::Text { text } => text.clone(),
                    Content::Image { .. } => "<image>".to_string(),
                }
            )),
            AgentMessage::Llm {
                message: Message::Assistant(a),
            } => Some(format!(
                "assistant {} {:?} [{}]",
                a.text(),
                a.stop_reason,
                a.tool_calls()
                    .map(|c| format!("{} {} {}", c.id, c.name, c.arguments))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            AgentMessage::Llm {
                message: Message::ToolResult(r),
            } => Some(format!(
                "result {} {} {}",
                r.tool_call_id, r.tool_name, r.is_error
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_claude_code_runtime_emits_the_native_loop_s_events_and_history() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("a.txt"), "alpha\n").unwrap();
    // The native loop, against the mock model.
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("toolu_1", "read", r#"{"path":"a.txt"}"#),
        ("toolu_2", "write", r#"{"path":"b.txt","content":"beta\n"}"#),
    ])));
    mock.push(Reply::sse(support::sse::anthropic_text("Done.", 5)));
    let native_host = Recorder::new(Answer::AllowOnce);
    let mut native = Vec::new();
    let config = support::agent_config(&mock, project.path());
    let stop = run(
        project.path(),
        &config,
        &mut native,
        "go",
        &native_host,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(stop, RunStop::EndTurn);

    // The same conversation through Claude Code (the scripted fake CLI).
    std::fs::remove_file(project.path().join("b.txt")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("script.json");
    std::fs::write(
        &script,
        json!({"processes": [{"turns": [[
            {"tool_uses": [
                {"id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
                {"id": "toolu_2", "name": "write", "input": {"path": "b.txt", "content": "beta\n"}}
            ]},
            {"text": "Done."}
        ]]}]})
        .to_string(),
    )
    .unwrap();
    // The fake reads its script from its environment: a wrapper gives it.
    let claude = scratch.path().join("claude");
    std::fs::write(
        &claude,
        format!(
            "#!/bin/sh\nFAKE_CLAUDE_SCRIPT='{}' FAKE_CLAUDE_LOG='{}' exec '{}' \"$@\"\n",
            script.display(),
            scratch.path().join("log.jsonl").display(),
            support::fake_claude_bin().display()
        ),
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut claude_config = config.clone();
    claude_config.runtime = Some(std::sync::Arc::new(agent::claude_code::ClaudeCode::new(
        agent::claude_code::Settings {
            path: claude,
            native: config.model.clone(),
            native_key: None,
            native_profile: None,
        },
        agent::claude_code::Session::new(None, None),
    )));
    let claude_host = Recorder::new(Answer::AllowOnce);
    let mut claude = Vec::new();
    let stop = run(
        project.path(),
        &claude_config,
        &mut claude,
        "go",
        &claude_host,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(stop, RunStop::EndTurn);
    assert_eq!(
        std::fs::read_to_string(project.path().join("b.txt")).unwrap(),
        "beta\n"
    );
    let mut names = claude_host.names();
    assert_eq!(names.remove(names.len() - 2), "runtime claude-code");
    assert_eq!(names, native_host.names());
    assert_eq!(shape_of(&claude), shape_of(&native));
    assert_eq!(
        mock.requests().len(),
        2,
        "Claude Code made no call of pincer's"
    );
}
