//! Helpers (the `task` tool) end to end against the mock model: several
//! at once, their questions, their narrowed tools, cancelling one or all,
//! how an editor sees them (as ACP subagent sessions, or inside the task
//! call), and their transcripts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, TIMEOUT, requests_of, updates_of};
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
