//! An MCP `tools/call` result as a pincer tool result.
//!
//! Text stays text and images stay images (described in words for a model
//! without image input). Resource links and embedded resources become a
//! line of text naming the resource, so the model can ask for it; audio is
//! named, not sent. Structured content is shown as JSON when the server
//! sent no content blocks. The whole result goes to the editor as
//! `rawOutput`. Read from the JSON form so that new block types degrade to
//! a line of text instead of a failure.

use serde_json::Value;

use crate::llm::Content;
use crate::tools::ToolOutput;

/// Maps a `CallToolResult` (as JSON) to a tool result.
pub fn to_output(result: &Value, image_input: bool) -> ToolOutput {
    let mut content = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        content.push(block_content(block, image_input));
    }
    if content.is_empty()
        && let Some(structured) = result.get("structuredContent")
        && !structured.is_null()
    {
        content.push(Content::text(
            serde_json::to_string_pretty(structured).unwrap_or_default(),
        ));
    }
    if content.is_empty() {
        content.push(Content::text("(no output)"));
    }
    ToolOutput {
        content,
        is_error: result
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        details: result.clone(),
        display: Vec::new(),
    }
}

fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

fn block_content(block: &Value, image_input: bool) -> Content {
    let kind = str_field(block, "type").unwrap_or("");
    match kind {
        "text" => Content::text(str_field(block, "text").unwrap_or_default()),
        "image" => {
            let data = str_field(block, "data").unwrap_or_default();
            let mime = str_field(block, "mimeType").unwrap_or("image/png");
            if image_input {
                Content::Image {
                    data: data.to_string(),
                    mime_type: mime.to_string(),
                }
            } else {
                Content::text(format!(
                    "[image: {mime}, {} bytes; this model cannot see images]",
                    data.len() / 4 * 3
                ))
            }
        }
        "audio" => Content::text(format!(
            "[audio: {}; not passed on]",
            str_field(block, "mimeType").unwrap_or("unknown type")
        )),
        "resource_link" => {
            let uri = str_field(block, "uri").unwrap_or_default();
            let mut line = format!("Resource link: {uri}");
            if let Some(name) = str_field(block, "name") {
                line.push_str(&format!(" (name: {name}"));
                if let Some(mime) = str_field(block, "mimeType") {
                    line.push_str(&format!(", {mime}"));
                }
                line.push(')');
            }
            if let Some(description) = str_field(block, "description") {
                line.push_str(&format!(" — {description}"));
            }
            Content::text(line)
        }
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let uri = str_field(resource, "uri").unwrap_or_default();
            match str_field(resource, "text") {
                Some(text) => Content::text(format!("Resource {uri}:\n{text}")),
                None => Content::text(format!(
                    "[binary resource {uri}, {}]",
                    str_field(resource, "mimeType").unwrap_or("unknown type")
                )),
            }
        }
        other => Content::text(format!(
            "[{} content]",
            if other.is_empty() { "unknown" } else { other }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn blocks_become_text_images_and_links() {
        let result = json!({
            "content": [
                {"type": "text", "text": "saved"},
                {"type": "resource_link", "uri": "note://1", "name": "note 1", "mimeType": "text/plain"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "hello"}},
            ],
            "isError": false
        });
        let output = to_output(&result, true);
        assert_eq!(
            output.content,
            vec![
                Content::text("saved"),
                Content::text("Resource link: note://1 (name: note 1, text/plain)"),
                Content::Image {
                    data: "aGVsbG8=".into(),
                    mime_type: "image/png".into()
                },
                Content::text("Resource file:///a.txt:\nhello"),
            ]
        );
        assert!(!output.is_error);
        assert_eq!(output.details, result);
    }

    #[test]
    fn errors_structured_content_and_blind_models() {
        let output = to_output(
            &json!({"content": [{"type": "text", "text": "boom"}], "isError": true}),
            true,
        );
        assert!(output.is_error);
        assert_eq!(output.text(), "boom");
        let output = to_output(&json!({"content": [], "structuredContent": {"n": 1}}), true);
        assert_eq!(output.text(), "{\n  \"n\": 1\n}");
        let output = to_output(
            &json!({"content": [{"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}]}),
            false,
        );
        assert_eq!(
            output.text(),
            "[image: image/png, 6 bytes; this model cannot see images]"
        );
    }
}
