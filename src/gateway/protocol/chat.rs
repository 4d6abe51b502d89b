//! The params of OpenClaw's chat methods: `chat.send` and `agent`, which
//! send a message, and those that read and follow a session:
//! `chat.history`/`chat.startup`, `chat.abort`, `chat.subscribe`,
//! `sessions.messages.subscribe`, `sessions.get` and `agent.wait` (their
//! shapes are the `openclaw` package's `ChatSendParamsSchema`,
//! `AgentParamsSchema`, `ChatHistoryParamsSchema`,
//! `ChatAbortParamsSchema`, `SessionsMessagesSubscribeParamsSchema`,
//! `SessionsGetParamsSchema` and `AgentWaitParamsSchema`). A field of
//! OpenClaw's that pincer cannot honour is not in the type, so it is
//! refused by name.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `chat.send`: `message` (with `attachments`) for the session
/// `sessionKey` names, as the run `idempotencyKey`. Some fields are taken
/// only at the value that asks for what pincer does anyway, and the
/// handler refuses the others: `thinking` only at the session's level,
/// `deliver` only `false` (a channel session's replies go to its channel
/// whatever a client asks), `expectedLeafEntryId` only `null` (pincer's
/// transcripts have no branches).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendParams {
    pub session_key: String,
    pub agent_id: Option<String>,
    /// The session the client means: a key that names another one is not
    /// sent to.
    pub session_id: Option<String>,
    pub message: String,
    pub attachments: Option<Vec<Attachment>>,
    pub thinking: Option<String>,
    pub deliver: Option<bool>,
    pub timeout_ms: Option<u64>,
    pub queue_mode: Option<String>,
    pub idempotency_key: String,
    pub expected_leaf_entry_id: Option<String>,
    /// The Control UI resending after a reconnect: the idempotency key
    /// makes that safe whatever the flag says.
    #[serde(rename = "__controlUiReconnectResume")]
    pub control_ui_reconnect_resume: Option<bool>,
}

/// `agent` (`openclaw agent`): `chat.send`'s message for `sessionKey`
/// (the main session without one), or for the session `sessionId` names,
/// answered twice (accepted, then the run's result); `timeout` is in
/// seconds, as OpenClaw's CLI sends it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentParams {
    pub session_key: Option<String>,
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub message: String,
    pub attachments: Option<Vec<Attachment>>,
    pub thinking: Option<String>,
    pub deliver: Option<bool>,
    pub timeout: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub queue_mode: Option<String>,
    pub idempotency_key: String,
}

/// One attachment of a message (OpenClaw's `ChatAttachmentSchema`, which
/// is open: its size and origin fields describe the file and change
/// nothing, so they pass). pincer takes images and text files.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    /// `image` (without one) or `file`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub mime_type: Option<String>,
    pub file_name: Option<String>,
    /// The base64 body, or a data URL (as a browser reads a file).
    pub content: Option<Value>,
}

/// `chat.history` and `chat.startup`. Every user message is in the
/// history, so the inputs of the runs asked for (`inputRunIds`) are too.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryParams {
    pub session_key: String,
    pub agent_id: Option<String>,
    pub limit: Option<u64>,
    pub max_bytes: Option<u64>,
    pub input_run_ids: Option<Vec<String>>,
}

/// `chat.abort`: pincer has no side runs, so keeping or stopping them
/// (`preserveSideRuns`) is the same.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbortParams {
    pub session_key: String,
    pub agent_id: Option<String>,
    pub run_id: Option<String>,
    pub preserve_side_runs: Option<bool>,
}

/// `chat.subscribe` and `chat.unsubscribe`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscribeParams {
    pub session_key: String,
    pub agent_id: Option<String>,
}

/// `sessions.messages.subscribe` and `…unsubscribe`: a session's
/// approvals reach every client that may answer them, so
/// `includeApprovals` is what pincer does anyway.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessagesSubscribeParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub include_approvals: Option<bool>,
}

/// `sessions.get`: a session's messages.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub limit: Option<u64>,
}

/// `agent.wait`: a run's outcome, waiting up to `timeoutMs` (30 s).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitParams {
    pub run_id: String,
    pub timeout_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::params;
    use serde_json::json;

    #[test]
    fn a_message_takes_openclaw_s_fields_and_refuses_what_pincer_cannot_honour() {
        let send: SendParams = params(
            "chat.send",
            json!({
                "sessionKey": "k", "message": "hi", "idempotencyKey": "r",
                "attachments": [{"type": "image", "mimeType": "image/png", "content": "AA==", "sizeBytes": 1}],
                "__controlUiReconnectResume": true, "expectedLeafEntryId": null
            }),
        )
        .unwrap();
        assert_eq!(send.message, "hi");
        let attachments = send.attachments.unwrap();
        assert_eq!(attachments[0].mime_type.as_deref(), Some("image/png"));
        assert_eq!(send.control_ui_reconnect_resume, Some(true));
        for (field, value) in [("fastMode", json!(true)), ("replyToId", json!("m1"))] {
            let mut params_given =
                json!({"sessionKey": "k", "message": "hi", "idempotencyKey": "r"});
            params_given[field] = value;
            let error = params::<SendParams>("chat.send", params_given).unwrap_err();
            assert!(
                error.starts_with(&format!("chat.send: `{field}` is not supported by pincer")),
                "{error}"
            );
        }
        let agent: AgentParams = params(
            "agent",
            json!({"message": "hi", "idempotencyKey": "r", "timeout": 30}),
        )
        .unwrap();
        assert_eq!((agent.session_key, agent.timeout), (None, Some(30)));
        let error = params::<AgentParams>(
            "agent",
            json!({"message": "hi", "idempotencyKey": "r", "model": "gpt"}),
        )
        .unwrap_err();
        assert!(
            error.starts_with("agent: `model` is not supported by pincer"),
            "{error}"
        );
        let error = params::<SendParams>(
            "chat.send",
            json!({"sessionKey": "k", "message": 5, "idempotencyKey": "r"}),
        )
        .unwrap_err();
        assert_eq!(
            error,
            "chat.send: `message` must be a string, not integer `5`"
        );
    }

    #[test]
    fn the_chat_params_take_openclaw_s_fields_and_refuse_others() {
        let history: HistoryParams = params(
            "chat.history",
            json!({"sessionKey": "k", "limit": 5, "maxBytes": 100, "inputRunIds": ["r"]}),
        )
        .unwrap();
        assert_eq!(history.session_key, "k");
        assert_eq!(history.limit, Some(5));
        assert_eq!(history.input_run_ids, Some(vec!["r".to_string()]));
        let refused =
            params::<HistoryParams>("chat.history", json!({"sessionKey": "k", "since": 3}))
                .unwrap_err();
        assert!(
            refused.starts_with("chat.history: `since` is not supported by pincer (it takes"),
            "{refused}"
        );
        // The key is required, and each field has its type.
        let missing = params::<AbortParams>("chat.abort", json!({})).unwrap_err();
        assert_eq!(missing, "chat.abort: `sessionKey` is required");
        let wrong =
            params::<HistoryParams>("chat.history", json!({"sessionKey": "k", "limit": -1}))
                .unwrap_err();
        assert_eq!(
            wrong,
            "chat.history: `limit` must be a non-negative integer, not integer `-1`"
        );
        let flag = params::<MessagesSubscribeParams>(
            "sessions.messages.subscribe",
            json!({"key": "k", "includeApprovals": "yes"}),
        )
        .unwrap_err();
        assert_eq!(
            flag,
            "sessions.messages.subscribe: `includeApprovals` must be a boolean, not string \"yes\""
        );
        let wait: WaitParams = params("agent.wait", json!({"runId": "r"})).unwrap();
        assert_eq!((wait.run_id.as_str(), wait.timeout_ms), ("r", None));
    }

    #[test]
    fn history_messages_have_openclaw_s_shape_for_each_role() {
        let meta = |seq, id: Option<&str>| MessageMeta {
            seq,
            id: id.map(String::from),
            ..Default::default()
        };
        let user = HistoryMessage {
            body: HistoryBody::User {
                content: vec![
                    HistoryBlock::Text {
                        text: "look".into(),
                    },
                    HistoryBlock::Image {
                        mime_type: "image/png".into(),
                        omitted: true,
                        bytes: 68,
                    },
                ],
            },
            timestamp: 5,
            id: Some("e1".into()),
            turn: Some(1),
            meta: MessageMeta {
                idempotency_key: Some("r:user".into()),
                run_id: Some("r".into()),
                ..meta(1, Some("e1"))
            },
        };
        assert_eq!(
            json!(user),
            json!({"role": "user", "content": [{"type": "text", "text": "look"},
                     {"type": "image", "mimeType": "image/png", "omitted": true, "bytes": 68}],
                   "timestamp": 5, "id": "e1", "turn": 1,
                   "__openclaw": {"seq": 1, "id": "e1", "idempotencyKey": "r:user", "runId": "r"}})
        );
        assert!(user.is_user());
        assert_eq!(user.user_text(), "look");
        let assistant = HistoryMessage {
            body: HistoryBody::Assistant {
                content: vec![
                    AssistantBlock::Thinking {
                        thinking: String::new(),
                    },
                    AssistantBlock::ToolCall {
                        id: "t1".into(),
                        name: "edit".into(),
                        arguments: json!({"path": "a"}),
                        kind: Some(crate::tools::ToolKind::Edit),
                        title: Some("Edit a".into()),
                    },
                ],
                model: "m".into(),
                provider: "p".into(),
                stop_reason: "toolUse",
            },
            timestamp: 6,
            id: None,
            turn: None,
            meta: meta(2, None),
        };
        assert_eq!(
            json!(assistant),
            json!({"role": "assistant", "content": [{"type": "thinking", "thinking": ""},
                     {"type": "toolCall", "id": "t1", "name": "edit", "arguments": {"path": "a"},
                      "kind": "edit", "title": "Edit a"}],
                   "model": "m", "provider": "p", "stopReason": "toolUse",
                   "timestamp": 6, "__openclaw": {"seq": 2}})
        );
        let result = HistoryMessage {
            body: HistoryBody::ToolResult {
                tool_call_id: "t1".into(),
                tool_name: "edit".into(),
                content: vec![HistoryBlock::Text { text: "ok".into() }],
                is_error: false,
                kind: Some(crate::tools::ToolKind::Edit),
                diffs: vec![HistoryDiff {
                    path: "a".into(),
                    old_text: None,
                    new_text: "x".into(),
                }],
            },
            timestamp: 7,
            id: None,
            turn: None,
            meta: meta(3, Some("e3")),
        };
        assert_eq!(
            json!(result),
            json!({"role": "toolResult", "toolCallId": "t1", "toolName": "edit",
                   "content": [{"type": "text", "text": "ok"}], "isError": false, "kind": "edit",
                   "diffs": [{"path": "a", "oldText": null, "newText": "x"}],
                   "timestamp": 7, "__openclaw": {"seq": 3, "id": "e3"}})
        );
        assert!(!result.is_user());
    }
}

/// `chat.startup`'s `sessionInfo`: the session's row (or, for a key with
/// no session yet, its key alone) and its runs not yet ended.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    #[serde(flatten)]
    pub session: StartupSession,
    pub agent_id: &'static str,
    pub has_active_run: bool,
    pub active_run_ids: Vec<String>,
}

/// `chat.history`'s answer, and `chat.startup`'s with [`Startup`]: the
/// session's messages (OpenClaw's shape, each with its `__openclaw` id
/// and place) and its levels.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
    pub session_key: String,
    /// `None` before the key names a session.
    pub session_id: Option<String>,
    pub messages: Vec<HistoryMessage>,
    pub thinking_level: String,
    pub verbose_level: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub startup: Option<Startup>,
}

/// What `chat.startup` adds to the history: whether older messages were
/// left out, the session's state, and the defaults a new one starts with.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Startup {
    pub has_more: bool,
    pub total_messages: usize,
    pub session_info: SessionInfo,
    pub defaults: super::sessions::RowDefaults,
}

/// `chat.send`'s answer: the run, `started` or (for a key already sent)
/// that run's status.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    pub run_id: String,
    pub status: &'static str,
}

/// `chat.abort`'s answer: the runs stopped (none when nothing ran).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Aborted {
    pub ok: bool,
    pub aborted: bool,
    pub run_ids: Vec<String>,
}

/// What `chat.startup` knows of the session.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum StartupSession {
    Listed(Box<super::sessions::Row>),
    New { key: String, kind: &'static str },
}

/// `progressCard.get`: a session's progress card, which in pincer is its
/// plan (the agent's todo list).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CardParams {
    pub session_key: String,
    pub agent_id: Option<String>,
}

/// A progress card as OpenClaw's clients show it above the composer.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressCard {
    pub session_key: String,
    pub revision: u64,
    pub updated_at: u64,
    pub steps: Vec<ProgressStep>,
}

/// One step of a plan: `pending`, `in_progress` or `completed`.
#[derive(Clone, Debug, Serialize)]
pub struct ProgressStep {
    pub step: String,
    pub status: &'static str,
}

/// One message of a session's history (`chat.history`, `sessions.get`),
/// in OpenClaw's shape: its role and content, when it was written, and the
/// `__openclaw` metadata its clients match their own copies on.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryMessage {
    #[serde(flatten)]
    pub body: HistoryBody,
    /// When its entry was written, in ms since the epoch.
    pub timestamp: u64,
    /// A prompt's entry id (what `sessions.rewind` and `sessions.fork`
    /// take as `messageId`) …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// … and the number of the turn it started, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<usize>,
    #[serde(rename = "__openclaw")]
    pub meta: MessageMeta,
}

impl HistoryMessage {
    pub fn is_user(&self) -> bool {
        matches!(self.body, HistoryBody::User { .. })
    }

    /// A user message's text, its blocks' joined.
    pub fn user_text(&self) -> String {
        match &self.body {
            HistoryBody::User { content } => content
                .iter()
                .filter_map(|block| match block {
                    HistoryBlock::Text { text } => Some(text.as_str()),
                    HistoryBlock::Image { .. } => None,
                })
                .collect(),
            _ => String::new(),
        }
    }
}

/// A history message's `__openclaw`: its place (from 1), its entry's id,
/// and the run it belongs to when the gateway saw that run start (a user
/// message's `idempotencyKey` is `<run>:user`).
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageMeta {
    pub seq: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
}

/// A history message by its role.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum HistoryBody {
    User {
        content: Vec<HistoryBlock>,
    },
    #[serde(rename_all = "camelCase")]
    Assistant {
        content: Vec<AssistantBlock>,
        model: String,
        provider: String,
        /// `stop`, `length`, `toolUse`, `error` or `aborted`.
        stop_reason: &'static str,
    },
    #[serde(rename_all = "camelCase")]
    ToolResult {
        tool_call_id: String,
        tool_name: String,
        content: Vec<HistoryBlock>,
        is_error: bool,
        /// The call's kind, as its live tool events had it.
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<crate::tools::ToolKind>,
        /// An edit's changes.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        diffs: Vec<HistoryDiff>,
    },
}

/// A block of a user message or a tool's result. A picture's bytes stay
/// out, as OpenClaw's history leaves them out: it is `omitted`, with its
/// size.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum HistoryBlock {
    Text {
        text: String,
    },
    #[serde(rename_all = "camelCase")]
    Image {
        mime_type: String,
        omitted: bool,
        bytes: usize,
    },
}

/// A block of an assistant's message. Redacted thinking is shown empty.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantBlock {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        kind: Option<crate::tools::ToolKind>,
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
}

/// One file an edit changed; `oldText` is `null` for a new file.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryDiff {
    pub path: std::path::PathBuf,
    pub old_text: Option<String>,
    pub new_text: String,
}

/// `sessions.get`'s answer: a session's messages.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Messages {
    pub key: String,
    pub session_id: Option<String>,
    pub messages: Vec<HistoryMessage>,
}

/// `sessions.messages.subscribe` and `…unsubscribe`: whether the client
/// now hears the session's messages.
#[derive(Clone, Debug, Serialize)]
pub struct MessagesSubscribed {
    pub subscribed: bool,
    pub key: String,
}

/// `agent`'s first answer: the run was accepted (or, for an
/// `idempotencyKey` already sent, that run's status).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentAccepted {
    pub run_id: String,
    pub session_key: String,
    pub agent_id: &'static str,
    pub status: &'static str,
    pub accepted_at: u64,
}

/// `agent`'s last answer: how the run ended, and its reply
/// (`result.payloads` is what OpenClaw's CLI prints).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDone {
    pub run_id: String,
    /// `ok` or `error`.
    pub status: &'static str,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub result: AgentReply,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentReply {
    pub text: String,
    pub stop_reason: &'static str,
    pub payloads: Vec<Payload>,
}

/// A part of a reply as OpenClaw delivers it.
#[derive(Clone, Debug, Serialize)]
pub struct Payload {
    pub text: String,
}

/// `agent.wait`'s answer: `timeout` while the run goes on, else how it
/// ended.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waited {
    pub run_id: String,
    /// `ok`, `error` or `timeout`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal_reply: Option<TerminalReply>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The reply a finished run left, shown to the user.
#[derive(Clone, Debug, Serialize)]
pub struct TerminalReply {
    pub disposition: &'static str,
    pub text: String,
}
