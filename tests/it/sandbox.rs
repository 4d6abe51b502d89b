//! End-to-end: the sandbox of commands, through the agent over ACP against
//! the mock model. Real commands run in the real kernel sandbox (user,
//! mount and network namespaces, Landlock, seccomp, resource limits): a
//! write inside the project runs without a question, a write outside it is
//! denied and reported to the model with the reason, then asks "run
//! outside the sandbox?" and, allowed, succeeds outside; the user's ssh
//! key cannot be read; a listener on the machine's loopback cannot be
//! reached; a fork bomb and a 2 GB write stop at the limits; a process the
//! command leaves behind (`setsid`, `nohup`) is as confined as the
//! command; a repository's config cannot turn the sandbox off or widen it.
//!
//! Homes and projects live outside the system temp dir (which commands
//! may write), as a user's do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, requests_of};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_calls};
use support::{prompt, selected, tool_results};

/// What the fake private key holds; no tool result may contain it.
const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- fake-key-material-4242";

struct World {
    sandbox: Sandbox,
    mock: MockModel,
    acp: Acp,
    session: String,
}

/// A session in a project outside temp, with `config` as the user's
/// `config.toml` and a fake `~/.ssh/id_ed25519`.
async fn world(config: &str) -> World {
    world_in(Sandbox::outside_temp(), config).await
}

/// [`world`] in `sandbox`, which may hold a project already.
async fn world_in(sandbox: Sandbox, config: &str) -> World {
    world_with(sandbox, config, &[]).await
}

/// [`world_in`] with more variables in pincer's environment.
async fn world_with(sandbox: Sandbox, config: &str, env: &[(&str, String)]) -> World {
    std::fs::write(sandbox.home().join("config.toml"), config).unwrap();
    std::fs::create_dir_all(sandbox.home().join(".ssh")).unwrap();
    std::fs::write(sandbox.home().join(".ssh/id_ed25519"), KEY).unwrap();
    std::fs::create_dir_all(sandbox.dir.path().join("outside")).unwrap();
    let mock = MockModel::start().await;
    let acp = spawn_sandboxed(&sandbox, &mock, env);
    World::start(sandbox, mock, acp).await
}

/// What one `bash` call came to.
struct Ran {
    is_error: bool,
    /// The tool result the model read.
    text: String,
    /// The permission questions asked, as sent.
    questions: Vec<Value>,
}

impl World {
    /// A world whose pincer is `acp`, initialized, with a session in the
    /// project.
    async fn start(sandbox: Sandbox, mock: MockModel, mut acp: Acp) -> World {
        acp.initialize().await;
        let session = acp.new_session(&sandbox.work()).await;
        World {
            sandbox,
            mock,
            acp,
            session,
        }
    }

    /// A directory outside the project and outside temp.
    fn outside(&self) -> PathBuf {
        self.sandbox.dir.path().join("outside")
    }

    /// Runs `command` with `bash` in one turn, answering every question
    /// with `answer`.
    async fn bash(&mut self, command: &str, answer: &str) -> Ran {
        let input = json!({ "command": command }).to_string();
        self.mock.push(Reply::sse(anthropic_tool_calls(&[(
            "call_1",
            "bash",
            input.as_str(),
        )])));
        self.mock.push(Reply::sse(anthropic_text("Done.", 5)));
        let before = self.mock.requests().len();
        let id = self
            .acp
            .send("session/prompt", prompt(&self.session, "run it"))
            .await;
        let answer = answer.to_string();
        let (response, messages) = self
            .acp
            .drive(id, move |method, _| match method {
                "session/request_permission" => selected(&answer),
                other => panic!("unexpected {other}"),
            })
            .await;
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        let results = tool_results(&self.mock, before + 1);
        let (_, is_error, text) = results.into_iter().next().unwrap();
        Ran {
            is_error,
            text,
            questions: requests_of(&messages, "session/request_permission")
                .into_iter()
                .cloned()
                .collect(),
        }
    }
}

/// `pincer acp` against `mock` with the sandbox as the config says (the
/// tests' `PINCER_SANDBOX=off` removed).
fn spawn_sandboxed(sandbox: &Sandbox, mock: &MockModel, env: &[(&str, String)]) -> Acp {
    let mut cmd = sandbox.command(&["acp"]);
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .env_remove("PINCER_SANDBOX")
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    Acp::spawn(cmd)
}

/// `program args…` with the environment `Sandbox::command` gives pincer
/// (but no `PINCER_SANDBOX`), the mock as Anthropic, pipes for ACP.
fn raw_command(
    sandbox: &Sandbox,
    mock: &MockModel,
    program: &str,
    args: &[String],
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sandbox.home())
        .env("PINCER_HOME", sandbox.home())
        .env("RUST_LOG", "warn")
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .current_dir(sandbox.work())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test]
async fn writes_inside_the_project_run_without_a_question_and_outside_are_denied_with_the_reason() {
    let mut w = world("").await;
    let ran = w
        .bash("echo made > inside.txt && cat inside.txt", "reject_once")
        .await;
    assert!(!ran.is_error, "{}", ran.text);
    assert!(ran.questions.is_empty(), "{:?}", ran.questions);
    assert_eq!(
        std::fs::read_to_string(w.sandbox.work().join("inside.txt")).unwrap(),
        "made\n"
    );

    // Outside: denied by the kernel, reported with the reason, and the
    // user is asked once whether it may run outside; declined, it stays.
    let target = w.outside().join("escaped.txt");
    let ran = w
        .bash(&format!("echo out > {}", shown(&target)), "reject_once")
        .await;
    assert!(ran.is_error);
    assert!(ran.text.contains("Permission denied"), "{}", ran.text);
    assert!(
        ran.text.contains("The sandbox stopped this command")
            && ran.text.contains("chose not to run it outside the sandbox"),
        "{}",
        ran.text
    );
    assert_eq!(ran.questions.len(), 1, "{:?}", ran.questions);
    assert!(
        ran.questions[0]
            .to_string()
            .contains("runs it again outside the sandbox"),
        "{}",
        ran.questions[0]
    );
    // Its answers are about leaving the sandbox, and "always" remembers
    // just that; there is no "always reject" to remember.
    assert_eq!(
        option_names(&ran.questions[0]),
        [
            "Run outside the sandbox once",
            "Always run it outside the sandbox",
            "Keep it in the sandbox"
        ]
    );
    assert!(!target.exists());
}

#[tokio::test]
async fn a_denied_write_asks_to_run_outside_and_allowed_it_succeeds_there() {
    let mut w = world("").await;
    let target = w.outside().join("allowed.txt");
    let ran = w
        .bash(&format!("echo out > {}", shown(&target)), "allow_once")
        .await;
    assert!(!ran.is_error, "{}", ran.text);
    assert_eq!(ran.questions.len(), 1);
    assert!(ran.text.contains("outside the sandbox"), "{}", ran.text);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "out\n");

    // "Always" remembers the command (its program and where it writes)
    // for outside the sandbox: the next one the sandbox stops runs
    // outside without a question.
    let log = w.outside().join("log.txt");
    let ran = w
        .bash(&format!("echo two >> {}", shown(&log)), "allow_always")
        .await;
    assert!(!ran.is_error, "{}", ran.text);
    assert_eq!(ran.questions.len(), 1);
    let ran = w
        .bash(&format!("echo three >> {}", shown(&log)), "reject_once")
        .await;
    assert!(ran.questions.is_empty(), "{:?}", ran.questions);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "two\nthree\n");
    // Inside the sandbox nothing changed: a write elsewhere still asks.
    let ran = w
        .bash(
            &format!("echo four > {}", shown(&w.outside().join("other.txt"))),
            "reject_once",
        )
        .await;
    assert_eq!(ran.questions.len(), 1);
}

#[tokio::test]
async fn the_user_s_ssh_key_and_pincer_s_own_files_cannot_be_read() {
    let mut w = world("[sandbox]\nescape = false\n").await;
    let ran = w
        .bash(
            "cat ~/.ssh/id_ed25519; ls ~/.ssh; cat $PINCER_HOME/config.toml ~/config.toml",
            "reject_once",
        )
        .await;
    assert!(ran.is_error);
    assert!(!ran.text.contains("fake-key-material"), "{}", ran.text);
    assert!(!ran.text.contains("escape = false"), "{}", ran.text);
    assert!(ran.text.contains("Permission denied"), "{}", ran.text);
    assert!(
        ran.text
            .contains("This session cannot run commands outside the sandbox"),
        "{}",
        ran.text
    );
    assert!(ran.questions.is_empty());
}

/// A connection from the sandbox to `listener`'s port: refused, and the
/// listener never sees it.
async fn loopback_is_out_of_reach(config: &str, error: &str) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut w = world(config).await;
    let ran = w
        .bash(
            &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"),
            "reject_once",
        )
        .await;
    assert!(ran.is_error, "{}", ran.text);
    assert!(!ran.text.contains("connected\n"), "{}", ran.text);
    assert!(ran.text.contains(error), "{}", ran.text);
    assert!(
        listener.accept().is_err(),
        "the listener was reached from the sandbox"
    );
}

#[tokio::test]
async fn a_listener_on_the_machine_s_loopback_is_blocked_with_the_network_off() {
    loopback_is_out_of_reach("[sandbox]\nnetwork = \"off\"\n", "Operation not permitted").await;
}

#[tokio::test]
async fn a_listener_on_the_machine_s_loopback_is_blocked_by_default() {
    // The default network is the sandbox's own loopback: the machine's
    // listeners are not on it.
    loopback_is_out_of_reach("", "Connection refused").await;
}

#[tokio::test]
async fn a_process_left_running_by_setsid_and_nohup_stays_confined() {
    let mut w = world("").await;
    let leak = w.outside().join("leak.txt");
    let command = format!(
        "setsid nohup bash -c 'sleep 0.3; echo leaked > {leak}; cat ~/.ssh/id_ed25519 > stolen.txt 2>&1; echo finished >> stolen.txt' > /dev/null 2>&1 & sleep 1.5; cat stolen.txt",
        leak = shown(&leak)
    );
    let ran = w.bash(&command, "reject_once").await;
    assert!(ran.text.contains("finished"), "{}", ran.text);
    assert!(!ran.text.contains("fake-key-material"), "{}", ran.text);
    assert!(!leak.exists());
    let stolen = std::fs::read_to_string(w.sandbox.work().join("stolen.txt")).unwrap();
    assert!(!stolen.contains("fake-key-material"), "{stolen}");
}

#[tokio::test]
async fn a_2_gb_write_stops_at_the_file_size_limit() {
    let mut w = world("[sandbox]\nescape = false\n[sandbox.limits]\nfile_size = \"8 MiB\"\n").await;
    let ran = w
        .bash("head -c 2000000000 /dev/zero > big.bin", "reject_once")
        .await;
    assert!(ran.is_error);
    assert!(
        ran.text.contains("File size limit exceeded"),
        "{}",
        ran.text
    );
    let size = std::fs::metadata(w.sandbox.work().join("big.bin"))
        .unwrap()
        .len();
    assert_eq!(size, 8 << 20);
}

#[tokio::test]
async fn the_working_directory_s_git_hooks_git_config_and_pincer_settings_stay_read_only() {
    let mut w = world("[sandbox]\nescape = false\n").await;
    let work = w.sandbox.work();
    std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
    std::fs::write(work.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(work.join(".pincer")).unwrap();
    let ran = w
        .bash(
            "echo evil > .git/hooks/pre-commit; echo evil >> .git/config; echo x > .pincer/config.toml; mv .git .git-old; echo ok > .git/HEAD2",
            "reject_once",
        )
        .await;
    assert!(ran.text.contains("Read-only file system"), "{}", ran.text);
    assert!(ran.text.contains("Device or resource busy"), "{}", ran.text);
    assert!(!work.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(work.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!work.join(".pincer/config.toml").exists());
    assert!(!work.join(".git-old").exists());
    // The rest of .git stays writable: git can still commit.
    assert_eq!(
        std::fs::read_to_string(work.join(".git/HEAD2")).unwrap(),
        "ok\n"
    );
}

#[tokio::test]
async fn a_repository_cannot_turn_the_sandbox_off_or_widen_it_even_trusted() {
    let mut w = world("").await;
    let outside = w.outside();
    std::fs::create_dir_all(w.sandbox.work().join(".pincer")).unwrap();
    std::fs::write(
        w.sandbox.work().join(".pincer/config.toml"),
        format!(
            "[sandbox]\nmode = \"off\"\nnetwork = \"on\"\nescape = true\nallow_write = [\"{}\"]\n",
            shown(&outside)
        ),
    )
    .unwrap();
    // Trusting the project does not change it either.
    let status = w
        .sandbox
        .command(&["trust", w.sandbox.work().to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let mut acp = spawn_sandboxed(&w.sandbox, &w.mock, &[]);
    acp.initialize().await;
    w.session = acp.new_session(&w.sandbox.work()).await;
    w.acp = acp;
    let target = outside.join("widened.txt");
    let ran = w
        .bash(&format!("echo x > {}", shown(&target)), "reject_once")
        .await;
    assert!(ran.is_error, "{}", ran.text);
    assert!(!target.exists());
}

#[tokio::test]
async fn a_command_that_is_dangerous_by_itself_still_asks_inside_the_sandbox() {
    let mut w = world("").await;
    let ran = w.bash("git push origin main", "reject_once").await;
    assert_eq!(ran.questions.len(), 1, "{:?}", ran.questions);
    assert!(
        ran.questions[0]
            .to_string()
            .contains("runs in the sandbox, but"),
        "{}",
        ran.questions[0]
    );
    assert!(ran.is_error);
    assert!(ran.text.contains("declined"), "{}", ran.text);
    // Its answers say where an "always" holds.
    assert_eq!(
        option_names(&ran.questions[0]),
        [
            "Allow once",
            "Always allow (in the sandbox or out)",
            "Reject",
            "Always reject"
        ]
    );
}

/// The names of a permission question's answers, in order.
fn option_names(question: &Value) -> Vec<String> {
    question["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_string())
        .collect()
}

/// The uid tests run the limits under when they run as root: the kernel
/// never applies the process limit to root.
const NOBODY: u32 = 65534;

#[tokio::test]
async fn a_fork_bomb_stops_at_the_process_limit() {
    let config = "[sandbox]\nescape = false\n[sandbox.limits]\nprocesses = 32\n";
    let sandbox = Sandbox::outside_temp();
    std::fs::write(sandbox.home().join("config.toml"), config).unwrap();
    let mock = MockModel::start().await;
    let pincer = env!("CARGO_BIN_EXE_pincer").to_string();
    let cmd = if nix::unistd::geteuid().is_root() {
        chown_tree(sandbox.dir.path(), NOBODY);
        let args = [
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".to_string(),
            pincer,
            "acp".to_string(),
        ];
        raw_command(&sandbox, &mock, "setpriv", &args)
    } else {
        raw_command(&sandbox, &mock, &pincer, &["acp".to_string()])
    };
    let mut w = World::start(sandbox, mock, Acp::spawn(cmd)).await;
    // 200 sleeps asked for, at most 32 processes at once: the shell
    // cannot fork the 32nd and says so.
    let ran = w
        .bash(
            "sh -c 'i=0; while [ $i -lt 200 ]; do sleep 2 & i=$((i+1)); echo $i > started.txt; done'; echo started $(cat started.txt)",
            "reject_once",
        )
        .await;
    let started: u32 = ran
        .text
        .lines()
        .find_map(|l| l.strip_prefix("started ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}", ran.text));
    assert!(started < 32, "{started} started: {}", ran.text);
    assert!(ran.text.contains("fork"), "{}", ran.text);
    // A real fork bomb: it ends at the call's timeout, with the machine
    // and pincer still answering.
    let started = std::time::Instant::now();
    w.mock.push(Reply::sse(anthropic_tool_calls(&[(
        "bomb",
        "bash",
        r#"{"command": "sh -c 'b(){ b | b & }; b'; sleep 30", "timeout": 3}"#,
    )])));
    w.mock.push(Reply::sse(anthropic_text("Done.", 5)));
    let id = w
        .acp
        .send("session/prompt", prompt(&w.session, "bomb"))
        .await;
    let (response, _) = w.acp.drive(id, |_, _| selected("reject_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(started.elapsed() < Duration::from_secs(20));
}

fn chown_tree(root: &Path, uid: u32) {
    let owner = Some(nix::unistd::Uid::from_raw(uid));
    let group = Some(nix::unistd::Gid::from_raw(uid));
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        nix::unistd::chown(&path, owner, group).unwrap();
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        }
    }
}

/// What `pincer sandbox check` printed, with the sandbox as the config
/// says; it must have succeeded.
async fn sandbox_check(sandbox: &Sandbox) -> String {
    let output = sandbox
        .command(&["sandbox", "check"])
        .env_remove("PINCER_SANDBOX")
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text
}

#[tokio::test]
async fn sandbox_check_shows_the_sandbox_and_proves_it_holds() {
    let w = world("").await;
    let text = sandbox_check(&w.sandbox).await;
    assert!(text.starts_with("sandbox: workspace-write\n"), "{text}");
    assert!(
        text.contains(&format!("  writes: {}", shown(&w.sandbox.work()))),
        "{text}"
    );
    assert!(
        text.contains(&shown(&w.sandbox.home().join(".ssh"))),
        "{text}"
    );
    assert!(text.contains("network: its own loopback only"), "{text}");
    for line in [
        "✓ write in",
        "✓ read ~/.ssh: stopped, as it should be",
        ": stopped, as it should be",
    ] {
        assert!(text.contains(line), "{line}: {text}");
    }
    assert!(!text.contains('✗'), "{text}");
    // With allow_hosts it shows them, and that the proxy refuses others.
    std::fs::write(
        w.sandbox.home().join("config.toml"),
        "[sandbox]\nallow_hosts = [\"github.com\"]\n",
    )
    .unwrap();
    let text = sandbox_check(&w.sandbox).await;
    assert!(
        text.contains("network: its own loopback, and github.com through pincer's proxy"),
        "{text}"
    );
    assert!(
        text.contains(
            "✓ reach a host allow_hosts does not list, through the proxy: stopped, as it should be"
        ),
        "{text}"
    );
    assert!(!text.contains('✗'), "{text}");
    // With the sandbox off it says so and tries nothing.
    let output = w
        .sandbox
        .command(&["sandbox", "check"])
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success());
    assert!(text.starts_with("sandbox: off\n"), "{text}");
}

#[tokio::test]
async fn the_sandbox_option_and_command_change_it_for_the_session_and_it_survives_a_reload() {
    let mut w = world("").await;
    let target = w.outside().join("unconfined.txt");
    let options = w
        .acp
        .call(
            "session/set_config_option",
            json!({"sessionId": w.session, "configId": "sandbox", "value": "off"}),
        )
        .await;
    let sandbox = options["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "sandbox")
        .cloned()
        .unwrap();
    assert_eq!(sandbox["currentValue"], "off", "{sandbox}");
    // Off: the write outside the project asks as it did before there was
    // a sandbox, and allowed it runs unconfined.
    let ran = w
        .bash(&format!("echo free > {}", shown(&target)), "allow_once")
        .await;
    assert!(!ran.is_error, "{}", ran.text);
    assert_eq!(ran.questions.len(), 1);
    assert!(
        !ran.questions[0].to_string().contains("sandbox"),
        "{}",
        ran.questions[0]
    );
    assert!(target.exists());

    // `/sandbox read-only` in a later process, after a reload: writes in
    // the project are stopped now.
    let id = w
        .acp
        .send("session/prompt", prompt(&w.session, "/sandbox read-only"))
        .await;
    w.acp.until_response(id).await;
    let mut acp = spawn_sandboxed(&w.sandbox, &w.mock, &[]);
    acp.initialize().await;
    acp.call(
        "session/load",
        json!({"sessionId": w.session, "cwd": w.sandbox.work(), "mcpServers": []}),
    )
    .await;
    w.acp = acp;
    let ran = w.bash("echo x > inside.txt", "reject_once").await;
    assert!(ran.is_error, "{}", ran.text);
    assert!(
        ran.text.contains("Read-only file system") || ran.text.contains("Permission denied"),
        "{}",
        ran.text
    );
    assert!(!w.sandbox.work().join("inside.txt").exists());
}

#[tokio::test]
async fn hooks_run_in_the_sandbox_unless_their_config_says_not_to() {
    // The hooks' command lines name places the world creates.
    let config = |outside: &Path| {
        format!(
            "[[hooks]]\nevent = \"user_prompt_submit\"\ncommand = \"cat ~/.ssh/id_ed25519 > hook-read.txt 2>&1; echo confined > {confined} 2>/dev/null; true\"\n\n[[hooks]]\nevent = \"user_prompt_submit\"\nsandbox = false\ncommand = \"echo free > {free}\"\n",
            confined = shown(&outside.join("confined.txt")),
            free = shown(&outside.join("free.txt")),
        )
    };
    // A world whose outside dir the config can name: made first, then
    // configured.
    let mut w = world("").await;
    let outside_dir = w.outside();
    std::fs::write(w.sandbox.home().join("config.toml"), config(&outside_dir)).unwrap();
    let mut acp = spawn_sandboxed(&w.sandbox, &w.mock, &[]);
    acp.initialize().await;
    w.session = acp.new_session(&w.sandbox.work()).await;
    w.acp = acp;
    let ran = w.bash("true", "reject_once").await;
    assert!(!ran.is_error, "{}", ran.text);
    let read = std::fs::read_to_string(w.sandbox.work().join("hook-read.txt")).unwrap();
    assert!(!read.contains("fake-key-material"), "{read}");
    assert!(read.contains("Permission denied"), "{read}");
    assert!(!outside_dir.join("confined.txt").exists());
    assert_eq!(
        std::fs::read_to_string(outside_dir.join("free.txt")).unwrap(),
        "free\n"
    );
}

#[tokio::test]
async fn where_the_sandbox_cannot_be_made_pincer_says_so_once_and_every_command_asks() {
    // A user namespace in which no further user namespace may be made:
    // pincer's sandbox cannot start there, as on a kernel without them.
    let sandbox = Sandbox::outside_temp();
    let mock = MockModel::start().await;
    let args: Vec<String> = [
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" acp",
        env!("CARGO_BIN_EXE_pincer"),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let cmd = raw_command(&sandbox, &mock, "unshare", &args);
    let mut w = World::start(sandbox, mock, Acp::spawn(cmd)).await;
    let first = w.bash("echo one > one.txt", "allow_once").await;
    assert!(!first.is_error, "{}", first.text);
    assert_eq!(first.questions.len(), 1, "{:?}", first.questions);
    let said = first.questions[0].to_string();
    assert!(
        said.contains("commands are not sandboxed here") && said.contains("user namespace"),
        "{said}"
    );
    let second = w.bash("echo two > two.txt", "allow_once").await;
    assert_eq!(second.questions.len(), 1);
    assert!(
        !second.questions[0]
            .to_string()
            .contains("not sandboxed here"),
        "{}",
        second.questions[0]
    );
    assert!(w.sandbox.work().join("two.txt").exists());
}

#[tokio::test]
async fn a_server_one_command_starts_is_reachable_from_the_next_and_not_from_the_machine() {
    let mut w = world("").await;
    // A port free on this machine; inside, the commands' network is their
    // own, shared by every command of this pincer.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!(
        "perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => \"127.0.0.1:{port}\", Listen => 5, ReuseAddr => 1) or die \"listen: $!\"; print \"listening\\n\"; while ($c = $s->accept) {{ print $c \"hello from the sandbox\\n\"; close $c }}'"
    );
    let input = json!({"action": "start", "command": server}).to_string();
    w.mock.push(Reply::sse(anthropic_tool_calls(&[(
        "start",
        "process",
        input.as_str(),
    )])));
    w.mock.push(Reply::sse(anthropic_text("Started.", 5)));
    let id = w
        .acp
        .send("session/prompt", prompt(&w.session, "start it"))
        .await;
    let (response, _) = w.acp.drive(id, |_, _| selected("reject_once")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let started = tool_results(&w.mock, w.mock.requests().len() - 1);
    assert!(!started[0].1, "{started:?}");

    let mut reached = String::new();
    for _ in 0..50 {
        let ran = w
            .bash(
                &format!("exec 3<>/dev/tcp/127.0.0.1/{port} && head -n 1 <&3"),
                "reject_once",
            )
            .await;
        reached = ran.text;
        if reached.contains("hello from the sandbox") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(reached.contains("hello from the sandbox"), "{reached}");
    // The machine's own loopback has nothing on that port.
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[tokio::test]
async fn a_command_in_the_editor_s_terminal_is_confined_the_same_way() {
    let sandbox = Sandbox::outside_temp();
    std::fs::create_dir_all(sandbox.home().join(".ssh")).unwrap();
    std::fs::write(sandbox.home().join(".ssh/id_ed25519"), KEY).unwrap();
    let outside = sandbox.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mock = MockModel::start().await;
    let mut acp = spawn_sandboxed(&sandbox, &mock, &[]);
    acp.initialize_with(json!({"terminal": true})).await;
    let session = acp.new_session(&sandbox.work()).await;
    let command = format!(
        "cat ~/.ssh/id_ed25519; echo out > {}/editor.txt; echo in > inside.txt",
        shown(&outside)
    );
    let input = json!({ "command": command }).to_string();
    mock.push(Reply::sse(anthropic_tool_calls(&[(
        "call_1",
        "bash",
        input.as_str(),
    )])));
    mock.push(Reply::sse(anthropic_text("Done.", 5)));
    let id = acp.send("session/prompt", prompt(&session, "run it")).await;
    // The editor runs what pincer asks it to, as Zed does: the program
    // and arguments of terminal/create, in its cwd.
    let mut ran: Option<std::process::Output> = None;
    let mut asked_for = Value::Null;
    let (response, messages) = acp
        .drive(id, |method, params| match method {
            "terminal/create" => {
                asked_for = params.clone();
                let args: Vec<String> = params["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string())
                    .collect();
                ran = Some(
                    std::process::Command::new(params["command"].as_str().unwrap())
                        .args(&args)
                        .current_dir(params["cwd"].as_str().unwrap())
                        .env("HOME", sandbox.home())
                        .output()
                        .unwrap(),
                );
                json!({"terminalId": "term-1"})
            }
            "terminal/wait_for_exit" => {
                json!({"exitCode": ran.as_ref().unwrap().status.code()})
            }
            "terminal/output" => {
                let out = ran.as_ref().unwrap();
                let text = String::from_utf8_lossy(&out.stdout).to_string()
                    + &String::from_utf8_lossy(&out.stderr);
                json!({"output": text, "truncated": false, "exitStatus": {"exitCode": out.status.code()}})
            }
            "terminal/release" => json!({}),
            "session/request_permission" => selected("reject_once"),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn");
    assert!(
        asked_for["command"]
            .as_str()
            .unwrap()
            .ends_with("pincer-sandbox"),
        "{asked_for}"
    );
    assert!(requests_of(&messages, "session/request_permission").len() <= 1);
    let out = ran.unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("fake-key-material"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!outside.join("editor.txt").exists());
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("inside.txt")).unwrap(),
        "in\n"
    );
}

#[tokio::test]
async fn a_repository_s_dangling_links_where_protected_paths_go_stop_nothing() {
    // A repository that commits `.pincer` and `.git/hooks` as links to
    // nowhere must not make every command fail (nor leave the sandbox).
    let mut w = world("[sandbox]\nescape = false\n").await;
    let work = w.sandbox.work();
    std::fs::create_dir_all(work.join(".git")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/hooks", work.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/pincer", work.join(".pincer")).unwrap();
    let ran = w
        .bash(
            "echo fine > made.txt && cat ~/.ssh/id_ed25519",
            "reject_once",
        )
        .await;
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt")).unwrap(),
        "fine\n",
        "{}",
        ran.text
    );
    assert!(ran.text.contains("Permission denied"), "{}", ran.text);
    assert!(!ran.text.contains("fake-key-material"), "{}", ran.text);
}

#[tokio::test]
async fn pincer_sandbox_exec_confines_as_the_small_launcher_does() {
    // What pincer falls back to when pincer-sandbox is not beside it.
    let sandbox = Sandbox::outside_temp();
    std::fs::create_dir_all(sandbox.home().join(".ssh")).unwrap();
    std::fs::write(sandbox.home().join(".ssh/id_ed25519"), KEY).unwrap();
    let outside = sandbox.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let policy = json!({
        "writable": [sandbox.work()],
        "read_only": [],
        "deny_read": [sandbox.home().join(".ssh")],
        "network": "off",
        "limits": {"processes": 1024, "file_size": 1 << 30, "cpu_seconds": 60},
    });
    let script = format!(
        "echo in > inside.txt; cat ~/.ssh/id_ed25519; echo out > {}/x.txt",
        shown(&outside)
    );
    let output = sandbox
        .command(&[
            "sandbox",
            "exec",
            "--policy",
            &policy.to_string(),
            "--",
            "bash",
            "-c",
            &script,
        ])
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(said.contains("Permission denied"), "{said}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("fake-key-material"));
    assert!(!outside.join("x.txt").exists());
    assert!(sandbox.work().join("inside.txt").exists());
    // A policy that is not one runs nothing, and says why.
    let output = sandbox
        .command(&[
            "sandbox", "exec", "--policy", "{}", "--", "touch", "ran.txt",
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(125));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .starts_with("pincer sandbox: the policy is not valid")
    );
    assert!(!sandbox.work().join("ran.txt").exists());
}

#[tokio::test]
async fn stdio_mcp_servers_run_in_the_sandbox_unless_the_user_s_config_says_not_to() {
    let bin = support::mcp_server_bin();
    let config = format!(
        "[mcp.servers.files]\ncommand = \"{bin}\"\n\n[mcp.servers.free]\ncommand = \"{bin}\"\nsandbox = false\n",
        bin = bin.display()
    );
    let sandbox = Sandbox::outside_temp();
    // A repository may not take the server out of the sandbox.
    std::fs::create_dir_all(sandbox.work().join(".pincer")).unwrap();
    std::fs::write(
        sandbox.work().join(".pincer/config.toml"),
        "[mcp.servers.files]\nsandbox = false\n",
    )
    .unwrap();
    let mut w = world_in(sandbox, &config).await;
    let key = shown(&w.sandbox.home().join(".ssh/id_ed25519"));
    let outside = shown(&w.outside().join("from-mcp.txt"));
    let free_outside = shown(&w.outside().join("from-free.txt"));
    let inside = shown(&w.sandbox.work().join("from-mcp.txt"));
    let inputs = [
        json!({ "path": key }).to_string(),
        json!({ "path": outside, "text": "x" }).to_string(),
        json!({ "path": inside, "text": "in" }).to_string(),
        json!({ "path": free_outside, "text": "free" }).to_string(),
    ];
    let triples = [
        ("c_key", "mcp__files__read_file", inputs[0].as_str()),
        ("c_out", "mcp__files__write_file", inputs[1].as_str()),
        ("c_in", "mcp__files__write_file", inputs[2].as_str()),
        ("c_free", "mcp__free__write_file", inputs[3].as_str()),
    ];
    w.mock.push(Reply::sse(anthropic_tool_calls(&triples)));
    w.mock.push(Reply::sse(anthropic_text("Done.", 5)));
    let before = w.mock.requests().len();
    let id = w
        .acp
        .send("session/prompt", prompt(&w.session, "use the servers"))
        .await;
    let (response, _) = w
        .acp
        .drive(id, |method, _| match method {
            "session/request_permission" => selected("allow_once"),
            other => panic!("unexpected {other}"),
        })
        .await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let results = tool_results(&w.mock, before + 1);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    let (_, error, text) = by_id("c_key");
    assert!(error, "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(!text.contains("fake-key-material"), "{text}");
    let (_, error, text) = by_id("c_out");
    assert!(error, "{text}");
    assert!(!w.outside().join("from-mcp.txt").exists());
    let (_, error, text) = by_id("c_in");
    assert!(!error, "{text}");
    assert_eq!(
        std::fs::read_to_string(w.sandbox.work().join("from-mcp.txt")).unwrap(),
        "in"
    );
    // `sandbox = false` in the user's own table: the server runs as the
    // user's process.
    let (_, error, text) = by_id("c_free");
    assert!(!error, "{text}");
    assert_eq!(
        std::fs::read_to_string(w.outside().join("from-free.txt")).unwrap(),
        "free"
    );

    // `pincer mcp list` says which servers run in the sandbox.
    let output = raw_command(
        &w.sandbox,
        &w.mock,
        env!("CARGO_BIN_EXE_pincer"),
        &["mcp".to_string(), "list".to_string()],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .unwrap();
    let listed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        listed.contains(&format!("files ({}, in the sandbox): ready", bin.display())),
        "{listed}"
    );
    assert!(
        listed.contains(&format!("free ({}): ready", bin.display())),
        "{listed}"
    );
}

/// An HTTP head read from `stream` through its blank line (byte by
/// byte: what follows is not the head's).
fn head_of(stream: &mut impl std::io::Read) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read_exact(&mut byte).is_ok() {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// A web server on this machine's loopback: answers every request with
/// `hello from the machine` and keeps the paths it was asked for.
fn machine_web_server() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let paths = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let head = head_of(&mut stream);
            let path = head.split(' ').nth(1).unwrap_or_default().to_string();
            paths.lock().unwrap().push(path);
            let body = "hello from the machine\n";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

#[tokio::test]
async fn allow_hosts_are_reached_through_the_proxy_over_http_connect_and_socks_and_nothing_else() {
    support::ensure_tool("curl", "curl");
    let (port, seen) = machine_web_server();
    let mut w = world("[sandbox]\nallow_hosts = [\"localhost\"]\n").await;
    // The command is told where the proxy is; its own loopback stays
    // direct (NO_PROXY), so these name the machine's through the proxy.
    let via = "env -u NO_PROXY -u no_proxy curl -sS --max-time 20";
    let ran = w
        .bash(
            &format!(
                "echo \"proxy=$HTTPS_PROXY\"; {via} http://localhost:{port}/plain && {via} -p http://localhost:{port}/tunnel && env -u HTTP_PROXY -u http_proxy {via} http://localhost:{port}/socks"
            ),
            "reject_once",
        )
        .await;
    assert!(!ran.is_error, "{}", ran.text);
    assert!(ran.questions.is_empty(), "{:?}", ran.questions);
    assert!(ran.text.contains("proxy=http://127.0.0.1:"), "{}", ran.text);
    assert_eq!(
        ran.text.matches("hello from the machine").count(),
        3,
        "{}",
        ran.text
    );
    assert_eq!(*seen.lock().unwrap(), ["/plain", "/tunnel", "/socks"]);

    // A host not listed: refused by the proxy, with the reason; the
    // model reads it and the user is asked whether to run it outside.
    let ran = w
        .bash(
            &format!("{via} -p http://127.0.0.1:{port}/denied"),
            "reject_once",
        )
        .await;
    assert!(ran.is_error, "{}", ran.text);
    assert!(
        ran.text.contains("CONNECT tunnel failed, response 403"),
        "{}",
        ran.text
    );
    assert!(
        ran.text.contains("allow_hosts does not list"),
        "{}",
        ran.text
    );
    assert_eq!(ran.questions.len(), 1, "{:?}", ran.questions);
    // Past the proxy there is still no way out: a direct connection finds
    // only the sandbox's own loopback.
    let ran = w
        .bash(
            &format!("curl -sS --noproxy '*' --max-time 20 http://localhost:{port}/direct"),
            "reject_once",
        )
        .await;
    assert!(ran.is_error, "{}", ran.text);
    assert!(!ran.text.contains("hello from the machine"), "{}", ran.text);
    assert_eq!(*seen.lock().unwrap(), ["/plain", "/tunnel", "/socks"]);

    // The proxy's socket is pincer's own, out of the commands' sight,
    // and goes with pincer.
    let sockets = |root: &Path| -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut work = vec![root.to_path_buf()];
        while let Some(dir) = work.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    work.push(path);
                } else if path.to_string_lossy().contains("proxy-") {
                    out.push(path);
                }
            }
        }
        out
    };
    let home = w.sandbox.home().to_path_buf();
    assert_eq!(sockets(&home).len(), 1, "{:?}", sockets(&home));
    w.acp.close_stdin();
    assert!(w.acp.wait_exit().await.success());
    support::wait_until(
        "the proxy's socket to go with pincer",
        Duration::from_secs(10),
        || sockets(&home).is_empty(),
    )
    .await;
}

#[tokio::test]
async fn a_model_s_own_sandbox_table_applies_to_its_sessions() {
    // The mock answers as Anthropic: its table makes the sandbox
    // read-only, so a write in the project is stopped.
    let mut w = world(
        "[sandbox.by_provider.anthropic]\nmode = \"read-only\"\n[sandbox.by_provider.openai]\nmode = \"off\"\n",
    )
    .await;
    let ran = w.bash("echo x > inside.txt", "reject_once").await;
    assert!(ran.is_error, "{}", ran.text);
    assert!(
        ran.text.contains("The sandbox stopped this command"),
        "{}",
        ran.text
    );
    assert!(!w.sandbox.work().join("inside.txt").exists());
    // The session's own choice is over the model's.
    let result = w
        .acp
        .call(
            "session/set_config_option",
            json!({"sessionId": w.session, "configId": "sandbox", "value": "workspace-write"}),
        )
        .await;
    assert!(result.get("configOptions").is_some(), "{result}");
    let ran = w.bash("echo x > inside.txt", "reject_once").await;
    assert!(!ran.is_error, "{}", ran.text);
    assert!(w.sandbox.work().join("inside.txt").exists());
}

#[tokio::test]
async fn behind_the_machine_s_own_proxy_allowed_hosts_are_reached_through_it() {
    support::ensure_tool("curl", "curl");
    use std::io::Write;
    // The user's proxy, on this machine's loopback: it takes a CONNECT,
    // then answers what comes through the tunnel as the host would.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (said, heard) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        said.send(head_of(&mut stream)).unwrap();
        let _ = stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
        said.send(head_of(&mut stream)).unwrap();
        let body = "answered through the user's proxy\n";
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let mut w = world_with(
        Sandbox::outside_temp(),
        "[sandbox]\nallow_hosts = [\"example.invalid\"]\n",
        &[("HTTPS_PROXY", format!("http://u:p@127.0.0.1:{port}"))],
    )
    .await;
    // `.invalid` never resolves: only the user's proxy can take it on.
    let ran = w
        .bash(
            "curl -sS --max-time 20 http://example.invalid/through",
            "reject_once",
        )
        .await;
    assert!(!ran.is_error, "{}", ran.text);
    assert!(
        ran.text.contains("answered through the user's proxy"),
        "{}",
        ran.text
    );
    let connect = heard.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        connect.starts_with("CONNECT example.invalid:80 HTTP/1.1\r\n"),
        "{connect}"
    );
    assert!(
        connect.contains("Proxy-Authorization: Basic dTpw\r\n"),
        "{connect}"
    );
    let request = heard.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        request.starts_with("GET /through HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(!request.contains("Proxy-Authorization"), "{request}");
}
