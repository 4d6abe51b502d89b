//! A stored session to load: a transcript of real-looking work written
//! through the library, shared by the benchmarks that load one
//! (`sessions`, `model_call`).

use std::path::Path;

use pincer::llm::{
    Api, AssistantContent, AssistantMessage, Content, Message, StopReason, ToolCall,
    ToolResultMessage, Usage,
};
use pincer::session::{self, transcript};
use serde_json::json;

/// A transcript of `entries` entries shaped like real work: a prompt, an
/// answer with a tool call, its result, and so on.
pub fn write_transcript(data_dir: &Path, cwd: &Path, id: &str, entries: usize) {
    let path = session::transcript_path(data_dir, cwd, id);
    let mut writer =
        transcript::Writer::create(&path, &transcript::Header::new(id, cwd, None)).unwrap();
    let mut n = 0;
    while n < entries {
        let call_id = format!("toolu_{n}");
        let records = [
            transcript::Record::Message {
                message: Message::User {
                    content: vec![Content::text(format!(
                        "Please look at module {n} and fix the bug in it."
                    ))],
                },
                time: None,
            },
            transcript::Record::Message {
                message: Message::Assistant(AssistantMessage {
                    content: vec![
                        AssistantContent::Text {
                            text: "I'll read the file first to see what is going on. ".repeat(4),
                        },
                        AssistantContent::ToolCall(ToolCall {
                            id: call_id.clone(),
                            name: "read".into(),
                            arguments: json!({"path": format!("src/module_{n}.rs")}),
                            arguments_error: None,
                        }),
                    ],
                    provider: "anthropic".into(),
                    api: Api::AnthropicMessages,
                    model: "claude-sonnet-4-5".into(),
                    auth_profile: None,
                    stop_reason: StopReason::ToolUse,
                    error_message: None,
                    usage: Usage::default(),
                }),
                time: None,
            },
            transcript::Record::ToolResult {
                message: ToolResultMessage {
                    tool_call_id: call_id,
                    tool_name: "read".into(),
                    content: vec![Content::text(
                        "fn main() {\n    println!(\"hello\");\n}\n".repeat(20),
                    )],
                    is_error: false,
                },
                call: None,
                display: Vec::new(),
                details: json!({"startLine": 1}),
            },
        ];
        for record in records {
            writer.append(record).unwrap();
            n += 1;
        }
    }
}
