//! Helpers (the `task` tool) end to end against the mock model: several
//! at once, their questions, their narrowed tools, cancelling one or all,
//! how an editor sees them (as ACP subagent sessions, or inside the task
//! call), and their transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, TIMEOUT, process_running, requests_of, updates_of};
use support::mock_model::{MockModel, Reply, last_message_text};
use support::sse::{anthropic_text, anthropic_tool_call, anthropic_tool_calls};
use support::{prompt, selected, spawn_anthropic, tool_results};
use tokio::sync::Notify;

/// A `task` call's raw arguments.
fn task(description: &str, job: &str, agent: Option<&str>) -> String {
    let mut args = json!({"description": description, "prompt": job});
    if let Some(agent) = agent {
        args["agent"] = json!(agent);
    }
    args.to_string()
}

/// A text answer that waits for `gate`.
fn gated(text: &str, gate: &Arc<Notify>) -> Reply {
    Reply::Sse {
        body: anthropic_text(text, 10),
        delay: Duration::ZERO,
        gate: Some(gate.clone()),
    }
}

/// The model requests whose last message holds `needle`.
fn requests_for(mock: &MockModel, needle: &str) -> Vec<Value> {
    mock.requests()
        .into_iter()
        .filter(|r| last_message_text(&r.body).contains(needle))
        .map(|r| r.body)
        .collect()
}

/// Every session header under `home`'s sessions, by id.
fn headers(home: &std::path::Path) -> Vec<Value> {
    let mut found = Vec::new();
    for dir in std::fs::read_dir(home.join("sessions")).unwrap().flatten() {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            if file.path().extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(file.path()).unwrap();
                found.push(serde_json::from_str(text.lines().next().unwrap()).unwrap());
            }
        }
    }
    found
}

/// A transcript's entries after its header.
fn entries_of(home: &std::path::Path, id: &str) -> Vec<Value> {
    for dir in std::fs::read_dir(home.join("sessions")).unwrap().flatten() {
        let path = dir.path().join(format!("{id}.jsonl"));
        if path.exists() {
            return std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .skip(1)
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
        }
    }
    panic!("no transcript for {id}");
}

/// How many processes run `sleep <marker>`.
fn count_running(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmd| {
                String::from_utf8_lossy(&cmd).replace('\0', " ") == format!("sleep {marker} ")
            })
        })
        .count()
}

/// The notifications of `method` among `messages`.
fn notifications<'a>(messages: &'a [Value], method: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_none())
        .collect()
}

async fn start(sandbox: &Sandbox, mock: &MockModel, capabilities: Value) -> (Acp, String) {
    let mut acp = spawn_anthropic(sandbox, mock);
    acp.initialize_with(capabilities).await;
    let session = acp.new_session(&sandbox.work()).await;
    (acp, session)
}

#[tokio::test]
async fn three_task_calls_run_at_the_same_time_and_each_returns_its_answer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let jobs = ["JOB-A", "JOB-B", "JOB-C"];
    let calls: Vec<(String, String)> = jobs
        .iter()
        .map(|job| (format!("t_{job}"), task(&format!("do {job}"), job, None)))
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "task", args.as_str()))
        .collect();
    mock.push(Reply::sse(anthropic_tool_calls(&refs)));
    let gates: Vec<Arc<Notify>> = jobs.iter().map(|_| Arc::new(Notify::new())).collect();
    for (job, gate) in jobs.iter().zip(&gates) {
        mock.push_for(job, gated(&format!("answer of {job}"), gate));
    }
    mock.push(Reply::sse(anthropic_text("All three done.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    let id = acp
        .send("session/prompt", prompt(&session, "Split it up."))
        .await;
    // The parent's call and all three helpers' calls arrive before any
    // helper has an answer.
    mock.wait_for_requests(4, TIMEOUT).await;
    for gate in &gates {
        gate.notify_one();
    }
    let (response, messages) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_eq!(mock.requests().len(), 5);

    // The results come back in call order, each with its own answer.
    let results = tool_results(&mock, 4);
    assert_eq!(results.len(), 3, "{results:?}");
    for ((id, is_error, text), job) in results.iter().zip(jobs) {
        assert_eq!(id, &format!("t_{job}"));
        assert!(!is_error, "{text}");
        assert!(text.starts_with(&format!("answer of {job}")), "{text}");
        assert!(text.contains("helper `general-purpose`"), "{text}");
    }
    // Each helper has its own context: the job, with the helper's
    // instructions, and the task tool again (depth 1 of 2).
    for job in jobs {
        let requests = requests_for(&mock, job);
        let child = requests
            .iter()
            .find(|r| r["messages"].as_array().unwrap().len() == 1)
            .unwrap_or_else(|| panic!("no helper request for {job}"));
        let system = child["system"].to_string();
        assert!(system.contains("You are a helper"), "{system}");
        let tools: Vec<&str> = child["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(
            tools.contains(&"task") && tools.contains(&"bash"),
            "{tools:?}"
        );
    }
    // A client that did not opt in sees nothing under the helpers' ids:
    // their progress is in the task calls.
    for message in notifications(&messages, "session/update") {
        assert_eq!(
            message["params"]["sessionId"],
            session.as_str(),
            "{message}"
        );
    }
    let progress = updates_of(&messages)
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .any(|u| u.to_string().contains("Helper `general-purpose`: do JOB-B"));
    assert!(progress, "no progress in the task calls");
    // Three helper transcripts, each naming its parent.
    let headers = headers(&sandbox.home());
    let children: Vec<&Value> = headers
        .iter()
        .filter(|h| h["spawnedBy"] == session.as_str())
        .collect();
    assert_eq!(children.len(), 3, "{headers:?}");
    for child in children {
        assert_eq!(child["agent"], "general-purpose");
        let entries = entries_of(&sandbox.home(), child["id"].as_str().unwrap());
        assert_eq!(entries.last().unwrap()["type"], "helper_end", "{entries:?}");
        assert_eq!(entries.last().unwrap()["stop"], "end_turn");
    }
    acp.assert_stdout_was_json_rpc();
}

#[tokio::test]
async fn a_client_that_opts_in_sees_each_helper_as_a_subagent_session() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &serde_json::from_str(&task("look around", "JOB-LOOK", None)).unwrap(),
    )));
    mock.push_for(
        "JOB-LOOK",
        Reply::sse(anthropic_text("I looked: all fine.", 10)),
    );
    mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({"subagents": {}})).await;
    let id = acp.send("session/prompt", prompt(&session, "Look.")).await;
    let (response, messages) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let updates: Vec<&Value> = notifications(&messages, "session/update");
    let announce = updates
        .iter()
        .position(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .expect("no subagent_update");
    let first = &updates[announce]["params"];
    assert_eq!(first["sessionId"], session.as_str());
    let child = first["update"]["sessionId"].as_str().unwrap().to_string();
    assert_ne!(child, session);
    assert_eq!(first["update"]["title"], "look around");
    assert_eq!(first["update"]["state"]["state"], "running");
    assert_eq!(first["update"]["capabilities"]["cancel"], json!({}));
    // Nothing of the child comes before its announcement; then its job
    // arrives as a message from the parent, and its answer streams under
    // its own id.
    let of_child: Vec<usize> = updates
        .iter()
        .enumerate()
        .filter(|(_, m)| m["params"]["sessionId"] == child.as_str())
        .map(|(i, _)| i)
        .collect();
    assert!(of_child.iter().all(|&i| i > announce), "{of_child:?}");
    let child_updates: Vec<&Value> = of_child
        .iter()
        .map(|&i| &updates[i]["params"]["update"])
        .collect();
    let message = child_updates
        .iter()
        .find(|u| u["sessionUpdate"] == "session_message")
        .expect("no session_message");
    assert_eq!(message["senderSessionId"], session.as_str());
    assert_eq!(message["recipientSessionId"], child.as_str());
    assert_eq!(message["content"][0]["text"], "JOB-LOOK");
    let said: String = child_updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(said, "I looked: all fine.");
    // At the end the parent reports it idle, with its stop reason.
    let last = updates
        .iter()
        .rfind(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .unwrap();
    assert_eq!(last["params"]["sessionId"], session.as_str());
    assert_eq!(last["params"]["update"]["state"]["state"], "idle");
    assert_eq!(last["params"]["update"]["state"]["stopReason"], "end_turn");
    acp.assert_stdout_was_json_rpc();
}

#[tokio::test]
async fn a_helpers_question_names_it_and_the_answer_reaches_it() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &serde_json::from_str(&task("make a file", "JOB-WRITE", None)).unwrap(),
    )));
    mock.push_for(
        "JOB-WRITE",
        Reply::sse(anthropic_tool_call(
            "c1",
            "bash",
            &json!({"command": "echo from-the-helper > made.txt"}),
        )),
    );
    mock.push(Reply::sse(anthropic_text("Made it.", 10)));
    mock.push(Reply::sse(anthropic_text("The helper made it.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    let id = acp
        .send("session/prompt", prompt(&session, "Make a file."))
        .await;
    let (response, messages) = acp.drive(id, |_, _| selected("allow_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let asked = requests_of(&messages, "session/request_permission");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let question = &asked[0]["params"];
    // Asked in the parent's session (this client shows no helpers), under
    // an id of its own, naming the helper.
    assert_eq!(question["sessionId"], session.as_str());
    assert_ne!(question["toolCall"]["toolCallId"], "c1");
    let title = question["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.starts_with("Helper `general-purpose` wants to run:"),
        "{title}"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("made.txt")).unwrap(),
        "from-the-helper\n"
    );
    let results = tool_results(&mock, 3);
    assert!(results[0].2.starts_with("Made it."), "{results:?}");
}

/// "Always allow" answered to a helper holds for its parent and its
/// next helpers, as the same answer given to the parent would: they share
/// the session's remembered answers.
#[tokio::test]
async fn always_allow_answered_to_a_helper_holds_for_its_parent_and_the_next_helper() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let append = json!({"command": "echo line >> log.txt"});
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &serde_json::from_str(&task("first", "JOB-FIRST", None)).unwrap(),
    )));
    mock.push_for(
        "JOB-FIRST",
        Reply::sse(anthropic_tool_call("c1", "bash", &append)),
    );
    mock.push(Reply::sse(anthropic_text("First done.", 10)));
    mock.push(Reply::sse(anthropic_tool_call(
        "t2",
        "task",
        &serde_json::from_str(&task("second", "JOB-SECOND", None)).unwrap(),
    )));
    mock.push_for(
        "JOB-SECOND",
        Reply::sse(anthropic_tool_call("c2", "bash", &append)),
    );
    mock.push(Reply::sse(anthropic_text("Second done.", 10)));
    mock.push(Reply::sse(anthropic_tool_call("p1", "bash", &append)));
    mock.push(Reply::sse(anthropic_text("All three wrote.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    let id = acp
        .send("session/prompt", prompt(&session, "Write three lines."))
        .await;
    let (response, messages) = acp.drive(id, |_, _| selected("allow_always")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let asked = requests_of(&messages, "session/request_permission");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.starts_with("Helper `general-purpose` wants to run:"),
        "{title}"
    );
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("log.txt")).unwrap(),
        "line\nline\nline\n"
    );
}

#[tokio::test]
async fn a_definition_only_narrows_the_tools_its_parent_has() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.home().join("agents")).unwrap();
    std::fs::write(
        sandbox.home().join("agents/reader.md"),
        "---\nname: reader\ndescription: Reads and reports\ntools: Read, Grep, Bash\n---\nYou only read.\n",
    )
    .unwrap();
    // The user's policy takes `bash` away from every session.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[tools]\ndeny = [\"bash\"]\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &serde_json::from_str(&task("read it", "JOB-READ", Some("reader"))).unwrap(),
    )));
    mock.push_for(
        "JOB-READ",
        Reply::sse(anthropic_tool_calls(&[
            ("c1", "bash", r#"{"command":"echo no"}"#),
            ("c2", "write", r#"{"path":"x.txt","content":"no"}"#),
        ])),
    );
    mock.push(Reply::sse(anthropic_text("Could not.", 10)));
    mock.push(Reply::sse(anthropic_text("OK.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    let id = acp.send("session/prompt", prompt(&session, "Read.")).await;
    let (response, messages) = acp.drive(id, |_, _| selected("allow_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(requests_of(&messages, "session/request_permission").is_empty());
    // The task tool lists the definition.
    let offered = mock.requests()[0].body["tools"].clone();
    let task_tool = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "task")
        .unwrap();
    assert!(
        task_tool["description"]
            .as_str()
            .unwrap()
            .contains("- reader: Reads and reports")
    );
    // The helper is offered read and grep: not bash (its parent may not),
    // not write (its definition does not list it).
    let child = &mock.requests()[1].body;
    let tools: Vec<&str> = child["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["read", "grep"], "{tools:?}");
    assert!(child["system"].to_string().contains("You only read."));
    let refused = tool_results(&mock, 2);
    assert!(
        refused.iter().all(|(_, is_error, _)| *is_error),
        "{refused:?}"
    );
    assert!(refused[0].2.contains("not available"), "{refused:?}");
    assert!(!sandbox.work().join("x.txt").exists());
}

/// Reads messages, answering permission questions with "allow once",
/// until `done` holds; it is asked with each message and every 50 ms
/// (`None`), as what it waits for may come without a message.
async fn read_until(acp: &mut Acp, mut done: impl FnMut(Option<&Value>) -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "waited too long");
        let message = tokio::time::timeout(Duration::from_millis(50), acp.next())
            .await
            .ok();
        if let Some(message) = &message
            && message["method"] == "session/request_permission"
        {
            let id = message["id"].clone();
            acp.respond(&id, selected("allow_once")).await;
        }
        if done(message.as_ref()) {
            return;
        }
    }
}

#[tokio::test]
async fn cancelling_one_helper_ends_only_it_and_its_command() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = support::acp_client::unique_sleep();
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("t1", "task", &task("wait long", "JOB-SLOW", None)),
        ("t2", "task", &task("answer fast", "JOB-FAST", None)),
    ])));
    mock.push_for(
        "JOB-SLOW",
        Reply::sse(anthropic_tool_call(
            "c1",
            "bash",
            &json!({"command": format!("sleep {sleeper}")}),
        )),
    );
    mock.push_for("JOB-FAST", Reply::sse(anthropic_text("fast answer", 10)));
    mock.push(Reply::sse(anthropic_text("One was stopped.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({"subagents": {}})).await;
    let id = acp.send("session/prompt", prompt(&session, "Go.")).await;
    let mut slow = None;
    read_until(&mut acp, |m| {
        let update = &m.unwrap_or(&Value::Null)["params"]["update"];
        if update["sessionUpdate"] == "subagent_update" && update["title"] == "wait long" {
            slow = update["sessionId"].as_str().map(str::to_string);
        }
        slow.is_some() && process_running(&sleeper)
    })
    .await;
    let slow = slow.expect("the slow helper was not announced");
    acp.notify("session/cancel", json!({"sessionId": slow}))
        .await;
    let (response, _) = acp.until_response(id).await;
    // The parent goes on: its run ends normally, with the other helper's
    // answer and a result saying the user stopped this one.
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = tool_results(&mock, mock.requests().len() - 1);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].2.starts_with("The user stopped this helper"),
        "{results:?}"
    );
    assert!(results[1].2.starts_with("fast answer"), "{results:?}");
    support::wait_until("the command of the stopped helper ended", TIMEOUT, || {
        !process_running(&sleeper)
    })
    .await;
    let child = entries_of(&sandbox.home(), &slow);
    assert_eq!(child.last().unwrap()["stop"], "cancelled", "{child:?}");
}

#[tokio::test]
async fn cancelling_the_parent_ends_every_helper_and_its_commands() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleepers = [
        support::acp_client::unique_sleep(),
        support::acp_client::unique_sleep(),
    ];
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("t1", "task", &task("one", "JOB-ONE", None)),
        ("t2", "task", &task("two", "JOB-TWO", None)),
    ])));
    for (job, sleeper) in ["JOB-ONE", "JOB-TWO"].iter().zip(&sleepers) {
        mock.push_for(
            job,
            Reply::sse(anthropic_tool_call(
                "c1",
                "bash",
                &json!({"command": format!("sleep {sleeper}")}),
            )),
        );
    }
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    let id = acp.send("session/prompt", prompt(&session, "Go.")).await;
    read_until(&mut acp, |_| sleepers.iter().all(|s| count_running(s) == 1)).await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "cancelled", "{response}");
    support::wait_until("the helpers' commands ended", TIMEOUT, || {
        sleepers.iter().all(|s| !process_running(s))
    })
    .await;
    let children: Vec<Value> = headers(&sandbox.home())
        .into_iter()
        .filter(|h| h["spawnedBy"] == session.as_str())
        .collect();
    assert_eq!(children.len(), 2);
    for child in children {
        let entries = entries_of(&sandbox.home(), child["id"].as_str().unwrap());
        assert_eq!(entries.last().unwrap()["stop"], "cancelled", "{entries:?}");
    }
    // Only the parent's first call reached the model after the helpers'.
    assert_eq!(mock.requests().len(), 3);
}

#[tokio::test]
async fn after_a_kill_the_parent_and_its_helpers_load_and_the_helpers_show_as_interrupted() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = support::acp_client::unique_sleep();
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("t1", "task", &task("first", "JOB-1", None)),
        ("t2", "task", &task("second", "JOB-2", None)),
    ])));
    for job in ["JOB-1", "JOB-2"] {
        mock.push_for(
            job,
            Reply::sse(anthropic_tool_call(
                "c1",
                "bash",
                &json!({"command": format!("sleep {sleeper}")}),
            )),
        );
    }
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    acp.send("session/prompt", prompt(&session, "Go.")).await;
    read_until(&mut acp, |_| {
        mock.requests().len() == 3 && count_running(&sleeper) == 2
    })
    .await;
    acp.child.start_kill().unwrap();
    acp.wait_exit().await;
    let _ = std::process::Command::new("pkill")
        .args(["-f", &sleeper])
        .status();

    // Listed under their parent, marked as interrupted.
    let listed = sandbox
        .command(&["sessions", "list", "--json"])
        .output()
        .await
        .unwrap();
    let rows: Vec<Value> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let helpers: Vec<&Value> = rows
        .iter()
        .filter(|r| r["spawnedBy"] == session.as_str())
        .collect();
    assert_eq!(helpers.len(), 2, "{rows:?}");
    assert!(
        helpers.iter().all(|h| h["interrupted"] == true),
        "{helpers:?}"
    );
    let text = sandbox
        .command(&["sessions", "list"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let parent_line = lines.iter().position(|l| l.starts_with(&session)).unwrap();
    for line in &lines[parent_line + 1..parent_line + 3] {
        assert!(
            line.starts_with("└ helper `general-purpose` (interrupted): sess_"),
            "{text}"
        );
    }

    // A client that shows helpers gets them with the parent's replay.
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({"subagents": {}})).await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, messages) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let updates = notifications(&messages, "session/update");
    let announced: Vec<&Value> = updates
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .map(|m| &m["params"]["update"])
        .collect();
    assert_eq!(announced.len(), 2, "{announced:?}");
    for helper in &announced {
        // Interrupted: no state is claimed for it.
        assert!(helper.get("state").is_none(), "{helper}");
        let child = helper["sessionId"].as_str().unwrap();
        let of_child: Vec<&Value> = updates
            .iter()
            .filter(|m| m["params"]["sessionId"] == child)
            .map(|m| &m["params"]["update"])
            .collect();
        assert!(
            of_child
                .iter()
                .any(|u| u["sessionUpdate"] == "user_message_chunk"),
            "{of_child:?}"
        );
        assert!(
            of_child.iter().any(|u| u["sessionUpdate"] == "tool_call"),
            "{of_child:?}"
        );
    }
    // ACP's session/list lists the parent, not its helpers.
    let listed = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [session.as_str()], "{listed}");
    // A helper loads on its own too.
    let child = announced[0]["sessionId"].as_str().unwrap().to_string();
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": child, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    // The parent goes on: its cut-off task calls have results.
    mock.push(Reply::sse(anthropic_text("Starting again.", 10)));
    let id = acp.send("session/prompt", prompt(&session, "Again?")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn a_headless_run_starts_helpers_and_prints_them_as_an_editor_would_get_them() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("t1", "task", &task("count files", "JOB-COUNT", None)),
        ("t2", "task", &task("name files", "JOB-NAME", None)),
    ])));
    mock.push_for("JOB-COUNT", Reply::sse(anthropic_text("There are 3.", 10)));
    mock.push_for("JOB-NAME", Reply::sse(anthropic_text("a, b, c", 10)));
    mock.push(Reply::sse(anthropic_text("3 files: a, b, c.", 10)));
    let mut cmd = sandbox.command(&["run", "--output-format", "stream-json", "Count and name."]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .stdin(std::process::Stdio::null());
    let out = cmd.output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let session = lines[0]["session_id"].as_str().unwrap().to_string();
    assert!(
        lines[0]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("task")),
        "{}",
        lines[0]
    );
    let result = lines.last().unwrap();
    assert_eq!(result["result"], "3 files: a, b, c.");
    let results = tool_results(&mock, 3);
    assert!(results[0].2.starts_with("There are 3."), "{results:?}");
    assert!(results[1].2.starts_with("a, b, c"), "{results:?}");
    // Each helper is announced on the run's session before its own
    // updates, which carry its id.
    let announced: Vec<String> = lines
        .iter()
        .filter(|l| l["params"]["update"]["sessionUpdate"] == "subagent_update")
        .filter(|l| l["params"]["update"]["state"]["state"] == "running")
        .map(|l| {
            assert_eq!(l["params"]["sessionId"], session.as_str());
            l["params"]["update"]["sessionId"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(announced.len(), 2, "{lines:?}");
    for child in &announced {
        let first_own = lines
            .iter()
            .position(|l| l["params"]["sessionId"] == child.as_str())
            .unwrap();
        let announcement = lines
            .iter()
            .position(|l| l["params"]["update"]["sessionId"] == child.as_str())
            .unwrap();
        assert!(announcement < first_own);
        let entries = entries_of(&sandbox.home(), child);
        assert_eq!(entries.last().unwrap()["type"], "helper_end");
    }
    // Listed under the run's session as helpers that ended, not as
    // interrupted ones.
    let listed = sandbox
        .command(&["sessions", "list"])
        .output()
        .await
        .unwrap();
    let listed = String::from_utf8(listed.stdout).unwrap();
    let helpers: Vec<&str> = listed
        .lines()
        .filter(|l| l.starts_with("└ helper"))
        .collect();
    assert_eq!(helpers.len(), 2, "{listed}");
    assert!(
        helpers
            .iter()
            .all(|l| l.starts_with("└ helper `general-purpose`: sess_")),
        "{listed}"
    );
}

/// A prompt whose two helpers each run `sleep <marker>`, in bypass mode;
/// returns once both commands run.
async fn helpers_sleeping(sandbox: &Sandbox, mock: &MockModel, marker: &str) -> (Acp, String) {
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("t1", "task", &task("one", "JOB-ONE", None)),
        ("t2", "task", &task("two", "JOB-TWO", None)),
    ])));
    for job in ["JOB-ONE", "JOB-TWO"] {
        mock.push_for(
            job,
            Reply::sse(anthropic_tool_call(
                "c1",
                "bash",
                &json!({"command": format!("sleep {marker}")}),
            )),
        );
    }
    let (mut acp, session) = start(sandbox, mock, json!({})).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    acp.send("session/prompt", prompt(&session, "Go.")).await;
    read_until(&mut acp, |_| count_running(marker) == 2).await;
    (acp, session)
}

#[tokio::test]
async fn closing_the_session_or_ending_pincer_leaves_no_helper_process_behind() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let marker = support::acp_client::unique_sleep();
    let (mut acp, session) = helpers_sleeping(&sandbox, &mock, &marker).await;
    let closed = acp
        .call("session/close", json!({"sessionId": session}))
        .await;
    assert!(closed.get("error").is_none(), "{closed}");
    support::wait_until("the helpers' commands ended", TIMEOUT, || {
        count_running(&marker) == 0
    })
    .await;

    // pincer told to stop (the editor quits) ends them before it exits.
    let marker = support::acp_client::unique_sleep();
    let (mut acp, _) = helpers_sleeping(&sandbox, &mock, &marker).await;
    let pid = acp.child.id().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    acp.wait_exit().await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        count_running(&marker),
        0,
        "a helper's command outlived pincer"
    );
}

#[tokio::test]
async fn a_background_helper_outlives_the_turn_and_its_answer_reaches_the_user_and_the_next_turn() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gate = Arc::new(Notify::new());
    let args =
        json!({"description": "survey the code", "prompt": "JOB-BG: survey", "background": true});
    mock.push(Reply::sse(anthropic_tool_call("t1", "task", &args)));
    mock.push_for("JOB-BG", gated("The survey is done: 3 modules.", &gate));
    mock.push(Reply::sse(anthropic_text("I started a helper.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({"session": {"notices": {}}})).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "Survey it in the background."),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The call answered at once, with the task's id (the helper's request
    // and the parent's next one race).
    let started = (0..mock.requests().len())
        .map(|i| tool_results(&mock, i))
        .find(|results| results.iter().any(|(id, _, _)| id == "t1"))
        .unwrap();
    assert!(
        started[0]
            .2
            .starts_with("Started in the background as task t1"),
        "{started:?}"
    );
    // The offered task tool says it can do that.
    let offered = mock.requests()[0].body["tools"].to_string();
    assert!(offered.contains("\"background\""), "{offered}");

    // `/tasks` lists it, running.
    let id = acp.send("session/prompt", prompt(&session, "/tasks")).await;
    let (_, messages) = acp.until_response(id).await;
    let said: String = updates_of(&messages)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("t1 — Helper `general-purpose`: survey the code (running"),
        "{said}"
    );

    // It finishes after the turn: the user is told at once.
    gate.notify_one();
    let notice = loop {
        let message = acp.next().await;
        if message["params"]["update"]["sessionUpdate"] == "notice" {
            break message;
        }
    };
    assert_eq!(notice["params"]["sessionId"], session.as_str());
    assert_eq!(
        notice["params"]["update"]["title"],
        "Background task t1 finished"
    );
    let description = notice["params"]["update"]["description"].as_str().unwrap();
    assert!(description.contains("The survey is done"), "{description}");

    // And the model reads it with the next prompt, once.
    mock.push(Reply::sse(anthropic_text("It found 3 modules.", 10)));
    mock.push(Reply::sse(anthropic_text("Nothing new.", 10)));
    for text in ["What did it find?", "Anything else?"] {
        let id = acp.send("session/prompt", prompt(&session, text)).await;
        let (response, _) = acp.until_response(id).await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    let requests = mock.requests();
    let next = last_message_text(&requests[requests.len() - 2].body);
    assert!(
        next.contains("[Background task t1 (Helper `general-purpose`: survey the code) finished]"),
        "{next}"
    );
    assert!(next.contains("The survey is done: 3 modules."), "{next}");
    assert!(next.contains("What did it find?"), "{next}");
    let after = last_message_text(&requests[requests.len() - 1].body);
    assert!(!after.contains("Background task"), "{after}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn tasks_stop_ends_a_background_helper_and_its_command() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = support::acp_client::unique_sleep();
    let args = json!({"description": "wait", "prompt": "JOB-WAIT", "background": true});
    mock.push(Reply::sse(anthropic_tool_call("t1", "task", &args)));
    mock.push_for(
        "JOB-WAIT",
        Reply::sse(anthropic_tool_call(
            "c1",
            "bash",
            &json!({"command": format!("sleep {sleeper}")}),
        )),
    );
    mock.push(Reply::sse(anthropic_text("Started.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "Wait in the background."),
        )
        .await;
    acp.until_response(id).await;
    support::wait_until("the background command runs", TIMEOUT, || {
        count_running(&sleeper) == 1
    })
    .await;
    let id = acp
        .send("session/prompt", prompt(&session, "/tasks stop t1"))
        .await;
    let (_, messages) = acp.until_response(id).await;
    let said: String = updates_of(&messages)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(said.contains("Stopping background task t1"), "{said}");
    support::wait_until("the stopped helper's command ended", TIMEOUT, || {
        count_running(&sleeper) == 0
    })
    .await;
    // Without notices, the end is told as agent text.
    let told = loop {
        let message = acp.next().await;
        if let Some(text) = message["params"]["update"]["content"]["text"].as_str()
            && text.contains("Background task t1 was stopped")
        {
            break text.to_string();
        }
    };
    assert!(told.contains("The user stopped this helper"), "{told}");
}

#[tokio::test]
async fn a_definition_chooses_its_model_and_depth_limits_hold() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.home().join("agents")).unwrap();
    std::fs::write(
        sandbox.home().join("agents/cheap.md"),
        "---\nname: cheap\ndescription: A quick look on a small model\nmodel: openai/gpt-5-mini\n---\nBe brief.\n",
    )
    .unwrap();
    // Helpers may not start helpers of their own.
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[subagents]\nmax_depth = 1\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "quick look", "prompt": "JOB-CHEAP", "agent": "cheap"}),
    )));
    mock.push_for("JOB-CHEAP", Reply::fixture("openai/text.sse"));
    mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("OPENAI_API_KEY", "openai-test-key")
        .env("OPENAI_BASE_URL", mock.openai_url());
    let mut acp = Acp::spawn(cmd);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "Look.")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    // The helper's call went to OpenAI, with OpenAI's key and model.
    let child = &requests[1];
    assert_eq!(child.path, "/v1/chat/completions");
    assert_eq!(child.body["model"], "gpt-5-mini");
    assert_eq!(
        child.header("authorization"),
        Some("Bearer openai-test-key")
    );
    let tools: Vec<&str> = child.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(!tools.contains(&"task"), "{tools:?}");
    assert!(tools.contains(&"read"), "{tools:?}");
    // The parent still has it.
    assert!(requests[0].body["tools"].to_string().contains("\"task\""));
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn jetbrains_air_gets_async_task_updates_and_stops_a_task() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let sleeper = support::acp_client::unique_sleep();
    let args = json!({"description": "build it", "prompt": "JOB-BUILD", "background": true});
    mock.push(Reply::sse(anthropic_tool_call("call_bg", "task", &args)));
    mock.push_for(
        "JOB-BUILD",
        Reply::sse(anthropic_tool_call(
            "c1",
            "bash",
            &json!({"command": format!("sleep {sleeper}")}),
        )),
    );
    mock.push(Reply::sse(anthropic_text(
        "Building in the background.",
        10,
    )));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let init = acp
        .initialize_with(json!({"_meta": {"jetbrains": {"air": {"version": 1, "capabilities": ["asyncTasks"]}}}}))
        .await;
    let advertised = &init["_meta"]["jetbrains"]["air"]["capabilities"];
    assert!(
        advertised
            .as_array()
            .unwrap()
            .contains(&json!("asyncTasks")),
        "{init}"
    );
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    let id = acp.send("session/prompt", prompt(&session, "Build.")).await;
    let (_, messages) = acp.until_response(id).await;
    let spawned = notifications(&messages, "session/update")
        .into_iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "async_task_spawned")
        .expect("no async_task_spawned");
    assert_eq!(spawned["params"]["sessionId"], session.as_str());
    let update = &spawned["params"]["update"];
    assert_eq!(update["asyncTaskId"], "t1");
    assert_eq!(update["toolCallId"], "call_bg");
    assert_eq!(update["taskType"], "subagent");
    assert_eq!(update["canStop"], true);
    assert_eq!(update["name"], "Helper `general-purpose`: build it");
    support::wait_until("the background command runs", TIMEOUT, || {
        count_running(&sleeper) == 1
    })
    .await;
    let stopped = acp
        .call(
            "_session/async_task/stop",
            json!({"sessionId": session, "asyncTaskId": "t1"}),
        )
        .await;
    assert_eq!(stopped, json!({"stopped": true}));
    let state = loop {
        let message = acp.next().await;
        if message["params"]["update"]["sessionUpdate"] == "async_task_state_update" {
            break message;
        }
    };
    assert_eq!(state["params"]["update"]["asyncTaskId"], "t1");
    assert_eq!(state["params"]["update"]["state"], "stopped");
    support::wait_until("the stopped task's command ended", TIMEOUT, || {
        count_running(&sleeper) == 0
    })
    .await;
    // A task that is not running cannot be stopped again.
    let again = acp
        .call(
            "_session/async_task/stop",
            json!({"sessionId": session, "asyncTaskId": "t1"}),
        )
        .await;
    assert_eq!(again, json!({"stopped": false}));
}

#[tokio::test]
async fn a_process_that_ends_after_the_turn_is_reported_and_one_the_model_saw_end_is_not() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        (
            "c1",
            "process",
            r#"{"action":"start","command":"sleep 2; echo built-it"}"#,
        ),
        (
            "c2",
            "process",
            // Silent, so that its start call waits for its end (up to a
            // second) rather than for 200 ms of quiet after its output,
            // which a loaded machine may take to reap it in.
            r#"{"action":"start","command":"exit 0"}"#,
        ),
    ])));
    mock.push(Reply::sse(anthropic_text("Both started.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({"session": {"notices": {}}})).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    let id = acp.send("session/prompt", prompt(&session, "Build.")).await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // The quick one ended while its start call waited: the model saw it.
    let notice = loop {
        let message = acp.next().await;
        if message["params"]["update"]["sessionUpdate"] == "notice" {
            break message;
        }
    };
    assert_eq!(
        notice["params"]["update"]["title"],
        "Background task t1 finished"
    );
    let description = notice["params"]["update"]["description"].as_str().unwrap();
    assert!(
        description.contains("`sleep 2; echo built-it` exited with code 0. Last output:\nbuilt-it"),
        "{description}"
    );
    // /tasks shows both, ended.
    let id = acp.send("session/prompt", prompt(&session, "/tasks")).await;
    let (_, messages) = acp.until_response(id).await;
    let said: String = updates_of(&messages)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(
        said.contains("t1 — Process p1: `sleep 2; echo built-it` (finished)"),
        "{said}"
    );
    assert!(
        said.contains("t2 — Process p2: `exit 0` (finished)"),
        "{said}"
    );
    // The next prompt carries the one the model did not see end.
    mock.push(Reply::sse(anthropic_text("It built.", 10)));
    let id = acp
        .send("session/prompt", prompt(&session, "Did it build?"))
        .await;
    acp.until_response(id).await;
    let last = last_message_text(&mock.requests().last().unwrap().body);
    assert!(last.contains("[Background task t1 (Process p1"), "{last}");
    assert!(!last.contains("t2"), "{last}");
    // No notice came for the quick one.
    assert!(
        !messages
            .iter()
            .any(|m| m.to_string().contains("Background task t2")),
        "{messages:?}"
    );
}

#[tokio::test]
async fn a_session_runs_at_most_max_parallel_background_helpers() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[subagents]\nmax_parallel = 1\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    let gate = Arc::new(Notify::new());
    let one = json!({"description": "one", "prompt": "JOB-ONE", "background": true}).to_string();
    let two = json!({"description": "two", "prompt": "JOB-TWO", "background": true}).to_string();
    mock.push(Reply::sse(anthropic_tool_calls(&[
        ("t1", "task", &one),
        ("t2", "task", &two),
    ])));
    mock.push_for("JOB-ONE", gated("one done", &gate));
    mock.push(Reply::sse(anthropic_text("One runs.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({})).await;
    let id = acp
        .send("session/prompt", prompt(&session, "Two at once."))
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = (0..mock.requests().len())
        .map(|i| tool_results(&mock, i))
        .find(|r| r.len() == 2)
        .unwrap();
    assert!(
        results[0].2.starts_with("Started in the background"),
        "{results:?}"
    );
    assert!(results[1].1, "{results:?}");
    assert!(
        results[1].2.contains("already run in the background"),
        "{results:?}"
    );
    // The refused one never reached the model.
    assert!(requests_for(&mock, "JOB-TWO").is_empty());
    gate.notify_one();
}

#[tokio::test]
async fn a_client_that_shows_helpers_is_asked_under_the_helpers_session() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "make a file", "prompt": "JOB-MAKE"}),
    )));
    mock.push_for(
        "JOB-MAKE",
        Reply::sse(anthropic_tool_call(
            "c1",
            "bash",
            &json!({"command": "echo shown > shown.txt"}),
        )),
    );
    mock.push(Reply::sse(anthropic_text("Made.", 10)));
    mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({"subagents": {}})).await;
    let id = acp
        .send("session/prompt", prompt(&session, "Make it."))
        .await;
    let (response, messages) = acp.drive(id, |_, _| selected("allow_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let child = notifications(&messages, "session/update")
        .into_iter()
        .find(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
        .map(|m| m["params"]["update"]["sessionId"].clone())
        .unwrap();
    let asked = requests_of(&messages, "session/request_permission");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["params"]["sessionId"], child);
    assert_eq!(asked[0]["params"]["toolCall"]["toolCallId"], "c1");
    assert!(
        asked[0]["params"]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .starts_with("Helper `general-purpose` wants to run:")
    );
    assert!(sandbox.work().join("shown.txt").exists());
}

#[tokio::test]
async fn a_running_helper_cannot_be_loaded_a_second_time() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gate = Arc::new(Notify::new());
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "slow job", "prompt": "JOB-SLOWLY"}),
    )));
    mock.push_for("JOB-SLOWLY", gated("slow answer", &gate));
    mock.push(Reply::sse(anthropic_text("Done.", 10)));
    let (mut acp, session) = start(&sandbox, &mock, json!({"subagents": {}})).await;
    let id = acp.send("session/prompt", prompt(&session, "Go.")).await;
    let mut child = None;
    read_until(&mut acp, |m| {
        let update = &m.unwrap_or(&Value::Null)["params"]["update"];
        if update["sessionUpdate"] == "subagent_update" {
            child = update["sessionId"].as_str().map(str::to_string);
        }
        child.is_some() && mock.requests().len() == 2
    })
    .await;
    let child = child.unwrap();
    // Loading it while it runs would put a second writer on its
    // transcript: refused.
    let load = acp
        .send(
            "session/load",
            json!({"sessionId": child, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (refused, _) = acp.until_response(load).await;
    let message = refused["error"]["data"].to_string() + &refused["error"]["message"].to_string();
    assert!(message.contains("still running"), "{refused}");
    gate.notify_one();
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // Once it has finished it opens, and its transcript is whole.
    let load = acp
        .send(
            "session/load",
            json!({"sessionId": child, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (loaded, _) = acp.until_response(load).await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let entries = entries_of(&sandbox.home(), &child);
    assert_eq!(entries.last().unwrap()["type"], "helper_end", "{entries:?}");
}
