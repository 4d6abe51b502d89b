//! End-to-end: checkpoints over ACP against the mock model. A turn makes
//! every kind of change (its own edit and write, `sed -i`, `rm`, `mv`,
//! `chmod +x`, a binary file, a symlink); `/undo` puts the tree back byte
//! for byte and takes the turn out of what the model sees, `/redo` makes
//! the changes again. A file changed by hand since is not overwritten
//! without the user's say; a second session's change survives the first
//! one's undo; a process killed during a restore leaves a session that
//! loads and says which files were put back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use support::acp_client::{Acp, Sandbox, requests_of, updates_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_calls};
use support::{prompt, selected, spawn_anthropic};

/// Every path under `root` (ignored ones too, `.git` aside) with its kind,
/// mode and content hash or link target.
pub fn listing(root: &Path) -> BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {:o}", meta.permissions().mode() & 0o7777)
            } else {
                let hash: String = Sha256::digest(std::fs::read(&path).unwrap())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("file {:o} {hash}", meta.permissions().mode() & 0o7777)
            };
            out.insert(name, what);
        }
    }
    out
}

/// A file of the sandbox's working directory.
fn read(sandbox: &Sandbox, name: &str) -> String {
    std::fs::read_to_string(sandbox.work().join(name)).unwrap()
}

/// An answer that runs `command` with `bash`.
fn bash_call(id: &str, command: impl std::fmt::Display) -> Reply {
    let input = json!({ "command": command.to_string() }).to_string();
    Reply::sse(anthropic_tool_calls(&[(id, "bash", input.as_str())]))
}

/// `/undo` asks about `taken` alone and puts it back to `was` (`None`:
/// no file), leaving a.txt as the user made it ("mine").
async fn undo_spares_the_user_s_a(
    acp: &mut Acp,
    session: &str,
    sandbox: &Sandbox,
    taken: &str,
    was: Option<&str>,
) {
    let (_, said, questions) = send(acp, session, "/undo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    let text = questions[0]["params"]["toolCall"]["content"].to_string();
    assert!(text.contains(taken) && !text.contains("a.txt"), "{text}");
    assert_eq!(read(sandbox, "a.txt"), "mine\n");
    match was {
        Some(was) => assert_eq!(read(sandbox, taken), was),
        None => assert!(!sandbox.work().join(taken).exists()),
    }
}

/// A session in `bypass` mode (the turn's calls ask nothing).
async fn bypass_session(acp: &mut Acp, sandbox: &Sandbox) -> String {
    acp.initialize_with(json!({})).await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    session
}

/// Sends `text` and answers each permission question with `answer`;
/// returns the stop reason, the text pincer said, and the questions.
async fn send(
    acp: &mut Acp,
    session: &str,
    text: &str,
    answer: &str,
) -> (Value, String, Vec<Value>) {
    let id = acp.send("session/prompt", prompt(session, text)).await;
    let answer = answer.to_string();
    let (response, before) = acp
        .drive(id, move |method, _| match method {
            "session/request_permission" => selected(&answer),
            other => panic!("unexpected {other}"),
        })
        .await;
    let said: String = updates_of(&before)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    let questions = requests_of(&before, "session/request_permission")
        .into_iter()
        .cloned()
        .collect();
    (response["result"]["stopReason"].clone(), said, questions)
}

/// The texts of the user messages in a model request.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| match &m["content"] {
            Value::String(text) => vec![text.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test]
async fn undo_puts_back_every_kind_of_change_and_redo_makes_them_again() {
    let sandbox = Sandbox::new();
    sandbox.write("edit.txt", "one\ntwo\n");
    sandbox.write("sed.txt", "old value\n");
    sandbox.write("gone.txt", "to be removed\n");
    sandbox.write("moved.txt", "to be moved\n");
    sandbox.write("run.sh", "echo hi\n");
    sandbox.write("src/deep/file.rs", "fn main() {}\n");
    sandbox.write(".gitignore", "target/\n");
    sandbox.write("target/build.out", "ignored\n");
    let before = listing(&sandbox.work());

    let mock = MockModel::start().await;
    let command = "sed -i 's/old/new/' sed.txt && rm gone.txt && mv moved.txt src/moved.txt \
        && chmod +x run.sh && printf '\\000\\001\\377' > blob.bin && ln -s edit.txt link \
        && rm -r src/deep && echo rebuilt > target/build.out";
    let calls = [
        (
            "c_edit",
            "edit",
            json!({"path": "edit.txt", "edits": [{"oldText": "two", "newText": "TWO"}]})
                .to_string(),
        ),
        (
            "c_write",
            "write",
            json!({"path": "new/file.txt", "content": "fresh\n"}).to_string(),
        ),
        ("c_bash", "bash", json!({"command": command}).to_string()),
    ];
    let refs: Vec<(&str, &str, &str)> =
        calls.iter().map(|(a, b, c)| (*a, *b, c.as_str())).collect();
    mock.push(Reply::sse(anthropic_tool_calls(&refs)));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    let (stop, _, questions) = send(&mut acp, &session, "make the changes", "cancel").await;
    assert_eq!(stop, "end_turn");
    assert!(questions.is_empty());
    let after = listing(&sandbox.work());
    for path in [
        "edit.txt",
        "sed.txt",
        "gone.txt",
        "moved.txt",
        "src/moved.txt",
        "run.sh",
        "blob.bin",
        "link",
        "new/file.txt",
        "src/deep/file.rs",
        "target/build.out",
    ] {
        assert_ne!(before.get(path), after.get(path), "{path} did not change");
    }

    // The editor offers the commands.
    let (_, said, questions) = send(&mut acp, &session, "/undo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    let question = &questions[0]["params"]["toolCall"];
    assert!(
        question["title"]
            .as_str()
            .unwrap()
            .starts_with("Undo turn 1"),
        "{question}"
    );
    let content = question["content"].as_array().unwrap();
    assert!(
        content.iter().any(|c| c["type"] == "diff"
            && c["path"] == json!(sandbox.work().join("edit.txt"))
            && c["oldText"] == "one\nTWO\n"
            && c["newText"] == "one\ntwo\n"),
        "{content:?}"
    );
    assert!(said.contains("Undo turn 1"), "{said}");
    // The tree is as it was, ignored files aside: they were never copied.
    let mut undone = listing(&sandbox.work());
    let mut expected = before.clone();
    expected.remove("target/build.out");
    undone.remove("target/build.out");
    assert_eq!(undone, expected);

    let (_, said, questions) = send(&mut acp, &session, "/redo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    let mut redone = listing(&sandbox.work());
    let mut expected = after.clone();
    expected.remove("target/build.out");
    redone.remove("target/build.out");
    assert_eq!(redone, expected);

    // Undo once more; the next request holds no trace of the turn.
    send(&mut acp, &session, "/undo", "restore").await;
    mock.push(Reply::sse(anthropic_text("ok", 10)));
    let (stop, _, _) = send(&mut acp, &session, "what now?", "cancel").await;
    assert_eq!(stop, "end_turn");
    let requests = mock.requests();
    let last = requests
        .iter()
        .rev()
        .find(|r| user_texts(&r.body).iter().any(|t| t.contains("what now?")))
        .unwrap();
    let texts = user_texts(&last.body).join("\n");
    assert!(!texts.contains("make the changes"), "{texts}");
    assert!(
        !last.body.to_string().contains("c_edit"),
        "the undone turn's calls are gone"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn a_file_changed_since_the_turn_is_kept_unless_the_user_says_overwrite() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    sandbox.write("b.txt", "b1\n");
    let mock = MockModel::start().await;
    mock.push(bash_call("c1", "echo a2 > a.txt && echo b2 > b.txt"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    send(&mut acp, &session, "change both", "cancel").await;
    // The user edits a.txt by hand afterwards.
    sandbox.write("a.txt", "mine\n");

    // Cancelling changes nothing.
    let (_, said, questions) = send(&mut acp, &session, "/undo", "cancel").await;
    assert_eq!(questions.len(), 1);
    assert!(said.contains("cancelled"), "{said}");
    let question = &questions[0]["params"];
    let text = question["toolCall"]["content"].to_string();
    assert!(text.contains("Changed since the checkpoint"), "{text}");
    assert!(text.contains("a.txt"), "{text}");
    let options: Vec<&str> = question["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["restore", "overwrite", "cancel"]);
    assert_eq!(read(&sandbox, "b.txt"), "b2\n");

    // Restoring keeps the user's change and puts back the rest.
    let (_, said, _) = send(&mut acp, &session, "/undo", "restore").await;
    assert_eq!(read(&sandbox, "a.txt"), "mine\n");
    assert_eq!(read(&sandbox, "b.txt"), "b1\n");
    assert!(said.contains("Left `a.txt`"), "{said}");

    // Redo, edit by hand again, and this time overwrite: the hand edit
    // goes, as the question said it would.
    send(&mut acp, &session, "/redo", "restore").await;
    assert_eq!(read(&sandbox, "b.txt"), "b2\n");
    sandbox.write("b.txt", "mine too\n");
    send(&mut acp, &session, "/undo", "overwrite").await;
    assert_eq!(read(&sandbox, "b.txt"), "b1\n");
}

#[tokio::test]
async fn undo_in_one_session_leaves_another_session_s_changes_alone() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    sandbox.write("b.txt", "b1\n");
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let first = bypass_session(&mut acp, &sandbox).await;
    let second = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": second, "modeId": "bypass"}),
    )
    .await;
    let call = |id: &str, command: &str| {
        anthropic_tool_calls(&[(id, "bash", &json!({ "command": command }).to_string())])
    };
    // The first session's turn changes a.txt, then waits for the model
    // while the second session's whole turn changes b.txt, then goes on
    // to change c.txt.
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    mock.push(Reply::sse(call("a1", "echo a2 > a.txt")));
    mock.push(Reply::Sse {
        body: call("a2", "echo c > c.txt"),
        delay: std::time::Duration::ZERO,
        gate: Some(gate.clone()),
    });
    mock.push(Reply::sse(call("b1", "echo b2 > b.txt")));
    mock.push(Reply::sse(anthropic_text("second done", 10)));
    mock.push(Reply::sse(anthropic_text("first done", 10)));
    let first_prompt = acp
        .send("session/prompt", prompt(&first, "change a and c"))
        .await;
    support::wait_until(
        "the first turn waits for the model",
        std::time::Duration::from_secs(10),
        || mock.requests().len() == 2,
    )
    .await;
    send(&mut acp, &second, "change b", "cancel").await;
    assert_eq!(read(&sandbox, "b.txt"), "b2\n");
    gate.notify_one();
    let (response, _) = acp.until_response(first_prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    let (_, said, questions) = send(&mut acp, &first, "/undo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    let text = questions[0]["params"]["toolCall"]["content"].to_string();
    assert!(text.contains("a.txt") && text.contains("c.txt"), "{text}");
    assert!(!text.contains("b.txt"), "{text}");
    assert_eq!(read(&sandbox, "a.txt"), "a1\n");
    assert!(!sandbox.work().join("c.txt").exists());
    assert_eq!(read(&sandbox, "b.txt"), "b2\n");
    // And the second session's undo takes back only its own.
    send(&mut acp, &second, "/undo", "restore").await;
    assert_eq!(read(&sandbox, "b.txt"), "b1\n");
    assert_eq!(read(&sandbox, "a.txt"), "a1\n");
}

/// Waits (at most 20 s) in a shell until `file` exists.
fn wait_for(file: &Path) -> String {
    format!(
        "for i in $(seq 1000); do [ -e '{0}' ] && break; sleep 0.02; done",
        file.display()
    )
}

#[tokio::test]
async fn what_two_sessions_change_at_the_same_moment_is_never_taken_back_unasked() {
    // Two editors' pincer processes in one directory; their commands run
    // at once, each waiting for the other, so that each sees both changes
    // and neither can know whose the other file is.
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    sandbox.write("b.txt", "b1\n");
    let gate = sandbox.home().join("gate");
    std::fs::create_dir(&gate).unwrap();
    let (mock_a, mock_b) = (MockModel::start().await, MockModel::start().await);
    mock_a.push(bash_call(
        "a1",
        format!(
            "touch '{g}/a-in'; {}; echo a2 > a.txt; touch '{g}/a-done'; {}",
            wait_for(&gate.join("b-in")),
            wait_for(&gate.join("b-done")),
            g = gate.display()
        ),
    ));
    mock_a.push(Reply::sse(anthropic_text("a done", 10)));
    mock_b.push(bash_call(
        "b1",
        format!(
            "touch '{g}/b-in'; {}; echo b2 > b.txt; touch '{g}/b-done'",
            wait_for(&gate.join("a-done")),
            g = gate.display()
        ),
    ));
    mock_b.push(Reply::sse(anthropic_text("b done", 10)));
    let mut first = spawn_anthropic(&sandbox, &mock_a);
    let mut second = spawn_anthropic(&sandbox, &mock_b);
    let a = bypass_session(&mut first, &sandbox).await;
    let b = bypass_session(&mut second, &sandbox).await;
    let first_prompt = first.send("session/prompt", prompt(&a, "change a")).await;
    let (stop, _, _) = send(&mut second, &b, "change b", "cancel").await;
    assert_eq!(stop, "end_turn");
    let (response, _) = first.until_response(first_prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(
        (read(&sandbox, "a.txt"), read(&sandbox, "b.txt")),
        ("a2\n".into(), "b2\n".into())
    );

    // The first session's undo asks about both, and keeps both unless
    // told to overwrite: b.txt may be the second session's.
    let (_, said, questions) = send(&mut first, &a, "/undo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    let text = questions[0]["params"]["toolCall"]["content"].to_string();
    assert!(text.contains("at the same moment"), "{text}");
    assert!(text.contains("a.txt") && text.contains("b.txt"), "{text}");
    assert!(said.contains("may have made this change"), "{said}");
    assert_eq!(read(&sandbox, "b.txt"), "b2\n");
    assert_eq!(read(&sandbox, "a.txt"), "a2\n");
    // No window is left behind in the store.
    drop(first);
    drop(second);
    let present: Vec<_> = walk_names(&sandbox.home(), "present");
    assert!(!present.is_empty());
    assert!(
        present
            .iter()
            .all(|dir| std::fs::read_dir(dir).unwrap().next().is_none()),
        "{present:?}"
    );
}

#[tokio::test]
async fn what_a_session_s_own_edit_wrote_while_another_s_command_ran_is_its_own() {
    // The second session's command runs while the first session's `write`
    // changes a.txt: the first session knows the file is its own, the
    // second cannot know it is not.
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    let (mock_a, mock_b) = (MockModel::start().await, MockModel::start().await);
    let gate = sandbox.home().join("b-in");
    mock_b.push(bash_call(
        "b1",
        format!(
            "touch '{}'; for i in $(seq 1000); do grep -q a2 a.txt && break; sleep 0.02; done",
            gate.display()
        ),
    ));
    mock_b.push(Reply::sse(anthropic_text("b done", 10)));
    mock_a.push(Reply::sse(anthropic_tool_calls(&[(
        "w1",
        "write",
        &json!({"path": "a.txt", "content": "a2\n"}).to_string(),
    )])));
    mock_a.push(Reply::sse(anthropic_text("a done", 10)));
    let mut first = spawn_anthropic(&sandbox, &mock_a);
    let mut second = spawn_anthropic(&sandbox, &mock_b);
    let a = bypass_session(&mut first, &sandbox).await;
    let b = bypass_session(&mut second, &sandbox).await;
    let second_prompt = second
        .send("session/prompt", prompt(&b, "wait for a"))
        .await;
    support::wait_until(
        "the second session's command runs",
        std::time::Duration::from_secs(20),
        || gate.exists(),
    )
    .await;
    let (stop, _, _) = send(&mut first, &a, "write a", "cancel").await;
    assert_eq!(stop, "end_turn");
    let (response, _) = second.until_response(second_prompt).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");

    // The first session's undo puts a.txt back without a doubt.
    let (_, said, questions) = send(&mut first, &a, "/undo", "restore").await;
    let text = questions[0]["params"]["toolCall"]["content"].to_string();
    assert!(text.contains("Puts back 1 file"), "{text}");
    assert!(!text.contains("at the same moment"), "{text}");
    assert_eq!(read(&sandbox, "a.txt"), "a1\n", "{said}");
}

/// Every directory named `name` under `root`.
fn walk_names(root: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                if entry.file_name() == name {
                    out.push(entry.path());
                }
                stack.push(entry.path());
            }
        }
    }
    out
}

#[tokio::test]
async fn a_process_killed_during_a_restore_leaves_a_session_that_loads_and_says_what_was_put_back()
{
    const FILES: usize = 3000;
    let sandbox = Sandbox::new();
    for i in 0..FILES {
        sandbox.write(&format!("many/f{i}.txt"), "original\n");
    }
    let mock = MockModel::start().await;
    mock.push(bash_call(
        "c1",
        "for f in many/*.txt; do echo changed > \"$f\"; done",
    ));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    send(&mut acp, &session, "change them all", "cancel").await;

    let transcript = find_transcript(&sandbox.home(), &session);
    let id = acp.send("session/prompt", prompt(&session, "/undo")).await;
    // Answer the question, then kill the process as soon as the rewind
    // entry is written: the restore is under way.
    loop {
        let message = acp.next().await;
        if message["method"] == "session/request_permission" {
            acp.respond(&message["id"], selected("restore")).await;
            break;
        }
        assert_ne!(message["id"], json!(id), "answered without asking");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&transcript)
        .unwrap()
        .contains("\"type\":\"rewind\"")
    {
        assert!(std::time::Instant::now() < deadline, "no rewind entry");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let pid = acp.child.id().unwrap();
    nix_kill(pid);
    acp.wait_exit().await;
    let restored = (0..FILES)
        .filter(|i| {
            std::fs::read_to_string(sandbox.work().join(format!("many/f{i}.txt"))).unwrap()
                == "original\n"
        })
        .count();
    assert!(restored < FILES, "the restore finished before the kill");

    // A new process loads the session and says what happened.
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({})).await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let mut said = String::new();
    for message in before {
        said.push_str(
            message["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or(""),
        );
    }
    // The report may come just after the response.
    while !said.contains("cut off") {
        let message = acp.next().await;
        said.push_str(
            message["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or(""),
        );
    }
    assert!(
        said.contains(&format!("Put back {restored} file")),
        "{restored}: {said}"
    );
    assert!(
        said.contains("not put back: the restore was cut off"),
        "{said}"
    );
    let text = std::fs::read_to_string(&transcript).unwrap();
    assert!(text.contains("\"type\":\"restore_end\""));
}

fn nix_kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The transcript file of `session` under pincer's home.
fn find_transcript(home: &Path, session: &str) -> std::path::PathBuf {
    let mut stack = vec![home.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().unwrap().to_string_lossy() == format!("{session}.jsonl") {
                return path;
            }
        }
    }
    panic!("no transcript for {session}");
}

/// `pincer ARGS` in `sandbox` against `mock`; its stdout, after checking
/// it succeeded.
async fn pincer(sandbox: &Sandbox, mock: &MockModel, args: &[&str]) -> String {
    let mut cmd = sandbox.command(args);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .stdin(std::process::Stdio::null());
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "pincer {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test]
async fn pincer_run_undoes_with_continue_and_sessions_rewind_and_fork_work_from_the_shell() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    sandbox.write("old/kept.txt", "kept\n");
    let before = listing(&sandbox.work());
    let mock = MockModel::start().await;
    // Turn 1 changes a.txt and removes a directory; turn 2 adds a file.
    mock.push(bash_call(
        "c1",
        "echo a2 > a.txt && rm -r old && chmod 600 a.txt",
    ));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    pincer(&sandbox, &mock, &["run", "--mode", "bypass", "first turn"]).await;
    let after_first = listing(&sandbox.work());
    mock.push(Reply::sse(anthropic_tool_calls(&[(
        "c2",
        "write",
        &json!({"path": "b.txt", "content": "b\n"}).to_string(),
    )])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    pincer(
        &sandbox,
        &mock,
        &["run", "--mode", "bypass", "--continue", "second turn"],
    )
    .await;
    assert!(sandbox.work().join("b.txt").exists());

    // The list, from the shell.
    let sessions = pincer(&sandbox, &mock, &["sessions", "list", "--json"]).await;
    let id = serde_json::from_str::<Value>(sessions.lines().next().unwrap()).unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let listed = pincer(&sandbox, &mock, &["sessions", "rewind", &id]).await;
    assert!(
        listed.contains("1. ") && listed.contains("first turn (2 files)"),
        "{listed}"
    );
    assert!(
        listed.contains("2. ") && listed.contains("second turn (1 file)"),
        "{listed}"
    );

    // A fork before turn 2 holds turn 1 only; the files stay as they are.
    let forked = pincer(&sandbox, &mock, &["sessions", "fork", &id, "2"]).await;
    let fork_id = forked
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches('.')
        .to_string();
    assert!(fork_id.starts_with("sess_"), "{forked}");
    assert!(sandbox.work().join("b.txt").exists());
    mock.push(Reply::sse(anthropic_text("forked answer", 10)));
    pincer(
        &sandbox,
        &mock,
        &["run", "--resume", &fork_id, "in the fork"],
    )
    .await;
    let request = mock.requests().last().unwrap().body.clone();
    let texts = user_texts(&request).join("\n");
    assert!(texts.contains("first turn"), "{texts}");
    assert!(!texts.contains("second turn"), "{texts}");

    // `pincer run --continue /undo` in the parent: turn 2 goes, files too.
    let said = pincer(&sandbox, &mock, &["run", "--resume", &id, "/undo"]).await;
    assert!(said.contains("Undo turn 2"), "{said}");
    assert_eq!(listing(&sandbox.work()), after_first);
    // Back to before turn 1 from the shell, without a question.
    let said = pincer(&sandbox, &mock, &["sessions", "rewind", &id, "1", "--yes"]).await;
    assert!(said.contains("Rewind to before turn 1"), "{said}");
    assert_eq!(listing(&sandbox.work()), before);
    // The next request holds neither turn.
    mock.push(Reply::sse(anthropic_text("fresh", 10)));
    pincer(&sandbox, &mock, &["run", "--resume", &id, "start again"]).await;
    let request = mock.requests().last().unwrap().body.clone();
    let texts = user_texts(&request).join("\n");
    assert!(
        !texts.contains("first turn") && !texts.contains("second turn"),
        "{texts}"
    );
    assert!(texts.contains("start again"), "{texts}");
}

/// Two turns in bypass mode: the first writes `one.txt`, the second
/// `two.txt`; returns the session.
async fn two_turns(acp: &mut Acp, sandbox: &Sandbox, mock: &MockModel) -> String {
    let session = bypass_session(acp, sandbox).await;
    for (n, file) in [(1, "one.txt"), (2, "two.txt")] {
        mock.push(Reply::sse(anthropic_tool_calls(&[(
            &format!("c{n}"),
            "write",
            &json!({"path": file, "content": format!("{n}\n")}).to_string(),
        )])));
        mock.push(Reply::sse(anthropic_text(&format!("answer {n}"), 10)));
        send(acp, &session, &format!("turn {n}"), "cancel").await;
    }
    session
}

/// The ids the replay of `session` gives its messages, by their text.
async fn replayed_ids(
    sandbox: &Sandbox,
    mock: &MockModel,
    session: &str,
) -> BTreeMap<String, String> {
    let mut acp = spawn_anthropic(sandbox, mock);
    acp.initialize().await;
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let (_, before) = acp.until_response(id).await;
    updates_of(&before)
        .iter()
        .filter_map(|u| {
            Some((
                u["content"]["text"].as_str()?.to_string(),
                u["messageId"].as_str()?.to_string(),
            ))
        })
        .collect()
}

#[tokio::test]
async fn a_fork_at_a_message_holds_exactly_the_history_up_to_its_turn() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = two_turns(&mut acp, &sandbox, &mock).await;
    // What the model was sent with turn 2 is turn 1's history and turn 2.
    let turn_2_request = mock
        .requests()
        .into_iter()
        .find(|r| user_texts(&r.body).iter().any(|t| t.contains("turn 2")))
        .unwrap()
        .body;
    drop(acp);
    let ids = replayed_ids(&sandbox, &mock, &session).await;

    let mut acp = spawn_anthropic(&sandbox, &mock);
    let init = acp
        .initialize_with(json!({"_meta": {"jetbrains": {"air": {"version": 1}}}}))
        .await;
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["fork"],
        json!({})
    );
    assert_eq!(
        init["_meta"]["jetbrains"]["air"]["capabilities"],
        json!(["sessionRewind", "asyncTasks"])
    );
    // Fork at turn 1's answer, as JetBrains' client names it.
    let forked = acp
        .call(
            "session/fork",
            json!({
                "sessionId": session, "cwd": sandbox.work(), "mcpServers": [],
                "_meta": {"jetbrains": {"air": {"fork": {"version": 1, "messageId": ids["answer 1"]}}}}
            }),
        )
        .await;
    let fork = forked["sessionId"].as_str().unwrap().to_string();
    assert_ne!(fork, session);
    assert!(forked["configOptions"].is_array(), "{forked}");
    mock.push(Reply::sse(anthropic_text("forked", 10)));
    let (stop, _, _) = send(&mut acp, &fork, "turn 2", "cancel").await;
    assert_eq!(stop, "end_turn");
    // The fork's request for the same prompt is the original's, byte for
    // byte in what the model reads, but for the time lines.
    let fork_request = mock.requests().last().unwrap().body.clone();
    assert_eq!(
        support::without_time_lines(&fork_request)["messages"],
        support::without_time_lines(&turn_2_request)["messages"]
    );
    // The files were left alone, and the parent is as it was.
    assert!(sandbox.work().join("two.txt").exists());
    let parent = replayed_ids(&sandbox, &mock, &session).await;
    assert!(parent.contains_key("answer 2"));

    // An unknown message is refused and no session is made.
    let refused = acp
        .send(
            "session/fork",
            json!({
                "sessionId": session, "cwd": sandbox.work(), "mcpServers": [],
                "_meta": {"pincer": {"fork": {"messageId": "e999"}}}
            }),
        )
        .await;
    let (response, _) = acp.until_response(refused).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
}

#[tokio::test]
async fn jetbrains_session_rewind_takes_back_the_conversation_and_the_files_if_the_user_says_so() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = two_turns(&mut acp, &sandbox, &mock).await;
    drop(acp);
    let ids = replayed_ids(&sandbox, &mock, &session).await;

    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({"_meta": {"jetbrains": {"air": {"version": 1}}}}))
        .await;
    acp.call(
        "session/resume",
        json!({"sessionId": session, "cwd": sandbox.work(), "mcpServers": []}),
    )
    .await;
    // Named by fingerprint and occurrence, as for a message whose id the
    // client never got: turn 2's prompt. The files stay (the user says
    // so), the conversation goes back.
    let fingerprint: String = Sha256::digest(b"turn 2")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let id = acp
        .send(
            "_session/rewind",
            json!({"sessionId": session, "beforeMessage": {
                "messageId": "unknown-to-pincer",
                "messageFingerprint": format!("sha256:{fingerprint}"),
                "messageOccurrence": 1
            }}),
        )
        .await;
    let (response, before) = acp
        .drive(id, |method, params| {
            assert_eq!(method, "session/request_permission");
            let options: Vec<&str> = params["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["name"].as_str().unwrap())
                .collect();
            assert!(
                options.contains(&"Keep the files as they are"),
                "{options:?}"
            );
            selected("cancel")
        })
        .await;
    assert_eq!(response["result"], json!({"rewound": true}), "{response}");
    assert_eq!(requests_of(&before, "session/request_permission").len(), 1);
    assert!(sandbox.work().join("two.txt").exists(), "the files stay");
    mock.push(Reply::sse(anthropic_text("again", 10)));
    send(&mut acp, &session, "after the rewind", "cancel").await;
    let texts = user_texts(&mock.requests().last().unwrap().body).join("\n");
    assert!(
        texts.contains("turn 1") && !texts.contains("turn 2"),
        "{texts}"
    );

    // Rewinding to turn 1 by id, putting the files back this time.
    let id = acp
        .send(
            "_session/rewind",
            json!({"sessionId": session, "beforeMessage": {"messageId": ids["turn 1"]}}),
        )
        .await;
    let (response, _) = acp.drive(id, |_, _| selected("restore")).await;
    assert_eq!(response["result"], json!({"rewound": true}), "{response}");
    assert!(!sandbox.work().join("one.txt").exists());
    // two.txt was turn 2's, whose files stayed when it was rewound.
    assert!(sandbox.work().join("two.txt").exists());

    // A message that is not there.
    let id = acp
        .send(
            "_session/rewind",
            json!({"sessionId": session, "beforeMessage": {"messageId": "e999"}}),
        )
        .await;
    let (response, _) = acp.until_response(id).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
}

#[tokio::test]
async fn a_background_job_s_changes_are_recorded_even_after_its_turn_ended() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    mock.push(Reply::sse(anthropic_tool_calls(&[(
        "job",
        "process",
        &json!({"action": "start", "command": "echo early > early.txt; echo started; sleep 2; echo late > late.txt"})
            .to_string(),
    )])));
    mock.push(Reply::sse(anthropic_text("started", 10)));
    send(&mut acp, &session, "start the job", "cancel").await;
    support::wait_until(
        "the job's late file",
        std::time::Duration::from_secs(10),
        || sandbox.work().join("late.txt").exists(),
    )
    .await;
    // The job wrote late.txt after its turn ended: the next turn counts it.
    mock.push(Reply::sse(anthropic_text("ok", 10)));
    send(&mut acp, &session, "anything new?", "cancel").await;
    let (_, said, questions) = send(&mut acp, &session, "/undo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    assert!(!sandbox.work().join("late.txt").exists());
    assert!(sandbox.work().join("early.txt").exists());
    send(&mut acp, &session, "/undo", "restore").await;
    assert!(!sandbox.work().join("early.txt").exists());
}

#[tokio::test]
async fn a_workflow_run_is_a_turn_that_undo_takes_back() {
    let sandbox = Sandbox::new();
    let dir = sandbox.home().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("stamp.toml"),
        "name = \"stamp\"\ndescription = \"Stamp the project\"\n\n\
         [[steps]]\nid = \"stamp\"\nkind = \"tool\"\ntool = \"bash\"\n\
         params = { command = \"echo stamped > STAMP && rm old.txt\" }\n",
    )
    .unwrap();
    sandbox.write("old.txt", "old\n");
    let before = listing(&sandbox.work());
    let mock = MockModel::start().await;
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    let (_, said, _) = send(&mut acp, &session, "/workflow stamp", "cancel").await;
    assert!(said.contains("finished"), "{said}");
    assert!(sandbox.work().join("STAMP").exists());
    let (_, said, questions) = send(&mut acp, &session, "/undo", "restore").await;
    assert_eq!(questions.len(), 1, "{said}");
    assert!(said.contains("/workflow stamp"), "{said}");
    assert_eq!(listing(&sandbox.work()), before);

    // The same from the shell: a headless run, then `/undo`.
    drop(acp);
    pincer(
        &sandbox,
        &mock,
        &["workflow", "run", "stamp", "--mode", "bypass"],
    )
    .await;
    assert!(sandbox.work().join("STAMP").exists());
    let said = pincer(&sandbox, &mock, &["run", "--continue", "/undo"]).await;
    assert!(said.contains("/workflow stamp"), "{said}");
    assert_eq!(listing(&sandbox.work()), before);
}

#[tokio::test]
async fn an_unsaved_change_in_the_editor_s_buffer_counts_as_a_change_since() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    sandbox.write("b.txt", "b1\n");
    let mock = MockModel::start().await;
    mock.push(bash_call("c1", "echo a2 > a.txt && echo b2 > b.txt"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({"fs": {"readTextFile": true, "writeTextFile": false}}))
        .await;
    let session = acp.new_session(&sandbox.work()).await;
    acp.call(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "bypass"}),
    )
    .await;
    send(&mut acp, &session, "change both", "cancel").await;

    // The editor has a.txt open with an edit not saved yet.
    let id = acp.send("session/prompt", prompt(&session, "/undo")).await;
    let work = sandbox.work();
    let mut questions = Vec::new();
    let (_, _) = acp
        .drive(id, |method, params| match method {
            "fs/read_text_file" => {
                let path = std::path::PathBuf::from(params["path"].as_str().unwrap());
                let content = if path.ends_with("a.txt") {
                    "a2 and my unsaved line\n".to_string()
                } else {
                    std::fs::read_to_string(work.join(&path)).unwrap()
                };
                json!({ "content": content })
            }
            "session/request_permission" => {
                questions.push(params.clone());
                selected("restore")
            }
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(questions.len(), 1);
    let text = questions[0]["toolCall"]["content"].to_string();
    assert!(text.contains("Changed since the checkpoint"), "{text}");
    assert!(
        text.contains("a2 and my unsaved line"),
        "the diff starts from the buffer: {text}"
    );
    // a.txt is left for the editor's buffer; b.txt goes back.
    assert_eq!(read(&sandbox, "a.txt"), "a2\n");
    assert_eq!(read(&sandbox, "b.txt"), "b1\n");
}

#[tokio::test]
async fn what_the_user_edits_while_a_question_is_open_is_not_the_turn_s() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    sandbox.write("b.txt", "b1\n");
    let mock = MockModel::start().await;
    mock.push(bash_call("c1", "echo b2 > b.txt"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    acp.initialize_with(json!({})).await;
    let session = acp.new_session(&sandbox.work()).await;
    // The default mode asks before the command; the user edits a.txt
    // while the question is open, then allows it.
    let id = acp
        .send("session/prompt", prompt(&session, "change b"))
        .await;
    let work = sandbox.work();
    acp.drive(id, |method, _| {
        assert_eq!(method, "session/request_permission");
        std::fs::write(work.join("a.txt"), "mine\n").unwrap();
        selected("allow_once")
    })
    .await;
    assert_eq!(read(&sandbox, "b.txt"), "b2\n");
    undo_spares_the_user_s_a(&mut acp, &session, &sandbox, "b.txt", Some("b1\n")).await;
}

#[tokio::test]
async fn what_the_user_edits_while_answering_the_model_s_question_is_not_the_turn_s() {
    let sandbox = Sandbox::new();
    sandbox.write("a.txt", "a1\n");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[(
        "q1",
        "ask_user",
        &json!({"question": "Which colour?", "choices": [{"label": "Red"}, {"label": "Blue"}]})
            .to_string(),
    )])));
    mock.push(bash_call("c1", "echo made > b.txt"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    let id = acp.send("session/prompt", prompt(&session, "ask me")).await;
    let work = sandbox.work();
    acp.drive(id, |method, _| {
        assert_eq!(method, "session/request_permission");
        // The user edits a.txt before answering.
        std::fs::write(work.join("a.txt"), "mine\n").unwrap();
        selected("choice_1")
    })
    .await;
    undo_spares_the_user_s_a(&mut acp, &session, &sandbox, "b.txt", None).await;
}

#[tokio::test]
async fn a_file_written_outside_the_working_directory_is_named_and_never_restored() {
    let sandbox = Sandbox::new();
    let outside = sandbox.home().join("outside.txt");
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_calls(&[
        (
            "w1",
            "write",
            &json!({"path": outside, "content": "out\n"}).to_string(),
        ),
        (
            "w2",
            "write",
            &json!({"path": "inside.txt", "content": "in\n"}).to_string(),
        ),
    ])));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    let (_, said, _) = send(&mut acp, &session, "write both", "cancel").await;
    assert!(
        said.contains("wrote outside the working directory"),
        "{said}"
    );
    assert!(said.contains(&outside.display().to_string()), "{said}");
    let (_, said, questions) = send(&mut acp, &session, "/undo", "restore").await;
    let text = questions[0]["params"]["toolCall"]["content"].to_string();
    assert!(text.contains("not put back"), "{text}");
    assert!(
        said.contains("Not put back (outside the working directory)"),
        "{said}"
    );
    assert!(!sandbox.work().join("inside.txt").exists());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "out\n");
}

#[tokio::test]
async fn a_fork_from_the_shell_can_put_the_files_back_to_its_point() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    for (n, file) in [(1, "one.txt"), (2, "two.txt")] {
        mock.push(Reply::sse(anthropic_tool_calls(&[(
            "w",
            "write",
            &json!({"path": file, "content": "x\n"}).to_string(),
        )])));
        mock.push(Reply::fixture("anthropic/after_tool.sse"));
        let mut args = vec!["run", "--mode", "bypass"];
        if n == 2 {
            args.push("--continue");
        }
        let text = format!("turn {n}");
        args.push(&text);
        pincer(&sandbox, &mock, &args).await;
    }
    let sessions = pincer(&sandbox, &mock, &["sessions", "list", "--json"]).await;
    let id = serde_json::from_str::<Value>(sessions.lines().next().unwrap()).unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let said = pincer(
        &sandbox,
        &mock,
        &["sessions", "fork", &id, "2", "--files", "--yes"],
    )
    .await;
    assert!(said.contains("Put back 1 file: `two.txt`"), "{said}");
    assert!(!sandbox.work().join("two.txt").exists());
    assert!(sandbox.work().join("one.txt").exists());
    // Without a terminal and without --yes nothing changes.
    let mut cmd = sandbox.command(&["sessions", "rewind", &id, "1"]);
    cmd.stdin(std::process::Stdio::null());
    let out = cmd.output().await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert!(sandbox.work().join("one.txt").exists());
}

#[tokio::test]
async fn with_checkpoints_off_undo_takes_back_the_conversation_and_says_the_files_stay() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[checkpoints]\nenabled = false\n",
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(bash_call("c1", "echo made > made.txt"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));
    let mut acp = spawn_anthropic(&sandbox, &mock);
    let session = bypass_session(&mut acp, &sandbox).await;
    send(&mut acp, &session, "make a file", "cancel").await;
    let (_, said, questions) = send(&mut acp, &session, "/undo", "restore").await;
    assert!(questions.is_empty(), "nothing to put back, nothing asked");
    assert!(said.contains("checkpoints off"), "{said}");
    assert!(sandbox.work().join("made.txt").exists());
    assert!(
        walk_names(&sandbox.home(), "objects").is_empty(),
        "no store is made for checkpoints that are off"
    );
    mock.push(Reply::sse(anthropic_text("ok", 10)));
    send(&mut acp, &session, "next", "cancel").await;
    let texts = user_texts(&mock.requests().last().unwrap().body).join("\n");
    assert!(!texts.contains("make a file"), "{texts}");
}
