//! Values between the two protocols: an ACP prompt as `chat.send`
//! parameters, a gateway session row as ACP session info and config
//! options, a `chat.history` as replayed updates, and a gateway tool event
//! as an ACP tool call. Pure functions; the tests below pin each mapping.

use base64::Engine;
use serde_json::{Value, json};

/// The remote working directory of a session row.
pub fn row_cwd(row: &Value) -> Option<String> {
    ["spawnedCwd", "spawnedWorkspaceDir", "cwd"]
        .iter()
        .find_map(|field| row[*field].as_str().filter(|s| !s.is_empty()))
        .map(String::from)
}

/// A row's title, as OpenClaw's clients pick it.
pub fn row_title(row: &Value) -> Option<String> {
    ["derivedTitle", "displayName", "label"]
        .iter()
        .find_map(|field| row[*field].as_str().filter(|s| !s.trim().is_empty()))
        .map(String::from)
}

/// A row's `updatedAt` (milliseconds) as ACP's ISO 8601.
pub fn row_updated(row: &Value) -> Option<String> {
    let ms = row["updatedAt"].as_u64()?;
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    Some(humantime::format_rfc3339_millis(time).to_string())
}

/// The `sessions.patch` field an ACP config option sets.
pub fn patch_field(option: &str) -> Option<&'static str> {
    match option {
        "model" => Some("model"),
        "thought_level" => Some("thinkingLevel"),
        "mode" => Some("permissionMode"),
        "queue" => Some("queueMode"),
        _ => None,
    }
}

const THINKING_LEVELS: [&str; 5] = ["off", "minimal", "low", "medium", "high"];
const QUEUE_MODES: [(&str, &str, &str); 4] = [
    (
        "steer",
        "Steer",
        "Interrupt after the running tool; the agent reads the message next",
    ),
    (
        "followup",
        "Follow up",
        "Wait until the agent is done, then continue with the message",
    ),
    (
        "collect",
        "Collect",
        "Gather messages sent while busy into one prompt after the run",
    ),
    (
        "interrupt",
        "Interrupt",
        "Abort the running turn and start on the message",
    ),
];

/// The ACP config options (and, on pincer's gateway, the older `modes`) of
/// a session: its row's values, else the gateway's defaults for new
/// sessions. Only what the gateway can change is offered.
pub fn config_options(
    row: Option<&Value>,
    defaults: &Value,
    models: Option<&Value>,
    pincer: bool,
) -> (Value, Value) {
    let field = |name: &str| -> Value {
        match row.map(|r| &r[name]) {
            Some(value) if !value.is_null() => value.clone(),
            _ => defaults[name].clone(),
        }
    };
    let mut options = Vec::new();
    let mut modes = Value::Null;
    if pincer {
        // A row names pincer's mode `mode` (its `permissionMode` is
        // OpenClaw's name, for OpenClaw's clients); the defaults name it
        // `permissionMode`.
        let current = row
            .and_then(|r| r["mode"].as_str())
            .or(defaults["permissionMode"].as_str())
            .unwrap_or("default")
            .to_string();
        let listed: Vec<Value> = field("permissionModes")
            .as_array()
            .cloned()
            .unwrap_or_default();
        let described = |m: &Value, id_field: &str| -> Option<Value> {
            let id = m["id"].as_str()?;
            let name = m["name"].as_str().unwrap_or(id);
            Some(json!({id_field: id, "name": name, "description": m["description"]}))
        };
        if !listed.is_empty() {
            let values: Vec<Value> = listed
                .iter()
                .filter_map(|m| described(m, "value"))
                .collect();
            options.push(json!({
                "id": "mode", "name": "Mode", "category": "mode", "type": "select",
                "description": "What the agent may do without asking",
                "currentValue": current, "options": values,
            }));
            let available: Vec<Value> = listed.iter().filter_map(|m| described(m, "id")).collect();
            modes = json!({"currentModeId": current, "availableModes": available});
        }
    }
    let current_model = match (field("modelProvider").as_str(), field("model").as_str()) {
        (_, Some(model)) if model.contains('/') => Some(model.to_string()),
        (Some(provider), Some(model)) => Some(format!("{provider}/{model}")),
        (None, Some(model)) => Some(model.to_string()),
        _ => None,
    };
    let mut model_values: Vec<Value> = models
        .and_then(|m| m["models"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let id = m["id"].as_str()?;
            let value = match m["provider"].as_str() {
                Some(provider) if !id.contains('/') => format!("{provider}/{id}"),
                _ => id.to_string(),
            };
            let name = m["name"].as_str().unwrap_or(id);
            Some(json!({"value": value, "name": name, "description": value}))
        })
        .collect();
    if let Some(current) = &current_model
        && !model_values.iter().any(|v| v["value"] == *current)
    {
        model_values.insert(
            0,
            json!({"value": current, "name": current, "description": current}),
        );
    }
    if let Some(current) = current_model.or_else(|| {
        model_values
            .first()
            .and_then(|v| v["value"].as_str().map(String::from))
    }) {
        options.push(json!({
            "id": "model", "name": "Model", "category": "model", "type": "select",
            "description": "The model that answers in this session",
            "currentValue": current, "options": model_values,
        }));
    }
    let levels: Vec<Value> = match field("thinkingLevels").as_array() {
        Some(levels) if !levels.is_empty() => levels
            .iter()
            .filter_map(|l| {
                let id = l.as_str().or(l["id"].as_str())?;
                let name = l["label"].as_str().or(l["name"].as_str()).unwrap_or(id);
                Some(json!({"value": id, "name": name}))
            })
            .collect(),
        _ => THINKING_LEVELS
            .iter()
            .map(|l| json!({"value": l, "name": capitalized(l)}))
            .collect(),
    };
    let thinking = field("thinkingLevel").as_str().unwrap_or("off").to_string();
    options.push(json!({
        "id": "thought_level", "name": "Thinking", "category": "thought_level", "type": "select",
        "description": "How much the model reasons before it answers",
        "currentValue": thinking, "options": levels,
    }));
    if pincer {
        let queue = field("queueMode").as_str().unwrap_or("steer").to_string();
        let values: Vec<Value> = QUEUE_MODES
            .iter()
            .map(|(value, name, description)| {
                json!({"value": value, "name": name, "description": description})
            })
            .collect();
        options.push(json!({
            "id": "queue", "name": "Messages while busy", "type": "select",
            "description": "What a message sent while the agent works does",
            "currentValue": queue, "options": values,
        }));
    }
    (Value::Array(options), modes)
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// An ACP prompt as `chat.send`'s `message` and `attachments`: text blocks
/// joined by newlines, images and embedded resources as attachments, and a
/// resource link as a line naming it (the remote side cannot open the
/// editor's URIs).
pub fn prompt(blocks: &Value) -> Result<(String, Vec<Value>), String> {
    let mut texts: Vec<String> = Vec::new();
    let mut attachments = Vec::new();
    for (i, block) in blocks.as_array().into_iter().flatten().enumerate() {
        match block["type"].as_str() {
            Some("text") => texts.push(block["text"].as_str().unwrap_or_default().to_string()),
            Some("image") => {
                let mut attachment = json!({
                    "type": "image",
                    "mimeType": block["mimeType"],
                    "content": block["data"],
                });
                if let Some(name) = block["uri"].as_str().and_then(file_name) {
                    attachment["fileName"] = json!(name);
                }
                attachments.push(attachment);
            }
            Some("resource") => {
                let resource = &block["resource"];
                let uri = resource["uri"].as_str().unwrap_or_default();
                let name = file_name(uri).unwrap_or_else(|| format!("resource-{}", i + 1));
                let (mime, content) = if let Some(text) = resource["text"].as_str() {
                    (
                        resource["mimeType"].as_str().unwrap_or("text/plain"),
                        base64::engine::general_purpose::STANDARD.encode(text),
                    )
                } else if let Some(blob) = resource["blob"].as_str()
                    && resource["mimeType"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("image/"))
                {
                    // An image the editor embedded is an image to the model.
                    attachments.push(json!({
                        "type": "image",
                        "mimeType": resource["mimeType"],
                        "fileName": name,
                        "content": blob,
                    }));
                    continue;
                } else if let Some(blob) = resource["blob"].as_str() {
                    (
                        resource["mimeType"]
                            .as_str()
                            .unwrap_or("application/octet-stream"),
                        blob.to_string(),
                    )
                } else {
                    return Err(format!(
                        "prompt block {i}: a resource needs `text` or `blob`"
                    ));
                };
                attachments.push(json!({
                    "type": "file",
                    "mimeType": mime,
                    "fileName": name,
                    "content": content,
                }));
            }
            Some("resource_link") => {
                let uri = block["uri"].as_str().unwrap_or_default();
                let name = block["name"].as_str().unwrap_or(uri);
                texts.push(format!("[Resource: {name} <{uri}>]"));
            }
            Some("audio") => {
                return Err("audio is not supported through the gateway".to_string());
            }
            other => {
                return Err(format!(
                    "prompt block {i} has an unknown type {}",
                    other.unwrap_or("(none)")
                ));
            }
        }
    }
    Ok((texts.join("\n"), attachments))
}

/// The last path segment of a URI, as an attachment's file name.
fn file_name(uri: &str) -> Option<String> {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or_default();
    (!name.is_empty() && !name.contains(':')).then(|| name.to_string())
}

/// The text of a message's content: a string, or its blocks of one type
/// (`text` or `thinking`) joined by newlines.
pub fn joined(content: &Value, kind: &str) -> String {
    if let Some(text) = content.as_str() {
        return if kind == "text" {
            text.to_string()
        } else {
            String::new()
        };
    }
    let parts: Vec<&str> = content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == kind)
        .filter_map(|b| b[kind].as_str())
        .collect();
    parts.join("\n")
}

/// The ACP tool kind a gateway tool name suggests.
pub fn tool_kind(name: &str) -> &'static str {
    let name = name.to_ascii_lowercase();
    let name = name.rsplit("__").next().unwrap_or(&name);
    match name {
        "read" | "read_file" | "view" | "cat" => "read",
        "write" | "edit" | "multiedit" | "apply_patch" | "write_file" | "edit_file" => "edit",
        "delete" | "rm" | "remove" => "delete",
        "move" | "mv" | "rename" => "move",
        "grep" | "find" | "search" | "glob" | "ls" | "list" => "search",
        "bash" | "exec" | "run" | "shell" | "process" | "terminal" => "execute",
        "fetch" | "web_fetch" | "web_search" | "websearch" => "fetch",
        "think" => "think",
        _ => "other",
    }
}

/// A tool call's title: the gateway's own, else `name: key: value, …` (as
/// OpenClaw's bridge titles it).
pub fn tool_title(name: &str, args: &Value, given: Option<&str>) -> String {
    if let Some(title) = given.filter(|t| !t.trim().is_empty()) {
        return title.to_string();
    }
    let parts: Vec<String> = args
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let v: String = if v.chars().count() > 80 {
                v.chars().take(79).chain(['…']).collect()
            } else {
                v
            };
            format!("{k}: {v}")
        })
        .collect();
    if parts.is_empty() {
        name.to_string()
    } else {
        format!("{name}: {}", parts.join(", "))
    }
}

/// Paths a tool's arguments name, as ACP locations.
pub fn tool_locations(args: &Value) -> Vec<Value> {
    ["path", "file_path", "filePath", "file"]
        .iter()
        .filter_map(|k| args[*k].as_str())
        .map(|path| json!({"path": path}))
        .collect()
}

/// A tool result's text blocks as ACP tool content.
pub fn tool_content(result: &Value) -> Vec<Value> {
    let content = if result["content"].is_null() {
        result
    } else {
        &result["content"]
    };
    if let Some(text) = content.as_str() {
        return vec![json!({"type": "content", "content": {"type": "text", "text": text}})];
    }
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .map(|text| json!({"type": "content", "content": {"type": "text", "text": text}}))
        .collect()
}

/// A tool start as an ACP `tool_call`.
pub fn tool_call(id: &str, name: &str, args: &Value, title: Option<&str>, status: &str) -> Value {
    let mut call = json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": tool_title(name, args, title),
        "kind": tool_kind(name),
        "status": status,
        "rawInput": args,
    });
    let locations = tool_locations(args);
    if !locations.is_empty() {
        call["locations"] = json!(locations);
    }
    call
}

/// A tool's end as an ACP `tool_call_update`.
pub fn tool_done(id: &str, result: &Value, failed: bool) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "status": if failed { "failed" } else { "completed" },
        "content": tool_content(result),
        "rawOutput": result,
    })
}

fn chunk(kind: &str, text: &str) -> Value {
    json!({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
}

pub fn message_chunk(text: &str) -> Value {
    chunk("agent_message_chunk", text)
}

pub fn thought_chunk(text: &str) -> Value {
    chunk("agent_thought_chunk", text)
}

pub fn user_chunk(text: &str) -> Value {
    chunk("user_message_chunk", text)
}

/// A `chat.history` (or `sessions.get`) as the updates that replay it.
pub fn replay(messages: &Value) -> Vec<Value> {
    let mut updates = Vec::new();
    for message in messages.as_array().into_iter().flatten() {
        let content = &message["content"];
        match message["role"].as_str() {
            Some("user") => {
                let text = joined(content, "text");
                if !text.is_empty() {
                    updates.push(user_chunk(&text));
                }
            }
            Some("assistant") => {
                let blocks = match content {
                    Value::String(text) => vec![json!({"type": "text", "text": text})],
                    Value::Array(blocks) => blocks.clone(),
                    _ => Vec::new(),
                };
                for block in &blocks {
                    match block["type"].as_str() {
                        Some("text") => {
                            if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                                updates.push(message_chunk(text));
                            }
                        }
                        Some("thinking") => {
                            if let Some(text) = block["thinking"].as_str().filter(|t| !t.is_empty())
                            {
                                updates.push(thought_chunk(text));
                            }
                        }
                        Some("toolCall") | Some("tool_use") | Some("toolUse") => {
                            let Some(id) = block["id"].as_str() else {
                                continue;
                            };
                            let name = block["name"].as_str().unwrap_or("tool");
                            let args = if block["arguments"].is_null() {
                                &block["input"]
                            } else {
                                &block["arguments"]
                            };
                            updates.push(tool_call(id, name, args, None, "in_progress"));
                        }
                        _ => {}
                    }
                }
            }
            Some("toolResult") | Some("tool") => {
                let Some(id) = message["toolCallId"].as_str() else {
                    continue;
                };
                updates.push(tool_done(
                    id,
                    &json!({"content": content}),
                    message["isError"] == true,
                ));
            }
            _ => {}
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_prompt_becomes_text_and_attachments() {
        let blocks = json!([
            {"type": "text", "text": "look at"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=", "uri": "file:///tmp/shot.png"},
            {"type": "resource", "resource": {"uri": "file:///home/me/src/main.rs", "mimeType": "text/x-rust", "text": "fn main() {}"}},
            {"type": "resource_link", "uri": "file:///home/me/notes.md", "name": "notes.md"},
            {"type": "text", "text": "please"}
        ]);
        let (message, attachments) = prompt(&blocks).unwrap();
        assert_eq!(
            message,
            "look at\n[Resource: notes.md <file:///home/me/notes.md>]\nplease"
        );
        assert_eq!(
            attachments,
            vec![
                json!({"type": "image", "mimeType": "image/png", "content": "iVBORw0KGgo=", "fileName": "shot.png"}),
                json!({"type": "file", "mimeType": "text/x-rust", "fileName": "main.rs", "content": "Zm4gbWFpbigpIHt9"}),
            ]
        );
        // An embedded image is an image.
        let embedded = json!([{"type": "resource", "resource": {"uri": "file:///tmp/a.png", "mimeType": "image/png", "blob": "iVBORw0KGgo="}}]);
        assert_eq!(
            prompt(&embedded).unwrap().1,
            vec![
                json!({"type": "image", "mimeType": "image/png", "fileName": "a.png", "content": "iVBORw0KGgo="})
            ]
        );
        let audio = json!([{"type": "audio", "mimeType": "audio/wav", "data": ""}]);
        assert!(prompt(&audio).unwrap_err().contains("audio"));
    }

    #[test]
    fn a_history_replays_as_updates() {
        let messages = json!([
            {"role": "user", "content": [{"type": "text", "text": "read it"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "Reading."},
                {"type": "toolCall", "id": "t1", "name": "read", "arguments": {"path": "a.txt"}}
            ]},
            {"role": "toolResult", "toolCallId": "t1", "toolName": "read", "content": [{"type": "text", "text": "A"}], "isError": false},
            {"role": "assistant", "content": "It says A."}
        ]);
        assert_eq!(
            replay(&messages),
            vec![
                user_chunk("read it"),
                thought_chunk("hmm"),
                message_chunk("Reading."),
                json!({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read: path: a.txt", "kind": "read",
                       "status": "in_progress", "rawInput": {"path": "a.txt"}, "locations": [{"path": "a.txt"}]}),
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                       "content": [{"type": "content", "content": {"type": "text", "text": "A"}}],
                       "rawOutput": {"content": [{"type": "text", "text": "A"}]}}),
                message_chunk("It says A."),
            ]
        );
    }

    #[test]
    fn rows_give_cwd_title_and_time() {
        let row = json!({"key": "k", "spawnedCwd": "/srv/app", "derivedTitle": "Fix it", "updatedAt": 1_795_504_474_767_u64});
        assert_eq!(row_cwd(&row).as_deref(), Some("/srv/app"));
        assert_eq!(row_title(&row).as_deref(), Some("Fix it"));
        assert_eq!(
            row_updated(&row).as_deref(),
            Some("2026-11-24T07:14:34.767Z")
        );
    }

    #[test]
    fn options_follow_the_row_then_the_defaults() {
        let row = json!({"model": "claude-sonnet-4-5", "modelProvider": "anthropic", "thinkingLevel": "low"});
        let models = json!({"models": [{"id": "anthropic/claude-haiku-4-5", "name": "Haiku", "provider": "anthropic"}]});
        let (options, modes) = config_options(Some(&row), &json!({}), Some(&models), false);
        assert_eq!(modes, Value::Null);
        let ids: Vec<&str> = options
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["model", "thought_level"]);
        assert_eq!(options[0]["currentValue"], "anthropic/claude-sonnet-4-5");
        assert_eq!(options[0]["options"].as_array().unwrap().len(), 2);
        assert_eq!(options[1]["currentValue"], "low");

        let defaults = json!({"permissionMode": "plan", "queueMode": "followup",
            "permissionModes": [{"id": "default", "name": "Ask"}, {"id": "plan", "name": "Plan"}]});
        let (options, modes) = config_options(None, &defaults, None, true);
        let ids: Vec<&str> = options
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["mode", "thought_level", "queue"]);
        assert_eq!(modes["currentModeId"], "plan");
        assert_eq!(options[2]["currentValue"], "followup");

        // A row's mode is pincer's id in `mode`; its `permissionMode` is
        // OpenClaw's name, which pincer's options never show.
        let row = json!({"mode": "bypass", "permissionMode": "full"});
        let (options, modes) = config_options(Some(&row), &defaults, None, true);
        assert_eq!(modes["currentModeId"], "bypass");
        assert_eq!(options[0]["currentValue"], "bypass");
    }
}
