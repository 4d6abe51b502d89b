//! End-to-end: the coding tools over ACP with the editor in the loop —
//! permissions and modes, the editor's file system and terminals, cancel
//! during a command — against the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, selected, spawn_anthropic, tool_results, wait_until};

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, process_running, requests_of, unique_sleep, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_tool_call, anthropic_tool_calls};

fn tool_names(mock: &MockModel, index: usize) -> Vec<String> {
    mock.requests()[index].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn session(acp: &mut Acp, sandbox: &Sandbox, capabilities: Value) -> String {
    acp.initialize_with(capabilities).await;
    acp.new_session(&sandbox.work()).await
}

async fn set_mode(acp: &mut Acp, session: &str, mode: &str) {
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": mode}),
    )
    .await;
}

#[tokio::test]
async fn every_tool_works_and_reports_its_errors() {
    let sandbox = Sandbox::new();
    sandbox.write("src/lib.rs", "fn one() {}\nfn two() {}\nfn two() {}\n");
    sandbox.write("notes.txt", "alpha\nbeta\n");
    std::fs::write(sandbox.work().join("blob.bin"), [0u8, 1, 2, 3, 0, 5]).unwrap();
    let mock = MockModel::start().await;
    let sleeper = format!("sleep {}", unique_sleep());
    let calls: Vec<(&str, &str, Value)> = vec![
        ("c_read", "read", json!({"path": "notes.txt"})),
        ("c_read_missing", "read", json!({"path": "nope.txt"})),
        ("c_read_binary", "read", json!({"path": "blob.bin"})),
        (
            "c_write",
            "write",
            json!({"path": "out/new.txt", "content": "fresh\n"}),
        ),
        (
            "c_edit",
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "gamma"}]}),
        ),
        (
            "c_edit_ambiguous",
            "edit",
            json!({"path": "src/lib.rs", "edits": [{"oldText": "fn two() {}", "newText": "fn three() {}"}]}),
        ),
        (
            "c_edit_missing",
            "edit",
            json!({"path": "ghost.rs", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        ("c_bash", "bash", json!({"command": "echo hello from bash"})),
        (
            "c_bash_fail",
            "bash",
            json!({"command": "echo oops; exit 3"}),
        ),
        (
            "c_bash_timeout",
            "bash",
            json!({"command": sleeper, "timeout": 1}),
        ),
        ("c_grep", "grep", json!({"pattern": "fn t", "path": "src"})),
        ("c_find", "find", json!({"pattern": "*.rs"})),
        ("c_ls", "ls", json!({})),
    ];
    let raw: Vec<(String, String, String)> = calls
        .iter()
        .map(|(id, name, args)| (id.to_string(), name.to_string(), args.to_string()))
        .collect();
    let refs: Vec<(&str, &str, &str)> = raw
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    mock.push(Reply::sse(anthropic_tool_calls(&refs)));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({})).await;
    set_mode(&mut acp, &session, "bypass").await;
    let id = acp
        .send("session/prompt", prompt(&session, "try everything"))
        .await;
    let (response, before) = acp
        .drive(id, |method, _| panic!("unexpected {method}"))
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert!(requests_of(&before, "session/request_permission").is_empty());
    let results = tool_results(&mock, 1);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).cloned().unwrap();
    let expect = |id: &str, error: bool, fragment: &str| {
        let (_, is_error, text) = by_id(id);
        assert_eq!(is_error, error, "{id}: {text}");
        assert!(
            text.contains(fragment),
            "{id}: expected {fragment:?} in {text:?}"
        );
    };
    expect("c_read", false, "alpha\nbeta");
    expect("c_read_missing", true, "does not exist");
    expect("c_read_binary", true, "binary");
    expect("c_write", false, "Successfully wrote");
    expect("c_edit", false, "Successfully replaced 1 block");
    expect("c_edit_ambiguous", true, "Found 2 occurrences");
    expect("c_edit_missing", true, "does not exist");
    expect("c_bash", false, "hello from bash");
    expect("c_bash_fail", true, "exited with code 3");
    expect("c_bash_timeout", true, "timed out after 1 second");
    expect("c_grep", false, "lib.rs:2: fn two() {}");
    expect("c_find", false, "src/lib.rs");
    expect("c_ls", false, "src/");
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("out/new.txt")).unwrap(),
        "fresh\n"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    assert!(!process_running(&sleeper));

    // The editor saw the edit as a diff.
    let updates = updates_of(&before);
    let edit = updates
        .iter()
        .find(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == "c_edit"
                && u["status"] == "completed"
        })
        .unwrap();
    assert_eq!(
        edit["content"],
        json!([{"type": "diff", "path": sandbox.work().join("notes.txt"), "oldText": "alpha\nbeta\n", "newText": "alpha\ngamma\n"}])
    );
    let bash = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "c_bash")
        .unwrap();
    assert_eq!(bash["title"], "echo hello from bash");
    assert_eq!(bash["kind"], "execute");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn edits_and_reads_go_through_the_editor_when_it_offers_its_file_system() {
    let sandbox = Sandbox::new();
    sandbox.write("notes.txt", "on disk\n");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("c_read", "read", r#"{"path":"notes.txt"}"#),
        (
            "c_edit",
            "edit",
            r#"{"path":"notes.txt","edits":[{"oldText":"unsaved","newText":"saved"}]}"#,
        ),
    ])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(
        &mut acp,
        &sandbox,
        json!({"fs": {"readTextFile": true, "writeTextFile": true}}),
    )
    .await;
    let notes = sandbox.work().join("notes.txt");
    let id = acp.send("session/prompt", prompt(&session, "edit")).await;
    let mut written = Vec::new();
    let (response, before) = acp
        .drive(id, |method, params| match method {
            "fs/read_text_file" => {
                assert_eq!(params["path"], json!(notes));
                json!({"content": "unsaved buffer\n"})
            }
            "fs/write_text_file" => {
                written.push(params.clone());
                json!({})
            }
            "session/request_permission" => {
                assert_eq!(
                    params["toolCall"]["content"],
                    json!([{"type": "diff", "path": notes, "oldText": "unsaved buffer\n", "newText": "saved buffer\n"}])
                );
                selected("allow_once")
            }
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);
    assert_eq!(
        written,
        vec![json!({"sessionId": session, "path": notes, "content": "saved buffer\n"})]
    );
    // pincer left the disk to the editor.
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "on disk\n");
    let results = tool_results(&mock, 1);
    assert_eq!(results[0].2, "unsaved buffer");
    assert!(!results[1].1, "{:?}", results[1]);
}

#[tokio::test]
async fn commands_run_in_the_editors_terminal_when_it_offers_one() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "c_bash",
        "bash",
        &json!({"command": "cargo --version"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({"terminal": true})).await;
    let id = acp
        .send("session/prompt", prompt(&session, "version?"))
        .await;
    let mut calls = Vec::new();
    let (response, before) = acp
        .drive(id, |method, params| {
            calls.push(method.to_string());
            match method {
                "session/request_permission" => selected("allow_once"),
                "terminal/create" => {
                    assert_eq!(params["command"], "bash");
                    assert_eq!(params["args"], json!(["-c", "cargo --version"]));
                    json!({"terminalId": "term-1"})
                }
                "terminal/wait_for_exit" => json!({"exitCode": 0}),
                "terminal/output" => {
                    json!({"output": "cargo 1.95.0\n", "truncated": false, "exitStatus": {"exitCode": 0}})
                }
                "terminal/release" => json!({}),
                other => panic!("unexpected {other}"),
            }
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    assert_eq!(
        calls,
        vec![
            "session/request_permission",
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release"
        ]
    );
    let embeds_terminal = updates_of(&before).iter().any(|u| {
        u["sessionUpdate"] == "tool_call_update"
            && u["content"] == json!([{"type": "terminal", "terminalId": "term-1"}])
    });
    assert!(embeds_terminal);
    let results = tool_results(&mock, 1);
    assert_eq!(results[0].1, false);
    assert!(results[0].2.contains("cargo 1.95.0"), "{:?}", results[0]);
}

#[tokio::test]
async fn each_permission_answer_does_what_it_says() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let bash = |id: &str, command: &str| {
        Reply::sse(anthropic_tool_call(
            id,
            "bash",
            &json!({"command": command}),
        ))
    };
    // 1: allow once; 2: allow always for `echo`; 3: `echo` again, not asked;
    // 4: reject once; 5: reject always for `touch`; 6: `touch`, refused
    // without asking; 7: cancelled outcome ends the turn.
    for (id, command) in [
        ("p1", "echo one"),
        ("p2", "echo two"),
        ("p3", "echo three"),
        ("p4", "touch four"),
        ("p5", "touch five"),
        ("p6", "touch six"),
    ] {
        mock.push(bash(id, command));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
    }
    mock.push(bash("p7", "pwd"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({})).await;
    let answers = [
        Some("allow_once"),
        Some("allow_always"),
        None,
        Some("reject_once"),
        Some("reject_always"),
        None,
    ];
    for (turn, answer) in answers.iter().enumerate() {
        let id = acp.send("session/prompt", prompt(&session, "go")).await;
        let (response, before) = acp
            .drive(id, |method, _| {
                assert_eq!(method, "session/request_permission");
                selected(answer.expect("this call must not ask"))
            })
            .await;
        assert_eq!(
            response["result"],
            json!({"stopReason": "end_turn"}),
            "turn {turn}"
        );
        assert_eq!(
            requests_of(&before, "session/request_permission").len(),
            usize::from(answer.is_some()),
            "turn {turn}"
        );
    }
    let outcome = |request: usize| tool_results(&mock, request)[0].clone();
    assert!(!outcome(1).1 && outcome(1).2.contains("one"));
    assert!(!outcome(3).1 && outcome(3).2.contains("two"));
    assert!(!outcome(5).1 && outcome(5).2.contains("three"));
    assert!(outcome(7).1 && outcome(7).2.contains("declined"));
    assert!(outcome(9).1 && outcome(9).2.contains("declined"));
    assert!(outcome(11).1 && outcome(11).2.contains("always reject"));
    assert!(!sandbox.work().join("four").exists());
    assert!(!sandbox.work().join("six").exists());

    assert_eq!(mock.requests().len(), 12);
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let (response, _) = acp
        .drive(id, |_, _| json!({"outcome": {"outcome": "cancelled"}}))
        .await;
    assert_eq!(
        response["result"],
        json!({"stopReason": "cancelled"}),
        "{response}"
    );
}

#[tokio::test]
async fn modes_decide_what_asks_and_what_is_offered() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "one\n");
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({})).await;

    // plan: nothing that changes the machine is offered.
    let id = acp
        .send(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({}));
    assert_eq!(
        updates_of(&before)[0],
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    );
    mock.push(Reply::fixture("anthropic/text.sse"));
    let id = acp.send("session/prompt", prompt(&session, "look")).await;
    acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    let mut offered = tool_names(&mock, 0);
    offered.sort();
    assert_eq!(
        offered,
        vec!["ask_user", "find", "grep", "ls", "read", "task", "todo"]
    );

    // accept-edits: an edit runs without asking, a command asks.
    set_mode(&mut acp, &session, "accept-edits").await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        (
            "e1",
            "edit",
            r#"{"path":"a.txt","edits":[{"oldText":"one","newText":"two"}]}"#,
        ),
        ("b1", "bash", r#"{"command":"echo hi"}"#),
    ])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = acp.send("session/prompt", prompt(&session, "edit")).await;
    let (_, before) = acp.drive(id, |_, _| selected("reject_once")).await;
    let asked = requests_of(&before, "session/request_permission");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "b1");
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("a.txt")).unwrap(),
        "two\n"
    );

    // bypass: nothing asks; default: everything mutating asks.
    for (mode, asks) in [("bypass", 0), ("default", 1)] {
        set_mode(&mut acp, &session, mode).await;
        mock.push(Reply::sse(anthropic_tool_call(
            "w",
            "write",
            &json!({"path": "b.txt", "content": "x"}),
        )));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
        let id = acp.send("session/prompt", prompt(&session, "write")).await;
        let (_, before) = acp.drive(id, |_, _| selected("allow_once")).await;
        assert_eq!(
            requests_of(&before, "session/request_permission").len(),
            asks,
            "{mode}"
        );
    }
    // The mode is also a config option.
    let result = acp
        .call(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "plan"}),
        )
        .await;
    assert_eq!(result["configOptions"][0]["currentValue"], "plan");
}

/// The answers pincer remembered for the sandbox's project, from the
/// user's state.
fn saved_permissions(sandbox: &Sandbox) -> String {
    let dir = sandbox.home().join("permissions");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    std::fs::read_to_string(&files[0]).unwrap()
}

#[tokio::test]
async fn always_answers_are_remembered_across_a_restart() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "a1",
        "bash",
        &json!({"command": "cargo --version && echo ok"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session1 = session(&mut acp, &sandbox, json!({})).await;
    let id = acp.send("session/prompt", prompt(&session1, "go")).await;
    let (_, before) = acp.drive(id, |_, _| selected("allow_always")).await;
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);
    drop(acp);
    // Kept in the user's state, never in the working tree.
    assert!(!sandbox.work().join(".pincer").exists());
    let saved = saved_permissions(&sandbox);
    assert!(
        saved.contains("bash:cargo --version") || saved.contains("bash:cargo"),
        "{saved}"
    );
    assert!(saved.contains("bash:echo"), "{saved}");

    // A new process: the same commands run without asking, others still ask.
    mock.push(Reply::sse(anthropic_tool_call(
        "a2",
        "bash",
        &json!({"command": "echo again"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    mock.push(Reply::sse(anthropic_tool_call(
        "a3",
        "bash",
        &json!({"command": "echo fine; rm -rf nothing-here"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session2 = session(&mut acp, &sandbox, json!({})).await;
    let id = acp.send("session/prompt", prompt(&session2, "go")).await;
    let (_, before) = acp.drive(id, |m, _| panic!("asked: {m}")).await;
    assert!(requests_of(&before, "session/request_permission").is_empty());
    let id = acp.send("session/prompt", prompt(&session2, "go")).await;
    let (_, before) = acp.drive(id, |_, _| selected("reject_once")).await;
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);
}

#[tokio::test]
async fn cancel_during_a_long_command_kills_it_within_a_second() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = format!("sleep {}", unique_sleep());
    mock.push(Reply::sse(anthropic_tool_call(
        "slow",
        "bash",
        &json!({ "command": sleeper }),
    )));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({})).await;
    set_mode(&mut acp, &session, "bypass").await;
    let id = acp.send("session/prompt", prompt(&session, "wait")).await;
    // Wait until the command runs.
    wait_until("the command never started", Duration::from_secs(10), || {
        process_running(&sleeper)
    })
    .await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, before) = tokio::time::timeout(
        Duration::from_secs(1),
        acp.drive(id, |m, _| panic!("unexpected {m}")),
    )
    .await
    .expect("the prompt answers within a second of the cancel");
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    let end = updates_of(&before)
        .into_iter()
        .rfind(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "slow")
        .unwrap();
    assert_eq!(end["status"], "failed");
    wait_until(
        "the command outlived the cancel",
        Duration::from_secs(2),
        || !process_running(&sleeper),
    )
    .await;
}

#[tokio::test]
async fn writing_outside_the_project_asks_even_in_accept_edits() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("x.txt");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "o1",
        "write",
        &json!({"path": target, "content": "x"}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({})).await;
    set_mode(&mut acp, &session, "accept-edits").await;
    let id = acp.send("session/prompt", prompt(&session, "go")).await;
    let (_, before) = acp.drive(id, |_, _| selected("reject_once")).await;
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);
    assert!(!target.exists());
}

#[tokio::test]
async fn background_processes_end_when_the_editor_goes_away() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = format!("sleep {}", unique_sleep());
    mock.push(Reply::sse(anthropic_tool_call(
        "bg",
        "process",
        &json!({"action": "start", "command": format!("echo serving; {sleeper}")}),
    )));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = session(&mut acp, &sandbox, json!({})).await;
    set_mode(&mut acp, &session, "bypass").await;
    let id = acp.send("session/prompt", prompt(&session, "serve")).await;
    let (response, _) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let results = tool_results(&mock, 1);
    assert!(results[0].2.contains("serving"), "{:?}", results[0]);
    assert!(process_running(&sleeper));
    acp.close_stdin();
    assert!(acp.wait_exit().await.success());
    wait_until(
        "a background process outlived pincer",
        Duration::from_secs(5),
        || !process_running(&sleeper),
    )
    .await;
}
