//! The payloads of the events a run streams: `chat` (the reply as it
//! grows, and how the run ended) and `agent` (each step: lifecycle, text,
//! thinking, tools, usage, plans). The hub writes them and `pincer acp
//! --connect` reads them (from pincer's gateway or OpenClaw's) as these
//! types. Read leniently: a gateway may send fields these do not name.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// Where a run's `chat` stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatState {
    /// More of the reply.
    Delta,
    /// The run ended with its reply.
    Final,
    /// The run was stopped.
    Aborted,
    /// The run failed.
    Error,
}

/// A `chat` event's payload.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatEvent<'a> {
    #[serde(borrow)]
    pub run_id: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<Cow<'a, str>>,
    /// The run's `chat` events in order, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub state: ChatState,
    /// A helper's run: its parent's key.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<Cow<'a, str>>,
    /// The text new since the last delta.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub delta_text: Option<Cow<'a, str>>,
    /// `deltaText` is the whole text, not an addition (OpenClaw's, after
    /// it rewrote what it had sent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace: bool,
    /// The reply so far (with a delta, for clients that do not build it
    /// from the deltas), or the whole reply (at the end).
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub message: Option<ChatMessage<'a>>,
    /// `stop`, `max_tokens`, `max_turns` or `aborted`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<Cow<'a, str>>,
    /// The run's last usage report (see [`Usage`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<Cow<'a, str>>,
    /// `refusal` when the model refused; else `unknown`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<Cow<'a, str>>,
}

impl<'a> ChatEvent<'a> {
    /// An event of `run_id` in `state`, its other fields unset.
    pub fn new(run_id: &'a str, state: ChatState) -> Self {
        Self {
            run_id: Cow::Borrowed(run_id),
            session_key: None,
            seq: None,
            state,
            spawned_by: None,
            delta_text: None,
            replace: false,
            message: None,
            stop_reason: None,
            usage: None,
            error_message: None,
            error_kind: None,
        }
    }

    /// The payload as the wire has it.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// An assistant's message in a `chat` event.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChatMessage<'a> {
    #[serde(borrow, default)]
    pub role: Cow<'a, str>,
    #[serde(borrow, default)]
    pub content: MessageContent<'a>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<u64>,
}

impl<'a> ChatMessage<'a> {
    /// The assistant's reply: its thinking (when there is any), then its
    /// text.
    pub fn assistant(thinking: &'a str, text: &'a str, timestamp: u64) -> Self {
        let mut blocks = Vec::with_capacity(2);
        if !thinking.is_empty() {
            blocks.push(MessageBlock::Thinking {
                thinking: Cow::Borrowed(thinking),
            });
        }
        blocks.push(MessageBlock::Text {
            text: Cow::Borrowed(text),
        });
        Self {
            role: Cow::Borrowed("assistant"),
            content: MessageContent::Blocks(blocks),
            timestamp: Some(timestamp),
        }
    }

    /// The message's text (`text` blocks) or its thinking, each block's
    /// on a line of its own.
    pub fn joined(&self, thinking: bool) -> String {
        match &self.content {
            MessageContent::Text(text) if !thinking => text.to_string(),
            MessageContent::Text(_) => String::new(),
            MessageContent::Blocks(blocks) => {
                let parts: Vec<&str> = blocks
                    .iter()
                    .filter_map(|block| match block {
                        MessageBlock::Text { text } if !thinking => Some(text.as_ref()),
                        MessageBlock::Thinking { thinking: t } if thinking => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                parts.join("\n")
            }
        }
    }
}

/// A message's content: plain text, or blocks.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent<'a> {
    #[serde(borrow)]
    Text(Cow<'a, str>),
    #[serde(borrow)]
    Blocks(Vec<MessageBlock<'a>>),
}

impl Default for MessageContent<'_> {
    fn default() -> Self {
        Self::Blocks(Vec::new())
    }
}

/// A block of a message; kinds other than text and thinking (a tool
/// call, a picture) are kept as `Other` and read as nothing.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum MessageBlock<'a> {
    Text {
        #[serde(borrow)]
        text: Cow<'a, str>,
    },
    Thinking {
        #[serde(borrow)]
        thinking: Cow<'a, str>,
    },
    #[serde(other)]
    Other,
}

/// A session's usage report: `agent` `stream:"usage"`'s data, repeated
/// on the run's `final`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub context_tokens: Option<u64>,
    pub context_window: Option<u64>,
    pub cost_usd: Option<f64>,
}

/// An `agent` event's payload: one step of a run on its `stream`
/// (`lifecycle`, `assistant`, `thinking`, `tool`, `usage`, `plan`,
/// `approval`, `subagent`), with that stream's `data`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentEvent<'a, D> {
    #[serde(borrow)]
    pub run_id: Cow<'a, str>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(borrow)]
    pub stream: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<u64>,
    pub data: D,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<Cow<'a, str>>,
}

/// `assistant` and `thinking` data: the new text.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Delta<'a> {
    #[serde(borrow)]
    pub delta: Cow<'a, str>,
}

/// An `agent` event's `lifecycle` data: a run started, ended, or failed.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// `start`, `end` or `error`.
    pub phase: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<u64>,
    /// An end that was a stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aborted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Lifecycle {
    pub fn start(now: u64) -> Self {
        Self {
            phase: "start",
            started_at: Some(now),
            ended_at: None,
            aborted: None,
            error: None,
        }
    }

    pub fn end(now: u64) -> Self {
        Self {
            phase: "end",
            started_at: None,
            ended_at: Some(now),
            aborted: None,
            error: None,
        }
    }
}

/// An `agent` event's `tool` data: a call started (with its title and
/// arguments), sent part of its result, or ended.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolStep {
    /// `start`, `update` or `result`.
    pub phase: &'static str,
    pub name: String,
    /// The ACP kind (`read`, `edit`, `execute`, …).
    pub kind: String,
    pub tool_call_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ToolOutput<'static>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_result: Option<ToolOutput<'static>>,
    /// An edit's changes, for clients that show it as a diff.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<super::approvals::Diff>,
    /// A command's output as plain text, for a terminal view.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// What a tool gave back, as text blocks.
#[derive(Clone, Debug, Serialize)]
pub struct ToolOutput<'a> {
    pub content: Vec<MessageBlock<'a>>,
}

/// An `agent` event's `subagent` data on the parent's run: a helper
/// started (`start`, with what it was asked) or ended (`end`, with how).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HelperStep {
    pub phase: &'static str,
    pub tool_call_id: String,
    pub child_session_key: String,
    pub child_run_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// `done`, `stopped` or `failed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
}

/// `session.message`: a prompt a session was sent, for the clients that
/// did not send it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMessage<'a> {
    pub session_key: &'a str,
    pub run_id: &'a str,
    /// A helper's prompt: its parent's key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<&'a str>,
    pub message: ChatMessage<'a>,
}

impl<'a> ChatMessage<'a> {
    /// A user's message of `text`.
    pub fn user(text: &'a str, timestamp: u64) -> Self {
        Self {
            role: Cow::Borrowed("user"),
            content: MessageContent::Blocks(vec![MessageBlock::Text {
                text: Cow::Borrowed(text),
            }]),
            timestamp: Some(timestamp),
        }
    }
}

/// `sessions.changed`: a session was made, patched, spawned, reset or
/// deleted (`reason`); a patch carries the session's row.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsChanged<'a> {
    pub reason: &'a str,
    pub key: &'a str,
    pub session_id: &'a str,
    pub ts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<super::sessions::Row>,
}

/// `tick`: the gateway is alive.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Tick {
    pub ts: u64,
}

/// `progressCard.changed`: a session's card has a new revision.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CardChanged<'a> {
    pub session_key: &'a str,
    pub revision: u64,
}

/// `cron`: a scheduled job's run `started` or `finished`, with the job as
/// `cron.get` gives it; a finished run says how it went.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRun<'a> {
    pub job_id: &'a str,
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<Option<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<Option<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Option<super::cron::RunStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<Option<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<super::cron::Job>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn a_delta_is_written_in_the_order_openclaw_s_clients_read() {
        let mut event = ChatEvent::new("run-1", ChatState::Delta);
        event.session_key = Some("agent:main:main".into());
        event.seq = Some(3);
        event.delta_text = Some("lo".into());
        assert_eq!(
            event.encode(),
            r#"{"runId":"run-1","sessionKey":"agent:main:main","seq":3,"state":"delta","deltaText":"lo"}"#
        );
        event.message = Some(ChatMessage::assistant("", "Hello", 7));
        assert_eq!(
            serde_json::from_str::<Value>(&event.encode()).unwrap()["message"],
            json!({"role": "assistant", "content": [{"type": "text", "text": "Hello"}], "timestamp": 7})
        );
    }

    #[test]
    fn an_ending_carries_the_reply_and_its_usage() {
        let mut event = ChatEvent::new("r", ChatState::Final);
        event.message = Some(ChatMessage::assistant("hmm", "Done.", 1));
        event.stop_reason = Some("stop".into());
        event.usage = Some(Usage {
            context_tokens: Some(10),
            context_window: Some(100),
            cost_usd: None,
        });
        assert_eq!(
            serde_json::from_str::<Value>(&event.encode()).unwrap(),
            json!({
                "runId": "r", "state": "final",
                "message": {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Done."}
                ], "timestamp": 1},
                "stopReason": "stop",
                "usage": {"contextTokens": 10, "contextWindow": 100, "costUsd": null},
            })
        );
    }

    #[test]
    fn another_gateway_s_events_are_read_with_what_they_add() {
        let text = r#"{"runId":"r","sessionKey":"main","seq":2,"state":"delta","extra":1,
            "message":{"role":"assistant","content":[{"type":"text","text":"a"},
            {"type":"toolCall","id":"t"},{"type":"thinking","thinking":"b"},{"type":"text","text":"c"}]}}"#;
        let event: ChatEvent<'_> = serde_json::from_str(text).unwrap();
        let message = event.message.unwrap();
        assert_eq!(
            (message.joined(false), message.joined(true)),
            ("a\nc".to_string(), "b".to_string())
        );
        let plain: ChatEvent<'_> = serde_json::from_str(
            r#"{"runId":"r","state":"final","message":{"role":"assistant","content":"all"}}"#,
        )
        .unwrap();
        assert_eq!(plain.message.unwrap().joined(false), "all");
        // A state no gateway sends is refused, not taken for a delta.
        assert!(
            serde_json::from_str::<ChatEvent<'_>>(r#"{"runId":"r","state":"paused"}"#).is_err()
        );
        let agent: AgentEvent<'_, Delta<'_>> = serde_json::from_str(
            r#"{"runId":"r","stream":"assistant","data":{"delta":"x\"y"},"seq":1}"#,
        )
        .unwrap();
        assert_eq!(agent.data.delta, "x\"y");
    }

    #[test]
    fn a_tool_s_steps_and_a_run_s_lifecycle_carry_only_what_their_phase_has() {
        let start = ToolStep {
            phase: "start",
            name: "bash".into(),
            kind: "execute".into(),
            tool_call_id: "t1".into(),
            title: Some("ls".into()),
            args: Some(json!({"command": "ls"})),
            is_error: None,
            result: None,
            partial_result: None,
            diffs: Vec::new(),
            output: None,
        };
        assert_eq!(
            json!(start),
            json!({"phase": "start", "name": "bash", "kind": "execute", "toolCallId": "t1",
                   "title": "ls", "args": {"command": "ls"}})
        );
        let result = ToolStep {
            phase: "result",
            title: None,
            args: None,
            is_error: Some(false),
            result: Some(ToolOutput {
                content: vec![MessageBlock::Text { text: "a\n".into() }],
            }),
            output: Some("a".into()),
            ..start
        };
        assert_eq!(
            json!(result),
            json!({"phase": "result", "name": "bash", "kind": "execute", "toolCallId": "t1",
                   "isError": false, "result": {"content": [{"type": "text", "text": "a\n"}]},
                   "output": "a"})
        );
        let failed = Lifecycle {
            phase: "error",
            error: Some("down".into()),
            ..Lifecycle::end(9)
        };
        assert_eq!(
            json!(failed),
            json!({"phase": "error", "endedAt": 9, "error": "down"})
        );
        assert_eq!(
            json!(Lifecycle::start(1)),
            json!({"phase": "start", "startedAt": 1})
        );
    }

    #[test]
    fn the_gateway_s_own_events_have_openclaw_s_fields() {
        let changed = SessionsChanged {
            reason: "reset",
            key: "k",
            session_id: "s",
            ts: 3,
            session: None,
        };
        assert_eq!(
            json!(changed),
            json!({"reason": "reset", "key": "k", "sessionId": "s", "ts": 3})
        );
        let message = SessionMessage {
            session_key: "k",
            run_id: "r",
            spawned_by: Some("p"),
            message: ChatMessage::user("hi", 4),
        };
        assert_eq!(
            json!(message),
            json!({"sessionKey": "k", "runId": "r", "spawnedBy": "p",
                   "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 4}})
        );
        // A job the scheduler no longer has: its id and what happened.
        let gone = CronRun {
            job_id: "j",
            action: "finished",
            run_at_ms: None,
            next_run_at_ms: None,
            status: None,
            error: None,
            duration_ms: None,
            job: None,
        };
        assert_eq!(json!(gone), json!({"jobId": "j", "action": "finished"}));
        let started = CronRun {
            action: "started",
            run_at_ms: Some(Some(5)),
            next_run_at_ms: Some(None),
            ..gone
        };
        assert_eq!(
            json!(started),
            json!({"jobId": "j", "action": "started", "runAtMs": 5, "nextRunAtMs": null})
        );
        assert_eq!(json!(Tick { ts: 1 }), json!({"ts": 1}));
    }
}
