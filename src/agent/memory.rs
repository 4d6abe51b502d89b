//! The silent memory flush before a compaction.
//!
//! Compaction keeps a summary of the older history, and summaries lose
//! detail. Just before one, the model gets a turn of its own to write what
//! should outlive the session into the agent's workspace (`MEMORY.md` or
//! `memory/YYYY-MM-DD.md`), which later sessions load as context. The turn
//! is silent: it runs on a copy of the history, the user sees none of it,
//! and the only tools are read, write and edit, allowed inside the
//! workspace and refused everywhere else.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::{AgentConfig, AgentEvent, AgentHost, AgentMessage, Answer, Mode, Permissions};
use crate::llm::{Content, ToolCall};
use crate::tools::{CallInfo, Display, Tool};

use crate::context::SILENT_REPLY as NO_REPLY;

/// Model calls the flush may make (a read, a write and the final reply
/// fit in three; one more for a retry after a failed edit).
const FLUSH_TURNS: u32 = 4;

/// Reports nothing and refuses anything that would need the user.
struct SilentHost;

impl AgentHost for SilentHost {
    fn emit(&self, _event: AgentEvent) {}

    fn request_permission<'a>(
        &'a self,
        _call: &'a ToolCall,
        _info: &'a CallInfo,
        _reason: &'a str,
        _preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        Box::pin(async { Answer::RejectOnce })
    }
}

/// The flush turn's instruction at `now`: the daily file is named after
/// the user's local date, the same calendar the system prompt's
/// environment section shows, not UTC's (which is a day off for part of
/// every day in most of the world).
pub fn prompt(workspace: &std::path::Path, now: &jiff::Zoned) -> String {
    let date = now.date();
    format!(
        "Pre-compaction memory flush. The older part of this conversation is about to be \
         summarised. Store durable memories now: facts about the user, the project and decisions \
         that later sessions should know. Write them to {dir}/memory/{date}.md (create memory/ if \
         needed) or {dir}/MEMORY.md. IMPORTANT: if the file already exists, APPEND new content \
         only and do not overwrite existing entries. If nothing needs storing, reply with \
         {NO_REPLY}.",
        dir = workspace.display()
    )
}

const FLUSH_SYSTEM: &str = "\n\n# Memory flush\nThis turn is invisible to the user. Usually \
nothing needs storing and NO_REPLY is the right answer; write only what is worth keeping \
across sessions.";

/// Runs the flush, if the session has a workspace to write to. Failures
/// are logged: the compaction goes ahead either way.
///
/// A plain function returning a boxed future: the flush runs the agent
/// loop that called it, and the explicit `Send` future type is what lets
/// the compiler check that cycle.
pub fn flush<'a>(
    client: &'a reqwest::Client,
    config: &'a AgentConfig,
    history: &'a [AgentMessage],
    cancel: &'a CancellationToken,
) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        let Some(workspace) = config.memory_dir.clone() else {
            return;
        };
        if let Err(e) = std::fs::create_dir_all(&workspace) {
            tracing::warn!(path = %workspace.display(), error = %e, "no memory flush: cannot create the workspace");
            return;
        }
        let tools: Vec<Arc<dyn Tool>> = crate::tools::builtin()
            .into_iter()
            .filter(|t| matches!(t.name(), "read" | "write" | "edit"))
            .collect();
        let mut config = config.clone();
        config.permissions = Arc::new(Permissions::new(
            Mode::AcceptEdits,
            vec![workspace.clone()],
            None,
        ));
        config.max_turns = FLUSH_TURNS;
        config.compaction.enabled = false;
        config.memory_dir = None;
        config.system_prompt.push_str(FLUSH_SYSTEM);
        // The flush follows the conversation so far; a prompt that is still
        // waiting for its answer would blur the instruction.
        let mut copy = history.to_vec();
        if matches!(
            copy.last(),
            Some(AgentMessage::Llm {
                message: crate::llm::Message::User { .. }
            })
        ) {
            copy.pop();
        }
        let stop = super::run(
            client,
            &config,
            &tools,
            &workspace,
            &mut copy,
            vec![Content::text(prompt(&workspace, &jiff::Zoned::now()))],
            &SilentHost,
            cancel,
        )
        .await;
        tracing::debug!(?stop, "memory flush finished");
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// 23:30 UTC on 5 March is already 6 March in Sydney.
    fn sydney_evening() -> jiff::Zoned {
        "2026-03-05T23:30:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .to_zoned(jiff::tz::TimeZone::fixed(jiff::tz::offset(11)))
    }

    #[test]
    fn the_flush_names_the_local_date_and_says_to_append() {
        let workspace = std::path::Path::new("/home/me/.pincer/agents/main/workspace");
        assert_eq!(
            prompt(workspace, &sydney_evening()),
            "Pre-compaction memory flush. The older part of this conversation is about to be \
             summarised. Store durable memories now: facts about the user, the project and \
             decisions that later sessions should know. Write them to \
             /home/me/.pincer/agents/main/workspace/memory/2026-03-06.md (create memory/ if \
             needed) or /home/me/.pincer/agents/main/workspace/MEMORY.md. IMPORTANT: if the file \
             already exists, APPEND new content only and do not overwrite existing entries. If \
             nothing needs storing, reply with NO_REPLY."
        );
    }

    #[test]
    fn the_date_follows_the_time_zone_not_utc() {
        let utc = sydney_evening().with_time_zone(jiff::tz::TimeZone::UTC);
        let workspace = std::path::Path::new("/w");
        assert!(prompt(workspace, &utc).contains("/w/memory/2026-03-05.md"));
        assert!(prompt(workspace, &sydney_evening()).contains("/w/memory/2026-03-06.md"));
    }
}
