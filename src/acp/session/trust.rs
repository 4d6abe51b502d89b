//! Asking the user, once per session, whether to trust the project's
//! configuration, and telling them what was ignored.
//!
//! The question comes at the first prompt (the editor can only be asked
//! inside a session, and `session/new` must answer first). It is a
//! `session/request_permission` for a tool call titled "Trust this
//! project's configuration" whose content lists exactly what trusting
//! would do: each command an MCP server would run, each URL, each
//! provider. An "always" answer is remembered under `PINCER_HOME` with the
//! hash of the files it covers; a changed file is asked about again.

use super::*;
use crate::config::trust::{Decision, TrustStore};

/// The prompt was cancelled while the trust question was open.
#[derive(Debug)]
pub(super) struct Cancelled;

/// The id of the trust question's tool call.
const TRUST_CALL: &str = "pincer_trust_project";

/// The tool name of the trust question's pseudo tool call (ACP `name`).
const TRUST_TOOL: &str = "trust_project";

impl Session {
    /// Asks about the project's trust if it needs asking, adopts the
    /// answer, and reports what stays ignored. Once per session; an error
    /// means the prompt was cancelled while the question was open (it is
    /// asked again at the next prompt).
    pub(super) async fn settle_trust(
        self: &Arc<Self>,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<(), Cancelled> {
        self.trust_settled
            .get_or_try_init(|| self.settle_trust_now(cx, client, drain))
            .await
            .map(|_| ())
    }

    async fn settle_trust_now(
        self: &Arc<Self>,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<(), Cancelled> {
        let settings = self.settings();
        if settings.project.should_ask() {
            let answer = self.ask_trust(&settings, cx, client, drain).await;
            if answer == Answer::Cancelled {
                return Err(Cancelled);
            }
            let store = TrustStore::new(&settings.paths.config_dir);
            let remember = match answer {
                Answer::AllowAlways => Some(Decision::Trusted),
                Answer::RejectAlways => Some(Decision::Rejected),
                _ => None,
            };
            if let Some(decision) = remember
                && let Err(e) = store.set(&settings.project.root, &settings.project.hash, decision)
            {
                tracing::warn!(error = %e, "cannot remember the answer about the project's trust");
                self.tell(cx, client, "Could not remember your answer", &e.to_string());
            }
            if matches!(answer, Answer::AllowOnce | Answer::AllowAlways) {
                match Settings::load_from_process_with(&self.cwd, true) {
                    Ok(trusted) => self.adopt(trusted, cx, client),
                    Err(e) => self.tell(
                        cx,
                        client,
                        "The project's configuration could not be loaded",
                        &e.to_string(),
                    ),
                }
            }
        }
        if let Some(report) = self.settings().project.report() {
            self.tell(cx, client, "Project configuration ignored", &report);
        }
        Ok(())
    }

    /// The trust question, as a permission request for a pseudo tool call
    /// that shows what trusting would do.
    async fn ask_trust(
        self: &Arc<Self>,
        settings: &Settings,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Answer {
        let project = &settings.project;
        let file = project.config_file.as_ref().map_or_else(
            || project.root.display().to_string(),
            |p| p.display().to_string(),
        );
        let mut text = format!(
            "{file} asks for things a repository cannot do until you trust it. Trusting this project would:\n"
        );
        for grant in &project.grants {
            text.push_str(&format!("- {grant}\n"));
        }
        text.push_str(
            "\n\"Always allow\" remembers this for exactly this content: if the file changes, pincer asks again. \
             Even when trusted, a project never changes your providers, OAuth or MCP servers, and never turns on bypass mode.",
        );
        let title = "Trust this project's configuration".to_string();
        let call = crate::llm::ToolCall {
            id: TRUST_CALL.to_string(),
            name: TRUST_TOOL.to_string(),
            arguments: serde_json::json!({
                "project": project.root.display().to_string(),
                "config": file,
                "grants": project.grants,
            }),
            arguments_error: None,
        };
        let info = CallInfo {
            title: title.clone(),
            kind: tools::ToolKind::Other,
            locations: project
                .config_file
                .iter()
                .map(|p| tools::Location {
                    path: p.clone(),
                    line: None,
                })
                .collect(),
        };
        let preview = vec![Display::Text(text)];
        self.notify(
            cx,
            SessionUpdate::ToolCall(
                agent_client_protocol::v1::schema::ToolCall::new(TRUST_CALL, title)
                    .name(TRUST_TOOL.to_string())
                    .kind(updates::kind(tools::ToolKind::Other))
                    .status(agent_client_protocol::v1::schema::ToolCallStatus::Pending)
                    .content(updates::display_content(&preview))
                    .raw_input(call.arguments.clone()),
            ),
        );
        let host = self.host(cx.clone(), client, drain);
        let answer = host
            .request_permission(
                &call,
                &info,
                "the project's configuration needs your trust",
                preview,
            )
            .await;
        let (status, outcome) = match answer {
            Answer::AllowOnce => (true, "Trusted for this session."),
            Answer::AllowAlways => (true, "Trusted; pincer remembers this for this content."),
            Answer::RejectAlways => (
                false,
                "Not trusted; pincer will not ask again unless the file changes.",
            ),
            Answer::RejectOnce | Answer::Cancelled => (false, "Not trusted for this session."),
        };
        self.notify(
            cx,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                TRUST_CALL,
                ToolCallUpdateFields::new()
                    .name(TRUST_TOOL.to_string())
                    .status(if status {
                        agent_client_protocol::v1::schema::ToolCallStatus::Completed
                    } else {
                        agent_client_protocol::v1::schema::ToolCallStatus::Failed
                    })
                    .content(updates::display_content(&[Display::Text(
                        outcome.to_string(),
                    )])),
            )),
        );
        answer
    }

    /// Takes on the settings of the now trusted project: its MCP servers
    /// start, and its model and mode apply where the session still has the
    /// defaults it started with.
    fn adopt(
        self: &Arc<Self>,
        trusted: Settings,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
    ) {
        let before = self.settings();
        let trusted = Arc::new(trusted);
        let manager = start_mcp(
            &trusted,
            &self.cwd,
            self.editor_mcp.clone(),
            self.permissions.sandbox().map(|s| s.as_ref()),
        );
        let old = {
            let mut parts = self.parts.lock();
            parts.credentials = Arc::new(trusted.credentials());
            parts.settings = trusted.clone();
            std::mem::replace(&mut parts.mcp, manager)
        };
        tokio::spawn(async move { old.shutdown().await });
        self.report_mcp(cx, client);
        let mut changed = false;
        if let (Ok(old_default), Ok(new_default)) =
            (before.default_model(None), trusted.default_model(None))
            && old_default.full_id() != new_default.full_id()
            && trusted.has_credentials(&new_default)
        {
            let mut state = self.state.lock();
            if state.model.full_id() == old_default.full_id() {
                state.thinking = clamp_thinking(&new_default, trusted.thinking());
                self.model_changed(&new_default);
                state.model = new_default;
                changed = true;
            }
        }
        if self.permissions.mode() == before.default_mode()
            && trusted.default_mode() != before.default_mode()
        {
            self.permissions.set_mode(trusted.default_mode());
            self.notify(
                cx,
                SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                    self.mode_state().current_mode_id,
                )),
            );
            changed = true;
        }
        if changed {
            self.notify(
                cx,
                SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(self.config_options())),
            );
        }
    }

    /// A notice where the editor shows them, else a line of agent text.
    fn tell(
        &self,
        cx: &ConnectionTo<Client>,
        client: &ClientCapabilities,
        title: &str,
        text: &str,
    ) {
        let notices = client.session.as_ref().is_some_and(|s| s.notices.is_some());
        self.notify(
            cx,
            if notices {
                SessionUpdate::Notice(
                    Notice::new(NoticeSeverity::Warning, title).description(text.to_string()),
                )
            } else {
                updates::agent_text(&format!("{title}: {text}\n\n"))
            },
        );
    }
}
