use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::agent::convert_to_llm;
use crate::llm::{Api, AssistantMessage, StopReason, ToolCall, ToolResultMessage, Usage};

fn user(text: &str) -> AgentMessage {
    AgentMessage::Llm {
        message: Message::User {
            content: vec![Content::text(text)],
        },
    }
}

fn assistant(text: &str, calls: &[(&str, &str, serde_json::Value)], input: u64) -> AgentMessage {
    let mut content = vec![AssistantContent::Text { text: text.into() }];
    for (id, name, args) in calls {
        content.push(AssistantContent::ToolCall(ToolCall {
            id: (*id).into(),
            name: (*name).into(),
            arguments: args.clone(),
            arguments_error: None,
        }));
    }
    AgentMessage::Llm {
        message: Message::Assistant(AssistantMessage {
            content,
            provider: "anthropic".into(),
            api: Api::AnthropicMessages,
            model: "claude-sonnet-4-5".into(),
            auth_profile: None,
            stop_reason: if calls.is_empty() {
                StopReason::Stop
            } else {
                StopReason::ToolUse
            },
            error_message: None,
            usage: Usage {
                input,
                ..Usage::default()
            },
        }),
    }
}

fn result(id: &str, text: &str) -> AgentMessage {
    AgentMessage::Llm {
        message: Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "read".into(),
            content: vec![Content::text(text)],
            is_error: false,
        }),
    }
}

/// A conversation of `turns` turns, each a prompt, a call, a result of
/// `result_chars` characters and an answer.
fn conversation(turns: usize, result_chars: usize) -> Vec<AgentMessage> {
    let mut history = Vec::new();
    for n in 0..turns {
        let id = format!("call_{n}");
        history.push(user(&format!("question {n}")));
        history.push(assistant(
            "",
            &[(&id, "read", json!({"path": format!("src/f{n}.rs")}))],
            0,
        ));
        history.push(result(&id, &"x".repeat(result_chars)));
        history.push(assistant(&format!("answer {n}"), &[], 0));
    }
    history
}

#[test]
fn estimates_count_four_characters_a_token_and_images_flat() {
    let message = Message::User {
        content: vec![
            Content::text("a".repeat(401)),
            Content::Image {
                data: "AAAA".into(),
                mime_type: "image/png".into(),
            },
        ],
    };
    assert_eq!(estimate(&message), 101 + 1_200);
}

#[test]
fn context_size_is_the_last_usage_plus_what_came_after() {
    let mut history = vec![user("hi"), assistant("hello", &[], 5_000)];
    history.push(user(&"y".repeat(4_000)));
    assert_eq!(context_tokens(&history, "system"), 5_000 + 1_000);
    // Without any reported usage everything is estimated, system prompt too.
    let history = vec![user(&"z".repeat(400))];
    assert_eq!(context_tokens(&history, &"s".repeat(40)), 100 + 10);
}

#[test]
fn the_reserve_has_a_floor_for_large_windows_and_a_ceiling_for_small_ones() {
    let settings = Settings::default();
    assert_eq!(settings.reserve(200_000), 20_000);
    assert_eq!(settings.reserve(32_000), 16_000);
    assert_eq!(settings.reserve(8_192), 4_096);
    let big = Settings {
        reserve_tokens: 50_000,
        ..Settings::default()
    };
    assert_eq!(big.reserve(200_000), 50_000);
    assert!(!settings.needs_compaction(180_000, 200_000));
    assert!(settings.needs_compaction(180_001, 200_000));
    let off = Settings {
        enabled: false,
        ..Settings::default()
    };
    assert!(!off.needs_compaction(199_999, 200_000));
}

#[test]
fn the_cut_keeps_recent_tokens_and_never_parts_a_call_from_its_result() {
    // Each turn: ~1,000 tokens of tool result.
    let history = conversation(40, 4_000);
    let cut = cut_point(&history, 20_000).unwrap();
    assert!(
        !matches!(
            &history[cut],
            AgentMessage::Llm {
                message: Message::ToolResult(_)
            }
        ),
        "cut at a tool result"
    );
    let kept: u64 = history[cut..].iter().map(estimate_entry).sum();
    assert!((20_000..22_100).contains(&kept), "kept {kept}");
    // Every kept result has its call in the kept part.
    let kept_calls: Vec<String> = history[cut..]
        .iter()
        .filter_map(|e| match e {
            AgentMessage::Llm {
                message: Message::Assistant(a),
            } => Some(a.tool_calls().map(|c| c.id.clone()).collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    for entry in &history[cut..] {
        if let AgentMessage::Llm {
            message: Message::ToolResult(r),
        } = entry
        {
            assert!(kept_calls.contains(&r.tool_call_id), "{}", r.tool_call_id);
        }
    }
    // A short history has nothing old enough to summarise.
    assert_eq!(cut_point(&conversation(2, 100), 20_000), None);
    // With nothing to keep, only the last message stays.
    let short = conversation(2, 100);
    assert_eq!(cut_point(&short, 0), Some(short.len() - 1));
}

#[test]
fn a_summary_reaches_the_model_as_a_user_message_joined_with_the_next_one() {
    let mut history = conversation(3, 10);
    let cut = 4; // the second turn's prompt
    let kept = apply(&mut history, cut, "## Goal\nTest".into(), 1_234);
    assert_eq!(kept, 8);
    let messages = convert_to_llm(history.clone());
    assert_eq!(messages.len(), 8);
    let Message::User { content } = &messages[0] else {
        panic!("{:?}", messages[0])
    };
    assert_eq!(
        content,
        &vec![
            Content::text(format!(
                "{SUMMARY_PREFIX}\n\n<summary>\n## Goal\nTest\n</summary>"
            )),
            Content::text("question 1"),
        ]
    );
    // Cut at an assistant message: the summary stands alone before it.
    let mut history = conversation(2, 10);
    apply(&mut history, 3, "s".into(), 1);
    let messages = convert_to_llm(history);
    assert!(matches!(messages[0], Message::User { .. }));
    assert!(matches!(messages[1], Message::Assistant(_)));
}

#[test]
fn restoring_from_the_kept_count_rebuilds_the_same_context() {
    let original = conversation(6, 50);
    let mut live = original.clone();
    let kept = apply(&mut live, 9, "summary".into(), 99);
    let mut restored = original.clone();
    restore(&mut restored, "summary".into(), kept, 99);
    assert_eq!(restored, live);
}

#[test]
fn the_summary_request_serialises_the_history_and_updates_a_previous_summary() {
    let model = crate::llm::catalog::Catalog::new(&Default::default(), &|_| None)
        .resolve("anthropic/claude-sonnet-4-5")
        .unwrap();
    let history = conversation(1, 3_000);
    let old: Vec<&Message> = history
        .iter()
        .filter_map(|e| match e {
            AgentMessage::Llm { message } => Some(message),
            _ => None,
        })
        .collect();
    let request = summary_request(
        &model,
        Some("## Goal\nOld"),
        &old,
        Some("keep the API names"),
        20_000,
    );
    assert!(request.tools.is_empty());
    assert_eq!(request.max_tokens, Some(16_000));
    let Message::User { content } = &request.messages[0] else {
        panic!()
    };
    let Content::Text { text } = &content[0] else {
        panic!()
    };
    for expected in [
        "[User]: question 0",
        "[Assistant tool calls]: read({\"path\":\"src/f0.rs\"})",
        &format!("[Tool result]: {} […]", "x".repeat(2_000)),
        "[Assistant]: answer 0",
        "<previous-summary>\n## Goal\nOld\n</previous-summary>",
        "UPDATE the previous summary",
        "## Next Steps",
        "The user asked for this focus: keep the API names",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from {text}");
    }
    assert!(!text.contains(&"x".repeat(2_001)));
    let first = summary_request(&model, None, &old, None, 20_000);
    let Message::User { content } = &first.messages[0] else {
        panic!()
    };
    let Content::Text { text } = &content[0] else {
        panic!()
    };
    assert!(!text.contains("previous-summary") && text.contains("Summarise the conversation"));
}

#[test]
fn files_read_and_modified_come_from_the_tool_calls() {
    let history = [assistant(
        "",
        &[
            ("a", "read", json!({"path": "src/a.rs"})),
            ("b", "edit", json!({"path": "src/b.rs"})),
            ("c", "read", json!({"path": "src/b.rs"})),
            ("d", "write", json!({"path": "NOTES.md"})),
            ("e", "bash", json!({"command": "ls"})),
        ],
        0,
    )];
    let messages: Vec<&Message> = history
        .iter()
        .filter_map(|e| match e {
            AgentMessage::Llm { message } => Some(message),
            _ => None,
        })
        .collect();
    let ops = FileOps::collect(&messages);
    assert_eq!(ops.read.iter().collect::<Vec<_>>(), ["src/a.rs"]);
    assert_eq!(
        ops.modified.iter().collect::<Vec<_>>(),
        ["NOTES.md", "src/b.rs"]
    );
    assert_eq!(
        ops.render(),
        "\n\n<read-files>\nsrc/a.rs\n</read-files>\n\n<modified-files>\nNOTES.md\nsrc/b.rs\n</modified-files>"
    );
    assert_eq!(FileOps::default().render(), "");
}

#[test]
fn file_lists_split_off_a_summary_and_merge_with_new_ones() {
    let summary = "## Goal\nFix it\n\n<read-files>\nsrc/a.rs\nsrc/c.rs\n</read-files>\n\n<modified-files>\nsrc/b.rs\n</modified-files>";
    let (text, mut files) = FileOps::split(summary);
    assert_eq!(text, "## Goal\nFix it");
    let set = |paths: &[&str]| paths.iter().map(|p| p.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        files,
        FileOps {
            read: set(&["src/a.rs", "src/c.rs"]),
            modified: set(&["src/b.rs"]),
        }
    );
    // A file read before and changed since moves to the modified list.
    files.merge(FileOps {
        read: set(&["src/d.rs"]),
        modified: set(&["src/c.rs"]),
    });
    assert_eq!(
        files,
        FileOps {
            read: set(&["src/a.rs", "src/d.rs"]),
            modified: set(&["src/b.rs", "src/c.rs"]),
        }
    );
    // Rendering and splitting again gives the same lists back.
    let again = format!("{text}{}", files.render());
    assert_eq!(FileOps::split(&again), (text, files));
    // A summary without lists is left as it is.
    assert_eq!(
        FileOps::split("## Goal\nOld\n"),
        ("## Goal\nOld", FileOps::default())
    );
}

fn time(text: &str) -> AgentMessage {
    AgentMessage::Time { text: text.into() }
}

#[test]
fn a_kept_user_message_keeps_its_time_line_and_time_lines_alone_are_not_summarised() {
    let history = vec![
        time("Current time: 09:00"),
        user("first"),
        assistant("one", &[], 0),
        time("Current time: 10:00"),
        user("second"),
    ];
    // Keeping only the latest message keeps the time line before it.
    assert_eq!(cut_point(&history, 0), Some(3));
    // A cut that would summarise nothing but a time line is no cut.
    assert_eq!(cut_point(&history[..2], 0), None);
    let mut compacted = history.clone();
    assert_eq!(apply(&mut compacted, 3, "sum".into(), 100), 1);
    let messages = convert_to_llm(compacted);
    assert_eq!(
        messages,
        vec![Message::User {
            content: vec![
                Content::text(format!("{SUMMARY_PREFIX}\n\n<summary>\nsum\n</summary>")),
                Content::text("second"),
                Content::text("Current time: 10:00"),
            ],
        }]
    );
}
