//! Permission questions as approvals: the agent asks the gateway's ACP
//! connection, every client that may approve hears
//! `exec.approval.requested`, the first `exec.approval.resolve` wins, and
//! silence until the timeout is a rejection the model sees.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome,
};
use serde_json::Value;

use super::events::tool_name;
use super::{Approval, Audience, Failure, Hub};
use crate::gateway::frames::{APPROVAL_NOT_FOUND, now_ms};
use crate::gateway::protocol::approvals;

/// How long a permission question waits for the observer to handle the
/// events told before it.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(5);

impl Hub {
    pub(super) async fn ask(
        self: Arc<Self>,
        request: RequestPermissionRequest,
    ) -> RequestPermissionResponse {
        // The question comes over the ACP connection, the run's events
        // over the observer's bus: the tool call it asks about, and the
        // run's start, were told first and are handled first, so that
        // the approval names its run and a client that matches it to the
        // tool call (OpenClaw's bridge) knows that call. A bound, should
        // the observer ever stall: the question is not lost for it.
        let _ = tokio::time::timeout(CATCH_UP, self.registry.caught_up()).await;
        let session = request.session_id.0.to_string();
        let key = self.key_of(&session);
        let tool = serde_json::to_value(&request.tool_call).unwrap_or_default();
        let tool_call_id = request.tool_call.tool_call_id.0.to_string();
        let command = tool["rawInput"]["command"]
            .as_str()
            .map(String::from)
            .or_else(|| tool["title"].as_str().map(String::from))
            .unwrap_or_default();
        let mut decisions: Vec<(String, String)> = Vec::new();
        let mut labels: Vec<(String, String)> = Vec::new();
        let mut reject = None;
        for option in &request.options {
            // The protocol knows three decisions; "reject always" has no
            // word in it (a client that wants it rejects once).
            let decision = match option.kind {
                PermissionOptionKind::AllowOnce => "allow-once",
                PermissionOptionKind::AllowAlways => "allow-always",
                PermissionOptionKind::RejectOnce => "deny",
                _ => continue,
            }
            .to_string();
            if option.kind == PermissionOptionKind::RejectOnce {
                reject = Some(option.option_id.0.to_string());
            }
            if !decisions.iter().any(|(d, _)| *d == decision) {
                // A question of its own (a restore) names its choices;
                // a tool's approval keeps the protocol's words.
                let usual = ["allow_once", "allow_always", "reject_once", "reject_always"];
                if !usual.contains(&option.option_id.0.as_ref()) {
                    labels.push((decision.clone(), option.name.clone()));
                }
                decisions.push((decision, option.option_id.0.to_string()));
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        let created_ms = now_ms();
        let expires_ms = created_ms + self.approval_timeout.as_millis() as u64;
        let tool_name = {
            let state = self.state();
            state
                .live
                .get(&session)
                .and_then(|l| l.active.as_ref())
                .and_then(|run| state.runs.get(run))
                .and_then(|r| r.tools.get(&tool_call_id).map(|t| t.name.clone()))
                .unwrap_or_else(|| tool_name(&tool))
        };
        let (details, diffs) = shown(&tool);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let approval = Approval {
            session: session.clone(),
            key: key.clone(),
            tool_name,

            tool_call_id,
            command,
            decisions,
            labels,
            details,
            diffs,
            created_ms,
            expires_ms,
            reply: Some(tx),
        };
        let described = approval.describe(&id);
        let payload = approvals::Requested {
            approval_kind: "exec",
            id: id.clone(),
            request: approvals::Request {
                command: approval.command.clone(),
                command_preview: described.command_preview,
                session_key: approval.key.clone(),
                agent_id: "main",
                host: "gateway",
                tool_call_id: approval.tool_call_id.clone(),
                tool_name: approval.tool_name.clone(),
                cwd: Some(self.cwd.clone()),
                details: Some(described.details),
                diffs: Some(described.diffs),
            },
            allowed_decisions: described.allowed_decisions,
            labels: described.labels,
            created_at_ms: created_ms,
            expires_at_ms: expires_ms,
        };
        let legacy = approvals::Phase {
            phase: "requested",
            kind: "exec",
            status: "pending",
            approval_id: id.clone(),
            command: approval.command.clone(),
            title: tool["title"].clone(),
            tool_call_id: approval.tool_call_id.clone(),
        };
        let listed = listed(&id, &approval);
        let phase = legacy.clone();
        let tool_call_id_told = approval.tool_call_id.clone();
        let offered: Vec<String> = approval.decisions.iter().map(|(d, _)| d.clone()).collect();
        {
            let mut state = self.state();
            state
                .asked
                .insert((session.clone(), approval.tool_call_id.clone()));
            state.approvals.insert(id.clone(), approval);
            // OpenClaw's bridge relays `exec.approval.requested` only for a
            // command; the older `agent` approval event (matched by run) gets
            // every other tool's question to the editor too.
            let active = state.live.get(&session).and_then(|l| l.active.clone());
            if let Some(run_id) = active
                && let Some(run) = state.runs.get_mut(&run_id)
            {
                self.agent(&run_id, run, "approval", legacy);
            }
        }
        self.broadcast("exec.approval.requested", &payload, Audience::Approvers);
        self.tell_asked(
            &id,
            &session,
            &key,
            &tool_call_id_told,
            super::cluster::AskedHere {
                event: &payload,
                listed: &listed,
                phase: &phase,
                decisions: offered,
            },
        );
        let chosen = match tokio::time::timeout(self.approval_timeout, rx).await {
            Ok(Ok(chosen)) => chosen,
            Ok(Err(_)) => None,
            Err(_) => {
                self.settle(&id, None, "timeout");
                None
            }
        };
        let option = chosen.or(reject);
        RequestPermissionResponse::new(match option {
            Some(option) => {
                RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option))
            }
            None => RequestPermissionOutcome::Cancelled,
        })
    }

    /// Answers an approval (once): `decision` is the protocol's word,
    /// `None` a rejection.
    pub fn settle(&self, id: &str, decision: Option<&str>, by: &str) -> bool {
        let Some(mut approval) = self.state().approvals.remove(id) else {
            return false;
        };
        let option = decision.and_then(|d| {
            approval
                .decisions
                .iter()
                .find(|(name, _)| name == d)
                .map(|(_, option)| option.clone())
        });
        if let Some(reply) = approval.reply.take() {
            let _ = reply.send(option);
        }
        let payload = approvals::Resolved {
            id: id.to_string(),
            decision: decision.unwrap_or("deny").to_string(),
            session_key: approval.key.clone(),
            tool_call_id: approval.tool_call_id.clone(),
            resolved_by: by.to_string(),
            ts: now_ms(),
        };
        self.broadcast("exec.approval.resolved", &payload, Audience::Approvers);
        self.tell_settled(id, &payload);
        true
    }

    /// A permission question was settled (the agent says so): the
    /// gateway's own ones are done with; one an editor answered is told
    /// to the clients that approve, so they drop it.
    pub(super) fn permission_resolved(
        &self,
        session: String,
        tool_call_id: String,
        option: Option<(String, PermissionOptionKind)>,
    ) {
        let ours = self
            .state()
            .asked
            .remove(&(session.clone(), tool_call_id.clone()));
        if !ours {
            let decision = option
                .map(|(_, kind)| decision_of(kind).to_string())
                .unwrap_or_else(|| "deny".to_string());
            let payload = approvals::Resolved {
                id: format!("editor:{tool_call_id}"),
                decision,
                session_key: self.key_of(&session),
                tool_call_id,
                resolved_by: "editor".to_string(),
                ts: now_ms(),
            };
            self.broadcast("exec.approval.resolved", &payload, Audience::Approvers);
        }
    }

    /// Answers approval `id` with `decision` (`exec.approval.resolve`),
    /// which must be one the question offers.
    pub fn resolve_approval(&self, id: &str, decision: &str) -> Result<(), Failure> {
        let allowed = self.approval_decisions(id).ok_or_else(|| not_found(id))?;
        if !allowed.iter().any(|d| d == decision) {
            return Err(Failure::invalid(format!(
                "`decision` must be one of: {}",
                allowed.join(", ")
            )));
        }
        if self.settle(id, Some(decision), "client") {
            Ok(())
        } else {
            Err(not_found(id))
        }
    }

    pub fn approval(&self, id: &str) -> Option<approvals::Approval> {
        self.state().approvals.get(id).map(|a| a.describe(id))
    }

    pub fn approval_decisions(&self, id: &str) -> Option<Vec<String>> {
        self.state()
            .approvals
            .get(id)
            .map(|a| a.decisions.iter().map(|(d, _)| d.clone()).collect())
    }

    pub fn approvals(&self) -> Vec<approvals::Approval> {
        self.state()
            .approvals
            .iter()
            .map(|(id, a)| listed(id, a))
            .collect()
    }
}

/// An approval as `exec.approvals.list` lists it: OpenClaw's entries
/// carry the question as `request` too.
fn listed(id: &str, approval: &Approval) -> approvals::Approval {
    let mut entry = approval.describe(id);
    entry.request = Some(approvals::Request {
        command: entry.command_text.clone(),
        command_preview: entry.command_preview.clone(),
        session_key: entry.session_key.clone(),
        agent_id: "main",
        host: "gateway",
        tool_call_id: entry.tool_call_id.clone(),
        tool_name: entry.tool_name.clone(),
        cwd: None,
        details: None,
        diffs: None,
    });
    entry
}

/// The error for an approval that is not waiting (answered, expired or
/// never asked).
pub fn not_found(id: &str) -> Failure {
    Failure::new(APPROVAL_NOT_FOUND, format!("no pending approval {id}"))
}

fn decision_of(kind: PermissionOptionKind) -> &'static str {
    match kind {
        PermissionOptionKind::AllowOnce => "allow-once",
        PermissionOptionKind::AllowAlways => "allow-always",
        _ => "deny",
    }
}

/// The most text of diffs one question carries to every approver.
const MAX_SHOWN_DIFFS: usize = 512 * 1024;

/// What the question shows besides its title: its text (a restore says
/// which files change and what overwriting loses) and its diffs
/// (`{path, oldText, newText}`), within [`MAX_SHOWN_DIFFS`]; files past
/// it are named in the text.
fn shown(tool: &Value) -> (String, Vec<approvals::Diff>) {
    let mut details: Vec<String> = Vec::new();
    let mut diffs = Vec::new();
    let mut left = Vec::new();
    let mut budget = MAX_SHOWN_DIFFS;
    for item in tool["content"].as_array().into_iter().flatten() {
        match item["type"].as_str() {
            Some("content") => {
                if let Some(text) = item["content"]["text"].as_str() {
                    details.push(text.to_string());
                }
            }
            Some("diff") => {
                let len = item["oldText"].as_str().map_or(0, str::len)
                    + item["newText"].as_str().map_or(0, str::len);
                if len <= budget {
                    budget -= len;
                    diffs.push(approvals::Diff {
                        path: item["path"].as_str().unwrap_or_default().to_string(),
                        old_text: item["oldText"].as_str().map(String::from),
                        new_text: item["newText"].as_str().unwrap_or_default().to_string(),
                    });
                } else if let Some(path) = item["path"].as_str() {
                    left.push(path.to_string());
                }
            }
            _ => {}
        }
    }
    if !left.is_empty() {
        details.push(format!("Not shown here: {}.", left.join(", ")));
    }
    (details.join("\n"), diffs)
}

pub(super) fn preview(command: &str) -> String {
    let line = command.lines().next().unwrap_or_default();
    if line.chars().count() > 200 {
        format!("{}…", line.chars().take(200).collect::<String>())
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::registry::Registry;
    use pretty_assertions::assert_eq;
    use std::time::Duration;

    /// A question of session `s1` waiting under `id`, offering to allow
    /// once or to deny; the receiver gets the option id chosen.
    fn ask(hub: &Hub, id: &str) -> tokio::sync::oneshot::Receiver<Option<String>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let approval = Approval {
            session: "s1".into(),
            key: "telegram:dm:1".into(),
            tool_call_id: "call-1".into(),
            tool_name: "bash".into(),
            command: "ls".into(),
            decisions: vec![
                ("allow-once".into(), "option-allow".into()),
                ("deny".into(), "option-deny".into()),
            ],
            labels: Vec::new(),
            details: String::new(),
            diffs: Vec::new(),
            created_ms: 0,
            expires_ms: 0,
            reply: Some(reply),
        };
        hub.state().approvals.insert(id.to_string(), approval);
        answer
    }

    /// What a channel's "1" (or a client's `exec.approval.resolve`) does:
    /// the hub checks the decision against those offered, answers the
    /// agent with the option it offered, and once only.
    #[test]
    fn an_approval_is_resolved_through_the_hub_with_the_option_offered_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let hub = Hub::for_test(dir.path());
        let mut answer = ask(&hub, "a1");

        let refused = hub.resolve_approval("a1", "allow-always").unwrap_err();
        assert_eq!(
            refused.message,
            "`decision` must be one of: allow-once, deny"
        );
        assert!(answer.try_recv().is_err(), "the question still waits");

        hub.resolve_approval("a1", "allow-once").unwrap();
        assert_eq!(answer.try_recv().unwrap(), Some("option-allow".to_string()));

        let gone = hub.resolve_approval("a1", "deny").unwrap_err();
        assert_eq!(
            (gone.code, gone.message.as_str()),
            (APPROVAL_NOT_FOUND, "no pending approval a1")
        );
    }

    /// A permission question comes over the ACP connection while the
    /// run's events come over the observer's bus; under load the question
    /// can overtake them. It waits until the events told before it are
    /// handled: the approval then knows its run (and the tool call a
    /// client matches it to was announced first).
    #[tokio::test]
    async fn a_question_waits_for_the_events_told_before_it() {
        use crate::acp::registry::Observed;
        use agent_client_protocol::v1::schema::{
            PermissionOption, SessionId, ToolCallUpdate, ToolCallUpdateFields,
        };

        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::new();
        let hub = Hub::new(
            registry.clone(),
            dir.path().to_path_buf(),
            dir.path().to_path_buf(),
            Duration::from_secs(60),
        );
        // The test plays the hub's observer loop.
        let mut observer = registry.observe().unwrap();
        hub.keys().insert("telegram:dm:1", "s1");
        registry.tell(Observed::PromptStarted {
            session: SessionId::new("s1"),
            tag: Some("r1".into()),
            text: "go".into(),
        });
        let request = RequestPermissionRequest::new(
            "s1".to_string(),
            ToolCallUpdate::new(
                "call-1".to_string(),
                ToolCallUpdateFields::new().title("ls"),
            ),
            vec![
                PermissionOption::new("allow_once", "Allow", PermissionOptionKind::AllowOnce),
                PermissionOption::new("reject_once", "Deny", PermissionOptionKind::RejectOnce),
            ],
        );
        let asking = tokio::spawn(hub.clone().ask(request));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            hub.state().approvals.is_empty(),
            "the question went out before the run's start was handled"
        );
        let started = observer.recv().await.unwrap();
        hub.observe(started);
        // Handled once the observer comes back for the next event.
        assert!(observer.try_recv().is_err());
        let id = loop {
            if let Some(id) = hub.state().approvals.keys().next().cloned() {
                break id;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert_eq!(
            hub.state().live.get("s1").and_then(|l| l.active.clone()),
            Some("r1".to_string())
        );
        hub.resolve_approval(&id, "allow-once").unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(5), asking)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            answer.outcome,
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new("allow_once"))
        );
    }
}
