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
}
