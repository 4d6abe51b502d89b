//! OpenClaw's approval and question methods (`exec.approval.get`,
//! `….list`, `….resolve`, `question.list`): their params, the pending
//! approvals they answer with, and the events that announce and settle
//! one.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `exec.approval.get`: one pending approval, by id.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    pub id: String,
}

/// `exec.approval.resolve`: `decision` is `allow-once`, `allow-always`
/// or `deny` (the hub checks it against the approval's options).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveParams {
    pub id: String,
    pub decision: String,
}

/// `question.list`: pincer asks no questions but approvals, so the list
/// is empty whatever `status` it is filtered by.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionListParams {
    pub status: Option<String>,
}

/// `question.list`'s answer: always empty (see [`QuestionListParams`]).
#[derive(Clone, Debug, Serialize)]
pub struct Questions {
    pub questions: Vec<Value>,
}

/// A pending approval as `exec.approval.get` and `….list` give it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub id: String,
    pub command_text: String,
    /// The command's first line, at most 200 characters.
    pub command_preview: String,
    pub allowed_decisions: Vec<String>,
    /// What the question calls a decision when it has a name of its own
    /// (a restore's "Restore" rather than "Allow once").
    pub labels: BTreeMap<String, String>,
    pub host: &'static str,
    pub agent_id: &'static str,
    /// The question's text beyond its title.
    pub details: String,
    pub diffs: Vec<Diff>,
    pub session_key: String,
    pub tool_call_id: String,
    pub tool_name: String,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
    /// The question as a list entry carries it again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<Request>,
}

/// What an approval asks, as `exec.approval.requested` and the list's
/// entries carry it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub command: String,
    pub command_preview: String,
    pub session_key: String,
    pub agent_id: &'static str,
    pub host: &'static str,
    pub tool_call_id: String,
    pub tool_name: String,
    /// The event's only: where the command runs, and what the question
    /// shows besides its title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diffs: Option<Vec<Diff>>,
}

/// A change an approval would allow: `oldText` is `null` for a new file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    pub path: String,
    #[serde(default)]
    pub old_text: Option<String>,
    pub new_text: String,
}

/// `exec.approval.requested`: a question for the clients that approve.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requested {
    pub approval_kind: &'static str,
    pub id: String,
    pub request: Request,
    pub allowed_decisions: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
}

/// `exec.approval.resolved`: how a question was answered, and by whom
/// (`client`, `timeout`, or `editor` for one an editor answered).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    pub id: String,
    pub decision: String,
    pub session_key: String,
    pub tool_call_id: String,
    pub resolved_by: String,
    pub ts: u64,
}

/// The run's `agent` event for a question (`stream: "approval"`), which
/// OpenClaw's bridge matches by run for every tool, not only commands.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub phase: &'static str,
    pub kind: &'static str,
    pub status: &'static str,
    pub approval_id: String,
    pub command: String,
    pub title: Value,
    pub tool_call_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::{NoParams, params};
    use serde_json::json;

    #[test]
    fn the_approval_params_take_openclaw_s_fields_and_refuse_others() {
        let resolve: ResolveParams = params(
            "exec.approval.resolve",
            json!({"id": "a1", "decision": "allow-once"}),
        )
        .unwrap();
        assert_eq!(
            (resolve.id.as_str(), resolve.decision.as_str()),
            ("a1", "allow-once")
        );
        let missing =
            params::<ResolveParams>("exec.approval.resolve", json!({"id": "a1"})).unwrap_err();
        assert_eq!(missing, "exec.approval.resolve: `decision` is required");
        let extra =
            params::<GetParams>("exec.approval.get", json!({"id": "a1", "x": 1})).unwrap_err();
        assert_eq!(
            extra,
            "exec.approval.get: `x` is not supported by pincer (it takes `id`)"
        );
        let none = params::<NoParams>("agents.list", json!({"agentId": "main"})).unwrap_err();
        assert_eq!(
            none,
            "agents.list: `agentId` is not supported by pincer (it takes no params)"
        );
        params::<NoParams>("agents.list", json!({})).unwrap();
        params::<QuestionListParams>("question.list", json!({"status": "pending"})).unwrap();
    }
}
