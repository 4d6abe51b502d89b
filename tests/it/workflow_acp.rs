//! End to end: `/workflow` in an editor session. The workflow shows as a
//! plan whose entries change status as steps run, tool steps as ordinary
//! tool calls (the write asks first), llm steps stream; every step is in
//! the transcript, and a run a killed process left behind resumes from its
//! last finished step without running the finished ones again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;
use support::{prompt, selected, spawn_anthropic};

const REVIEW: &str = include_str!("../../fixtures/workflows/review.toml");

fn setup(sandbox: &Sandbox) {
    let dir = sandbox.home().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("review.toml"), REVIEW).unwrap();
    sandbox.write("README.md", "# Title\nTODO: typo\n");
    sandbox.write("src/main.rs", "fn main() {}\n");
}

/// Each plan update as `id:status` per entry.
fn plans(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .map(|u| {
            u["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    // A parallel step's substeps by their own id.
                    let content = e["content"].as_str().unwrap();
                    let id = content.split(" (").next().unwrap();
                    let id = id.rsplit("› ").next().unwrap();
                    let status = match e["status"].as_str().unwrap() {
                        "pending" => "-",
                        "in_progress" => ">",
                        "completed" => "x",
                        other => other,
                    };
                    format!("{id}{status}")
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

fn transcript(sandbox: &Sandbox, session: &str) -> Vec<Value> {
    let dir = std::fs::read_dir(sandbox.home().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_to_string(dir.join(format!("{session}.jsonl")))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_workflow_runs_as_a_plan_with_tool_calls_and_streamed_steps() {
    let sandbox = Sandbox::new();
    setup(&sandbox);
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 1, \"summary\": \"a typo\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Fix the typo.", 10)));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/workflow review file=README.md"),
        )
        .await;
    let mut asked = Vec::new();
    let (response, before) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            asked.push(
                params["toolCall"]["title"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            );
            selected("allow_once")
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let updates = updates_of(&before);
    // The whole sequence. The substeps of `gather` start with it and run
    // at once, so either may finish first.
    let start = [
        "read_file- gather- list_src- grep_word- analyse- decide- suggest_fix- write_notes- approve-",
        "read_file> gather- list_src- grep_word- analyse- decide- suggest_fix- write_notes- approve-",
        "read_filex gather- list_src- grep_word- analyse- decide- suggest_fix- write_notes- approve-",
        "read_filex gather> list_src> grep_word> analyse- decide- suggest_fix- write_notes- approve-",
    ];
    let list_first = "read_filex gather> list_srcx grep_word> analyse- decide- suggest_fix- write_notes- approve-";
    let grep_first = "read_filex gather> list_src> grep_wordx analyse- decide- suggest_fix- write_notes- approve-";
    let rest = [
        "read_filex gather> list_srcx grep_wordx analyse- decide- suggest_fix- write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analyse- decide- suggest_fix- write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analyse> decide- suggest_fix- write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decide- suggest_fix- write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decide> suggest_fix- write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fix- write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fix> write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fixx write_notes- approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fixx write_notes> approve-",
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fixx write_notesx approve-",
    ];
    let expected = |middle: &str| -> Vec<String> {
        start
            .iter()
            .chain([&middle])
            .chain(rest.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let plans = plans(&updates);
    assert!(
        plans == expected(list_first) || plans == expected(grep_first),
        "{plans:#?}"
    );
    // Tool steps are tool calls; the write was asked about.
    let tools: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|u| u["title"].as_str().unwrap())
        .collect();
    assert_eq!(tools.len(), 4, "{tools:?}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("REVIEW.md")).unwrap(),
        "Fix the typo."
    );
    // The llm steps streamed, then the result was said.
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(text.contains("Fix the typo."), "{text}");
    assert!(
        text.ends_with(
            "Workflow `review` finished (8 steps): Successfully wrote 13 bytes to REVIEW.md\n"
        ),
        "{text}"
    );
    // The transcript has the run and its steps, and no conversation
    // messages from them.
    let entries = transcript(&sandbox, &session);
    let runs: Vec<String> = entries
        .iter()
        .filter(|e| e["type"] == "workflow")
        .map(|e| {
            format!(
                "{} {}",
                e["data"]["event"].as_str().unwrap(),
                e["data"]["step"].as_str().unwrap_or("")
            )
        })
        .collect();
    // (The parallel step's own record follows its steps'.)
    let mut middle = runs[1..4].to_vec();
    middle.sort();
    assert_eq!(
        middle,
        vec!["step grep_word", "step list_src", "step read_file"]
    );
    assert_eq!(
        [&runs[..1], &runs[4..]].concat(),
        vec![
            "start ",
            "step gather",
            "step analyse",
            "step decide",
            "step suggest_fix",
            "step write_notes",
            "end "
        ]
    );
    assert!(
        !entries
            .iter()
            .any(|e| e["type"] == "message" || e["type"] == "tool_result")
    );
    acp.assert_stdout_was_json_rpc();
    drop(acp);

    // Reopened, the session shows what the run did: the command, each
    // tool step as a finished tool call, what the llm steps answered, and
    // how it ended.
    let mut acp: Acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response["error"].is_null(), "{response}");
    let replayed = updates_of(&before);
    let user: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(user, "/workflow review file=README.md");
    let calls: Vec<(&str, &str)> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .map(|u| {
            (
                u["toolCallId"].as_str().unwrap(),
                u["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(calls.len(), 4, "{replayed:#?}");
    assert!(
        calls.iter().all(|(_, status)| *status == "completed"),
        "{calls:?}"
    );
    let titles: Vec<&str> = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .map(|u| u["title"].as_str().unwrap())
        .collect();
    let mut sorted = titles.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        vec![
            "review › grep_word",
            "review › list_src",
            "review › read_file",
            "review › write_notes"
        ]
    );
    let said: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(said.contains("suggest_fix: Fix the typo."), "{said}");
    assert!(
        said.ends_with(
            "Workflow `review` finished (8 steps): Successfully wrote 13 bytes to REVIEW.md\n"
        ),
        "{said}"
    );
    acp.assert_stdout_was_json_rpc();
}

#[tokio::test]
async fn the_editor_lists_the_workflows_as_commands() {
    let sandbox = Sandbox::new();
    setup(&sandbox);
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    acp.new_session(&sandbox.work()).await;
    let update = loop {
        let message = acp.next().await;
        if message["params"]["update"]["sessionUpdate"] == "available_commands_update" {
            break message["params"]["update"].clone();
        }
    };
    let names: Vec<&str> = update["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let workflows: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| n.starts_with("workflow"))
        .collect();
    // The user's workflow and the three pincer ships, each a command.
    assert_eq!(
        workflows,
        vec![
            "workflow",
            "workflow:code-review",
            "workflow:release-notes",
            "workflow:review",
            "workflow:test-fix"
        ]
    );
}

#[tokio::test]
async fn a_run_a_killed_process_left_behind_resumes_from_its_last_finished_step() {
    let sandbox = Sandbox::new();
    setup(&sandbox);
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 1, \"summary\": \"a typo\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Fix the typo.", 10)));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.send("session/prompt", prompt(&session, "/workflow review"))
        .await;
    // The write asks; the process dies before anyone answers.
    loop {
        let message = acp.next().await;
        if message["method"] == "session/request_permission" {
            break;
        }
    }
    drop(acp);
    assert_eq!(mock.side_requests().len(), 2);
    assert!(!sandbox.work().join("REVIEW.md").exists());

    let mut acp: Acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    acp.until_response(id).await;
    let id = acp
        .send("session/prompt", prompt(&session, "/workflow resume"))
        .await;
    let (response, before) = acp.drive(id, |_, _| selected("allow_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    // Only the write ran again: no model call, the earlier steps shown done.
    assert_eq!(mock.side_requests().len(), 2);
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("REVIEW.md")).unwrap(),
        "Fix the typo."
    );
    let updates = updates_of(&before);
    let plans = plans(&updates);
    assert_eq!(
        plans.first().unwrap(),
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fixx write_notes- approve-"
    );
    assert_eq!(
        plans.last().unwrap(),
        "read_filex gatherx list_srcx grep_wordx analysex decidex suggest_fixx write_notesx approve-"
    );
    // Nothing is left to resume.
    let id = acp
        .send("session/prompt", prompt(&session, "/workflow resume"))
        .await;
    let (_, before) = acp.until_response(id).await;
    let text: String = updates_of(&before)
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "There is no interrupted workflow run to resume.\n");
}

#[tokio::test]
async fn a_gateway_client_runs_a_workflow_with_chat_send() {
    use support::gateway::{Gateway, new_key, write_gateway_config};
    let sandbox = Sandbox::new();
    sandbox.write("notes.txt", "alpha beta\n");
    write_gateway_config(&sandbox, "");
    let dir = sandbox.home().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("summarise.toml"),
        r#"description = "Summarise a file"
[inputs.file]
type = "string"
[[steps]]
id = "read"
kind = "tool"
tool = "read"
params = { path = "{{ inputs.file }}" }
next = "sum"
[[steps]]
id = "sum"
kind = "llm"
prompt = "Summarise: {{ steps.read.output }}"
"#,
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text("Two words.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client
        .chat_send(&key, "/workflow summarise file=notes.txt")
        .await;
    let end = client.chat_end(&run).await;
    let text: String = end["payload"]["message"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str())
        .collect();
    assert!(
        text.contains("Workflow `summarise` finished (2 steps): Two words."),
        "{text}"
    );
    let prompt = mock.side_requests()[0].body["messages"].to_string();
    assert!(prompt.contains("alpha beta"), "{prompt}");
}

#[tokio::test]
async fn inputs_may_be_quoted_and_an_unclosed_quote_runs_nothing() {
    let sandbox = Sandbox::new();
    setup(&sandbox);
    std::fs::write(
        sandbox.home().join("workflows/show.toml"),
        "[inputs.file]\n[[steps]]\nid = \"look\"\nkind = \"tool\"\ntool = \"read\"\nparams = { path = \"{{ inputs.file }}\" }\n",
    )
    .unwrap();
    sandbox.write("my notes.md", "noted\n");
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let said = |updates: &[Value]| -> String {
        updates_of(updates)
            .iter()
            .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|u| u["content"]["text"].as_str())
            .collect()
    };
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/workflow show file='my notes.md'"),
        )
        .await;
    let (response, before) = acp
        .drive(id, |method, _| panic!("a read asks nothing: {method}"))
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        said(&before).starts_with("\nWorkflow `show` finished (1 steps): "),
        "{}",
        said(&before)
    );
    let steps = |sandbox: &Sandbox| -> Vec<Value> {
        transcript(sandbox, &session)
            .into_iter()
            .filter(|e| e["type"] == "workflow" && e["data"]["event"] == "step")
            .map(|e| json!({"input": e["data"]["input"], "error": e["data"]["error"]}))
            .collect()
    };
    assert_eq!(
        steps(&sandbox),
        vec![json!({"input": {"path": "my notes.md"}, "error": false})]
    );

    // An unclosed quote is a usage message; nothing runs.
    let id = acp
        .send(
            "session/prompt",
            prompt(&session, "/workflow show file='my notes.md"),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        said(&before),
        "Usage: /workflow NAME [input=value …]. A quote is not closed; quote a value with spaces as input='a value'.\n"
    );
    assert_eq!(steps(&sandbox).len(), 1);
    acp.assert_stdout_was_json_rpc();
}
