//! `/undo`, `/redo` and `/rewind [N]` in the editor: the files of the
//! turns go back (after a question that shows them as diffs, and names
//! what would be lost where a file changed since), the conversation the
//! model sees with them. The transcript keeps it all
//! ([`crate::session::rewind`]).

use super::*;
use crate::checkpoint::store::Store;
use crate::session::rewind::{self as travel, Proposal};

/// Which way to go: a travel, or `/rewind` alone (the list).
pub(super) enum Travel {
    Go(travel::Travel),
    List,
}

/// The options of a restore question.
struct Labels {
    restore: &'static str,
    restore_keeping: &'static str,
    overwrite: &'static str,
    cancel: &'static str,
}

const UNDO_LABELS: Labels = Labels {
    restore: "Restore",
    restore_keeping: "Restore, keeping the files changed since",
    overwrite: "Restore all, overwriting the changes made since",
    cancel: "Cancel",
};

/// `_session/rewind` takes the conversation back whatever the answer: the
/// question is whether the files go back with it.
const HISTORY_LABELS: Labels = Labels {
    restore: "Put the files back too",
    restore_keeping: "Put the files back too, keeping those changed since",
    overwrite: "Put all the files back, overwriting the changes made since",
    cancel: "Keep the files as they are",
};

const RESTORE: &str = "restore";
const OVERWRITE: &str = "overwrite";
const CANCEL: &str = "cancel";

impl Session {
    /// Runs `/undo`, `/redo` or `/rewind`; it waits for a running turn.
    pub(super) async fn time_travel(
        self: &Arc<Self>,
        travel: Travel,
        cx: ConnectionTo<Client>,
        client: &ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<PromptResponse, Error> {
        let mut history = self.history.lock().await;
        // An editor that serves its files has buffers that may hold
        // changes not saved yet: those count as changes since, too.
        let buffers = client.fs.read_text_file.then(|| EditorFiles {
            cx: cx.clone(),
            session: self.id.clone(),
            drain: drain.clone(),
            read: true,
            write: false,
        });
        let text = match self
            .travel(&travel, &cx, &drain, buffers.as_ref(), &mut history)
            .await
        {
            Ok(text) | Err(text) => text,
        };
        self.say(&cx, &format!("{text}\n"));
        Ok(PromptResponse::new(StopReason::EndTurn))
    }

    /// The project's checkpoint store.
    fn checkpoint_store(&self) -> std::io::Result<Store> {
        match &self.checkpoints {
            Some(recording) => recording.open_store(),
            None => {
                let settings = self.settings();
                Store::existing(
                    &crate::checkpoint::store_dir(&settings.paths.data_dir, &settings.project.root),
                    settings.config.checkpoints.limits(),
                )
            }
        }
    }

    /// The transcript as it is on disk, restored.
    fn reread(&self) -> Result<crate::session::Restored, String> {
        let path = self.transcript.lock().path().to_path_buf();
        let loaded = transcript::load(&path).map_err(|e| e.to_string())?;
        Ok(crate::session::restore(loaded.entries))
    }

    async fn travel(
        self: &Arc<Self>,
        travel: &Travel,
        cx: &ConnectionTo<Client>,
        drain: &Drain,
        buffers: Option<&EditorFiles>,
        history: &mut Vec<AgentMessage>,
    ) -> Result<String, String> {
        let restored = self.reread()?;
        let store = self
            .checkpoint_store()
            .map_err(|e| format!("The checkpoint store cannot be opened: {e}"))?;
        let travel = match travel {
            Travel::List => return Ok(travel::list(&restored.turns)),
            Travel::Go(travel) => travel,
        };
        let (mut proposal, what) = travel::propose(&restored, &self.cwd, &store, travel)?;
        if let Some(buffers) = buffers {
            self.check_buffers(buffers, &mut proposal, &store).await;
        }
        let overwrite = if proposal.touches_files() {
            match self
                .ask_restore(cx, drain, &what, &proposal, &store, &UNDO_LABELS)
                .await
            {
                Some(overwrite) => overwrite,
                None => return Err(format!("{what}: cancelled; nothing changed.")),
            }
        } else {
            false
        };
        let root = self.cwd.clone();
        let outcome = {
            let mut writer = self.transcript.lock();
            travel::carry_out(&mut writer, &root, &store, &proposal, overwrite)
        }
        .map_err(|e| format!("The transcript cannot be written, so nothing was changed: {e}"))?;
        self.reload_history(history)?;
        Ok(travel::done_text(&what, &proposal, &outcome))
    }

    /// Moves the files whose editor buffer differs from what the turns
    /// left (unsaved changes) from ready to conflicts; their buffer's text
    /// is kept in the store, so that even an overwrite loses nothing.
    async fn check_buffers(&self, buffers: &EditorFiles, proposal: &mut Proposal, store: &Store) {
        use crate::checkpoint::restore::Conflict;
        use crate::checkpoint::store::Hash;
        use crate::checkpoint::tree::{Entry, Kind};
        /// The most buffers asked for: past it, only the disk is compared.
        const MAX_READS: usize = 200;
        let mut unsaved = Vec::new();
        for (index, step) in proposal.plan.ready.iter().enumerate().take(MAX_READS) {
            let Some(Entry {
                kind: kind @ Kind::File { .. },
                content: Ok(Some(hash)),
                ..
            }) = &step.expected
            else {
                continue;
            };
            let Ok(text) = buffers.read_text(&self.cwd.join(&step.path)).await else {
                continue;
            };
            if Hash::of(text.as_bytes()) != *hash
                && let Ok(kept) = store.put_bytes(text.as_bytes())
            {
                unsaved.push((index, Entry::unsaved(kind.clone(), kept)));
            }
        }
        for (index, found) in unsaved.into_iter().rev() {
            let step = proposal.plan.ready.remove(index);
            let conflict = Conflict {
                path: step.path.clone(),
                found: Some(found),
                shared: false,
            };
            proposal.plan.conflicts.push((step, conflict));
        }
    }

    /// Puts the conversation the transcript now holds in place.
    fn reload_history(&self, history: &mut Vec<AgentMessage>) -> Result<(), String> {
        let restored = self.reread()?;
        let (resume, synced) = restored.claude_code.clone().unzip();
        self.parts.lock().claude_code = crate::agent::claude_code::Session::new(resume, synced);
        *history = restored.history;
        Ok(())
    }

    /// Asks before files change: the diffs, and what overwriting would
    /// lose. `Some(overwrite)`: go ahead; `None`: cancelled.
    async fn ask_restore(
        &self,
        cx: &ConnectionTo<Client>,
        drain: &Drain,
        what: &str,
        proposal: &Proposal,
        store: &Store,
        labels: &Labels,
    ) -> Option<bool> {
        if drain.is_closed() {
            return None;
        }
        let call_id = format!("rewind-{}", uuid::Uuid::new_v4());
        let mut shown = vec![Display::Text(proposal.summary())];
        shown.extend(proposal.diffs(&self.cwd, store));
        let locations: Vec<agent_client_protocol::v1::schema::ToolCallLocation> = proposal
            .files
            .iter()
            .map(|f| {
                agent_client_protocol::v1::schema::ToolCallLocation::new(self.cwd.join(&f.path))
            })
            .collect();
        let fields = ToolCallUpdateFields::new()
            .title(what.to_string())
            .kind(agent_client_protocol::v1::schema::ToolKind::Edit)
            .status(agent_client_protocol::v1::schema::ToolCallStatus::Pending)
            .content(updates::display_content(&shown))
            .locations(locations);
        self.notify(
            cx,
            SessionUpdate::ToolCall(
                agent_client_protocol::v1::schema::ToolCall::try_from(ToolCallUpdate::new(
                    call_id.clone(),
                    fields.clone(),
                ))
                .ok()?,
            ),
        );
        let mut options = vec![PermissionOption::new(
            RESTORE,
            if proposal.plan.conflicts.is_empty() {
                labels.restore
            } else {
                labels.restore_keeping
            },
            PermissionOptionKind::AllowOnce,
        )];
        if !proposal.plan.conflicts.is_empty() {
            options.push(PermissionOption::new(
                OVERWRITE,
                labels.overwrite,
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(PermissionOption::new(
            CANCEL,
            labels.cancel,
            PermissionOptionKind::RejectOnce,
        ));
        let request = RequestPermissionRequest::new(
            self.id.clone(),
            ToolCallUpdate::new(call_id.clone(), fields),
            options,
        );
        let answer = tokio::select! {
            answer = cx.send_request(request).block_task() => answer.ok(),
            () = drain.closed() => None,
        };
        let chosen = match answer.map(|a| a.outcome) {
            Some(RequestPermissionOutcome::Selected(selected)) => {
                match selected.option_id.0.as_ref() {
                    RESTORE => Some(false),
                    OVERWRITE => Some(true),
                    _ => None,
                }
            }
            _ => None,
        };
        let status = if chosen.is_some() {
            agent_client_protocol::v1::schema::ToolCallStatus::Completed
        } else {
            agent_client_protocol::v1::schema::ToolCallStatus::Failed
        };
        self.notify(
            cx,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                call_id,
                ToolCallUpdateFields::new().status(status),
            )),
        );
        chosen
    }

    /// `_session/rewind`: the conversation goes back to before the user
    /// message a client names, and the files of the turns it takes back
    /// with it if the user says so (asked with the diffs). `Ok(false)`: a
    /// turn is running, nothing changed.
    pub async fn rewind_to_message(
        self: &Arc<Self>,
        message_id: &str,
        fingerprint: Option<&str>,
        occurrence: Option<u32>,
    ) -> Result<bool, Error> {
        let Ok(mut history) = self.history.try_lock() else {
            return Ok(false);
        };
        let owner = self.owner();
        let path = self.transcript.lock().path().to_path_buf();
        let loaded = transcript::load(&path).map_err(|e| invalid_params(e.to_string()))?;
        let effective = travel::effective(loaded.entries.clone());
        let not_found = || {
            invalid_params(format!(
                "Rewind message {message_id} was not found in session {}",
                self.id.0
            ))
        };
        let to = travel::find_message(&effective.entries, message_id, fingerprint, occurrence)
            .ok_or_else(not_found)?;
        let is_user = effective.entries.iter().any(|e| {
            e.id == to
                && matches!(
                    e.record,
                    transcript::Record::Message {
                        message: crate::llm::Message::User { .. },
                        ..
                    } | transcript::Record::Command { .. }
                )
        });
        if !is_user {
            return Err(invalid_params(format!(
                "{message_id} is not a user message: a rewind goes back to before one"
            )));
        }
        let restored = crate::session::restore(loaded.entries);
        let store = self
            .checkpoint_store()
            .map_err(|e| invalid_params(format!("the checkpoint store cannot be opened: {e}")))?;
        let mut proposal = match restored.turns.iter().position(|t| t.prompt_id == to) {
            Some(index) => Proposal::rewind(&self.cwd, &store, &restored.turns, index)
                .map_err(|e| invalid_params(format!("the files cannot be checked: {e}")))?,
            // A message inside a turn: its conversation goes, its files stay.
            None => Proposal {
                target: travel::Target::Rewind { to: to.clone() },
                files: Vec::new(),
                plan: Default::default(),
                outside: Vec::new(),
                unrecorded: 0,
            },
        };
        let what = "Rewind the conversation";
        let mut overwrite = false;
        if proposal.touches_files() {
            match self
                .ask_restore(
                    &owner.cx,
                    &owner.drain,
                    what,
                    &proposal,
                    &store,
                    &HISTORY_LABELS,
                )
                .await
            {
                Some(answer) => overwrite = answer,
                None => {
                    proposal.plan = Default::default();
                    proposal.files.clear();
                    proposal.outside.clear();
                }
            }
        }
        let outcome = {
            let mut writer = self.transcript.lock();
            travel::carry_out(&mut writer, &self.cwd, &store, &proposal, overwrite)
        }
        .map_err(|e| invalid_params(e.to_string()))?;
        self.reload_history(&mut history).map_err(invalid_params)?;
        self.say(
            &owner.cx,
            &format!("{}\n", travel::done_text(what, &proposal, &outcome)),
        );
        Ok(true)
    }

    /// Tells the session's owner something, and keeps it in the transcript.
    pub fn say_to_owner(&self, text: &str) {
        self.record(transcript::Record::Notice {
            text: text.to_string(),
        });
        self.notify_owner(updates::agent_text(&format!("{text}\n")));
    }

    /// Checks the files of a restore a killed process left unfinished, and
    /// tells the user which were put back (once: the result is recorded).
    pub fn finish_unfinished_restore(&self, unfinished: Option<travel::Unfinished>) {
        let Some(unfinished) = unfinished else {
            return;
        };
        let Ok(store) = self.checkpoint_store() else {
            return;
        };
        let outcome = {
            let mut writer = self.transcript.lock();
            travel::check_unfinished(&mut writer, &self.cwd, &store, &unfinished)
        };
        match outcome {
            Ok(outcome) => {
                let text = format!(
                    "The last undo or rewind was cut off before it finished. {}",
                    outcome.report()
                );
                self.record(transcript::Record::Notice { text: text.clone() });
                self.notify_owner(updates::agent_text(&format!("{text}\n")));
            }
            Err(error) => tracing::error!(%error, "cannot record how a cut-off restore ended"),
        }
    }
}
