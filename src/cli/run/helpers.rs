//! A headless run's helpers (the `task` tool's children): each is a
//! session of its own with a transcript naming the run's session, printed
//! as the run prints: in `text`, its tool activity on stderr after its
//! name; in `stream-json`, a `subagent_update` on the run's session and
//! then the helper's own `session/update`s under its id, as an ACP client
//! that shows helpers gets them. Nobody can be asked, so a helper, like
//! the run, does only what the run's mode allows. What helpers cost joins
//! the run's result.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    IdleStateUpdate, RunningStateUpdate, SessionNotification, SessionUpdate, StateUpdate,
    SubagentUpdate,
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::output::{OutputFormat, PrintHost, Tally, Verbosity, print_line};
use crate::agent::AgentHost;
use crate::agent::subagent::{self, ChildSession, ChildSpec, Children, Outcome};
use crate::session::transcript;

/// Where a run (or one of its helpers) starts helpers.
pub(crate) struct RunChildren {
    pub data_dir: PathBuf,
    pub cwd: PathBuf,
    /// The session whose helpers these are.
    pub parent: String,
    pub format: OutputFormat,
    pub verbosity: Verbosity,
    /// The run's tally: helpers add their cost.
    pub tally: Arc<Mutex<Tally>>,
}

impl RunChildren {
    fn announce(&self, update: SubagentUpdate) {
        if self.format == OutputFormat::StreamJson {
            let notification = SessionNotification::new(
                self.parent.clone(),
                SessionUpdate::SubagentUpdate(update),
            );
            print_line(&json!({
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": notification,
            }));
        }
    }
}

impl Children for RunChildren {
    fn open(
        &self,
        spec: &ChildSpec,
        cancel: &CancellationToken,
    ) -> Result<Arc<dyn ChildSession>, String> {
        let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
        let path = crate::session::transcript_path(&self.data_dir, &self.cwd, &id);
        let header = transcript::Header::new(id.clone(), self.cwd.clone(), None).spawned(
            self.parent.clone(),
            spec.agent.clone(),
            spec.parent_call.clone(),
        );
        let writer = transcript::Writer::create(&path, &header)
            .map_err(|e| format!("its transcript cannot be created ({e})"))?;
        if let Err(e) = crate::session::save_title(&path, &spec.description) {
            tracing::debug!(error = %e, "cannot keep the helper's title");
        }
        self.announce(
            SubagentUpdate::new(id.clone())
                .title(spec.description.clone())
                .description(format!("Helper `{}`", spec.agent))
                .state(StateUpdate::Running(RunningStateUpdate::new())),
        );
        let mut host = PrintHost::new(id.clone(), self.format, self.verbosity, writer);
        host.show_answer = false;
        host.prefix = format!("  [{}] ", spec.agent);
        host.record(transcript::Record::Message {
            message: crate::llm::Message::User {
                content: vec![crate::llm::Content::text(spec.prompt.clone())],
            },
            time: None,
        });
        Ok(Arc::new(RunChild {
            id: id.clone(),
            host,
            cancel: cancel.child_token(),
            children: RunChildren {
                data_dir: self.data_dir.clone(),
                cwd: self.cwd.clone(),
                parent: self.parent.clone(),
                format: self.format,
                verbosity: self.verbosity,
                tally: self.tally.clone(),
            },
        }))
    }
}

/// One running helper of a headless run.
struct RunChild {
    id: String,
    host: PrintHost,
    cancel: CancellationToken,
    /// Where its parent's helpers are (for announcing its end).
    children: RunChildren,
}

impl ChildSession for RunChild {
    fn host(&self) -> &dyn AgentHost {
        &self.host
    }

    fn id(&self) -> String {
        self.id.clone()
    }

    fn shown(&self) -> bool {
        false
    }

    fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    fn children(&self) -> Arc<dyn Children> {
        Arc::new(RunChildren {
            parent: self.id.clone(),
            data_dir: self.children.data_dir.clone(),
            cwd: self.children.cwd.clone(),
            format: self.children.format,
            verbosity: self.children.verbosity,
            tally: self.children.tally.clone(),
        })
    }

    fn finish(&self, outcome: &Outcome) {
        self.host.record(transcript::Record::HelperEnd {
            stop: subagent::stop_name(&outcome.stop).to_string(),
            cost: outcome.cost,
        });
        self.children.tally.lock().cost += outcome.cost;
        self.children.announce(
            SubagentUpdate::new(self.id.clone()).state(StateUpdate::Idle(IdleStateUpdate::new())),
        );
    }
}
