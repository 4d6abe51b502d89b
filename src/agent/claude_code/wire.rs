//! The shapes of Claude Code's stream-json protocol that pincer writes or
//! reads beside the conversation: user lines, control responses, tool
//! names, tool results, and the conversation so far for a session that
//! has not seen it.

use serde_json::{Value, json};

use crate::agent::AgentMessage;
use crate::llm::{AssistantContent, Content, Message};

/// pincer's name of a tool Claude Code names `mcp__pincer__<name>`.
pub fn pincer_name(claude_name: &str) -> Option<&str> {
    claude_name
        .strip_prefix("mcp__")?
        .strip_prefix(super::process::SERVER_NAME)?
        .strip_prefix("__")
        .filter(|name| !name.is_empty())
}

/// Where the prompt of this run starts in `history`: its time line, or
/// the user message itself.
pub fn prompt_start(history: &[AgentMessage]) -> usize {
    let at = history
        .iter()
        .rposition(|entry| {
            matches!(
                entry,
                AgentMessage::Llm {
                    message: Message::User { .. }
                }
            )
        })
        .unwrap_or(history.len());
    if at > 0 && matches!(history[at - 1], AgentMessage::Time { .. }) {
        at - 1
    } else {
        at
    }
}

/// A user line for `prompt` (a time line and a user message, as the
/// history keeps them): the same bytes the model reads from pincer's own
/// loop, after the conversation so far when the session lacks it.
pub fn user_line(prompt: &[AgentMessage], catch_up: Option<&str>) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    if let Some(text) = catch_up {
        blocks.push(json!({"type": "text", "text": text}));
    }
    let mut time = None;
    for entry in prompt {
        match entry {
            AgentMessage::Time { text } => time = Some(text.clone()),
            AgentMessage::Llm {
                message: Message::User { content },
            } => blocks.extend(content.iter().map(content_block)),
            _ => {}
        }
    }
    if let Some(time) = time {
        blocks.push(json!({"type": "text", "text": time}));
    }
    json!({
        "type": "user",
        "session_id": "",
        "message": {"role": "user", "content": blocks},
        "parent_tool_use_id": null,
    })
}

/// A user line for a message sent while the run was busy.
pub fn queued_line(content: &[Content], time: &str) -> Value {
    let prompt = [
        AgentMessage::Time {
            text: time.to_string(),
        },
        AgentMessage::Llm {
            message: Message::User {
                content: content.to_vec(),
            },
        },
    ];
    user_line(&prompt, None)
}

fn content_block(content: &Content) -> Value {
    match content {
        Content::Text { text } => json!({"type": "text", "text": text}),
        Content::Image { data, mime_type } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime_type, "data": data},
        }),
    }
}

/// The content of a `tool_result` block (a string, or text and image
/// blocks) as pincer's content.
pub fn result_content(value: &Value) -> Vec<Content> {
    match value {
        Value::String(text) => vec![Content::text(text.clone())],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| match block.get("type").and_then(Value::as_str) {
                Some("text") => block.get("text").and_then(Value::as_str).map(Content::text),
                Some("image") => {
                    let source = block.get("source")?;
                    Some(Content::Image {
                        data: source.get("data")?.as_str()?.to_string(),
                        mime_type: source.get("media_type")?.as_str()?.to_string(),
                    })
                }
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A success response to the control request `request_id`.
pub fn control_success(request_id: &Value, response: Value) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
}

/// An error response to the control request `request_id`.
pub fn control_error(request_id: &Value, error: &str) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    })
}

/// A control request pincer sends (`initialize`, `interrupt`).
pub fn control_request(request_id: &str, subtype: &str) -> Value {
    let mut request = json!({"subtype": subtype});
    if subtype == "initialize" {
        request["hooks"] = Value::Null;
    }
    json!({"type": "control_request", "request_id": request_id, "request": request})
}

/// The most of the earlier conversation sent to a session that has not
/// seen it; the oldest part goes first when there is more.
const CATCH_UP_LIMIT: usize = 100 * 1024;
/// The most of one message or tool result in it.
const CATCH_UP_ENTRY: usize = 4 * 1024;

/// The conversation so far, for a Claude Code session that has not seen
/// it (a new one, or one that missed turns pincer's own loop answered):
/// the text of each message and the gist of each tool call, newest kept.
pub fn catch_up(history: &[AgentMessage]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    for entry in history {
        match entry {
            AgentMessage::Llm {
                message: Message::User { content },
            } => lines.push(format!("[user]\n{}", clip(&text_of(content)))),
            AgentMessage::Llm {
                message: Message::Assistant(assistant),
            } => {
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text { text } if !text.trim().is_empty() => {
                            lines.push(format!("[assistant]\n{}", clip(text)));
                        }
                        AssistantContent::ToolCall(call) => lines.push(format!(
                            "[tool call {} {}]\n{}",
                            call.name,
                            call.id,
                            clip(&call.arguments.to_string())
                        )),
                        _ => {}
                    }
                }
            }
            AgentMessage::Llm {
                message: Message::ToolResult(result),
            } => lines.push(format!(
                "[tool result {}{}]\n{}",
                result.tool_call_id,
                if result.is_error { ", error" } else { "" },
                clip(&text_of(&result.content))
            )),
            AgentMessage::Summary { summary, .. } => {
                lines.push(format!(
                    "[summary of the earlier conversation]\n{}",
                    clip(summary)
                ));
            }
            AgentMessage::Notice { .. } | AgentMessage::Time { .. } => {}
        }
    }
    if lines.is_empty() {
        return None;
    }
    let mut kept: Vec<String> = Vec::new();
    let mut size = 0;
    for line in lines.into_iter().rev() {
        size += line.len() + 2;
        if size > CATCH_UP_LIMIT {
            kept.push("[… earlier messages left out]".to_string());
            break;
        }
        kept.push(line);
    }
    kept.reverse();
    Some(format!(
        "<conversation-so-far>\nThis conversation began before this session; here is what was said so far, from pincer's transcript. Continue from it.\n\n{}\n</conversation-so-far>",
        kept.join("\n\n")
    ))
}

fn text_of(content: &[Content]) -> String {
    content
        .iter()
        .map(|c| match c {
            Content::Text { text } => text.as_str(),
            Content::Image { .. } => "[image]",
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn clip(text: &str) -> String {
    if text.len() <= CATCH_UP_ENTRY {
        return text.to_string();
    }
    let mut cut = CATCH_UP_ENTRY;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} more bytes]", &text[..cut], text.len() - cut)
}
