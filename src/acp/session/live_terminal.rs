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

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;

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
                self.calls.lock().insert(call.id.clone(), None);
                tool_call.content = vec![terminal(&call.id)];
                tool_call.meta = Some(meta(
                    "terminal_info",
                    json!({"terminal_id": call.id, "cwd": self.cwd}),
                ));
                Some(SessionUpdate::ToolCall(tool_call))
            }
            AgentEvent::ToolExecutionUpdate { call_id, display } => {
                let mut calls = self.calls.lock();
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
                let Some(ended) = self.calls.lock().remove(call_id) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acp::updates::session_update;
    use crate::llm::ToolCall;
    use crate::tools::{CallInfo, LiveOutput, ToolKind, ToolOutput};
    use pretty_assertions::assert_eq;

    fn start(name: &str) -> AgentEvent {
        AgentEvent::ToolExecutionStart {
            call: ToolCall {
                id: "c1".to_string(),
                name: name.to_string(),
                arguments: json!({"command": "make"}),
                arguments_error: None,
            },
            info: CallInfo {
                title: "make".to_string(),
                kind: ToolKind::Execute,
                locations: Vec::new(),
            },
        }
    }

    fn progress(appended: &str, exit: Option<TerminalExit>) -> AgentEvent {
        AgentEvent::ToolExecutionUpdate {
            call_id: "c1".to_string(),
            display: vec![Display::Live(LiveOutput {
                tail: appended.trim_end().to_string(),
                appended: appended.to_string(),
                exit,
            })],
        }
    }

    fn end(output: ToolOutput) -> AgentEvent {
        AgentEvent::ToolExecutionEnd {
            call_id: "c1".to_string(),
            tool_name: "bash".to_string(),
            output: ToolOutput {
                display: vec![Display::Text(output.text())],
                ..output
            },
        }
    }

    /// What the client gets for `events`, as JSON.
    fn sent(terminals: &LiveTerminals, events: &[AgentEvent]) -> Vec<serde_json::Value> {
        events
            .iter()
            .filter_map(|event| terminals.update(event, session_update(event, 0.0)))
            .map(|update| serde_json::to_value(update).unwrap())
            .collect()
    }

    fn terminals() -> LiveTerminals {
        LiveTerminals::new(PathBuf::from("/work"))
    }

    #[test]
    fn only_a_client_that_asks_and_has_no_terminals_wants_it() {
        let with_meta = |terminal: bool| {
            ClientCapabilities::new()
                .terminal(terminal)
                .meta(meta("terminal_output", json!(true)))
        };
        assert!(wanted(&with_meta(false)));
        assert!(!wanted(&with_meta(true)));
        assert!(!wanted(&ClientCapabilities::new()));
        assert!(!wanted(
            &ClientCapabilities::new().meta(meta("terminal_output", json!("yes")))
        ));
    }

    #[test]
    fn a_call_that_never_ran_closes_its_terminal_and_shows_its_error() {
        let declined = "The user declined this call.";
        assert_eq!(
            sent(
                &terminals(),
                &[start("bash"), end(ToolOutput::error(declined))]
            ),
            vec![
                json!({
                    "sessionUpdate": "tool_call", "toolCallId": "c1", "title": "make",
                    "name": "bash", "kind": "execute", "status": "in_progress",
                    "content": [{"type": "terminal", "terminalId": "c1"}],
                    "rawInput": {"command": "make"},
                    "_meta": {"terminal_info": {"terminal_id": "c1", "cwd": "/work"}},
                }),
                json!({
                    "sessionUpdate": "tool_call_update", "toolCallId": "c1",
                    "status": "failed", "name": "bash",
                    "content": [{"type": "content", "content": {"type": "text", "text": declined}}],
                    "rawOutput": {"output": declined, "isError": true},
                    "_meta": {"terminal_exit": {"terminal_id": "c1", "exit_code": null, "signal": null}},
                }),
            ]
        );
    }

    #[test]
    fn a_signal_ends_the_terminal_and_empty_reports_send_nothing() {
        let killed = TerminalExit {
            exit_code: None,
            signal: Some("Terminated".to_string()),
        };
        let sent = sent(
            &terminals(),
            &[
                start("bash"),
                progress("", None),
                progress("", Some(killed)),
                end(ToolOutput::error("dying")),
            ],
        );
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert_eq!(
            sent[1]["_meta"],
            json!({"terminal_exit": {"terminal_id": "c1", "exit_code": null, "signal": "Terminated"}})
        );
        assert_eq!(
            sent[1]["content"],
            json!([{"type": "terminal", "terminalId": "c1"}])
        );
    }

    #[test]
    fn other_tools_are_left_alone() {
        let terminals = terminals();
        for event in [start("process"), end(ToolOutput::ok("done"))] {
            let plain = session_update(&event, 0.0);
            assert_eq!(terminals.update(&event, plain.clone()), plain);
        }
    }
}
