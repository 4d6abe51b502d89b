//! End-to-end: slash commands over ACP — the `/` menu, and what each
//! command does — with the real binary and the mock model server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::prompt;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;

fn spawn(sandbox: &Sandbox, mock: &MockModel) -> Acp {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "title_model = \"none\"\n",
    )
    .unwrap();
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

/// The menu of a project with nothing of its own: pincer's commands, and
/// its built-in workflows.
const BUILTIN: [&str; 14] = [
    "compact",
    "model",
    "think",
    "mode",
    "sandbox",
    "init",
    "undo",
    "redo",
    "tasks",
    "rewind",
    "workflow",
    "workflow:code-review",
    "workflow:release-notes",
    "workflow:test-fix",
];

fn commands_in(messages: &[Value]) -> Vec<Vec<String>> {
    messages
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .map(|m| {
            m["params"]["update"]["availableCommands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

/// Reads messages until one satisfies `done`; returns them all.
async fn read_until(acp: &mut Acp, done: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let message = acp.next().await;
        let stop = done(&message);
        seen.push(message);
        if stop {
            return seen;
        }
    }
}

fn said(messages: &[Value]) -> String {
    updates_of(messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or_default())
        .collect()
}

fn user_text(body: &Value) -> String {
    let body = &support::without_time_lines(body);
    let last = body["messages"].as_array().unwrap().last().unwrap();
    last["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_menu_lists_commands_skills_and_templates_and_follows_changes() {
    let sandbox = Sandbox::new();
    sandbox.write(
        ".pincer/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Extract text and tables from PDF files\n---\n\nRun scripts/extract.py on the file.\n",
    );
    sandbox.write(".pincer/skills/broken/SKILL.md", "no front matter here\n");
    sandbox.write(
        ".pincer/prompts/review.md",
        "---\ndescription: Review a file for bugs\n---\nReview $1 for bugs and explain each one.\n",
    );
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let announced = read_until(&mut acp, |m| {
        m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    })
    .await;
    assert_eq!(
        commands_in(&announced),
        [[&BUILTIN[..], &["skill:pdf", "review"]].concat()]
    );
    let menu = &announced.last().unwrap()["params"]["update"]["availableCommands"];
    assert_eq!(
        menu[14]["description"],
        "Extract text and tables from PDF files"
    );
    assert_eq!(menu[15]["description"], "Review a file for bugs");
    assert!(menu[0]["input"]["hint"].is_string());
    // The broken skill is reported, naming its file; the rest still works.
    let warning = read_until(&mut acp, |m| {
        m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    })
    .await;
    let warning = said(&warning);
    assert!(
        warning.contains(".pincer/skills/broken/SKILL.md"),
        "{warning}"
    );

    // A skill added during the session shows up at the end of the next
    // turn, before its answer; an unchanged menu is not announced again.
    sandbox.write(
        ".agents/skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy the app\n---\nUse make deploy.\n",
    );
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (_, before) = acp.until_response(id).await;
    let menus = commands_in(&before);
    assert_eq!(menus.len(), 1, "{menus:?}");
    assert!(menus[0].contains(&"skill:deploy".to_string()), "{menus:?}");
    mock.push(Reply::fixture("anthropic/text.sse"));
    let id = acp.send("session/prompt", prompt(&session, "again")).await;
    let (_, before) = acp.until_response(id).await;
    assert!(commands_in(&before).is_empty());
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn commands_change_the_session_or_become_prompts() {
    let sandbox = Sandbox::new();
    sandbox.write(
        ".pincer/skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Work with PDFs\n---\n\nRun scripts/extract.py on the file.\n",
    );
    sandbox.write(".pincer/prompts/review.md", "Review $1 for bugs.\n");
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;

    // /model without an argument shows the current model and the choices.
    let id = acp.send("session/prompt", prompt(&session, "/model")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let text = said(&before);
    assert!(
        text.starts_with("Model: anthropic/claude-sonnet-4-5 (choose from:")
            && text.contains("anthropic/claude-haiku-4-5"),
        "{text}"
    );
    // /model, /think and /mode change the session and say so.
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/model anthropic/claude-haiku-4-5"),
        )
        .await;
    let (_, before) = acp.until_response(id).await;
    let kinds: Vec<Value> = updates_of(&before)
        .iter()
        .map(|u| u["sessionUpdate"].clone())
        .collect();
    assert_eq!(kinds, ["config_option_update", "agent_message_chunk"]);
    assert_eq!(said(&before), "Model set to anthropic/claude-haiku-4-5.\n");
    let id = acp
        .send("session/prompt", prompt(&session, "/think low"))
        .await;
    let (_, before) = acp.until_response(id).await;
    assert_eq!(said(&before), "Thinking set to low.\n");
    let id = acp
        .send("session/prompt", prompt(&session, "/mode plan"))
        .await;
    let (_, before) = acp.until_response(id).await;
    assert_eq!(
        updates_of(&before)[0],
        json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"})
    );
    // Without an argument they report the current value and the choices.
    let id = acp.send("session/prompt", prompt(&session, "/think")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        said(&before),
        "Thinking: low (choose from: off, minimal, low, medium, high)\n"
    );
    let id = acp.send("session/prompt", prompt(&session, "/mode")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(
        said(&before),
        "Mode: plan (choose from: default, accept-edits, plan, bypass)\n"
    );
    let id = acp
        .send("session/prompt", prompt(&session, "/think sideways"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(said(&before).contains("not available"), "{}", said(&before));
    // None of that reached the model.
    assert!(mock.requests().is_empty());

    // /skill:<name>, templates and /init become prompts for the model.
    for (command, expected) in [
        (
            "/skill:pdf split report.pdf",
            "Run scripts/extract.py on the file.",
        ),
        ("/review src/lib.rs", "Review src/lib.rs for bugs."),
        ("/init", "AGENTS.md"),
    ] {
        mock.push(Reply::sse(anthropic_text("on it", 100)));
        acp.call("session/prompt", prompt(&session, command)).await;
        let body = mock.requests().last().unwrap().body.clone();
        assert_eq!(body["model"], "claude-haiku-4-5");
        assert_eq!(body["thinking"]["type"], "enabled");
        let text = user_text(&body);
        assert!(text.contains(expected), "{command}: {text}");
    }
    let skill_prompt = user_text(&mock.requests()[0].body);
    assert!(skill_prompt.ends_with("split report.pdf"), "{skill_prompt}");
    assert!(!skill_prompt.contains("description:"), "{skill_prompt}");
    // An unknown skill answers with the ones there are.
    let id = acp
        .send("session/prompt", prompt(&session, "/skill:nope"))
        .await;
    let (_, before) = acp.until_response(id).await;
    assert!(said(&before).contains("pdf"), "{}", said(&before));
    // A slash that names no command is an ordinary prompt.
    mock.push(Reply::sse(anthropic_text("it is a directory", 100)));
    acp.call("session/prompt", prompt(&session, "/usr/local is what?"))
        .await;
    assert_eq!(
        user_text(&mock.requests().last().unwrap().body),
        "/usr/local is what?"
    );

    // /compact with instructions summarises now and the next turn starts
    // from the summary.
    mock.push_side(Reply::sse(anthropic_text("## Goal\nReview things", 50)));
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/compact keep the file names"),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(
        said(&before).contains("Context compacted"),
        "{}",
        said(&before)
    );
    assert!(
        updates_of(&before)
            .iter()
            .any(|u| u["sessionUpdate"] == "usage_update"),
        "{before:?}"
    );
    let side = mock.side_requests();
    assert_eq!(side.len(), 1);
    let asked = side[0].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(asked.contains("keep the file names"), "{asked}");
    mock.push(Reply::sse(anthropic_text("continuing", 100)));
    acp.call("session/prompt", prompt(&session, "go on")).await;
    let last = mock.requests().last().unwrap().body.clone();
    let first_message = last["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(
        first_message.contains("<summary>\n## Goal\nReview things"),
        "{first_message}"
    );

    // /compact alone compacts without a focus, updating the summary.
    mock.push_side(Reply::sse(anthropic_text("## Goal\nReview more", 50)));
    let id = acp
        .send("session/prompt", prompt(&session, "/compact"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(
        said(&before).contains("Context compacted"),
        "{}",
        said(&before)
    );
    let side = mock.side_requests();
    assert_eq!(side.len(), 2);
    let asked = side[1].body["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(!asked.contains("The user asked for this focus"), "{asked}");
    assert!(
        asked.contains("<previous-summary>\n## Goal\nReview things\n</previous-summary>"),
        "{asked}"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn commands_alone_announce_a_changed_menu_before_they_answer() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let builtin = BUILTIN;
    let announced = read_until(&mut acp, |m| {
        m["params"]["update"]["sessionUpdate"] == "available_commands_update"
    })
    .await;
    assert_eq!(commands_in(&announced), [builtin]);

    // A template added between prompts is announced by the next prompt,
    // even one that never reaches the model …
    sandbox.write(".pincer/prompts/fix.md", "Fix $1.\n");
    let id = acp
        .send("session/prompt", prompt(&session, "/think high"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(said(&before), "Thinking set to high.\n");
    assert_eq!(commands_in(&before), [[&builtin[..], &["fix"]].concat()]);
    // … or one that names a skill there is not.
    std::fs::remove_file(sandbox.work().join(".pincer/prompts/fix.md")).unwrap();
    let id = acp
        .send("session/prompt", prompt(&session, "/skill:nope"))
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert_eq!(commands_in(&before), [builtin]);
    // An unchanged menu is not announced again.
    let id = acp.send("session/prompt", prompt(&session, "/mode")).await;
    let (_, before) = acp.until_response(id).await;
    assert!(commands_in(&before).is_empty(), "{before:?}");
    assert!(mock.requests().is_empty());
}
