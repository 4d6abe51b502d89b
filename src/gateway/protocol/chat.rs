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
    pub messages: Vec<Value>,
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
    pub defaults: Value,
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
