use pretty_assertions::assert_eq;
use serde_json::json;

use super::{turn, wire};
use crate::agent::AgentMessage;
use crate::llm::{
    Api, AssistantContent, AssistantMessage, Content, LlmError, Message, StopReason, ToolCall,
    ToolResultMessage,
};

#[test]
fn only_pincer_s_server_names_pincer_s_tools() {
    assert_eq!(wire::pincer_name("mcp__pincer__read"), Some("read"));
    assert_eq!(wire::pincer_name("mcp__pincer__ask_user"), Some("ask_user"));
    for other in [
        "Bash",
        "mcp__pincer__",
        "mcp__pincerx__read",
        "mcp__other__read",
        "pincer__read",
        "mcp__pincer_read",
    ] {
        assert_eq!(wire::pincer_name(other), None, "{other}");
    }
}

fn user(text: &str) -> AgentMessage {
    AgentMessage::Llm {
        message: Message::User {
            content: vec![Content::text(text)],
        },
    }
}

fn assistant(content: Vec<AssistantContent>) -> AgentMessage {
    AgentMessage::Llm {
        message: Message::Assistant(AssistantMessage {
            content,
            provider: "anthropic".into(),
            api: Api::AnthropicMessages,
            model: "claude-sonnet-4-5".into(),
            auth_profile: None,
            stop_reason: StopReason::Stop,
            error_message: None,
            usage: Default::default(),
        }),
    }
}

#[test]
fn the_prompt_starts_at_its_time_line() {
    let history = vec![
        AgentMessage::Time { text: "t1".into() },
        user("one"),
        assistant(vec![AssistantContent::Text {
            text: "answer".into(),
        }]),
        AgentMessage::Time { text: "t2".into() },
        user("two"),
    ];
    assert_eq!(wire::prompt_start(&history), 3);
    assert_eq!(wire::prompt_start(&history[1..3]), 0);
}

#[test]
fn a_user_line_carries_text_images_and_the_time_line_after_the_catch_up() {
    let prompt = vec![
        AgentMessage::Time {
            text: "Current time: noon".into(),
        },
        AgentMessage::Llm {
            message: Message::User {
                content: vec![
                    Content::text("look"),
                    Content::Image {
                        data: "iVBOR".into(),
                        mime_type: "image/png".into(),
                    },
                ],
            },
        },
    ];
    assert_eq!(
        wire::user_line(&prompt, Some("<conversation-so-far>…")),
        json!({
            "type": "user",
            "session_id": "",
            "message": {"role": "user", "content": [
                {"type": "text", "text": "<conversation-so-far>…"},
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                {"type": "text", "text": "Current time: noon"},
            ]},
            "parent_tool_use_id": null,
        })
    );
}

#[test]
fn the_catch_up_tells_the_conversation_and_keeps_the_newest_within_its_limit() {
    assert_eq!(wire::catch_up(&[]), None);
    assert_eq!(
        wire::catch_up(&[AgentMessage::Notice { text: "n".into() }]),
        None
    );
    let history = vec![
        AgentMessage::Time { text: "t".into() },
        user("read it"),
        assistant(vec![
            AssistantContent::Text {
                text: "Reading.".into(),
            },
            AssistantContent::ToolCall(ToolCall {
                id: "toolu_1".into(),
                name: "read".into(),
                arguments: json!({"path": "a.txt"}),
                arguments_error: None,
            }),
        ]),
        AgentMessage::Llm {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: "toolu_1".into(),
                tool_name: "read".into(),
                content: vec![Content::text("alpha")],
                is_error: true,
            }),
        },
    ];
    assert_eq!(
        wire::catch_up(&history).unwrap(),
        "<conversation-so-far>\nThis conversation began before this session; here is what was said so far, from pincer's transcript. Continue from it.\n\n[user]\nread it\n\n[assistant]\nReading.\n\n[tool call read toolu_1]\n{\"path\":\"a.txt\"}\n\n[tool result toolu_1, error]\nalpha\n</conversation-so-far>"
    );
    // A long conversation keeps its newest part, each entry clipped.
    let long: Vec<AgentMessage> = (0..200)
        .map(|n| user(&format!("{n:03} {}", "x".repeat(10_000))))
        .collect();
    let text = wire::catch_up(&long).unwrap();
    assert!(text.len() < 110 * 1024, "{}", text.len());
    assert!(text.contains("[… earlier messages left out]"));
    assert!(text.contains("[user]\n199 "));
    assert!(!text.contains("[user]\n000 "));
    assert!(text.contains("… [5908 more bytes]"));
}

#[test]
fn tool_results_from_the_cli_keep_text_and_images() {
    assert_eq!(
        wire::result_content(&json!("denied")),
        vec![Content::text("denied")]
    );
    assert_eq!(
        wire::result_content(&json!([
            {"type": "text", "text": "a"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "Zg=="}},
            {"type": "resource_link", "uri": "file:///x"}
        ])),
        vec![
            Content::text("a"),
            Content::Image {
                data: "Zg==".into(),
                mime_type: "image/png".into()
            }
        ]
    );
}

#[test]
fn claude_code_s_error_classes_become_pincer_s_provider_errors() {
    let e = |class: Option<&str>, status: Option<u64>| {
        turn::to_llm_error("anthropic", class, status, "m".into())
    };
    assert!(matches!(
        e(Some("authentication_failed"), None),
        LlmError::Auth { .. }
    ));
    assert!(matches!(
        e(Some("rate_limit"), Some(429)),
        LlmError::RateLimit { .. }
    ));
    assert!(matches!(e(None, Some(429)), LlmError::RateLimit { .. }));
    assert!(matches!(
        e(Some("billing_error"), None),
        LlmError::Billing { .. }
    ));
    assert!(matches!(
        e(Some("overloaded"), None),
        LlmError::Overloaded { .. }
    ));
    assert!(matches!(
        e(None, Some(503)),
        LlmError::Server { status: 503, .. }
    ));
    assert!(matches!(
        e(Some("invalid_request"), Some(400)),
        LlmError::BadRequest { status: 400, .. }
    ));
    assert!(matches!(
        e(Some("model_not_found"), None),
        LlmError::ModelNotFound { .. }
    ));
}
