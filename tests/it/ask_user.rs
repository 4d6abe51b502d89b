//! End-to-end: the `ask_user` tool puts the model's question to the
//! editor's user — as an `elicitation/create` form when the client
//! advertises form elicitation, else as a `session/request_permission`
//! with one option per choice — and the answer is the call's result. A
//! declined question ends the turn as cancelled; `pincer run`, where no one
//! can answer, gets an error result instead of hanging.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, selected, spawn_anthropic, tool_results};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, requests_of, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;

const ELICITATION: &str = "elicitation/create";
const PERMISSION: &str = "session/request_permission";

fn colours() -> Value {
    json!({
        "question": "Which colour should the button be?",
        "choices": [
            {"label": "Red"},
            {"label": "Blue", "description": "matches the logo"},
        ],
    })
}

fn ask(id: &str, args: &Value) -> Reply {
    Reply::sse(anthropic_tool_call(id, "ask_user", args))
}

/// A session in a fresh `pincer acp` whose client advertises `capabilities`.
async fn start(sandbox: &Sandbox, mock: &MockModel, capabilities: Value) -> (Acp, String) {
    let mut acp = spawn_anthropic(sandbox, mock);
    acp.initialize_with(capabilities).await;
    let session = acp.new_session(&sandbox.work()).await;
    (acp, session)
}

/// The client requests pincer made, as (method, params without the
/// session id).
fn client_requests(before: &[Value]) -> Vec<(String, Value)> {
    before
        .iter()
        .filter(|m| m.get("id").is_some() && m.get("method").is_some())
        .map(|m| {
            let mut params = m["params"].clone();
            params.as_object_mut().unwrap().remove("sessionId");
            (m["method"].as_str().unwrap().to_string(), params)
        })
        .collect()
}

/// The `tool_call` and `tool_call_update`s the editor saw, without the
/// fields other features add.
fn tool_updates(before: &[Value]) -> Vec<Value> {
    updates_of(before)
        .into_iter()
        .filter(|u| {
            let kind = u["sessionUpdate"].as_str().unwrap_or_default();
            kind == "tool_call" || kind == "tool_call_update"
        })
        .map(|mut u| {
            let object = u.as_object_mut().unwrap();
            object.remove("_meta");
            object.remove("name");
            u
        })
        .collect()
}

#[tokio::test]
async fn with_elicitation_a_choice_and_a_typed_answer_are_the_results() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(ask("q1", &colours()));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    mock.push(ask("q2", &json!({"question": "Which port?"})));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let (mut acp, session) = start(&sandbox, &mock, json!({"elicitation": {"form": {}}})).await;

    let id = acp
        .send("session/prompt", prompt(&session, "style it"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| {
            assert_eq!(method, ELICITATION);
            json!({"action": "accept", "content": {"answer": "Blue"}})
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        client_requests(&before),
        vec![(
            ELICITATION.to_string(),
            json!({
                "mode": "form",
                "toolCallId": "q1",
                "message": "Which colour should the button be?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"answer": {
                        "type": "string",
                        "title": "Answer",
                        "oneOf": [
                            {"const": "Red", "title": "Red"},
                            {"const": "Blue", "title": "Blue", "description": "matches the logo"},
                        ],
                    }},
                    "required": ["answer"],
                },
            })
        )]
    );
    assert_eq!(
        tool_results(&mock, 1),
        vec![("q1".to_string(), false, "Blue".to_string())]
    );
    assert_eq!(
        tool_updates(&before),
        vec![
            json!({"sessionUpdate": "tool_call", "toolCallId": "q1",
                "title": "Which colour should the button be?",
                "status": "in_progress", "rawInput": colours()}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "q1",
                "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "Blue"}}],
                "rawOutput": {"output": "Blue", "isError": false}}),
        ]
    );

    let id = acp
        .send("session/prompt", prompt(&session, "serve it"))
        .await;
    let (response, before) = acp
        .drive(
            id,
            |_, _| json!({"action": "accept", "content": {"answer": "8080, the usual one"}}),
        )
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        client_requests(&before),
        vec![(
            ELICITATION.to_string(),
            json!({
                "mode": "form",
                "toolCallId": "q2",
                "message": "Which port?",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"answer": {"type": "string", "title": "Answer"}},
                    "required": ["answer"],
                },
            })
        )]
    );
    assert_eq!(
        tool_results(&mock, 3),
        vec![("q2".to_string(), false, "8080, the usual one".to_string())]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn without_elicitation_each_choice_is_a_permission_option() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(ask("q1", &colours()));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    // A typed answer cannot be asked for this way: the model is told so,
    // and nothing is put to the user.
    mock.push(ask("q2", &json!({"question": "Which port?"})));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;

    let id = acp
        .send("session/prompt", prompt(&session, "style it"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| {
            assert_eq!(method, PERMISSION);
            selected("choice_1")
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        client_requests(&before),
        vec![(
            PERMISSION.to_string(),
            json!({
                "toolCall": {
                    "toolCallId": "q1",
                    "title": "Which colour should the button be?",
                    "content": [{"type": "content", "content":
                        {"type": "text", "text": "- Blue: matches the logo"}}],
                },
                "options": [
                    {"optionId": "choice_0", "name": "Red", "kind": "allow_once"},
                    {"optionId": "choice_1", "name": "Blue", "kind": "allow_once"},
                ],
            })
        )]
    );
    assert_eq!(
        tool_results(&mock, 1),
        vec![("q1".to_string(), false, "Blue".to_string())]
    );

    let id = acp
        .send("session/prompt", prompt(&session, "serve it"))
        .await;
    let (response, before) = acp.drive(id, |method, _| panic!("asked {method}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(requests_of(&before, PERMISSION).len(), 0);
    let results = tool_results(&mock, 3);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].0, "q2");
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].2.contains("cannot take a typed answer"),
        "{results:?}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

const CANCELLED_RESULT: &str = "The user cancelled the question; the turn ended.";

/// The editor's answer to a question the user turns down, by client kind.
fn turned_down(method: &str) -> Value {
    match method {
        ELICITATION => json!({"action": "decline"}),
        PERMISSION => json!({"outcome": {"outcome": "cancelled"}}),
        other => panic!("unexpected {other}"),
    }
}

/// The declined question ends the turn as cancelled; the call still has its
/// result, which the model sees next time and a reload replays.
async fn declining_ends_the_turn(capabilities: Value, asked_by: &str) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(ask("q1", &colours()));
    mock.push(Reply::fixture("anthropic/text.sse"));
    let (mut acp, session) = start(&sandbox, &mock, capabilities).await;

    let id = acp
        .send("session/prompt", prompt(&session, "style it"))
        .await;
    let (response, before) = acp.drive(id, |method, _| turned_down(method)).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let asked: Vec<String> = client_requests(&before)
        .into_iter()
        .map(|(m, _)| m)
        .collect();
    assert_eq!(asked, vec![asked_by.to_string()]);
    let finished = json!({"sessionUpdate": "tool_call_update", "toolCallId": "q1",
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": CANCELLED_RESULT}}],
        "rawOutput": {"output": CANCELLED_RESULT, "isError": true}});
    assert_eq!(tool_updates(&before).last(), Some(&finished));
    // Only the one model call: the turn did not go on.
    assert_eq!(mock.requests().len(), 1);

    // The next prompt carries the call's result to the model.
    let id = acp
        .send("session/prompt", prompt(&session, "never mind"))
        .await;
    let (response, _) = acp.drive(id, |method, _| panic!("asked {method}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let sent = serde_json::to_string(&mock.requests()[1].body["messages"]).unwrap();
    assert!(sent.contains(CANCELLED_RESULT), "{sent}");
    assert_eq!(mock.violations(), Vec::<String>::new());
    drop(acp);

    // A fresh pincer loads the transcript with the call and its result.
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replayed = tool_updates(&before);
    assert_eq!(replayed.len(), 2, "{replayed:#?}");
    assert_eq!(replayed[0]["toolCallId"], "q1");
    assert_eq!(replayed[1], finished);
}

#[tokio::test]
async fn a_declined_form_ends_the_turn_as_cancelled() {
    declining_ends_the_turn(json!({"elicitation": {"form": {}}}), ELICITATION).await;
}

#[tokio::test]
async fn a_cancelled_permission_question_ends_the_turn_as_cancelled() {
    declining_ends_the_turn(json!({}), PERMISSION).await;
}

#[tokio::test]
async fn pincer_run_has_no_one_to_ask_and_says_so() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(ask("q1", &colours()));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut cmd = sandbox.command(&["run", "style it"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .stdin(std::process::Stdio::null());
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), cmd.output())
        .await
        .expect("pincer run finished instead of waiting for an answer")
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        tool_results(&mock, 1),
        vec![(
            "q1".to_string(),
            true,
            "No one can answer questions in this run (it has no user attached, e.g. `pincer run`). Do not ask again: decide yourself, and say in your reply what you assumed.".to_string()
        )]
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// A question still open when the user cancels the turn is withdrawn:
/// pincer sends `$/cancel_request` for it, so the editor can close the
/// form (or the permission dialog) instead of leaving it on screen.
async fn cancelling_withdraws_the_question(capabilities: Value, asked_by: &str) {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(ask("q1", &colours()));
    let (mut acp, session) = start(&sandbox, &mock, capabilities).await;

    let id = acp
        .send("session/prompt", prompt(&session, "style it"))
        .await;
    let question = loop {
        let message = acp.next().await;
        if message["method"] == asked_by && message.get("id").is_some() {
            break message;
        }
    };
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, after) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let withdrawn: Vec<&Value> = after
        .iter()
        .filter(|m| m["method"] == "$/cancel_request")
        .collect();
    assert_eq!(
        withdrawn,
        vec![
            &json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": question["id"]}})
        ]
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_cancelled_turn_withdraws_its_open_form() {
    cancelling_withdraws_the_question(json!({"elicitation": {"form": {}}}), ELICITATION).await;
}

#[tokio::test]
async fn a_cancelled_turn_withdraws_its_open_permission_question() {
    cancelling_withdraws_the_question(json!({}), PERMISSION).await;
}
