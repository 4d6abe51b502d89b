//! End-to-end: the client's system prompt (ACP `systemPrompt` on
//! `session/new`, `session/load` and `session/resume`). The real binary
//! talks to the mock model, and each test reads the system prompt the
//! model received: appended after the project's `AGENTS.md`, or in place of
//! pincer's own instructions with tools, environment and context kept;
//! stored with the session for later processes; refused with `-32602`
//! before anything is created when pincer cannot apply it; and the same
//! bytes from one call to the next.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::prompt;
use support::sse::anthropic_text;

/// What pincer puts before appended instructions.
const APPENDED_HEADING: &str = "# Session instructions\nThe client that runs this session gives \
these instructions for it:\n\n";

/// `pincer acp` with an Anthropic key on `mock`, its clock in the
/// sandbox's clock file, no title model (its side calls would only add noise).
fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    if !clock_file(sandbox).exists() {
        set_clock(sandbox, "2026-11-24T09:00:00Z");
    }
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("TZ", "UTC")
        .env("PINCER_CLOCK_FILE", clock_file(sandbox));
    Acp::spawn(cmd)
}

fn clock_file(sandbox: &Sandbox) -> PathBuf {
    sandbox.dir.path().join("clock")
}

fn set_clock(sandbox: &Sandbox, instant: &str) {
    std::fs::write(clock_file(sandbox), instant).unwrap();
}

/// A `systemPrompt` of one text block.
fn system_prompt(mode: &str, text: &str) -> Value {
    json!({"mode": mode, "content": [{"type": "text", "text": text}]})
}

/// `session/new` in the sandbox's project with `system` as its
/// `systemPrompt` (left out when null); the whole response.
async fn new_session_with(acp: &mut Acp, sandbox: &Sandbox, system: Value) -> Value {
    let mut params = json!({"cwd": sandbox.work(), "mcpServers": []});
    if !system.is_null() {
        params["systemPrompt"] = system;
    }
    let id = acp.send("session/new", params).await;
    acp.until_response(id).await.0
}

/// A fresh `pincer acp`, initialized, with a session opened with `system`
/// as its `systemPrompt`: the client and the session's id.
async fn started(sandbox: &Sandbox, mock: &MockModel, system: Value) -> (Acp, String) {
    let mut acp = spawn(sandbox, mock);
    acp.initialize().await;
    let response = new_session_with(&mut acp, sandbox, system).await;
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {response}"))
        .to_string();
    (acp, session)
}

/// Opens `session` with `method` (`session/load` or `session/resume`) and
/// `system` as its `systemPrompt` (left out when null); the whole response.
async fn reopen(acp: &mut Acp, method: &str, session: &str, cwd: &Path, system: Value) -> Value {
    let mut params = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
    if !system.is_null() {
        params["systemPrompt"] = system;
    }
    let id = acp.send(method, params).await;
    acp.until_response(id).await.0
}

/// Prompts `session` once, answered by `answer`; the system prompt the
/// model received.
async fn prompt_once(acp: &mut Acp, mock: &MockModel, session: &str, text: &str) -> String {
    let before = mock.requests().len();
    mock.push(Reply::sse(anthropic_text("ok", 10)));
    let result = acp.call("session/prompt", prompt(session, text)).await;
    assert_eq!(result, json!({"stopReason": "end_turn"}));
    let requests = mock.requests();
    assert_eq!(requests.len(), before + 1);
    system_of(&requests[before].body)
}

fn system_of(body: &Value) -> String {
    body["system"][0]["text"].as_str().unwrap().to_string()
}

/// Every transcript file under the sandbox's sessions directory.
fn transcripts(sandbox: &Sandbox) -> Vec<PathBuf> {
    let Ok(dirs) = std::fs::read_dir(sandbox.home().join("sessions")) else {
        return Vec::new();
    };
    dirs.flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).unwrap().flatten())
        .map(|f| f.path())
        .collect()
}

/// The part of `text` from the line `heading` up to the line `until`
/// (exclusive; to the end when `None`).
fn section<'a>(text: &'a str, heading: &str, until: Option<&str>) -> &'a str {
    let start = text
        .find(&format!("{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading} in {text}"));
    let end = until.map_or(text.len(), |until| {
        start
            + text[start..]
                .find(&format!("\n{until}\n"))
                .unwrap_or_else(|| panic!("no {until} after {heading} in {text}"))
            + 1
    });
    &text[start..end]
}

#[tokio::test]
async fn initialize_advertises_append_and_override() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    let result = acp.initialize().await;
    assert_eq!(
        result["agentCapabilities"]["sessionCapabilities"]["systemPrompt"],
        json!({"mode": {"override": {}}})
    );
}

/// Append: pincer's whole prompt, the project's AGENTS.md in it, and then
/// the client's text under a heading of its own.
#[tokio::test]
async fn appended_instructions_come_after_the_projects_agents_md() {
    let sandbox = Sandbox::new();
    sandbox.write("AGENTS.md", "Project rule: indent with tabs.\n");
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let plain = acp.new_session(&sandbox.work()).await;
    let default = prompt_once(&mut acp, &mock, &plain, "hello").await;
    let response = new_session_with(
        &mut acp,
        &sandbox,
        json!({"mode": "append", "content": [
            {"type": "text", "text": "Answer in French."},
            {"type": "text", "text": "Sign with -- Nib."}
        ]}),
    )
    .await;
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    let system = prompt_once(&mut acp, &mock, &session, "hello").await;

    assert_eq!(
        system,
        format!("{default}\n{APPENDED_HEADING}Answer in French.\n\nSign with -- Nib.\n")
    );
    let rule = system.find("Project rule: indent with tabs.").unwrap();
    assert!(rule < system.find("Answer in French.").unwrap(), "{system}");
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// Override: the client's text in place of pincer's identity (and the
/// workspace's SOUL.md) and safety rules; the tool list, environment and
/// the project's context stay as they were, and so do the tools offered.
#[tokio::test]
async fn overriding_instructions_replace_pincers_but_keep_tools_environment_and_context() {
    let sandbox = Sandbox::new();
    sandbox.write("AGENTS.md", "Project rule: indent with tabs.\n");
    let soul = sandbox.home().join("agents/main/workspace/SOUL.md");
    std::fs::create_dir_all(soul.parent().unwrap()).unwrap();
    std::fs::write(&soul, "I am Pinch, cheerful and loud.\n").unwrap();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let plain = acp.new_session(&sandbox.work()).await;
    let default = prompt_once(&mut acp, &mock, &plain, "hello").await;
    let response = new_session_with(
        &mut acp,
        &sandbox,
        system_prompt("override", "You are Nib, a terse code reviewer."),
    )
    .await;
    let session = response["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();

    let system = prompt_once(&mut acp, &mock, &session, "hello").await;

    // The default prompt is identity, tools, safety, environment and on.
    assert!(default.starts_with("# Identity\n"), "{default}");
    assert!(default.contains("I am Pinch"), "{default}");
    let tools = section(&default, "# Tools", Some("# Safety"));
    let rest = section(&default, "# Environment", None);
    assert!(rest.contains("Project rule: indent with tabs."), "{rest}");
    assert_eq!(
        system,
        format!("You are Nib, a terse code reviewer.\n\n{tools}{rest}")
    );
    let requests = mock.requests();
    assert_eq!(requests[1].body["tools"], requests[0].body["tools"]);
    assert_eq!(mock.violations(), Vec::<String>::new());
}

/// Stored with the session: a new process that loads or resumes it without
/// `systemPrompt` sends the model the same system prompt.
#[tokio::test]
async fn the_prompt_is_kept_by_load_and_resume_in_a_new_process() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let (mut acp, session) = started(
        &sandbox,
        &mock,
        system_prompt("append", "Answer in French."),
    )
    .await;
    let first = prompt_once(&mut acp, &mock, &session, "hello").await;
    assert!(
        first.ends_with(&format!("\n{APPENDED_HEADING}Answer in French.\n")),
        "{first}"
    );
    drop(acp);

    for method in ["session/load", "session/resume"] {
        let mut acp = spawn(&sandbox, &mock);
        acp.initialize().await;
        let response = reopen(&mut acp, method, &session, &sandbox.work(), Value::Null).await;
        assert!(response.get("error").is_none(), "{method}: {response}");
        let again = prompt_once(&mut acp, &mock, &session, "encore").await;
        assert_eq!(again, first, "{method}");
    }
}

/// A load with a different prompt replaces the stored one, for this
/// process and for the next one that loads without any.
#[tokio::test]
async fn a_load_with_another_prompt_replaces_the_stored_one() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let (mut acp, session) = started(
        &sandbox,
        &mock,
        system_prompt("append", "Answer in French."),
    )
    .await;
    prompt_once(&mut acp, &mock, &session, "hello").await;
    drop(acp);

    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let response = reopen(
        &mut acp,
        "session/load",
        &session,
        &sandbox.work(),
        system_prompt("override", "You are Nib, a terse code reviewer."),
    )
    .await;
    assert!(response.get("error").is_none(), "{response}");
    let replaced = prompt_once(&mut acp, &mock, &session, "again").await;
    assert!(
        replaced.starts_with("You are Nib, a terse code reviewer.\n\n# Tools\n"),
        "{replaced}"
    );
    assert!(!replaced.contains("Answer in French."), "{replaced}");
    drop(acp);

    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let response = reopen(
        &mut acp,
        "session/resume",
        &session,
        &sandbox.work(),
        Value::Null,
    )
    .await;
    assert!(response.get("error").is_none(), "{response}");
    let kept = prompt_once(&mut acp, &mock, &session, "and again").await;
    assert_eq!(kept, replaced);
}

/// What pincer cannot apply is refused with -32602: no session is created
/// (no file, nothing listed) and none is loaded (no replay, a prompt for
/// it is not found, the model hears nothing).
#[tokio::test]
async fn an_unusable_prompt_is_refused_and_nothing_is_created_or_loaded() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let bad = [
        (
            system_prompt("replace_all", "You are Nib."),
            "systemPrompt.mode `replace_all` is not supported: pincer supports `append` and \
             `override`; send one of those",
        ),
        (
            json!({"mode": "append", "content": [
                {"type": "text", "text": "Look at this."},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
            ]}),
            "systemPrompt.content[1] is a `image` block: a system prompt may only hold `text` \
             blocks; send its text instead",
        ),
        (
            json!({"mode": "append", "content": []}),
            "systemPrompt.content has no text: send at least one non-empty `text` block, or \
             leave systemPrompt out to keep the session's instructions",
        ),
    ];
    for (system, message) in &bad {
        let response = new_session_with(&mut acp, &sandbox, system.clone()).await;
        assert_eq!(
            response["error"],
            json!({"code": -32602, "message": "Invalid params", "data": {"message": message}}),
            "{system}"
        );
    }
    let list = acp
        .call("session/list", json!({"cwd": sandbox.work()}))
        .await;
    assert_eq!(list["sessions"], json!([]));
    assert_eq!(transcripts(&sandbox), Vec::<PathBuf>::new());

    // A stored session, then loads and resumes that are refused.
    let session = acp.new_session(&sandbox.work()).await;
    prompt_once(&mut acp, &mock, &session, "hello").await;
    drop(acp);
    for method in ["session/load", "session/resume"] {
        for (system, message) in &bad {
            let mut acp = spawn(&sandbox, &mock);
            acp.initialize().await;
            let mut params = json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []});
            params["systemPrompt"] = system.clone();
            let id = acp.send(method, params).await;
            let (response, before) = acp.until_response(id).await;
            assert_eq!(
                response["error"],
                json!({"code": -32602, "message": "Invalid params", "data": {"message": message}}),
                "{method} {system}"
            );
            assert_eq!(updates_of(&before), Vec::<Value>::new(), "{method}");
            let id = acp
                .send("session/prompt", prompt(&session, "still there?"))
                .await;
            let (response, _) = acp.until_response(id).await;
            assert!(response["error"].is_object(), "{method}: {response}");
        }
    }
    assert_eq!(mock.requests().len(), 1);
}

/// The prefix cache stays warm: two prompts an hour apart send the same
/// system prompt (with the client's text in it) and tools, and the second
/// request repeats the first one's messages.
#[tokio::test]
async fn the_request_prefix_stays_identical_across_prompts() {
    let sandbox = Sandbox::new();
    set_clock(&sandbox, "2026-11-24T09:00:00Z");
    let mock = MockModel::start().await;
    let (mut acp, session) = started(
        &sandbox,
        &mock,
        system_prompt("append", "Answer in French."),
    )
    .await;
    prompt_once(&mut acp, &mock, &session, "hello").await;
    set_clock(&sandbox, "2026-11-24T10:00:00Z");
    prompt_once(&mut acp, &mock, &session, "an hour later").await;

    let requests = mock.requests();
    let (first, second) = (
        without_cache_marks(&requests[0].body),
        without_cache_marks(&requests[1].body),
    );
    assert!(
        system_of(&requests[0].body).ends_with(&format!("{APPENDED_HEADING}Answer in French.\n")),
        "{}",
        system_of(&requests[0].body)
    );
    assert_eq!(second["system"].to_string(), first["system"].to_string());
    assert_eq!(second["tools"].to_string(), first["tools"].to_string());
    let old = first["messages"].as_array().unwrap();
    let new = second["messages"].as_array().unwrap();
    assert!(new.len() > old.len());
    for (index, (old, new)) in old.iter().zip(new).enumerate() {
        assert_eq!(new.to_string(), old.to_string(), "message {index}");
    }
}

/// A request body without Anthropic's cache breakpoints, which move to the
/// newest messages by design and are not part of the cached content.
fn without_cache_marks(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_marks(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_cache_marks).collect()),
        other => other.clone(),
    }
}

/// `pincer run --append-system-prompt`: the same placement as an editor's
/// `append`, after the project's AGENTS.md.
#[tokio::test]
async fn run_appends_instructions_after_the_projects_context() {
    let sandbox = Sandbox::new();
    sandbox.write("AGENTS.md", "Project rule: indent with tabs.\n");
    let mock = MockModel::start().await;
    for args in [
        vec!["run", "hello"],
        vec![
            "run",
            "--append-system-prompt",
            "Answer in French.",
            "hello",
        ],
    ] {
        mock.push(Reply::sse(anthropic_text("ok", 10)));
        let mut cmd = sandbox.command(&args);
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
            .env("TZ", "UTC")
            .stdin(std::process::Stdio::null());
        let out = tokio::time::timeout(std::time::Duration::from_secs(20), cmd.output())
            .await
            .expect("pincer finished")
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    let requests = mock.requests();
    let (default, appended) = (system_of(&requests[0].body), system_of(&requests[1].body));
    assert!(
        default.contains("Project rule: indent with tabs."),
        "{default}"
    );
    assert_eq!(
        appended,
        format!("{default}\n{APPENDED_HEADING}Answer in French.\n")
    );
}
