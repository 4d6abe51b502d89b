//! The agent's side of the editor for one turn: agent events become
//! `session/update`s and transcript entries, permission questions become
//! `session/request_permission`, and prompts queued in the session are
//! handed to the running run (steering and follow-ups).

use super::*;
use crate::agent::Place;
use crate::session::rewind;
use crate::tools::ask_user::{AskUser, Question, Reply};

/// The agent's view of the editor during one turn.
pub(super) struct AcpHost {
    pub(super) session: Arc<Session>,
    pub(super) cx: ConnectionTo<Client>,
    pub(super) notices: bool,
    /// The client shows `compaction_update`s.
    pub(super) compaction: bool,
    /// The client takes `plan_update`s rather than `plan`s.
    pub(super) plan_operations: bool,
    pub(super) drain: Arc<Drain>,
    pub(super) files: Arc<EditorFiles>,
    pub(super) terminals: Option<Arc<dyn Terminals>>,
    /// Puts the model's questions to the user.
    pub(super) asker: Arc<EditorAsker>,
    /// How each call of this turn was shown, kept for its transcript entry.
    pub(super) calls: Mutex<std::collections::HashMap<String, CallInfo>>,
    /// The tool name of each running call, for its progress updates.
    pub(super) names: Mutex<std::collections::HashMap<String, String>>,
    /// The transcript entry id reserved for the assistant message that is
    /// streaming: its chunks' `messageId`, as a replay gives it again.
    pub(super) message: Mutex<Option<String>>,
    /// The transcript entry of the prompt that started the run: what its
    /// checkpoint names.
    pub(super) prompt: Mutex<Option<String>>,
    /// Display-only terminals for the commands pincer runs, when the
    /// client takes Zed's `_meta` terminal extension.
    pub(super) live_terminals: Option<super::live_terminal::LiveTerminals>,
    /// Whether what the model says and the tools return is part of the
    /// conversation (recorded as its messages). A workflow's steps are
    /// shown, and recorded as the workflow's own entries instead.
    pub(super) conversation: bool,
}

impl AcpHost {
    /// Tells the editor about a compaction: `compaction_update`s when it
    /// shows them, else a short agent message; a finished one goes into
    /// the transcript.
    fn compaction_event(&self, event: &AgentEvent) {
        use agent_client_protocol::v1::schema::{CompactionStatus, CompactionUpdate};
        let n = self.session.state.lock().compactions;
        let id = updates::compaction_id(n);
        match event {
            AgentEvent::CompactionStart { reason } => {
                if self.compaction {
                    self.send(SessionUpdate::CompactionUpdate(CompactionUpdate::new(
                        id,
                        CompactionStatus::InProgress,
                    )));
                } else if *reason != crate::agent::compaction::Reason::Manual {
                    self.send(updates::agent_text_as(
                        updates::compaction_start_id(n),
                        updates::COMPACTING,
                    ));
                }
            }
            AgentEvent::CompactionEnd { result, .. } => {
                self.session.state.lock().compactions += 1;
                match result {
                    Ok(done) => {
                        self.session.record(transcript::Record::Compaction {
                            summary: done.summary.clone(),
                            kept: done.kept,
                            tokens_before: done.tokens_before,
                            read_files: done.files.read.iter().cloned().collect(),
                            modified_files: done.files.modified.iter().cloned().collect(),
                        });
                        let text = updates::compacted_text(done.tokens_before, done.tokens_after);
                        self.send(if self.compaction {
                            SessionUpdate::CompactionUpdate(
                                CompactionUpdate::new(id, CompactionStatus::Completed).summary(
                                    vec![ContentBlock::Text(TextContent::new(
                                        done.summary.as_str(),
                                    ))],
                                ),
                            )
                        } else {
                            updates::agent_text_as(updates::compaction_id(n), &text)
                        });
                    }
                    Err(error) => {
                        let text = format!("{}{error}\n\n", crate::acp::COMPACTION_FAILED);
                        self.session
                            .record(transcript::Record::Notice { text: text.clone() });
                        self.send(if self.compaction {
                            SessionUpdate::CompactionUpdate(
                                CompactionUpdate::new(id, CompactionStatus::Failed)
                                    .error(error.clone()),
                            )
                        } else {
                            updates::agent_text(&text)
                        });
                    }
                }
            }
            _ => {}
        }
    }

    pub(super) fn send(&self, update: SessionUpdate) {
        self.session.send_update(&self.cx, update);
    }

    /// The run takes in a waiting prompt: the request it was working on
    /// answers `end_turn` (its part is over), then the new one begins.
    fn hand_over(
        &self,
        handover: turns::Handover<super::Reply, Pending>,
    ) -> Vec<crate::llm::Content> {
        if let Some(done) = handover.done {
            done.send(Ok(PromptResponse::new(StopReason::EndTurn)));
        }
        self.session.begin(&self.cx, handover.prompt.start);
        handover.prompt.content
    }
}

impl AgentHost for AcpHost {
    fn steering_waiting(&self) -> bool {
        self.session.turns.lock().steering_waiting()
    }

    fn take_steering(&self) -> Vec<Vec<crate::llm::Content>> {
        let handovers = self.session.turns.lock().take_steering();
        handovers.into_iter().map(|h| self.hand_over(h)).collect()
    }

    fn take_follow_up(&self) -> Option<Vec<crate::llm::Content>> {
        let handover = self.session.turns.lock().take_follow_up()?;
        Some(self.hand_over(handover))
    }

    fn emit(&self, event: AgentEvent) {
        match &event {
            AgentEvent::UserMessage { .. }
            | AgentEvent::MessageStart
            | AgentEvent::MessageEnd(_)
            | AgentEvent::ToolExecutionEnd { .. }
                if !self.conversation => {}
            AgentEvent::UserMessage { content, time } => {
                self.session.record(transcript::Record::Message {
                    message: crate::llm::Message::User {
                        content: content.clone(),
                    },
                    time: Some(time.clone()),
                });
            }
            AgentEvent::MessageStart => {
                *self.message.lock() = Some(self.session.reserve_entry());
            }
            AgentEvent::MessageEnd(message) => {
                {
                    let mut state = self.session.state.lock();
                    state.total_cost += message.usage.cost.total;
                    state.last_call =
                        Some(crate::agent::setup::clock(&self.session.settings()).now());
                }
                let record = transcript::Record::Message {
                    message: crate::llm::Message::Assistant((**message).clone()),
                    time: None,
                };
                match self.message.lock().take() {
                    Some(id) => self.session.record_as(id, record),
                    None => self.session.record(record),
                }
            }
            AgentEvent::ToolExecutionStart { call, info } => {
                self.calls.lock().insert(call.id.clone(), info.clone());
                self.names.lock().insert(call.id.clone(), call.name.clone());
            }
            AgentEvent::ToolExecutionEnd {
                call_id,
                tool_name,
                output,
            } => {
                self.names.lock().remove(call_id);
                let call = self.calls.lock().remove(call_id);
                self.session.record(transcript::Record::ToolResult {
                    message: crate::llm::ToolResultMessage {
                        tool_call_id: call_id.clone(),
                        tool_name: tool_name.clone(),
                        content: output.content.clone(),
                        is_error: output.is_error,
                    },
                    call,
                    display: output.display.clone(),
                    details: output.details.clone(),
                });
            }
            AgentEvent::Checkpoint(changes) => {
                let (files, outside) = changes
                    .clone()
                    .map(|c| (c.files, c.outside))
                    .unwrap_or_default();
                if !outside.is_empty() {
                    let text = rewind::outside_notice(&outside);
                    self.session
                        .record(transcript::Record::Notice { text: text.clone() });
                    self.send(updates::agent_text(&format!("\n\n{text}\n")));
                }
                self.session.record(transcript::Record::Checkpoint {
                    prompt_id: self.prompt.lock().clone(),
                    files,
                    outside,
                    off: changes.is_none(),
                });
                return;
            }
            AgentEvent::Runtime { runtime, resume } => {
                self.session.record(transcript::Record::Runtime {
                    runtime: runtime.clone(),
                    resume: resume.clone(),
                });
                return;
            }
            AgentEvent::CompactionStart { .. } | AgentEvent::CompactionEnd { .. } => {
                self.compaction_event(&event);
                return;
            }
            _ => {}
        }
        let notice = match &event {
            AgentEvent::Retry {
                attempt,
                delay,
                error,
            } => Some((
                "Model call failed",
                format!(
                    "{error}. Retrying in {:.1} s (attempt {attempt}).",
                    delay.as_secs_f64()
                ),
            )),
            AgentEvent::Failover { text } => Some(("Switching credentials or model", text.clone())),
            AgentEvent::Notice { text } => Some(("Checkpoints", text.clone())),
            _ => None,
        };
        if let Some((title, text)) = notice {
            self.session
                .record(transcript::Record::Notice { text: text.clone() });
            self.send(if self.notices {
                SessionUpdate::Notice(Notice::new(NoticeSeverity::Warning, title).description(text))
            } else {
                SessionUpdate::AgentThoughtChunk(
                    ContentChunk::new(ContentBlock::Text(TextContent::new(format!("{text}\n"))))
                        .message_id(agent_client_protocol::v1::schema::MessageId::new(format!(
                            "notice-{}",
                            uuid::Uuid::new_v4()
                        ))),
                )
            });
            return;
        }
        // Only usage reports carry the cost; deltas skip the lock.
        let total_cost = match event {
            AgentEvent::TurnEnd { .. } => self.session.state.lock().total_cost,
            _ => 0.0,
        };
        let update = updates::session_update(&event, total_cost);
        let update = match &self.live_terminals {
            Some(terminals) => terminals.update(&event, update),
            None => update,
        };
        let Some(mut update) = update else {
            return;
        };
        match &mut update {
            SessionUpdate::AgentMessageChunk(_) | SessionUpdate::AgentThoughtChunk(_) => {
                if let Some(id) = self.message.lock().as_deref() {
                    update = updates::in_message(update, id);
                }
            }
            SessionUpdate::ToolCallUpdate(call) if call.fields.name.is_none() => {
                call.fields.name = self
                    .names
                    .lock()
                    .get(&call.tool_call_id.0.to_string())
                    .cloned();
            }
            _ => {}
        }
        self.send(update);
        if let Some(plan) = updates::plan_update(&event, self.plan_operations) {
            self.send(plan);
        }
    }

    fn workspace(&self) -> Arc<dyn Workspace> {
        self.files.clone()
    }

    fn terminals(&self) -> Option<Arc<dyn Terminals>> {
        self.terminals.clone()
    }

    fn asker(&self) -> Option<Arc<dyn AskUser>> {
        Some(self.asker.clone())
    }

    fn request_permission<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
        preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        self.request_permission_at(call, info, reason, preview, Place::Anywhere)
    }

    fn request_permission_at<'a>(
        &'a self,
        call: &'a ToolCall,
        info: &'a CallInfo,
        reason: &'a str,
        preview: Vec<Display>,
        place: Place,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async move {
            if self.drain.is_closed() {
                return Answer::RejectOnce;
            }
            let options = permission_options(place);
            let mut fields = ToolCallUpdateFields::new()
                .name(call.name.clone())
                .title(info.title.clone())
                .kind(updates::kind(info.kind))
                .raw_input(call.arguments.clone());
            // Why pincer asks, where it is more than the call's title (a
            // sensitive path, a target outside the project): ACP has no
            // field for it, so it leads the content the editor shows.
            let mut shown = Vec::with_capacity(preview.len() + 1);
            if reason != info.title {
                shown.push(Display::Text(format!("pincer asks because {reason}.")));
            }
            shown.extend(preview);
            if !shown.is_empty() {
                fields = fields.content(updates::display_content(&shown));
            }
            let request = RequestPermissionRequest::new(
                self.session.id.clone(),
                ToolCallUpdate::new(call.id.clone(), fields),
                options,
            )
            .meta(meta_reason(reason));
            // Told when the question ends, also when the run stops waiting
            // for it (a cancel drops this future).
            let mut resolved = Resolved {
                session: &self.session,
                tool_call_id: call.id.clone(),
                option: None,
            };
            let kinds: Vec<(String, PermissionOptionKind)> = request
                .options
                .iter()
                .map(|o| (o.option_id.0.to_string(), o.kind))
                .collect();
            let answer = tokio::select! {
                answer = self.cx.send_request(request).block_task() => Some(answer),
                // The editor is gone and can no longer answer.
                () = self.drain.closed() => None,
            };
            let chosen = match &answer {
                Some(Ok(response)) => match &response.outcome {
                    RequestPermissionOutcome::Selected(selected) => kinds
                        .into_iter()
                        .find(|(id, _)| id.as_str() == selected.option_id.0.as_ref()),
                    _ => None,
                },
                _ => None,
            };
            resolved.option = chosen;
            drop(resolved);
            match answer {
                None => Answer::RejectOnce,
                Some(Ok(response)) => match response.outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        match selected.option_id.0.as_ref() {
                            ALLOW_ONCE => Answer::AllowOnce,
                            ALLOW_ALWAYS => Answer::AllowAlways,
                            REJECT_ALWAYS => Answer::RejectAlways,
                            _ => Answer::RejectOnce,
                        }
                    }
                    RequestPermissionOutcome::Cancelled => Answer::Cancelled,
                    _ => Answer::RejectOnce,
                },
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "permission request failed; treating it as rejected");
                    Answer::RejectOnce
                }
            }
        })
    }
}

/// Tells the observer how a permission question ended (the gateway shows
/// the editor's answer to its clients): `option` is the chosen option,
/// `None` when there was no answer.
struct Resolved<'a> {
    session: &'a Session,
    tool_call_id: String,
    option: Option<(String, PermissionOptionKind)>,
}

impl Drop for Resolved<'_> {
    fn drop(&mut self) {
        self.session.bus.tell(Observed::PermissionResolved {
            session: self.session.id.clone(),
            tool_call_id: std::mem::take(&mut self.tool_call_id),
            option: self.option.take(),
        });
    }
}

/// Asks the editor's user the model's questions: as a form
/// (`elicitation/create`, scoped to the call) when the client advertises
/// form elicitation, else as a permission question with one option per
/// choice (which cannot carry typed text).
pub(super) struct EditorAsker {
    pub(super) session: Arc<Session>,
    pub(super) cx: ConnectionTo<Client>,
    pub(super) drain: Arc<Drain>,
    /// The client advertises `elicitation.form`.
    pub(super) form: bool,
}

/// The form field that carries the answer.
const ANSWER_FIELD: &str = "answer";

impl EditorAsker {
    /// The user declined or cancelled: that ends the turn, as cancelling a
    /// permission question does (queued prompts stay queued).
    fn cancel_turn(&self) -> Reply {
        self.session.turns.lock().cancel_work();
        Reply::Cancelled
    }

    async fn by_form(&self, question: &Question) -> Reply {
        use agent_client_protocol::v1::schema::{
            CreateElicitationRequest, ElicitationAction, ElicitationContentValue,
            ElicitationFormMode, ElicitationSchema, ElicitationSessionScope, EnumOption,
            StringPropertySchema, ToolCallId,
        };
        let mut field = StringPropertySchema::new().title("Answer".to_string());
        if !question.choices.is_empty() {
            field = field.one_of(
                question
                    .choices
                    .iter()
                    .map(|c| {
                        EnumOption::new(c.label.as_str(), c.label.as_str())
                            .description(c.description.clone())
                    })
                    .collect::<Vec<_>>(),
            );
        }
        let scope = ElicitationSessionScope::new(self.session.id.clone())
            .tool_call_id(ToolCallId::new(question.call_id.as_str()));
        let request = CreateElicitationRequest::new(
            ElicitationFormMode::new(
                scope,
                ElicitationSchema::new().property(ANSWER_FIELD, field, true),
            ),
            question.text.as_str(),
        );
        let response = tokio::select! {
            response = self.cx.send_request(request).block_task() => response,
            () = self.drain.closed() => return Reply::Unavailable(EDITOR_GONE.to_string()),
        };
        match response {
            Ok(response) => match response.action {
                ElicitationAction::Accept(accepted) => {
                    match accepted.content.and_then(|mut c| c.remove(ANSWER_FIELD)) {
                        Some(ElicitationContentValue::String(text)) => Reply::Answer(text),
                        _ => Reply::Unavailable(
                            "The editor accepted the question without an answer; ask again or go on without one."
                                .to_string(),
                        ),
                    }
                }
                _ => self.cancel_turn(),
            },
            Err(e) => Reply::Unavailable(format!("The editor could not ask the question: {e}")),
        }
    }

    async fn by_permission(&self, question: &Question) -> Reply {
        if question.choices.is_empty() {
            return Reply::Unavailable(NO_FREE_TEXT.to_string());
        }
        let options = question
            .choices
            .iter()
            .enumerate()
            .map(|(i, c)| {
                PermissionOption::new(
                    format!("{CHOICE_PREFIX}{i}"),
                    c.label.as_str(),
                    PermissionOptionKind::AllowOnce,
                )
            })
            .collect();
        // Descriptions have no place in a permission option: they follow
        // the question in the content the editor shows.
        let described: Vec<String> = question
            .choices
            .iter()
            .filter_map(|c| {
                c.description
                    .as_ref()
                    .map(|d| format!("- {}: {d}", c.label))
            })
            .collect();
        let mut fields = ToolCallUpdateFields::new().title(question.text.clone());
        if !described.is_empty() {
            fields = fields.content(updates::display_content(&[Display::Text(
                described.join("\n"),
            )]));
        }
        let request = RequestPermissionRequest::new(
            self.session.id.clone(),
            ToolCallUpdate::new(question.call_id.clone(), fields),
            options,
        );
        let answer = tokio::select! {
            answer = self.cx.send_request(request).block_task() => answer,
            () = self.drain.closed() => return Reply::Unavailable(EDITOR_GONE.to_string()),
        };
        match answer {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => selected
                    .option_id
                    .0
                    .strip_prefix(CHOICE_PREFIX)
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| question.choices.get(i))
                    .map_or_else(
                        || {
                            Reply::Unavailable(format!(
                                "The editor answered with an unknown option `{}`; ask again.",
                                selected.option_id.0
                            ))
                        },
                        |c| Reply::Answer(c.label.clone()),
                    ),
                _ => self.cancel_turn(),
            },
            Err(e) => Reply::Unavailable(format!("The editor could not ask the question: {e}")),
        }
    }
}

impl AskUser for EditorAsker {
    fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Reply> {
        Box::pin(async move {
            if self.drain.is_closed() {
                return Reply::Unavailable(EDITOR_GONE.to_string());
            }
            if self.form {
                self.by_form(question).await
            } else {
                self.by_permission(question).await
            }
        })
    }
}

const CHOICE_PREFIX: &str = "choice_";
const EDITOR_GONE: &str = "The editor has gone away; no one can answer.";
/// Without elicitation the only question an editor can put is a choice.
const NO_FREE_TEXT: &str = "This editor cannot take a typed answer (it does not support ACP elicitation forms). Ask again with `choices`, or put the question in your reply and end your turn.";

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

/// Why pincer asks, for clients that show it (ACP has no field for it).
fn meta_reason(reason: &str) -> agent_client_protocol::v1::schema::Meta {
    let mut meta = agent_client_protocol::v1::schema::Meta::new();
    meta.insert(
        "pincer".to_string(),
        serde_json::json!({ "reason": reason }),
    );
    meta
}

/// The answers offered for a command that runs at `place`, labelled with
/// where an "always" answer applies.
fn permission_options(place: Place) -> Vec<PermissionOption> {
    let (once, always, reject) = match place {
        Place::Anywhere => ("Allow once", "Always allow", "Reject"),
        Place::Sandbox => (
            "Allow once",
            "Always allow (in the sandbox or out)",
            "Reject",
        ),
        Place::Outside => (
            "Run outside the sandbox once",
            "Always run it outside the sandbox",
            "Keep it in the sandbox",
        ),
    };
    let mut options = vec![
        PermissionOption::new(ALLOW_ONCE, once, PermissionOptionKind::AllowOnce),
        PermissionOption::new(ALLOW_ALWAYS, always, PermissionOptionKind::AllowAlways),
        PermissionOption::new(REJECT_ONCE, reject, PermissionOptionKind::RejectOnce),
    ];
    // Leaving the sandbox is asked about each time it stops a command:
    // there is nothing for "always reject" to remember.
    if place != Place::Outside {
        options.push(PermissionOption::new(
            REJECT_ALWAYS,
            "Always reject",
            PermissionOptionKind::RejectAlways,
        ));
    }
    options
}
