//! Running workflows through the library against the mock model: the path
//! decided by scripted model outputs, tool steps through the agent's tool
//! path (the permission question included), structured output validated
//! and asked for again once, parallel steps, budgets and timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use parking_lot::Mutex;
use std::collections::BTreeMap;

use futures::future::BoxFuture;
use pincer::agent::{AgentEvent, AgentHost, Answer};
use pincer::llm::ToolCall;
use pincer::tools::{self, CallInfo, Display};
use pincer::workflow::run::{Runner, StepEvent, StepRecord};
use pincer::workflow::{Known, Workflow};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
// A model call without tools is what the mock calls a side request: the
// llm steps' replies come from its side queue.
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;
use tokio_util::sync::CancellationToken;

const REVIEW: &str = include_str!("../../fixtures/workflows/review.toml");

struct Host {
    events: Mutex<Vec<String>>,
    answer: Answer,
}

impl AgentHost for Host {
    fn emit(&self, event: AgentEvent) {
        let name = match &event {
            AgentEvent::ToolExecutionStart { call, .. } => format!("tool_start {}", call.name),
            AgentEvent::ToolExecutionEnd {
                tool_name, output, ..
            } => {
                format!("tool_end {tool_name} error={}", output.is_error)
            }
            AgentEvent::MessageEnd(m) => format!("message {}", m.text()),
            _ => return,
        };
        self.events.lock().push(name);
    }
    fn request_permission<'a>(
        &'a self,
        call: &'a ToolCall,
        _info: &'a CallInfo,
        _reason: &'a str,
        _preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        self.events.lock().push(format!("asked {}", call.name));
        let answer = self.answer;
        Box::pin(async move { answer })
    }
}

struct Tools;
impl Known for Tools {
    fn tool_exists(&self, name: &str) -> bool {
        tools::builtin().iter().any(|t| t.name() == name)
    }
    fn workflow_exists(&self, _name: &str) -> bool {
        true
    }
}

/// Runs `workflow` in a project with a.txt and src/; returns the steps
/// run, the host's events and the result.
async fn run(
    mock: &MockModel,
    workflow: &Workflow,
    inputs: Value,
    answer: Answer,
) -> (
    Vec<StepRecord>,
    Vec<String>,
    Result<pincer::workflow::run::Finished, String>,
    tempfile::TempDir,
) {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("README.md"), "# Title\nTODO: typo\n").unwrap();
    std::fs::create_dir_all(project.path().join("src")).unwrap();
    std::fs::write(project.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    let (records, events, result) = run_in(project.path(), mock, workflow, inputs, answer).await;
    (records, events, result, project)
}

/// Runs `workflow` in `project`.
async fn run_in(
    project: &std::path::Path,
    mock: &MockModel,
    workflow: &Workflow,
    inputs: Value,
    answer: Answer,
) -> (
    Vec<StepRecord>,
    Vec<String>,
    Result<pincer::workflow::run::Finished, String>,
) {
    let host = Host {
        events: Mutex::new(Vec::new()),
        answer,
    };
    let records = Mutex::new(Vec::new());
    let on_step = |event: StepEvent<'_>| {
        if let StepEvent::Finished(r) = event
            && r.kind != "parallel"
        {
            records.lock().push(r.clone());
        }
    };
    let recorded = Mutex::new(Vec::new());
    let config = support::agent_config(mock, project);
    let tools = tools::builtin();
    let client = reqwest::Client::new();
    let cancel = CancellationToken::new();
    let workflows = BTreeMap::new();
    let runner = Runner {
        client: &client,
        config: &config,
        tools: &tools,
        cwd: project,
        host: &host,
        cancel: &cancel,
        workflows: &workflows,
        model: &|_| None,
        on_step: &on_step,
        recorded: &recorded,
    };
    let result = runner
        .run(workflow, inputs)
        .await
        .map_err(|e| e.to_string());
    let records = records.into_inner();
    let events = host.events.into_inner();
    (records, events, result)
}

fn review() -> Workflow {
    Workflow::parse(std::path::Path::new("review.toml"), REVIEW, &Tools).unwrap()
}

fn steps(records: &[StepRecord]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {}", r.step, r.error))
        .collect()
}

#[tokio::test]
async fn issues_found_take_the_fix_path_with_the_answer_validated_and_the_write_asked_for() {
    let mock = MockModel::start().await;
    // Not JSON at first: asked again once, with the reason.
    mock.push_side(Reply::sse(anthropic_text("Looks fine to me.", 10)));
    mock.push_side(Reply::sse(anthropic_text(
        "```json\n{\"issues\": 2, \"summary\": \"a typo in the title\"}\n```",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Fix the typo.", 10)));
    let (records, events, result, project) = run(
        &mock,
        &review(),
        json!({"file": "README.md"}),
        Answer::AllowOnce,
    )
    .await;
    let finished = result.unwrap();
    // Parallel steps record in any order; the rest in path order.
    let mut path = steps(&records);
    path[1..3].sort();
    assert_eq!(
        path,
        vec![
            "read_file false",
            "grep_word false",
            "list_src false",
            "analyse false",
            "decide false",
            "suggest_fix false",
            "write_notes false"
        ]
    );
    assert_eq!(
        records[3].output,
        json!({"issues": 2, "summary": "a typo in the title"})
    );
    assert_eq!(records[4].output, json!(true));
    assert_eq!(
        records[5].input,
        json!("Suggest a fix for: a typo in the title")
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("REVIEW.md")).unwrap(),
        "Fix the typo."
    );
    assert_eq!(finished.steps, 8);
    // The write was asked about, and only the write.
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("asked"))
            .collect::<Vec<_>>(),
        vec!["asked write"]
    );
    assert!(events.contains(&"tool_start read".to_string()));
    // The retry showed the model its answer and why it was refused.
    let requests = mock.side_requests();
    assert_eq!(requests.len(), 3);
    let retry = requests[1].body["messages"].to_string();
    assert!(retry.contains("Looks fine to me."), "{retry}");
    assert!(
        retry.contains("That answer is not valid: it is not JSON"),
        "{retry}"
    );
    assert!(
        requests[0].body["messages"][0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("# Title"),
        "the prompt carries the file the tool step read"
    );
}

#[tokio::test]
async fn no_issues_take_the_approve_path_and_a_declined_write_is_an_error_output() {
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 0, \"summary\": \"clean\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Approved.", 10)));
    let (records, _, result, _) = run(
        &mock,
        &review(),
        json!({"file": "README.md"}),
        Answer::RejectOnce,
    )
    .await;
    let mut path = steps(&records);
    path[1..3].sort();
    assert_eq!(
        path,
        vec![
            "read_file false",
            "grep_word false",
            "list_src false",
            "analyse false",
            "decide false",
            "approve false"
        ]
    );
    assert_eq!(result.unwrap().output, json!("Approved."));

    // The fix path with the write declined: the step's output is the
    // refusal, marked as an error, and the run ends.
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 1, \"summary\": \"x\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Fix x.", 10)));
    let (records, _, result, project) = run(
        &mock,
        &review(),
        json!({"file": "README.md"}),
        Answer::RejectOnce,
    )
    .await;
    assert!(result.is_ok());
    let last = records.last().unwrap();
    assert_eq!((last.step.as_str(), last.error), ("write_notes", true));
    assert!(!project.path().join("REVIEW.md").exists());
}

#[tokio::test]
async fn a_schema_answer_wrong_twice_fails_the_step_and_budgets_and_timeouts_hold() {
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text("{\"issues\": \"many\"}", 10)));
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": \"still many\"}",
        10,
    )));
    let (_, _, result, _) = run(
        &mock,
        &review(),
        json!({"file": "README.md"}),
        Answer::AllowOnce,
    )
    .await;
    let error = result.unwrap_err();
    assert!(
        error.starts_with("step `analyse`: the answer did not satisfy the schema twice:"),
        "{error}"
    );

    // A loop stops at its budget; a slow step times out as an error output.
    let looping = Workflow::parse(
        std::path::Path::new("loop.toml"),
        r#"
budget = 5
[[steps]]
id = "slow"
kind = "tool"
tool = "bash"
params = { command = "sleep 5" }
timeout = 0.2
next = "again"
[[steps]]
id = "again"
kind = "condition"
if = "steps.slow.error"
then = "slow"
"#,
        &Tools,
    )
    .unwrap();
    let mock = MockModel::start().await;
    let (records, _, result, _) = run(&mock, &looping, json!({}), Answer::AllowOnce).await;
    assert_eq!(
        result.unwrap_err(),
        "the run used up its budget of 5 steps at step `again`"
    );
    assert_eq!(
        steps(&records),
        vec![
            "slow true",
            "again false",
            "slow true",
            "again false",
            "slow true"
        ]
    );
    assert_eq!(records[0].output, json!("The step timed out after 0.2 s."));

    // A timeout longer than any clock can hold is no limit, not a crash.
    let patient = Workflow::parse(
        std::path::Path::new("patient.toml"),
        r#"
[[steps]]
id = "quick"
kind = "tool"
tool = "bash"
params = { command = "echo done" }
timeout = 1e300
"#,
        &Tools,
    )
    .unwrap();
    let (records, _, result, _) = run(&mock, &patient, json!({}), Answer::AllowOnce).await;
    assert_eq!(steps(&records), vec!["quick false"]);
    assert_eq!(shown(&result.unwrap().output), "done");
}

fn shown(output: &Value) -> String {
    pincer::workflow::run::shown(output)
}

/// A shipped example workflow (docs/workflow-examples/NAME.toml).
fn example(name: &str) -> Workflow {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("docs/workflow-examples")
        .join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    Workflow::parse(&path, &text, &Tools).unwrap_or_else(|e| panic!("{e:?}"))
}

#[tokio::test]
async fn the_test_fix_example_loops_until_the_tests_pass() {
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("status.txt"), "broken\n").unwrap();
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        r#"{"path": "status.txt", "old_text": "broken", "new_text": "fixed"}"#,
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("The status is fixed.", 10)));
    let (records, events, result) = run_in(
        project.path(),
        &mock,
        &example("test-fix"),
        json!({"command": "grep -q fixed status.txt || { echo 'FAIL: status is broken'; exit 1; }"}),
        Answer::AllowOnce,
    )
    .await;
    assert_eq!(result.unwrap().output, json!("The status is fixed."));
    assert_eq!(
        steps(&records),
        vec![
            "test true",
            "failing false",
            "diagnose false",
            "fix false",
            "test false",
            "failing false",
            "done false"
        ]
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("status.txt")).unwrap(),
        "fixed\n"
    );
    // The model saw the failure; the edit and the commands were asked about.
    assert!(
        mock.side_requests()[0].body["messages"]
            .to_string()
            .contains("FAIL: status is broken")
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("asked"))
            .cloned()
            .collect::<Vec<_>>(),
        vec!["asked bash", "asked edit", "asked bash"]
    );

    // Tests that never pass: three fixes, then the budget ends the run
    // before a fourth edit.
    std::fs::write(project.path().join("count.txt"), "0\n").unwrap();
    let mock = MockModel::start().await;
    for n in 0..4 {
        mock.push_side(Reply::sse(anthropic_text(
            &format!(
                r#"{{"path": "count.txt", "old_text": "{n}", "new_text": "{}"}}"#,
                n + 1
            ),
            10,
        )));
    }
    let (records, _, result) = run_in(
        project.path(),
        &mock,
        &example("test-fix"),
        json!({"command": "echo 'FAIL: always'; exit 1"}),
        Answer::AllowOnce,
    )
    .await;
    assert_eq!(
        result.unwrap_err(),
        "the run used up its budget of 15 steps at step `fix`"
    );
    let round = ["test true", "failing false", "diagnose false", "fix false"];
    assert_eq!(
        steps(&records),
        [&round[..], &round[..], &round[..], &round[..3]].concat()
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("count.txt")).unwrap(),
        "3\n"
    );
}

#[tokio::test]
async fn the_release_notes_example_writes_notes_from_the_git_log() {
    let project = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git(project.path(), args);
    git(&["init", "-q"]);
    git(&["commit", "-q", "--allow-empty", "-m", "Release 1.0"]);
    git(&["tag", "v1.0"]);
    git(&["commit", "-q", "--allow-empty", "-m", "Add the frobnicator"]);
    git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "Fix a crash on empty input",
    ]);
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "# 1.1\n\n- The frobnicator.\n",
        10,
    )));
    let (records, _, result) = run_in(
        project.path(),
        &mock,
        &example("release-notes"),
        json!({"since": "v1.0", "file": "RELEASE_NOTES.md"}),
        Answer::AllowOnce,
    )
    .await;
    result.unwrap();
    assert_eq!(
        steps(&records),
        vec!["log false", "notes false", "save false"]
    );
    let prompt = mock.side_requests()[0].body["messages"].to_string();
    assert!(
        prompt.contains("Add the frobnicator") && prompt.contains("Fix a crash on empty input"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("Release 1.0"),
        "only the commits since the tag"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("RELEASE_NOTES.md")).unwrap(),
        "# 1.1\n\n- The frobnicator.\n"
    );

    // An input that looks like an option is a revision git refuses, not
    // `--output` writing a file of its choosing.
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text("Nothing to note.", 10)));
    let (records, _, result) = run_in(
        project.path(),
        &mock,
        &example("release-notes"),
        json!({"since": "--output=pwned", "file": "NOTES.md"}),
        Answer::AllowOnce,
    )
    .await;
    result.unwrap();
    assert_eq!(
        steps(&records),
        vec!["log true", "notes false", "save false"]
    );
    assert!(!project.path().join("pwned..HEAD").exists());
}

#[tokio::test]
async fn the_code_review_example_fixes_with_permission_or_approves() {
    let workflow = example("code-review");
    let outputs = |issues: i64| -> serde_json::Map<String, Value> {
        serde_json::from_value(json!({
            "diff": "diff", "files": "files", "fix": "ok", "report": "fixed", "approve": "fine",
            "analyse": {"issues": issues, "summary": "s"},
            "suggest": {"path": "a", "old_text": "x", "new_text": "y"},
        }))
        .unwrap()
    };
    let path = |issues| {
        pincer::workflow::path::dry_run(&workflow, json!({"base": "HEAD"}), &outputs(issues))
            .unwrap()
    };
    assert_eq!(
        path(2),
        vec![
            "read", "diff", "files", "analyse", "decide", "suggest", "fix", "report"
        ]
    );
    assert_eq!(
        path(0),
        vec!["read", "diff", "files", "analyse", "decide", "approve"]
    );

    // For real: a repository with a change that breaks a file, beside one
    // the change deleted.
    let project = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| git(project.path(), args);
    git(&["init", "-q"]);
    std::fs::write(project.path().join("limit.txt"), "# limits\nmax = 10\n").unwrap();
    std::fs::write(project.path().join("old.txt"), "gone\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-q", "-m", "start"]);
    std::fs::write(project.path().join("limit.txt"), "# limits\nmax = -10\n").unwrap();
    std::fs::remove_file(project.path().join("old.txt")).unwrap();
    // The change also adds a link to a file of the user's outside the
    // project: its target is never read.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("credentials"), "SECRET-KEY-1234\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("credentials"),
        project.path().join("notes.txt"),
    )
    .unwrap();
    git(&["add", "notes.txt"]);
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        r#"{"issues": 1, "summary": "the limit went negative"}"#,
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text(
        r#"{"path": "limit.txt", "old_text": "max = -10", "new_text": "max = 10"}"#,
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Fixed the negative limit.", 10)));
    let (records, events, result) = run_in(
        project.path(),
        &mock,
        &workflow,
        json!({"base": "HEAD"}),
        Answer::AllowOnce,
    )
    .await;
    assert_eq!(result.unwrap().output, json!("Fixed the negative limit."));
    let mut ran = steps(&records);
    ran[..2].sort();
    assert_eq!(
        ran,
        vec![
            "diff false",
            "files false",
            "analyse false",
            "decide false",
            "suggest false",
            "fix false",
            "report false"
        ]
    );
    // The model read the change and the changed file whole.
    let analysed = mock.side_requests()[0].body["messages"].to_string();
    assert!(analysed.contains("-max = 10\\n+max = -10"), "{analysed}");
    assert!(
        analysed.contains("==> limit.txt <==\\n# limits\\nmax = -10"),
        "{analysed}"
    );
    assert!(!analysed.contains("==> old.txt"), "{analysed}");
    assert!(!analysed.contains("SECRET-KEY"), "{analysed}");
    assert!(analysed.contains("notes.txt"), "the diff names the link");
    let suggested = mock.side_requests()[1].body["messages"].to_string();
    assert!(
        suggested.contains("You found this in a review: the limit went negative"),
        "{suggested}"
    );
    assert!(events.contains(&"asked edit".to_string()), "{events:?}");
    assert_eq!(
        std::fs::read_to_string(project.path().join("limit.txt")).unwrap(),
        "# limits\nmax = 10\n"
    );

    // No problems: an approval, and nothing is edited.
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        r#"{"issues": 0, "summary": "the limit is back"}"#,
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Looks right.", 10)));
    let (records, events, result) = run_in(
        project.path(),
        &mock,
        &workflow,
        json!({"base": "HEAD"}),
        Answer::AllowOnce,
    )
    .await;
    assert_eq!(result.unwrap().output, json!("Looks right."));
    assert_eq!(
        steps(&records)[2..],
        ["analyse false", "decide false", "approve false"]
    );
    // A base that looks like an option is a revision git refuses.
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        r#"{"issues": 0, "summary": "nothing to see"}"#,
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Looks right.", 10)));
    let (records, _, result) = run_in(
        project.path(),
        &mock,
        &workflow,
        json!({"base": "--output=pwned"}),
        Answer::AllowOnce,
    )
    .await;
    result.unwrap();
    let diff = records.iter().find(|r| r.step == "diff").unwrap();
    assert!(diff.error, "{diff:?}");
    assert!(!project.path().join("pwned").exists());

    // The two git commands asked, as any command does; nothing else.
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("asked"))
            .collect::<Vec<_>>(),
        ["asked bash", "asked bash"]
    );
}

/// Runs git in `dir` as a fixed author; fails the test if git does.
fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}
