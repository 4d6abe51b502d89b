//! `session/fork` (unstable ACP, `sessionCapabilities.fork`) and the
//! JetBrains `_session/rewind` extension.
//!
//! A fork is a new session whose transcript names its parent and holds the
//! parent's conversation: all of it, or through the turn that holds the
//! message a client names (JetBrains' `_meta.jetbrains.air.fork`, or
//! pincer's own `_meta.pincer.fork`, which may also put the files back to
//! that point). `_session/rewind` takes a session's conversation back to
//! before a user message, as JetBrains' AIR client asks of Claude Code's
//! and Codex's adapters; pincer also offers to put the files back (the
//! adapters cannot). Clients that say they are AIR
//! (`clientCapabilities._meta.jetbrains.air`) are told it is there
//! (`_meta.jetbrains.air.capabilities` of the initialize answer).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use agent_client_protocol::v1::schema::{ForkSessionRequest, ForkSessionResponse, SessionId};
use agent_client_protocol::{Error, JsonRpcRequest, JsonRpcResponse};

use super::{Server, checked_client_prompt, invalid_params};
use crate::session::rewind::{self, ForkPoint};

/// A message as JetBrains' client names it: by id, or by the SHA-256 of
/// its text and which occurrence of that text it is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessagePoint {
    #[serde(default)]
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_occurrence: Option<u32>,
}

/// `_session/rewind`.
#[derive(Clone, Debug, Serialize, Deserialize, JsonRpcRequest)]
#[request(method = "_session/rewind", response = SessionRewindResponse)]
#[serde(rename_all = "camelCase")]
pub struct SessionRewindRequest {
    pub session_id: String,
    /// The first user message to take out of the conversation.
    pub before_message: MessagePoint,
    /// The last assistant message kept (the client's check; pincer keeps
    /// everything before `before_message`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_at_message: Option<MessagePoint>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonRpcResponse)]
pub struct SessionRewindResponse {
    pub rewound: bool,
}

/// What the initialize answer adds for a client that says it is
/// JetBrains' AIR.
/// Whether the client is JetBrains AIR and takes its async task updates
/// (`_meta.jetbrains.air`, version 1 or later, listing `asyncTasks`).
pub fn air_async_tasks(client: &agent_client_protocol::v1::schema::ClientCapabilities) -> bool {
    let Some(air) = client
        .meta
        .as_ref()
        .and_then(|m| m.get("jetbrains"))
        .and_then(|j| j.get("air"))
    else {
        return false;
    };
    air.get("version")
        .and_then(Value::as_u64)
        .is_some_and(|v| v >= 1)
        && air
            .get("capabilities")
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c == "asyncTasks"))
}

pub fn air_meta(client: &agent_client_protocol::v1::schema::ClientCapabilities) -> Option<Value> {
    let air = client.meta.as_ref()?.get("jetbrains")?.get("air")?;
    air.is_object()
        .then(|| json!({"jetbrains": {"air": {"version": 1, "capabilities": ["sessionRewind", "asyncTasks"]}}}))
}

/// Where a `session/fork` request says to fork, and whether to put the
/// files back to there.
fn fork_request(meta: Option<&serde_json::Map<String, Value>>) -> (Option<MessagePoint>, bool) {
    let Some(meta) = meta else {
        return (None, false);
    };
    let pincer = meta.get("pincer").and_then(|p| p.get("fork"));
    let files = pincer
        .and_then(|f| f.get("files"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // JetBrains' fork point is read only in the version it defines.
    let air = meta
        .get("jetbrains")
        .and_then(|j| j.get("air"))
        .and_then(|a| a.get("fork"))
        .filter(|f| f.get("version").and_then(Value::as_u64) == Some(1));
    let point = pincer
        .or(air)
        .and_then(|f| serde_json::from_value::<MessagePoint>(f.clone()).ok())
        .filter(|p| !p.message_id.trim().is_empty() || p.message_fingerprint.is_some());
    (point, files)
}

impl Server {
    /// `session/fork`: the new session is opened like a resumed one.
    pub(super) async fn fork_session(
        &self,
        req: ForkSessionRequest,
        cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>,
    ) -> Result<ForkSessionResponse, Error> {
        let client_prompt = checked_client_prompt(req.system_prompt.as_ref())?;
        crate::session::check_cwd(&req.cwd).map_err(|e| invalid_params(e.to_string()))?;
        let settings = self.settings(&req.cwd)?;
        let data_dir = settings.paths.data_dir.clone();
        let source = crate::session::find(&data_dir, &req.session_id.0).ok_or_else(|| {
            Error::from(agent_client_protocol::v1::schema::Error::session_not_found(
                req.session_id.0.to_string(),
            ))
        })?;
        let (point, files) = fork_request(req.meta.as_ref());
        let point = match point {
            None => ForkPoint::Whole,
            Some(point) => {
                let loaded =
                    transcript::load(&source).map_err(|e| invalid_params(e.to_string()))?;
                let entries = rewind::effective(loaded.entries).entries;
                let id = rewind::find_message(
                    &entries,
                    &point.message_id,
                    point.message_fingerprint.as_deref(),
                    point.message_occurrence,
                )
                .ok_or_else(|| {
                    invalid_params(format!(
                        "Fork message {} was not found in session {}",
                        point.message_id, req.session_id.0
                    ))
                })?;
                ForkPoint::ThroughTurnOf(id)
            }
        };
        let forked = tokio::task::spawn_blocking(move || rewind::fork(&data_dir, &source, &point))
            .await
            .map_err(|e| invalid_params(e.to_string()))?
            .map_err(invalid_params)?;
        let report = if files && !forked.after.is_empty() {
            Some(put_files_back(&settings, &forked))
        } else {
            None
        };
        let session = self
            .restore_session(
                &SessionId::new(forked.id.clone()),
                req.cwd,
                req.additional_directories,
                req.mcp_servers,
                client_prompt,
                false,
                cx,
            )
            .await?;
        if let Some(text) = report {
            session.say_to_owner(&text);
        }
        Ok(ForkSessionResponse::new(forked.id)
            .config_options(session.config_options())
            .modes(session.mode_state()))
    }

    /// `_session/rewind`.
    pub(super) async fn session_rewind(
        &self,
        req: SessionRewindRequest,
    ) -> Result<SessionRewindResponse, Error> {
        let session = self.session(&req.session_id).await?;
        let point = &req.before_message;
        let rewound = session
            .rewind_to_message(
                &point.message_id,
                point.message_fingerprint.as_deref(),
                point.message_occurrence,
            )
            .await?;
        Ok(SessionRewindResponse { rewound })
    }
}

/// Puts the files back to a fork's point, never over a change made since
/// (nobody was asked); what happened, for the user.
fn put_files_back(settings: &crate::config::Settings, forked: &rewind::Forked) -> String {
    let store = match crate::checkpoint::store::Store::open(
        &crate::checkpoint::store_dir(&settings.paths.data_dir, &settings.project.root),
        settings.config.checkpoints.limits(),
    ) {
        Ok(store) => store,
        Err(e) => {
            return format!(
                "The files were not put back: the checkpoint store cannot be opened ({e})."
            );
        }
    };
    match rewind::Proposal::rewind(&forked.cwd, &store, &forked.after, 0) {
        Ok(proposal) => {
            let report =
                crate::checkpoint::restore::apply(&forked.cwd, &store, &proposal.plan, false);
            let outcome = rewind::Outcome::of(&proposal, report, false);
            format!(
                "Forked, with the files put back to the fork point. {}",
                outcome.report()
            )
        }
        Err(e) => format!("The files were not put back: they cannot be checked ({e})."),
    }
}

use crate::session::transcript;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fork_point_comes_from_pincer_s_meta_or_jetbrains_version_1() {
        let meta = |v: Value| v.as_object().cloned();
        let (point, files) = fork_request(
            meta(json!({"jetbrains": {"air": {"fork": {"version": 1, "messageId": "e7"}}}}))
                .as_ref(),
        );
        assert_eq!(point.unwrap().message_id, "e7");
        assert!(!files);
        let (point, _) = fork_request(
            meta(json!({"jetbrains": {"air": {"fork": {"version": 2, "messageId": "e7"}}}}))
                .as_ref(),
        );
        assert!(
            point.is_none(),
            "an unknown version forks the whole session"
        );
        let (point, files) = fork_request(
            meta(json!({"pincer": {"fork": {"messageId": "e3", "files": true}}})).as_ref(),
        );
        assert_eq!(point.unwrap().message_id, "e3");
        assert!(files);
        assert!(fork_request(None).0.is_none());
    }
}
