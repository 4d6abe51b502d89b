//! Zed's `_meta` terminal extension, for clients that advertise it
//! (`clientCapabilities._meta.terminal_output: true`) but offer no terminal
//! of their own, so pincer runs commands itself: the editor draws a
//! display-only terminal and pincer feeds it the command's output as it
//! arrives, the way Zed's own agents (codex-acp, claude-agent-acp) do.
//!
//! The wire format, as those agents send it and Zed's client reads it
//! (`crates/agent_servers/src/acp.rs`): the `tool_call` carries content
//! `{type: "terminal", terminalId}` and `_meta.terminal_info {terminal_id,
//! cwd}`; each `tool_call_update` while it runs carries only
//! `_meta.terminal_output {terminal_id, data}`, where `data` is appended to
//! the terminal; the last one carries `_meta.terminal_exit {terminal_id,
//! exit_code, signal}`. The terminal id is the tool call's id.
//!
//! Only `bash` calls get a terminal: they are the ones whose output pincer
//! streams ([`Display::Live`]). A call that never ran (declined, refused)
//! still gets its `terminal_exit`, so no terminal is left open, and shows
//! its error as text.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use agent_client_protocol::v1::schema::{
    ClientCapabilities, Meta, SessionUpdate, Terminal, ToolCallContent, ToolCallUpdate,
    ToolCallUpdateFields,
};
use serde_json::json;

use crate::agent::AgentEvent;
use crate::tools::{Display, TerminalExit};

/// The tool whose calls run a command pincer streams.
const COMMAND_TOOL: &str = "bash";

/// Whether the client takes the extension: it says so in `_meta` and has
/// no terminal of its own (a client with one watches the command there).
pub(super) fn wanted(client: &ClientCapabilities) -> bool {
    !client.terminal
        && client
            .meta
            .as_ref()
            .and_then(|meta| meta.get("terminal_output"))
            .and_then(serde_json::Value::as_bool)
            == Some(true)
}

/// The terminals of one turn's calls.
#[derive(Debug)]
pub(super) struct LiveTerminals {
    /// Where commands run, shown with the terminal.
    cwd: PathBuf,
    /// Each call given a terminal, with how its command ended once it has.
    calls: Mutex<HashMap<String, Option<TerminalExit>>>,
}

impl LiveTerminals {
    pub(super) fn new(cwd: PathBuf) -> Self {
        Self {
            cwd,
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// The update the client gets for `event`, given the one a client
    /// without the extension gets (`plain`); `None` sends nothing.
    pub(super) fn update(
        &self,
        event: &AgentEvent,
        plain: Option<SessionUpdate>,
    ) -> Option<SessionUpdate> {
        match event {
            AgentEvent::ToolExecutionStart { call, .. } if call.name == COMMAND_TOOL => {
                let Some(SessionUpdate::ToolCall(mut tool_call)) = plain else {
                    return plain;
                };
                super::lock(&self.calls).insert(call.id.clone(), None);
                tool_call.content = vec![terminal(&call.id)];
                tool_call.meta = Some(meta(
                    "terminal_info",
                    json!({"terminal_id": call.id, "cwd": self.cwd}),
                ));
                Some(SessionUpdate::ToolCall(tool_call))
            }
            AgentEvent::ToolExecutionUpdate { call_id, display } => {
                let mut calls = super::lock(&self.calls);
                let Some(ended) = calls.get_mut(call_id) else {
                    return plain;
                };
                let [Display::Live(live)] = display.as_slice() else {
                    return plain;
                };
                if live.exit.is_some() {
                    ended.clone_from(&live.exit);
                }
                if live.appended.is_empty() {
                    return None;
                }
                Some(SessionUpdate::ToolCallUpdate(
                    ToolCallUpdate::new(call_id.clone(), ToolCallUpdateFields::new()).meta(meta(
                        "terminal_output",
                        json!({"terminal_id": call_id, "data": live.appended}),
                    )),
                ))
            }
            AgentEvent::ToolExecutionEnd { call_id, .. } => {
                let Some(ended) = super::lock(&self.calls).remove(call_id) else {
                    return plain;
                };
                let Some(SessionUpdate::ToolCallUpdate(mut update)) = plain else {
                    return plain;
                };
                // A command that ran is shown by its terminal; one that
                // never did, by its error.
                if ended.is_some() {
                    update.fields.content = Some(vec![terminal(call_id)]);
                }
                let exit = ended.unwrap_or_default();
                update.meta = Some(meta(
                    "terminal_exit",
                    json!({
                        "terminal_id": call_id,
                        "exit_code": exit.exit_code,
                        "signal": exit.signal,
                    }),
                ));
                Some(SessionUpdate::ToolCallUpdate(update))
            }
            _ => plain,
        }
    }
}

fn terminal(call_id: &str) -> ToolCallContent {
    ToolCallContent::Terminal(Terminal::new(call_id.to_string()))
}

fn meta(key: &str, value: serde_json::Value) -> Meta {
    Meta::from_iter([(key.to_string(), value)])
}
