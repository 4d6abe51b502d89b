//! End-to-end: what the shell and file tools may not do behind the user's
//! back, driven over ACP against the real binary and the mock model — an
//! allowed program does not cover an environment prefix or a write outside
//! the project, a dangling symlink out of the project is outside, reading a
//! huge file costs no memory, full outputs are capped and cleaned up,
//! commands do not inherit credentials, and what a command starts ends with
//! it, even when it leaves its process group.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::{prompt, selected, spawn_anthropic, tool_results, wait_until};

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{
    Acp, Sandbox, peak_rss, process_running, requests_of, unique_sleep, updates_of, zombie_children,
};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_tool_call;

async fn open_session(acp: &mut Acp, sandbox: &Sandbox, mode: &str) -> String {
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": mode}),
    )
    .await;
    session
}

/// One prompt whose model calls `tool` with `args` once; permission
/// questions get `answer` (a call that asks when `answer` is `None` fails
/// the test). Returns the permission requests made.
async fn one_call(
    acp: &mut Acp,
    mock: &MockModel,
    session: &str,
    tool: &str,
    args: Value,
    answer: Option<&str>,
) -> Vec<Value> {
    call_messages(acp, mock, session, tool, args, answer)
        .await
        .iter()
        .filter(|m| m["method"] == "session/request_permission" && m.get("id").is_some())
        .cloned()
        .collect()
}

/// As [`one_call`], returning every message before the prompt's answer.
async fn call_messages(
    acp: &mut Acp,
    mock: &MockModel,
    session: &str,
    tool: &str,
    args: Value,
    answer: Option<&str>,
) -> Vec<Value> {
    mock.push(Reply::sse(anthropic_tool_call("call", tool, &args)));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = acp.send("session/prompt", prompt(session, "go")).await;
    let (response, before) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            let answer = answer.unwrap_or_else(|| panic!("{args} must not ask: {params}"));
            selected(answer)
        })
        .await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    before
}

/// The last tool result the model got.
fn last_result(mock: &MockModel) -> (bool, String) {
    let n = mock.requests().len();
    let (_, is_error, text) = tool_results(mock, n - 1).remove(0);
    (is_error, text)
}

#[tokio::test]
async fn an_allowed_program_covers_neither_environment_prefixes_nor_writes_outside() {
    let sandbox = Sandbox::new();
    let outside = sandbox.dir.path().join("outside-file");
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "default").await;

    // "Always allow" `git` (no subcommand: the scope is the program)...
    let asked = one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": "git --version"}),
        Some("allow_always"),
    )
    .await;
    assert_eq!(asked.len(), 1);
    // ...covers `git status` from then on...
    let asked = one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": "git status"}),
        None,
    )
    .await;
    assert_eq!(asked, Vec::<Value>::new());
    // ...but not git with its configuration injected through the
    // environment (a pager that runs any command), which asks again.
    let hostile = "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager \
                   GIT_CONFIG_VALUE_0='touch pwned' git status";
    let asked = one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": hostile}),
        Some("reject_once"),
    )
    .await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["params"]["toolCall"]["title"], hostile);
    for prefixed in ["LD_PRELOAD=/tmp/x.so git status", "PAGER=sh git log"] {
        let asked = one_call(
            &mut acp,
            &mock,
            &session,
            "bash",
            json!({"command": prefixed}),
            Some("reject_once"),
        )
        .await;
        assert_eq!(asked.len(), 1, "{prefixed}");
    }
    assert!(!sandbox.work().join("pwned").exists());

    // `echo` allowed always: a redirect out of the project still asks and
    // shows the target as the call's location; /dev/null does not.
    one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": "echo hello"}),
        Some("allow_always"),
    )
    .await;
    let command = format!("echo x > {}", outside.display());
    let messages = call_messages(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({ "command": command }),
        Some("reject_once"),
    )
    .await;
    assert_eq!(
        requests_of(&messages, "session/request_permission").len(),
        1
    );
    let shown = updates_of(&messages)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(shown["locations"], json!([{"path": outside}]));
    assert!(!outside.exists());
    let asked = one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": "echo quiet > /dev/null 2>&1"}),
        None,
    )
    .await;
    assert_eq!(asked, Vec::<Value>::new());
    assert_eq!(last_result(&mock), (false, "(no output)".to_string()));
    // `tee` is a write too.
    let command = format!("echo x | tee -a {}", outside.display());
    one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({ "command": command }),
        Some("reject_once"),
    )
    .await;
    assert!(!outside.exists());
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_dangling_symlink_out_of_the_project_is_outside() {
    let sandbox = Sandbox::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("nonexistent");
    std::os::unix::fs::symlink(&target, sandbox.work().join("link")).unwrap();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "accept-edits").await;
    // An edit inside the project goes through without asking...
    let asked = one_call(
        &mut acp,
        &mock,
        &session,
        "write",
        json!({"path": "inside.txt", "content": "fine"}),
        None,
    )
    .await;
    assert_eq!(asked, Vec::<Value>::new());
    // ...a write through the dangling link asks, saying it is outside.
    let asked = one_call(
        &mut acp,
        &mock,
        &session,
        "write",
        json!({"path": "link", "content": "planted"}),
        Some("reject_once"),
    )
    .await;
    assert_eq!(asked.len(), 1);
    assert!(!target.exists());
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("inside.txt")).unwrap(),
        "fine"
    );
}

#[tokio::test]
async fn reading_a_2_gib_file_keeps_memory_low() {
    let sandbox = Sandbox::new();
    // 20,000 lines of text, then a hole of zeros up to 2 GiB.
    let text: String = (1..=20_000).map(|i| format!("line {i}\n")).collect();
    let path = sandbox.write("huge.log", &text);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "default").await;
    // What pincer holds before reading: its own code and heap (a debug
    // build's is large and grows with the code); the reads must add little
    // to it, where loading the file would add 2 GiB.
    let pincer = acp.child.id().unwrap();
    let baseline = peak_rss(pincer);
    let grown = |peak: u64| {
        assert!(
            peak.saturating_sub(baseline) < 32 * 1024 * 1024,
            "pincer's peak RSS grew from {} MB to {} MB",
            baseline / (1024 * 1024),
            peak / (1024 * 1024)
        );
    };
    one_call(
        &mut acp,
        &mock,
        &session,
        "read",
        json!({"path": "huge.log", "offset": 19_999, "limit": 2}),
        None,
    )
    .await;
    grown(peak_rss(pincer));
    assert_eq!(
        last_result(&mock),
        (
            false,
            "line 19999\nline 20000\n\n[More lines in file. Use offset=20001 to continue.]"
                .to_string()
        )
    );
    one_call(
        &mut acp,
        &mock,
        &session,
        "read",
        json!({"path": "huge.log"}),
        None,
    )
    .await;
    let (is_error, shown) = last_result(&mock);
    assert!(!is_error);
    let mut expected: String = (1..=2_000)
        .map(|i| format!("line {i}"))
        .collect::<Vec<_>>()
        .join("\n");
    expected
        .push_str("\n\n[Showing lines 1-2000 of more than 20000. Use offset=2001 to continue.]");
    assert_eq!(shown, expected);
    grown(peak_rss(pincer));
}

/// The path named after "Full output: " in a bash result.
fn full_output_path(text: &str) -> PathBuf {
    let start = text.find("Full output: ").expect("a full output path") + "Full output: ".len();
    let rest = &text[start..];
    let end = rest.find([' ', ']']).unwrap();
    PathBuf::from(&rest[..end])
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn full_outputs_are_capped_and_removed_with_their_session() {
    let sandbox = Sandbox::new();
    let tmp = sandbox.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // Left by a pincer that is gone (the pid is beyond any Linux hands out),
    // and by one still running (this test process).
    let stale = format!("pincer-bash-4194399-{}.log", uuid::Uuid::new_v4());
    let live = format!(
        "pincer-bash-{}-{}.log",
        std::process::id(),
        uuid::Uuid::new_v4()
    );
    std::fs::write(tmp.join(&stale), "old").unwrap();
    std::fs::write(tmp.join(&live), "in use").unwrap();

    let mock = MockModel::start().await;
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("TMPDIR", &tmp);
    let mut acp = Acp::spawn(cmd);
    wait_until(
        "the stale output file was not swept",
        Duration::from_secs(10),
        || !tmp.join(&stale).exists(),
    )
    .await;
    assert_eq!(files_in(&tmp), vec![live.clone()]);

    let session = open_session(&mut acp, &sandbox, "bypass").await;
    // About 2.7 MB of output, over the 2 MB a file keeps.
    one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": "seq 1 400000"}),
        None,
    )
    .await;
    let (is_error, text) = last_result(&mock);
    assert!(!is_error, "{text}");
    let path = full_output_path(&text);
    assert_eq!(path.parent(), Some(tmp.as_path()));
    let all: String = (1..=400_000).map(|i| format!("{i}\n")).collect();
    let saved = std::fs::read_to_string(&path).unwrap();
    let head = &all[..1024 * 1024];
    let tail_from = all.len() - 1024 * 1024;
    let tail_from = tail_from + all[tail_from..].find('\n').unwrap() + 1;
    let left_out = tail_from - 1024 * 1024;
    assert_eq!(
        saved,
        format!(
            "{head}\n[… {left_out} bytes left out here by pincer: this file keeps the first 1 MB \
             and the last 1 MB of the output …]\n{}",
            &all[tail_from..]
        )
    );
    assert!(
        text.ends_with(&format!(
            "Full output: {} (its first 1 MB and last 1 MB; the {left_out} bytes between were \
             left out)]",
            path.display()
        )),
        "{text}"
    );

    acp.call("session/close", json!({"sessionId": session}))
        .await;
    wait_until(
        "the full output outlived its session",
        Duration::from_secs(10),
        || !path.exists(),
    )
    .await;
    assert_eq!(files_in(&tmp), vec![live]);
}

#[tokio::test]
async fn commands_do_not_inherit_credentials() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[shell]\nenv_passthrough = [\"KEEP_ME_TOKEN\"]\n",
    )
    .unwrap();
    // The project tries to let the GitHub token through: ignored.
    sandbox.write(
        ".pincer/config.toml",
        "[shell]\nenv_passthrough = [\"GITHUB_TOKEN\", \"*\"]\n",
    );
    let mock = MockModel::start().await;
    let mut cmd = sandbox.command(&["acp"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("FOO_API_KEY", "s1")
        .env("GITHUB_TOKEN", "s2")
        .env("MY_SECRET_X", "s3")
        .env("DB_PASSWORD", "s4")
        .env("KEEP_ME_TOKEN", "kept")
        .env("HARMLESS_SETTING", "visible");
    let mut acp = Acp::spawn(cmd);
    let session = open_session(&mut acp, &sandbox, "bypass").await;
    one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({"command": "env"}),
        None,
    )
    .await;
    let (is_error, text) = last_result(&mock);
    assert!(!is_error, "{text}");
    let tested = [
        "ANTHROPIC_API_KEY",
        "FOO_API_KEY",
        "GITHUB_TOKEN",
        "MY_SECRET_X",
        "DB_PASSWORD",
        "KEEP_ME_TOKEN",
        "HARMLESS_SETTING",
    ];
    let mut seen: Vec<&str> = text
        .lines()
        .filter(|line| {
            tested
                .iter()
                .any(|name| line.starts_with(&format!("{name}=")))
        })
        .collect();
    seen.sort();
    assert_eq!(seen, ["HARMLESS_SETTING=visible", "KEEP_ME_TOKEN=kept"]);
    for secret in ["test-key", "s1", "s2", "s3", "s4"] {
        assert!(
            !text.lines().any(|l| l.ends_with(&format!("={secret}"))),
            "{secret} leaked: {text}"
        );
    }
}

#[tokio::test]
async fn write_with_an_empty_path_says_so() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "bypass").await;
    one_call(
        &mut acp,
        &mock,
        &session,
        "write",
        json!({"path": "", "content": "x"}),
        None,
    )
    .await;
    assert_eq!(
        last_result(&mock),
        (
            true,
            "write needs `path`: the file to create or overwrite, e.g. \"src/main.rs\"; the path \
             given was empty."
                .to_string()
        )
    );
}

/// Starts `command` with the bash tool and waits until every marker runs.
async fn start_command(
    acp: &mut Acp,
    mock: &MockModel,
    session: &str,
    args: Value,
    markers: &[&str],
) -> i64 {
    mock.push(Reply::sse(anthropic_tool_call("slow", "bash", &args)));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let id = acp.send("session/prompt", prompt(session, "go")).await;
    for marker in markers {
        wait_until("the command never started", Duration::from_secs(10), || {
            process_running(marker)
        })
        .await;
    }
    id
}

async fn all_gone(markers: &[&str]) {
    for marker in markers {
        wait_until(
            &format!("sleep {marker} outlived its command"),
            Duration::from_secs(5),
            || !process_running(marker),
        )
        .await;
    }
}

#[tokio::test]
async fn cancel_ends_background_jobs_and_what_left_the_group() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "bypass").await;
    let (job, escaped, main) = (unique_sleep(), unique_sleep(), unique_sleep());
    let command = format!("sleep {job} & setsid sleep {escaped} & sleep {main}");
    let markers = [job.as_str(), escaped.as_str(), main.as_str()];
    let id = start_command(
        &mut acp,
        &mock,
        &session,
        json!({ "command": command }),
        &markers,
    )
    .await;
    acp.notify("session/cancel", json!({"sessionId": session}))
        .await;
    let (response, _) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "cancelled"}));
    all_gone(&markers).await;
    let pincer = acp.child.id().unwrap();
    wait_until(
        "pincer left zombies unreaped",
        Duration::from_secs(5),
        || zombie_children(pincer).is_empty(),
    )
    .await;
}

#[tokio::test]
async fn a_timeout_ends_background_jobs_and_what_left_the_group() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "bypass").await;
    let (job, escaped, main) = (unique_sleep(), unique_sleep(), unique_sleep());
    let command = format!("sleep {job} & setsid sleep {escaped} & sleep {main}");
    let markers = [job.as_str(), escaped.as_str(), main.as_str()];
    let id = start_command(
        &mut acp,
        &mock,
        &session,
        json!({ "command": command, "timeout": 2 }),
        &markers,
    )
    .await;
    let (response, _) = acp.drive(id, |m, _| panic!("unexpected {m}")).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    let (is_error, text) = last_result(&mock);
    assert_eq!(
        (is_error, text.as_str()),
        (true, "Command timed out after 2 seconds")
    );
    all_gone(&markers).await;
}

#[tokio::test]
async fn a_command_that_ends_takes_what_left_its_group_with_it() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "bypass").await;
    // A daemon that forks twice and starts a new session: its parent
    // exits at once, so it is adopted (by pincer, a subreaper). The command
    // ends once the daemon runs.
    let escaped = unique_sleep();
    let command = format!(
        "(setsid sh -c 'touch up; exec sleep {escaped}' > /dev/null 2>&1 &); \
         while [ ! -f up ]; do sleep 0.02; done; echo started"
    );
    one_call(
        &mut acp,
        &mock,
        &session,
        "bash",
        json!({ "command": command }),
        None,
    )
    .await;
    assert_eq!(last_result(&mock), (false, "started".to_string()));
    all_gone(&[&escaped]).await;
    let pincer = acp.child.id().unwrap();
    wait_until(
        "pincer left zombies unreaped",
        Duration::from_secs(5),
        || zombie_children(pincer).is_empty(),
    )
    .await;
}

#[tokio::test]
async fn background_processes_and_their_escapees_end_with_their_session() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = open_session(&mut acp, &sandbox, "bypass").await;
    let (escaped, main) = (unique_sleep(), unique_sleep());
    let command = format!("setsid sleep {escaped} & echo serving; sleep {main}");
    one_call(
        &mut acp,
        &mock,
        &session,
        "process",
        json!({"action": "start", "command": command}),
        None,
    )
    .await;
    for marker in [&escaped, &main] {
        wait_until("the server never started", Duration::from_secs(10), || {
            process_running(marker)
        })
        .await;
    }
    acp.call("session/close", json!({"sessionId": session}))
        .await;
    all_gone(&[&escaped, &main]).await;
}
