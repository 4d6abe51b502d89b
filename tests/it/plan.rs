//! End-to-end: the `todo` tool as the editor sees it — ACP `plan` updates
//! live and on replay, refused lists that change nothing, the read-only
//! `plan` mode presenting its plan the same way, and `pincer run --json`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, spawn_anthropic, tool_results};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, coalesce, requests_of, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;

/// The first list: two steps, the first under way.
fn first_list() -> Value {
    json!({"todos": [
        {"content": "Read the parser", "status": "in_progress", "priority": "high"},
        {"content": "Fix the off-by-one", "status": "pending"},
    ]})
}

/// The second list: the first step done, the second under way.
fn second_list() -> Value {
    json!({"todos": [
        {"content": "Read the parser", "status": "completed", "priority": "high"},
        {"content": "Fix the off-by-one", "status": "in_progress", "priority": "low"},
    ]})
}

fn first_plan() -> Value {
    json!({"sessionUpdate": "plan", "entries": [
        {"content": "Read the parser", "priority": "high", "status": "in_progress"},
        {"content": "Fix the off-by-one", "priority": "medium", "status": "pending"},
    ]})
}

fn second_plan() -> Value {
    json!({"sessionUpdate": "plan", "entries": [
        {"content": "Read the parser", "priority": "high", "status": "completed"},
        {"content": "Fix the off-by-one", "priority": "low", "status": "in_progress"},
    ]})
}

fn tool_call(id: &str, input: &Value) -> Value {
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "name": "todo",
        "title": "Update the todo list",
        "kind": "think",
        "status": "in_progress",
        "rawInput": input,
    })
}

fn tool_done(id: &str, checklist: &str, summary: &str) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "name": "todo",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": checklist}}],
        "rawOutput": {"output": summary, "isError": false},
    })
}

const FIRST_CHECKLIST: &str =
    "- [~] Read the parser (in progress) (high priority)\n- [ ] Fix the off-by-one";
const SECOND_CHECKLIST: &str =
    "- [x] Read the parser (high priority)\n- [~] Fix the off-by-one (in progress) (low priority)";

/// The updates a test compares: everything but usage (which carries
/// token counts), with message chunks joined and without their message ids
/// (tests/it/acp_ids.rs checks those).
fn shown(messages: &[Value]) -> Vec<Value> {
    coalesce(
        updates_of(messages)
            .into_iter()
            .filter(|u| u["sessionUpdate"] != "usage_update")
            .map(|mut u| {
                if let Some(update) = u.as_object_mut() {
                    update.remove("messageId");
                }
                u
            })
            .collect(),
    )
}

fn after_tool_text() -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "The file says hello."}})
}

async fn open(acp: &mut Acp, sandbox: &Sandbox) -> String {
    acp.initialize_with(json!({})).await;
    acp.new_session(&sandbox.work()).await
}

fn offered(mock: &MockModel, index: usize) -> Vec<String> {
    let mut names: Vec<String> = mock.requests()[index].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn two_todo_calls_send_two_plans_and_a_reload_shows_them_again() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call("t1", "todo", &first_list())));
    mock.push(Reply::sse(anthropic_tool_call(
        "t2",
        "todo",
        &second_list(),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox).await;

    let id = acp.send("session/prompt", prompt(&session, "fix it")).await;
    let (response, before) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(requests_of(&before, "session/request_permission").len(), 0);
    let first_summary = format!("Todo list updated (0 of 2 completed):\n{FIRST_CHECKLIST}");
    let second_summary = format!("Todo list updated (1 of 2 completed):\n{SECOND_CHECKLIST}");
    let live = vec![
        tool_call("t1", &first_list()),
        tool_done("t1", FIRST_CHECKLIST, &first_summary),
        first_plan(),
        tool_call("t2", &second_list()),
        tool_done("t2", SECOND_CHECKLIST, &second_summary),
        second_plan(),
        after_tool_text(),
    ];
    assert_eq!(shown(&before), live);
    // The model sees the checklist it wrote.
    assert_eq!(
        tool_results(&mock, 1),
        vec![("t1".to_string(), false, first_summary.clone())]
    );
    assert_eq!(
        tool_results(&mock, 2),
        vec![("t2".to_string(), false, second_summary.clone())]
    );
    drop(acp);

    // A new pincer replays the same updates, ending with the latest plan.
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({})).await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let user = json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "fix it"}});
    let mut replayed = vec![user];
    replayed.extend(live);
    assert_eq!(shown(&before), replayed);
}

#[tokio::test]
async fn an_unsound_list_is_an_error_result_and_no_plan() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let two_in_progress = json!({"todos": [
        {"content": "One", "status": "in_progress"},
        {"content": "Two", "status": "in_progress"},
    ]});
    let bad_status = json!({"todos": [{"content": "One", "status": "doing"}]});
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "todo",
        &two_in_progress,
    )));
    mock.push(Reply::sse(anthropic_tool_call("t2", "todo", &bad_status)));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox).await;

    let id = acp.send("session/prompt", prompt(&session, "plan")).await;
    let (response, before) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let refused = "The todo list was not changed: entries 1, 2 are all in_progress; at most \
                   one entry may be in_progress. Send the whole corrected list again.";
    // A status outside the schema is refused before the tool runs.
    let off_schema = "Invalid arguments for todo: /todos/0/status: \"doing\" is not one of \
                      \"pending\", \"in_progress\" or \"completed\". Nothing was run. Check the \
                      tool's parameter schema and call it again.";
    assert_eq!(
        tool_results(&mock, 1),
        vec![("t1".to_string(), true, refused.to_string())]
    );
    assert_eq!(
        tool_results(&mock, 2),
        vec![("t2".to_string(), true, off_schema.to_string())]
    );
    let failed = |id: &str, text: &str| {
        json!({
            "sessionUpdate": "tool_call_update",
            "toolCallId": id,
            "name": "todo",
            "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": text}}],
            "rawOutput": {"output": text, "isError": true},
        })
    };
    assert_eq!(
        shown(&before),
        vec![
            tool_call("t1", &two_in_progress),
            failed("t1", refused),
            tool_call("t2", &bad_status),
            failed("t2", off_schema),
            after_tool_text(),
        ]
    );
}

#[tokio::test]
async fn plan_mode_offers_todo_and_its_plan_reaches_the_editor() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call("t1", "todo", &first_list())));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open(&mut acp, &sandbox).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "plan"}),
    )
    .await;

    let id = acp
        .send("session/prompt", prompt(&session, "plan it"))
        .await;
    let (response, before) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        offered(&mock, 0),
        vec!["ask_user", "find", "grep", "ls", "read", "task", "todo"]
    );
    // The model is told to present its plan with todo.
    let system = mock.requests()[0].body["system"].to_string();
    assert!(
        system.contains("You are in plan mode: nothing on the machine can be changed."),
        "{system}"
    );
    let summary = format!("Todo list updated (0 of 2 completed):\n{FIRST_CHECKLIST}");
    assert_eq!(
        shown(&before),
        vec![
            tool_call("t1", &first_list()),
            tool_done("t1", FIRST_CHECKLIST, &summary),
            first_plan(),
            after_tool_text(),
        ]
    );

    // Out of plan mode the tools change and the plan-mode text goes.
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "default"}),
    )
    .await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    acp.call("session/prompt", prompt(&session, "go")).await;
    let system = mock.requests()[2].body["system"].to_string();
    assert!(!system.contains("You are in plan mode"), "{system}");
    assert!(offered(&mock, 2).contains(&"todo".to_string()));
}

#[tokio::test]
async fn run_json_prints_the_plan_like_an_editor_gets_it() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call("t1", "todo", &first_list())));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "--json", "make a plan"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let out = cmd.output().await.unwrap();
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A start event, the notifications, the result (tests/it/run_cli.rs).
    let (last, rest) = lines.split_last().unwrap();
    let (first, notifications) = rest.split_first().unwrap();
    assert_eq!(first["type"], "system");
    assert_eq!(
        (&last["type"], &last["stop_reason"]),
        (&json!("result"), &json!("end_turn"))
    );
    let summary = format!("Todo list updated (0 of 2 completed):\n{FIRST_CHECKLIST}");
    assert_eq!(
        shown(notifications),
        vec![
            tool_call("t1", &first_list()),
            tool_done("t1", FIRST_CHECKLIST, &summary),
            first_plan(),
            after_tool_text(),
        ]
    );
}

#[tokio::test]
async fn a_client_with_plan_operations_gets_markdown_plan_updates_live_and_on_replay() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call("t1", "todo", &first_list())));
    mock.push(Reply::sse(anthropic_tool_call(
        "t2",
        "todo",
        &json!({"todos": []}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({"plan": {}})).await;
    let session = acp.new_session(&sandbox.work()).await;

    let id = acp.send("session/prompt", prompt(&session, "plan")).await;
    let (response, before) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let first_summary = format!("Todo list updated (0 of 2 completed):\n{FIRST_CHECKLIST}");
    let live = vec![
        tool_call("t1", &first_list()),
        tool_done("t1", FIRST_CHECKLIST, &first_summary),
        json!({"sessionUpdate": "plan_update", "plan": {
            "type": "markdown", "planId": "todo", "content": FIRST_CHECKLIST,
        }}),
        tool_call("t2", &json!({"todos": []})),
        tool_done("t2", "The todo list is empty.", "Todo list cleared."),
        json!({"sessionUpdate": "plan_removed", "planId": "todo"}),
        after_tool_text(),
    ];
    assert_eq!(shown(&before), live);
    drop(acp);

    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({"plan": {}})).await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let user =
        json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "plan"}});
    let mut replayed = vec![user];
    replayed.extend(live);
    assert_eq!(shown(&before), replayed);
}
