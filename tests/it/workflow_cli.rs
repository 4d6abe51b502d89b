//! End to end: `pincer workflow run` and `pincer workflow resume`, headless
//! against the mock model. A run is a session: its steps are in the
//! transcript, tool steps meet `--mode` as `pincer run`'s calls do, stdout
//! is the workflow's result (text) or the plan and updates an editor would
//! get (stream-json), and the exit code says how it ended.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;

const REVIEW: &str = include_str!("../../fixtures/workflows/review.toml");

fn user_workflow(sandbox: &Sandbox, name: &str, text: &str) {
    let dir = sandbox.home().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
}

fn review_project(sandbox: &Sandbox) {
    user_workflow(sandbox, "review", REVIEW);
    sandbox.write("README.md", "# Title\nTODO: typo\n");
    sandbox.write("src/main.rs", "fn main() {}\n");
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    fn result(&self) -> Value {
        self.lines().pop().unwrap()
    }
}

async fn pincer(sandbox: &Sandbox, mock: Option<&MockModel>, args: &[&str]) -> Out {
    let mut cmd = sandbox.command(args);
    if let Some(mock) = mock {
        cmd.env("ANTHROPIC_API_KEY", "test-key")
            .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// The only session transcript's entries (after the header).
fn transcript(sandbox: &Sandbox) -> Vec<Value> {
    let dir = std::fs::read_dir(sandbox.home().join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .find(|f| f.path().extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    std::fs::read_to_string(file.path())
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The workflow entries as `event step`.
fn runs(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e["type"] == "workflow")
        .map(|e| {
            format!(
                "{} {}",
                e["data"]["event"].as_str().unwrap(),
                e["data"]["step"].as_str().unwrap_or("")
            )
            .trim_end()
            .to_string()
        })
        .collect()
}

/// Each plan update as `id:status` per entry (a parallel step's substeps
/// by their own id).
fn plans(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["params"]["update"]["sessionUpdate"] == "plan")
        .map(|l| {
            l["params"]["update"]["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
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

#[tokio::test]
async fn a_headless_run_streams_the_plan_and_records_every_step() {
    let sandbox = Sandbox::new();
    review_project(&sandbox);
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 1, \"summary\": \"a typo\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Fix the typo.", 10)));
    let out = pincer(
        &sandbox,
        Some(&mock),
        &[
            "workflow",
            "run",
            "review",
            "--input",
            "file=README.md",
            "--mode",
            "accept-edits",
            "--output-format",
            "stream-json",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let lines = out.lines();
    assert_eq!(lines[0]["type"], "system");
    assert_eq!(lines[0]["workflow"], "review");
    assert_eq!(lines[0]["mode"], "accept-edits");
    // The whole plan sequence. The substeps of `gather` start with it and
    // run at once, so either may finish first.
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
    let plans = plans(&lines);
    assert!(
        plans == expected(list_first) || plans == expected(grep_first),
        "{plans:#?}"
    );
    // Tool steps are tool calls; the llm steps streamed as message chunks.
    let updates: Vec<&Value> = lines
        .iter()
        .filter(|l| l["method"] == "session/update")
        .map(|l| &l["params"]["update"])
        .collect();
    assert_eq!(
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call")
            .count(),
        4
    );
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(text.contains("Fix the typo."), "{text}");
    let result = out.result();
    assert_eq!(result["type"], "result");
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["workflow"], "review");
    assert_eq!(result["steps"], 8);
    assert_eq!(result["result"], "Successfully wrote 13 bytes to REVIEW.md");
    assert_eq!(result["num_turns"], 2);
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("REVIEW.md")).unwrap(),
        "Fix the typo."
    );
    // The llm steps' prompts were rendered from the earlier outputs.
    let asked = mock.side_requests();
    assert_eq!(asked.len(), 2);
    assert!(asked[0].body.to_string().contains("TODO: typo"));
    assert!(
        asked[1]
            .body
            .to_string()
            .contains("Suggest a fix for: a typo")
    );
    // The session's transcript: the command, each step, the end.
    let entries = transcript(&sandbox);
    assert_eq!(entries[0]["type"], "model_change");
    let runs = runs(&entries);
    assert_eq!(runs.first().unwrap(), "start");
    assert_eq!(runs.last().unwrap(), "end");
    assert_eq!(runs.len(), 1 + 8 + 1, "{runs:?}");
    let end = entries.iter().rfind(|e| e["type"] == "workflow").unwrap();
    assert_eq!(end["data"]["ok"], true);
    assert_eq!(end["data"]["steps"], 8);
    assert!(
        entries
            .iter()
            .any(|e| e["type"] == "command" && e["text"] == "/workflow review file=README.md"),
        "{entries:#?}"
    );
    // It is a session like any other, titled by its command.
    let out = pincer(&sandbox, None, &["sessions", "list"]).await;
    assert!(
        out.stdout.contains("/workflow review file=README.md"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
}

#[tokio::test]
async fn text_output_is_the_result_alone_and_steps_go_to_stderr() {
    let sandbox = Sandbox::new();
    review_project(&sandbox);
    let mock = MockModel::start().await;
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 0, \"summary\": \"clean\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("README.md is approved.", 10)));
    let out = pincer(&sandbox, Some(&mock), &["workflow", "run", "review"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    // What the analysis said streamed nowhere: stdout is the last step's
    // output, for a script to take.
    assert_eq!(out.stdout, "README.md is approved.\n");
    for step in ["review › read_file", "review › analyse", "review › approve"] {
        assert!(out.stderr.contains(step), "{step} in {}", out.stderr);
    }
    assert!(!out.stderr.contains("suggest_fix"), "{}", out.stderr);
    // --quiet keeps stderr for problems.
    mock.push_side(Reply::sse(anthropic_text(
        "{\"issues\": 0, \"summary\": \"clean\"}",
        10,
    )));
    mock.push_side(Reply::sse(anthropic_text("Approved.", 10)));
    let out = pincer(&sandbox, Some(&mock), &["workflow", "run", "review", "-q"]).await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Approved.\n");
    assert_eq!(out.stderr, "");
}

const TOOLS_ONLY: &str = r#"
name = "notes"
description = "Write a note, then read it back"

[inputs.text]
type = "string"

[[steps]]
id = "write"
kind = "tool"
tool = "write"
params = { path = "NOTE.md", content = "{{ inputs.text }}" }
next = "check"

[[steps]]
id = "check"
kind = "condition"
if = "steps.write.error"
then = "failed"
else = "read"

[[steps]]
id = "read"
kind = "tool"
tool = "read"
params = { path = "NOTE.md" }

[[steps]]
id = "failed"
kind = "tool"
tool = "ls"
params = { path = "." }
"#;

#[tokio::test]
async fn tool_steps_need_no_model_and_meet_the_mode() {
    let sandbox = Sandbox::new();
    user_workflow(&sandbox, "notes", TOOLS_ONLY);
    // No credentials at all: a workflow of tool steps does not need them.
    // Read-only (the default) refuses the write; the path records it.
    let out = pincer(
        &sandbox,
        None,
        &[
            "workflow",
            "run",
            "notes",
            "--input",
            "text=hello",
            "--json",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!sandbox.work().join("NOTE.md").exists());
    let entries = transcript(&sandbox);
    let write = entries
        .iter()
        .find(|e| e["type"] == "workflow" && e["data"]["step"] == "write")
        .unwrap();
    assert_eq!(write["data"]["error"], true, "{write}");
    assert_eq!(
        runs(&entries),
        vec!["start", "step write", "step check", "step failed", "end"]
    );
    std::fs::remove_dir_all(sandbox.home().join("sessions")).unwrap();
    // accept-edits lets the write through.
    let out = pincer(
        &sandbox,
        None,
        &[
            "workflow",
            "run",
            "notes",
            "--input",
            "text=hello",
            "--mode",
            "accept-edits",
        ],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "hello\n");
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("NOTE.md")).unwrap(),
        "hello"
    );
}

#[tokio::test]
async fn usage_mistakes_budgets_and_missing_credentials_have_their_exit_codes() {
    let sandbox = Sandbox::new();
    review_project(&sandbox);
    user_workflow(&sandbox, "notes", TOOLS_ONLY);
    user_workflow(
        &sandbox,
        "tight",
        &TOOLS_ONLY
            .replace("name = \"notes\"", "name = \"tight\"\nbudget = 2")
            .replace(
                "[inputs.text]\ntype = \"string\"",
                "[inputs.text]\ntype = \"string\"\ndefault = \"x\"",
            ),
    );
    let code = |out: &Out| (out.code, out.stderr.clone());
    let out = pincer(&sandbox, None, &["workflow", "run", "nope"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("no workflow `nope`"), "{}", out.stderr);
    // A required input missing, an unknown one given.
    let out = pincer(&sandbox, None, &["workflow", "run", "notes"]).await;
    assert_eq!(out.code, 2, "{:?}", code(&out));
    assert!(out.stderr.contains("text"), "{}", out.stderr);
    let out = pincer(
        &sandbox,
        None,
        &[
            "workflow",
            "run",
            "notes",
            "--input",
            "text=a",
            "--input",
            "colour=red",
        ],
    )
    .await;
    assert_eq!(out.code, 2, "{:?}", code(&out));
    // None of those started a session.
    assert!(!sandbox.home().join("sessions").exists());
    // Budget: the third step is one too many.
    let out = pincer(&sandbox, None, &["workflow", "run", "tight", "--json"]).await;
    assert_eq!(out.code, 5, "{:?}", code(&out));
    let result = out.result();
    assert_eq!(result["subtype"], "error_budget");
    assert!(
        result["error"].as_str().unwrap().contains("budget of 2"),
        "{result}"
    );
    // An llm step without credentials: told before anything runs.
    let out = pincer(&sandbox, None, &["workflow", "run", "review"]).await;
    assert_eq!(out.code, 8, "{:?}", code(&out));
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
    // A model that fails: exit 1, the step named.
    let mock = MockModel::start().await;
    mock.push_side(Reply::status(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}"#,
    ));
    let out = pincer(
        &sandbox,
        Some(&mock),
        &["workflow", "run", "review", "-c", "max_retries=0"],
    )
    .await;
    assert_eq!(out.code, 1, "{:?}", code(&out));
    assert!(out.stderr.contains("step `analyse`"), "{}", out.stderr);
    // Nothing to resume in a session whose run ended.
    let out = pincer(&sandbox, None, &["workflow", "resume"]).await;
    assert_eq!(out.code, 2, "{:?}", code(&out));
    assert!(
        out.stderr.contains("no interrupted workflow run"),
        "{}",
        out.stderr
    );
}

const WAITS: &str = r#"
name = "waits"
description = "Counts, waits for a file, then says done"

[[steps]]
id = "count"
kind = "tool"
tool = "bash"
params = { command = "echo ran >> count.txt" }
next = "wait"

[[steps]]
id = "wait"
kind = "tool"
tool = "bash"
params = { command = "while [ ! -f go ]; do sleep 0.05; done; echo waited" }
next = "say"

[[steps]]
id = "say"
kind = "llm"
prompt = "Say done; the wait said {{ steps.wait.output }}"
"#;

#[tokio::test]
async fn a_killed_headless_run_resumes_from_its_last_finished_step() {
    let sandbox = Sandbox::new();
    user_workflow(&sandbox, "waits", WAITS);
    let mock = MockModel::start().await;
    let mut cmd = sandbox.command(&["workflow", "run", "waits", "--mode", "bypass"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let mut child = cmd.spawn().unwrap();
    // Killed (SIGKILL: no chance to record an end) while `wait` waits.
    let counted = sandbox.work().join("count.txt");
    support::wait_until("the first step recorded", Duration::from_secs(30), || {
        counted.exists()
            && sandbox.home().join("sessions").exists()
            && runs(&transcript(&sandbox)).contains(&"step count".to_string())
    })
    .await;
    child.kill().await.unwrap();
    assert_eq!(runs(&transcript(&sandbox)), vec!["start", "step count"]);

    std::fs::write(sandbox.work().join("go"), "").unwrap();
    mock.push_side(Reply::sse(anthropic_text("done", 10)));
    let out = pincer(
        &sandbox,
        Some(&mock),
        &["workflow", "resume", "--mode", "bypass", "--json"],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.result()["result"], "done");
    assert_eq!(out.result()["steps"], 3);
    // `count` did not run again; the rest did, with its output.
    assert_eq!(std::fs::read_to_string(&counted).unwrap(), "ran\n");
    assert!(
        mock.side_requests()[0]
            .body
            .to_string()
            .contains("the wait said waited")
    );
    assert_eq!(
        runs(&transcript(&sandbox)),
        vec!["start", "step count", "step wait", "step say", "end"]
    );
    // The run ended: nothing is left to resume.
    let out = pincer(&sandbox, None, &["workflow", "resume"]).await;
    assert_eq!(out.code, 2, "{}", out.stderr);
}

const GUARDED_CONFIG: &str = r#"
[tools]
deny = ["find"]

[loop_detection]
warning = 2
block = 3
breaker = 5

[[hooks]]
event = "before_tool_call"
matcher = "bash"
command = "printf '%s' '{\"block\": true, \"reason\": \"no shell in this test\"}'"

[[hooks]]
event = "after_tool_call"
matcher = "read"
command = "printf '%s' '{\"content\": \"redacted by a hook\"}'"
"#;

const OUTER: &str = r#"
name = "outer"
description = "Runs inner, then tools the policy, hooks and loop detector decide about"
budget = 40

[[steps]]
id = "sub"
kind = "workflow"
workflow = "inner"
inputs = { file = "a.txt" }
next = "shell"

[[steps]]
id = "shell"
kind = "tool"
tool = "bash"
params = { command = "touch ran.txt" }
next = "search"

[[steps]]
id = "search"
kind = "tool"
tool = "find"
params = { pattern = "*.txt" }
next = "poll"

[[steps]]
id = "poll"
kind = "tool"
tool = "ls"
params = { path = "." }
next = "check"

[[steps]]
id = "check"
kind = "condition"
if = "steps.poll.error"
then = "end"
else = "poll"

[[steps]]
id = "end"
kind = "tool"
tool = "ls"
params = { path = "sub" }
"#;

const INNER: &str = r#"
name = "inner"
description = "Reads a file"

[inputs.file]
type = "string"

[[steps]]
id = "look"
kind = "tool"
tool = "read"
params = { path = "{{ inputs.file }}" }
"#;

#[tokio::test]
async fn tool_steps_meet_policy_hooks_and_the_loop_detector_and_a_workflow_step_runs_another() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.home().join("config.toml"), GUARDED_CONFIG).unwrap();
    user_workflow(&sandbox, "outer", OUTER);
    user_workflow(&sandbox, "inner", INNER);
    sandbox.write("a.txt", "secret\n");
    sandbox.write("sub/x.txt", "x\n");
    let out = pincer(
        &sandbox,
        None,
        &["workflow", "run", "outer", "--mode", "bypass", "--json"],
    )
    .await;
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let entries = transcript(&sandbox);
    let step = |workflow: &str, id: &str| -> Vec<Value> {
        entries
            .iter()
            .filter(|e| {
                e["type"] == "workflow"
                    && e["data"]["workflow"] == workflow
                    && e["data"]["step"] == id
            })
            .map(|e| e["data"].clone())
            .collect()
    };
    // The inner workflow ran as a step, with its input, and the after
    // hook rewrote what its read returned.
    let look = &step("inner", "look")[0];
    assert_eq!(look["input"], serde_json::json!({"path": "a.txt"}));
    assert_eq!(look["output"], "redacted by a hook");
    assert_eq!(step("outer", "sub")[0]["output"], "redacted by a hook");
    // Even in bypass mode the hook refused the shell, and the policy the
    // denied tool: failed steps, and nothing ran.
    let shell = &step("outer", "shell")[0];
    assert_eq!(shell["error"], true);
    assert!(
        shell["output"]
            .as_str()
            .unwrap()
            .contains("no shell in this test"),
        "{shell}"
    );
    assert!(!sandbox.work().join("ran.txt").exists());
    let search = &step("outer", "search")[0];
    assert_eq!(search["error"], true, "{search}");
    // The same call over and over: the detector blocks the third, and the
    // path takes that failure to its end.
    let polls: Vec<bool> = step("outer", "poll")
        .iter()
        .map(|p| p["error"].as_bool().unwrap())
        .collect();
    assert_eq!(polls, vec![false, false, true]);
    assert_eq!(out.result()["result"], "x.txt");

    // Without an exit before the breaker, the breaker stops the run.
    std::fs::write(
        sandbox.home().join("workflows/outer.toml"),
        OUTER.replace("if = \"steps.poll.error\"", "if = \"false\""),
    )
    .unwrap();
    let out = pincer(&sandbox, None, &["workflow", "run", "outer", "--json"]).await;
    assert_eq!(out.code, 6, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.result()["subtype"], "error_loop_detected");
    assert!(
        out.result()["error"]
            .as_str()
            .unwrap()
            .starts_with("step `poll`: Stopped: the agent was stuck in a loop"),
        "{}",
        out.result()
    );
}

#[tokio::test]
async fn a_project_s_workflow_runs_headless_only_when_trusted() {
    let sandbox = Sandbox::new();
    sandbox.write(
        ".pincer/workflows/mine.toml",
        "description = \"the repository's\"\n[[steps]]\nid = \"s\"\nkind = \"tool\"\ntool = \"bash\"\nparams = { command = \"touch pwned\" }\n",
    );
    let out = pincer(
        &sandbox,
        None,
        &["workflow", "run", "mine", "--mode", "bypass"],
    )
    .await;
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("no workflow `mine`"), "{}", out.stderr);
    assert!(!sandbox.work().join("pwned").exists());
    // The user says so for this run: it is theirs to run.
    let out = pincer(
        &sandbox,
        None,
        &["workflow", "run", "mine", "--mode", "bypass", "--trust"],
    )
    .await;
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(sandbox.work().join("pwned").exists());
}
