//! A command the sandbox stopped: whether it runs again outside, after
//! the user's answer to a question of its own ("run outside the sandbox?"),
//! whose "always" is remembered apart from the other answers.

use tokio_util::sync::CancellationToken;

use super::{AgentConfig, AgentHost, Answer, Mode, Place};
use crate::llm::ToolCall;
use crate::tools::{CallInfo, Tool};

/// What becomes of a command the sandbox stopped.
pub(super) enum Escape {
    /// Run it again outside the sandbox.
    Outside,
    /// Keep the sandbox's failure, with this note for the model.
    Stay(String),
}

/// Whether a command the sandbox stopped (`why`) runs again outside it:
/// when the user allowed that for good, or says yes now. Sessions that may
/// not leave the sandbox (nobody watches them) and sessions that never ask
/// (`bypass`) keep the failure.
#[allow(clippy::too_many_arguments)]
pub(super) async fn escape(
    config: &AgentConfig,
    tool: &dyn Tool,
    call: &ToolCall,
    info: &CallInfo,
    host: &dyn AgentHost,
    cancel: &CancellationToken,
    confinement: &crate::tools::sandbox::Confinement,
    why: &str,
) -> Escape {
    let stopped = format!(
        "[The sandbox stopped this command: {why}. {}",
        confinement.summary()
    );
    let may_escape = config.permissions.sandbox().is_some_and(|s| s.may_escape());
    if !may_escape {
        return Escape::Stay(format!(
            "{stopped} This session cannot run commands outside the sandbox; do it another way or tell the user what is needed.]"
        ));
    }
    if config.permissions.allowed_outside(tool, &call.arguments) {
        return Escape::Outside;
    }
    if config.permissions.mode() == Mode::Bypass {
        return Escape::Stay(format!(
            "{stopped} Nobody is asked in this mode, so it stays in the sandbox.]"
        ));
    }
    let reason = format!(
        "the sandbox stopped this command ({why}); allowing runs it again outside the sandbox, with your full access"
    );
    let answer = tokio::select! {
        answer = host.request_permission_at(call, info, &reason, Vec::new(), Place::Outside) => answer,
        () = cancel.cancelled() => Answer::Cancelled,
    };
    match answer {
        Answer::AllowOnce => Escape::Outside,
        Answer::AllowAlways => {
            config.permissions.remember_outside(tool, &call.arguments);
            Escape::Outside
        }
        Answer::RejectOnce | Answer::RejectAlways => Escape::Stay(format!(
            "{stopped} The user chose not to run it outside the sandbox; do not retry it, continue another way.]"
        )),
        Answer::Cancelled => {
            cancel.cancel();
            Escape::Stay(format!("{stopped}]"))
        }
    }
}
