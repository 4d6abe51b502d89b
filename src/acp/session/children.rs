//! A session's helpers (the `task` tool's children) as ACP sessions.
//!
//! Each child is a [`Session`] of its own: its own id and transcript
//! (whose header names the parent and the helper's definition), written by
//! the same host code as any run's, so that it is listed under its parent
//! and can be loaded. It shares the parent's settings, credentials, MCP
//! servers, permissions (mode, remembered answers, sandbox) and owner.
//!
//! A client that opted in (`clientCapabilities.subagents`) sees it as an
//! ACP subagent session: a `subagent_update` on the parent announces it
//! (with cancel allowed), the prompt arrives as a `session_message` from
//! the parent, then the child's own updates flow under its id, and a last
//! `subagent_update` reports it idle with its stop reason. Other clients
//! see it only inside the parent's `task` call (its progress and answer).

use agent_client_protocol::v1::schema::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, MessageId, RunningStateUpdate,
    SessionCancelCapabilities, SessionMessage, StateUpdate, SubagentSessionCapabilities,
    SubagentUpdate,
};

use serde_json::json;

use super::*;
use crate::agent::subagent::{self, Background, ChildSession, ChildSpec, Children, Outcome};
use crate::tools::jobs::JobEvent;

/// An async task update of JetBrains AIR's extension: a `session/update`
/// whose kind ACP does not define.
#[derive(
    Clone, Debug, serde::Serialize, serde::Deserialize, agent_client_protocol::JsonRpcNotification,
)]
#[notification(method = "session/update")]
#[serde(rename_all = "camelCase")]
struct AirTaskUpdate {
    session_id: String,
    update: serde_json::Value,
}

/// `_session/async_task/stop`: AIR stops a background task.
#[derive(
    Clone, Debug, serde::Serialize, serde::Deserialize, agent_client_protocol::JsonRpcRequest,
)]
#[request(method = "_session/async_task/stop", response = AsyncTaskStopResponse)]
#[serde(rename_all = "camelCase")]
pub struct AsyncTaskStopRequest {
    pub session_id: String,
    pub async_task_id: String,
}

#[derive(
    Clone, Debug, serde::Serialize, serde::Deserialize, agent_client_protocol::JsonRpcResponse,
)]
pub struct AsyncTaskStopResponse {
    pub stopped: bool,
}

/// What makes a session a helper.
pub(super) struct ChildOf {
    /// Its work's token: a child of the parent's `task` call's, so that
    /// cancelling the parent ends it; cancelling it ends only the helper.
    pub(super) cancel: CancellationToken,
    /// The client shows it as a subagent session.
    pub(super) shown: bool,
}

/// Where the runs of `session` start their helpers.
pub(super) struct SessionChildren {
    pub(super) session: Arc<Session>,
    pub(super) cx: ConnectionTo<Client>,
    pub(super) client: ClientCapabilities,
    pub(super) drain: Arc<Drain>,
}

impl Children for SessionChildren {
    fn open(
        &self,
        spec: &ChildSpec,
        cancel: &CancellationToken,
    ) -> Result<Arc<dyn ChildSession>, String> {
        let shown = self.client.subagents.is_some();
        let child = Arc::new(self.session.new_child(spec, cancel, shown)?);
        self.session
            .children
            .lock()
            .insert(child.id.0.to_string(), child.clone());
        if shown {
            let announce = SubagentUpdate::new(child.id.clone())
                .title(spec.description.clone())
                .description(format!("Helper `{}`", spec.agent))
                .cwd(self.session.cwd.clone())
                .capabilities(
                    SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()),
                )
                .state(StateUpdate::Running(RunningStateUpdate::new()));
            self.session
                .send_update(&self.cx, SessionUpdate::SubagentUpdate(announce));
            let message = SessionMessage::new(MessageId::new(format!("task-{}", spec.parent_call)))
                .sender_session_id(self.session.id.clone())
                .recipient_session_id(child.id.clone())
                .content(vec![ContentBlock::Text(TextContent::new(
                    spec.prompt.clone(),
                ))]);
            child.send_update(&self.cx, SessionUpdate::SessionMessage(message));
        }
        // The gateway keeps its own record of helpers (a key, a run).
        self.session.bus.tell(Observed::HelperStarted {
            parent: self.session.id.clone(),
            child: child.id.clone(),
            call: spec.parent_call.clone(),
            agent: spec.agent.clone(),
            title: spec.description.clone(),
            prompt: spec.prompt.clone(),
            background: spec.background,
        });
        let host = child.host(self.cx.clone(), &self.client, self.drain.clone());
        Ok(Arc::new(SessionChild {
            session: child,
            parent: self.session.clone(),
            host,
            children: Arc::new(SessionChildren {
                session: self.session.clone(),
                cx: self.cx.clone(),
                client: self.client.clone(),
                drain: self.drain.clone(),
            }),
        }))
    }
}

impl Background for SessionChildren {
    fn jobs(&self) -> Arc<tools::jobs::Jobs> {
        self.session.jobs.clone()
    }

    fn host(&self) -> Arc<dyn AgentHost> {
        Arc::new(
            self.session
                .host(self.cx.clone(), &self.client, self.drain.clone()),
        )
    }
}

/// One running helper.
struct SessionChild {
    session: Arc<Session>,
    parent: Arc<Session>,
    host: AcpHost,
    children: Arc<SessionChildren>,
}

impl ChildSession for SessionChild {
    fn host(&self) -> &dyn AgentHost {
        &self.host
    }

    fn id(&self) -> String {
        self.session.id.0.to_string()
    }

    fn shown(&self) -> bool {
        self.session.child.as_ref().is_some_and(|c| c.shown)
    }

    fn cancel_token(&self) -> CancellationToken {
        self.session
            .child
            .as_ref()
            .map(|c| c.cancel.clone())
            .unwrap_or_default()
    }

    fn children(&self) -> Arc<dyn Children> {
        Arc::new(SessionChildren {
            session: self.session.clone(),
            cx: self.children.cx.clone(),
            client: self.children.client.clone(),
            drain: self.children.drain.clone(),
        })
    }

    fn finish(&self, outcome: &Outcome) {
        self.session.record(transcript::Record::HelperEnd {
            stop: subagent::stop_name(&outcome.stop).to_string(),
            cost: outcome.cost,
        });
        self.parent
            .children
            .lock()
            .remove(self.session.id.0.as_ref());
        self.session.bus.tell(Observed::HelperEnded {
            child: self.session.id.clone(),
            stop: subagent::stop_name(&outcome.stop),
            error: match &outcome.stop {
                RunStop::Failed(why) => Some(why.to_string()),
                _ => None,
            },
        });
        if self.shown() {
            let stop = match &outcome.stop {
                RunStop::EndTurn | RunStop::LoopDetected(_) | RunStop::Blocked(_) => {
                    IdleStopReason::EndTurn
                }
                RunStop::MaxTokens => IdleStopReason::MaxTokens,
                RunStop::MaxTurns => IdleStopReason::MaxTurnRequests,
                RunStop::Refusal => IdleStopReason::Refusal,
                RunStop::Cancelled => IdleStopReason::Cancelled,
                RunStop::Failed(_) => IdleStopReason::Error(ErrorStopReason::new()),
            };
            let update = SubagentUpdate::new(self.session.id.clone())
                .state(StateUpdate::Idle(IdleStateUpdate::new().stop_reason(stop)));
            self.parent
                .send_update(&self.children.cx, SessionUpdate::SubagentUpdate(update));
        }
    }
}

impl Session {
    /// A helper of this session for `spec`, its transcript created.
    fn new_child(
        self: &Arc<Self>,
        spec: &ChildSpec,
        cancel: &CancellationToken,
        shown: bool,
    ) -> Result<Session, String> {
        let settings = self.settings();
        let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        let path = crate::session::transcript_path(&settings.paths.data_dir, &self.cwd, &id);
        let header = transcript::Header::new(id.clone(), self.cwd.clone(), None).spawned(
            self.id.0.to_string(),
            spec.agent.clone(),
            spec.parent_call.clone(),
        );
        let writer = transcript::Writer::create(&path, &header)
            .map_err(|e| format!("its transcript cannot be created ({e})"))?;
        let (model, thinking) = {
            let state = self.state.lock();
            (state.model.clone(), state.thinking)
        };
        let model = settings.catalog.resolve(&spec.model).unwrap_or(model);
        let child = Session {
            id: SessionId::new(id),
            cwd: self.cwd.clone(),
            additional: self.additional.clone(),
            parts: Mutex::new(Parts {
                settings: settings.clone(),
                credentials: self.credentials(),
                mcp: self.mcp(),
                claude_code: Arc::default(),
            }),
            tools: self.tools.clone(),
            permissions: self.permissions.clone(),
            state: Mutex::new(State::new(model, thinking)),
            history: tokio::sync::Mutex::new(Vec::new()),
            transcript: Mutex::new(writer),
            announced: Mutex::new(Announced::default()),
            loops: agent::setup::loop_detector(&settings),
            turns: Mutex::new(Turns::new(agent::QueueMode::default())),
            editor_mcp: Vec::new(),
            trust_settled: tokio::sync::OnceCell::new_with(Some(())),
            started: tokio::sync::OnceCell::new_with(Some(())),
            bus: self.bus.clone(),
            owner: self.owner.clone(),
            checkpoints: None,
            child: Some(ChildOf {
                cancel: cancel.child_token(),
                shown,
            }),
            children: Mutex::new(std::collections::HashMap::new()),
            jobs: self.jobs.clone(),
        };
        // The job is its first prompt (and so its title in listings).
        child.record(transcript::Record::Message {
            message: crate::llm::Message::User {
                content: vec![crate::llm::Content::text(spec.prompt.clone())],
            },
            time: None,
        });
        if let Err(e) = crate::session::save_title(&path, &spec.description) {
            tracing::debug!(error = %e, "cannot keep the helper's title");
        }
        Ok(child)
    }

    /// The running helper `id` of this session or of one of its helpers.
    pub fn find_child(&self, id: &str) -> Option<Arc<Session>> {
        let children: Vec<Arc<Session>> = self.children.lock().values().cloned().collect();
        for child in children {
            if child.id.0.as_ref() == id {
                return Some(child);
            }
            if let Some(found) = child.find_child(id) {
                return Some(found);
            }
        }
        None
    }

    /// How this session's runs start helpers (`None`: they cannot, as in
    /// a Claude Code run, which has its own).
    pub(super) fn subagents(
        self: &Arc<Self>,
        http: &reqwest::Client,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
        drain: &Arc<Drain>,
    ) -> Option<Arc<subagent::Subagents>> {
        let settings = self.settings();
        let children = Arc::new(SessionChildren {
            session: self.clone(),
            cx: cx.clone(),
            client: client.clone(),
            drain: drain.clone(),
        });
        self.report_jobs(cx, client);
        let background: Arc<dyn Background> = Arc::new(SessionChildren {
            session: self.clone(),
            cx: cx.clone(),
            client: client.clone(),
            drain: drain.clone(),
        });
        agent::setup::subagents(&settings, &self.cwd, http, children, Some(background))
    }

    /// Tells the user, for as long as the session lives, when a
    /// background task ends: a notice where the client shows them, else a
    /// line of agent text. (Its result reaches the model at its next
    /// turn.) JetBrains AIR, when it asked for them, also gets its async
    /// task updates as tasks start and end. Started once.
    fn report_jobs(self: &Arc<Self>, cx: &ConnectionTo<Client>, client: &ClientCapabilities) {
        let Some(mut events) = self.jobs.take_finished() else {
            return;
        };
        let notices = client.session.as_ref().is_some_and(|s| s.notices.is_some());
        let air = super::super::fork::air_async_tasks(client);
        let session = Arc::downgrade(self);
        let spawned = cx.spawn(async move {
            while let Some(event) = events.recv().await {
                let Some(session) = session.upgrade() else {
                    break;
                };
                match event {
                    JobEvent::Started {
                        id,
                        title,
                        kind,
                        call_id,
                    } => {
                        if air {
                            session.air_task(json!({
                                "sessionUpdate": "async_task_spawned",
                                "asyncTaskId": id,
                                "name": title,
                                "taskType": kind,
                                "showInTranscript": false,
                                "canStop": true,
                                "toolCallId": call_id,
                            }));
                        }
                    }
                    JobEvent::Finished(done) => {
                        if air {
                            let state = if done.stopped {
                                "stopped"
                            } else if done.is_error {
                                "failed"
                            } else {
                                "completed"
                            };
                            session.air_task(json!({
                                "sessionUpdate": "async_task_state_update",
                                "asyncTaskId": done.id,
                                "state": state,
                            }));
                        }
                        if done.seen {
                            continue;
                        }
                        // A session the gateway owns: it starts a turn
                        // with the result (the model reads it there, not
                        // again with the next prompt).
                        let owner = session.owner.lock().connection;
                        if session.bus.hears_through_observer(owner) {
                            session.jobs.take_undelivered();
                            session.record(transcript::Record::Notice {
                                text: format!("Background task {} ended: {}", done.id, done.title),
                            });
                            session.bus.tell(Observed::BackgroundFinished {
                                session: session.id.clone(),
                                text: done.for_model(),
                            });
                        } else {
                            session.tell_finished(&done, notices);
                        }
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot report the session's background tasks");
        }
    }

    /// A background task ended: the user is told, and the transcript
    /// keeps it.
    fn tell_finished(&self, done: &tools::jobs::Finished, notices: bool) {
        let title = format!(
            "Background task {} {}",
            done.id,
            if done.stopped {
                "was stopped"
            } else if done.is_error {
                "failed"
            } else {
                "finished"
            }
        );
        let text = format!("{}: {}", done.title, done.text);
        self.record(transcript::Record::Notice {
            text: format!("{title}. {text}"),
        });
        let update = if notices {
            SessionUpdate::Notice(
                Notice::new(
                    if done.is_error {
                        NoticeSeverity::Warning
                    } else {
                        NoticeSeverity::Info
                    },
                    title,
                )
                .description(text),
            )
        } else {
            updates::agent_text(&format!("\n\n{title}. {text}\n"))
        };
        self.notify_owner(update);
    }

    /// Sends JetBrains AIR an async task update (a `session/update` kind
    /// that only AIR knows).
    fn air_task(&self, update: serde_json::Value) {
        let cx = self.owner.lock().cx.clone();
        let notification = AirTaskUpdate {
            session_id: self.id.0.to_string(),
            update,
        };
        if let Err(e) = cx.send_notification(notification) {
            tracing::debug!(error = %e, "could not send an async task update");
        }
    }

    /// `_session/async_task/stop`: stops background task `id`.
    pub fn stop_job(&self, id: &str) -> bool {
        self.jobs.stop(id)
    }

    /// The session's background tasks (`/tasks`), and `/tasks stop ID`.
    pub(super) fn tasks_command(&self, args: &str) -> String {
        match args.split_whitespace().collect::<Vec<_>>().as_slice() {
            [] | ["list"] => tools::jobs::describe(&self.jobs.list()),
            ["stop", id] => {
                if self.jobs.stop(id) {
                    format!("Stopping background task {id}.")
                } else {
                    format!("No running background task {id}; `/tasks` lists them.")
                }
            }
            _ => "Usage: `/tasks` lists the background tasks, `/tasks stop ID` stops one."
                .to_string(),
        }
    }

    /// Stops the session's background work (it closes).
    pub fn stop_background(&self) {
        self.jobs.stop_all();
    }
}
