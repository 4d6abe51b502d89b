//! The MCP server pincer hosts for the Claude Code runtime: pincer's own
//! tools (and its MCP servers' tools), offered to the `claude` CLI so that
//! every edit and command its model asks for runs through pincer's policy,
//! hooks and permission questions.
//!
//! The server is transport-free: it answers one JSON-RPC message at a time.
//! Claude Code tunnels the messages of an `sdk` server through its control
//! protocol on the same pipes as the conversation (see
//! [`crate::agent::claude_code`]), so there is no socket to guard and no
//! second process. `tools/call` is not answered here: the caller runs the
//! call through the agent's one tool path and answers with
//! [`call_result`].

use std::sync::Arc;

use serde_json::{Value, json};

use crate::llm::Content;
use crate::tools::{Tool, ToolOutput};

/// The MCP revision pincer speaks when the client asks for one it does
/// not know.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The revisions pincer's server answers in (its tools use nothing newer
/// than the 2024-11-05 feature set).
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The `_meta` key in which Claude Code names the `tool_use` a call answers.
pub const TOOL_USE_ID_META: &str = "claudecode/toolUseId";

/// What to do with one incoming message.
#[derive(Clone, Debug, PartialEq)]
pub enum Handled {
    /// Send this response.
    Reply(Value),
    /// A notification: nothing to answer.
    Notification,
    /// A tool call for the caller to run, then answer with [`call_result`].
    Call(Call),
}

/// A `tools/call` request.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The JSON-RPC id to answer.
    pub id: Value,
    pub name: String,
    pub arguments: Value,
    /// The `tool_use` id the client says this call answers, if it said.
    pub tool_use_id: Option<String>,
}

/// Answers `message` with `tools` on offer.
pub fn handle(message: &Value, tools: &[Arc<dyn Tool>]) -> Handled {
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Handled::Reply(error(
            message.get("id").cloned().unwrap_or(Value::Null),
            -32600,
            "not a JSON-RPC request: it has no method",
        ));
    };
    let Some(id) = message.get("id").cloned() else {
        return Handled::Notification;
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    match method {
        "initialize" => {
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or(PROTOCOL_VERSION);
            let version = if KNOWN_VERSIONS.contains(&asked) {
                asked
            } else {
                PROTOCOL_VERSION
            };
            Handled::Reply(result(
                id,
                json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": "pincer", "version": env!("CARGO_PKG_VERSION")},
                }),
            ))
        }
        "ping" => Handled::Reply(result(id, json!({}))),
        "tools/list" => Handled::Reply(result(
            id,
            json!({
                "tools": tools
                    .iter()
                    .map(|tool| json!({
                        "name": tool.name(),
                        "description": tool.description(),
                        "inputSchema": tool.parameters(),
                    }))
                    .collect::<Vec<_>>(),
            }),
        )),
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return Handled::Reply(error(id, -32602, "tools/call needs a tool name"));
            };
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(arguments) => arguments.clone(),
            };
            let tool_use_id = params
                .get("_meta")
                .and_then(|meta| meta.get(TOOL_USE_ID_META))
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map(str::to_string);
            Handled::Call(Call {
                id,
                name: name.to_string(),
                arguments,
                tool_use_id,
            })
        }
        other => Handled::Reply(error(
            id,
            -32601,
            &format!("pincer's MCP server does not handle `{other}`"),
        )),
    }
}

/// The response to a `tools/call`: the tool's output as MCP content, with
/// `isError` for a failed call (the model then sees an error result).
pub fn call_result(id: Value, output: &ToolOutput) -> Value {
    let content: Vec<Value> = output
        .content
        .iter()
        .map(|content| match content {
            Content::Text { text } => json!({"type": "text", "text": text}),
            Content::Image { data, mime_type } => {
                json!({"type": "image", "data": data, "mimeType": mime_type})
            }
        })
        .collect();
    result(id, json!({"content": content, "isError": output.is_error}))
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn tools() -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(crate::tools::read::ReadTool) as Arc<dyn Tool>]
    }

    #[test]
    fn initialize_answers_in_the_clients_revision_when_known() {
        let asked = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "claude-code", "version": "2.1.197"}}});
        let Handled::Reply(reply) = handle(&asked, &tools()) else {
            panic!("no reply")
        };
        assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(reply["result"]["serverInfo"]["name"], "pincer");
        let odd = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "1999-01-01"}});
        let Handled::Reply(reply) = handle(&odd, &tools()) else {
            panic!("no reply")
        };
        assert_eq!(reply["result"]["protocolVersion"], PROTOCOL_VERSION);
    }

    #[test]
    fn tools_are_listed_with_their_schemas() {
        let Handled::Reply(reply) = handle(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            &tools(),
        ) else {
            panic!("no reply")
        };
        let read = crate::tools::read::ReadTool;
        assert_eq!(
            reply,
            json!({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{
                "name": "read",
                "description": read.description(),
                "inputSchema": read.parameters(),
            }]}})
        );
    }

    #[test]
    fn a_call_carries_the_tool_use_id_from_meta_and_nothing_else() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "read", "arguments": {"path": "a.txt"},
            "_meta": {"claudecode/toolUseId": "toolu_01", "progressToken": 3}}});
        assert_eq!(
            handle(&call, &tools()),
            Handled::Call(Call {
                id: json!(3),
                name: "read".into(),
                arguments: json!({"path": "a.txt"}),
                tool_use_id: Some("toolu_01".into()),
            })
        );
        let bare = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "read"}});
        assert_eq!(
            handle(&bare, &tools()),
            Handled::Call(Call {
                id: json!(4),
                name: "read".into(),
                arguments: json!({}),
                tool_use_id: None,
            })
        );
    }

    #[test]
    fn notifications_unknown_methods_and_garbage() {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(handle(&note, &tools()), Handled::Notification);
        let Handled::Reply(reply) = handle(
            &json!({"jsonrpc": "2.0", "id": 5, "method": "resources/list"}),
            &tools(),
        ) else {
            panic!("no reply")
        };
        assert_eq!(reply["error"]["code"], -32601);
        let Handled::Reply(reply) = handle(&json!({"id": 6}), &tools()) else {
            panic!("no reply")
        };
        assert_eq!(reply["error"]["code"], -32600);
        let Handled::Reply(reply) = handle(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {}}),
            &tools(),
        ) else {
            panic!("no reply")
        };
        assert_eq!(reply["error"]["code"], -32602);
    }

    #[test]
    fn results_keep_text_images_and_the_error_flag() {
        let output = ToolOutput {
            content: vec![
                Content::text("no such file"),
                Content::Image {
                    data: "AAAA".into(),
                    mime_type: "image/png".into(),
                },
            ],
            is_error: true,
            details: Value::Null,
            display: Vec::new(),
        };
        assert_eq!(
            call_result(json!(9), &output),
            json!({"jsonrpc": "2.0", "id": 9, "result": {"content": [
                {"type": "text", "text": "no such file"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ], "isError": true}})
        );
    }
}
