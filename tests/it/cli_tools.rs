//! The command line around the agent, end to end against the real binary:
//! failing fast on errors that waiting cannot fix and reporting each retry
//! once, `pincer auth list` with other tools' credentials, `pincer login`
//! on a real pseudo-terminal, `pincer doctor`, and shell completions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::io::{Read, Write};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Acp, Sandbox, updates_of};
use support::mock_model::{MockModel, Reply};
use support::{prompt, wait_until};

const OVERLOADED: &str =
    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;

/// A loopback port nothing listens on: bound, then released.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

async fn output(mut cmd: tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("pincer did not finish")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn a_provider_nobody_listens_for_fails_at_once_with_a_clear_error() {
    let sandbox = Sandbox::new();
    let port = closed_port();
    // The default retry settings: 2 s, 4 s, 8 s of waiting if the refused
    // connection were retried.
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!("[providers.anthropic]\nbase_url = \"http://127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    let mut cmd = sandbox.command(&["run", "hi"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key");
    let started = Instant::now();
    let out = output(cmd).await;
    let elapsed = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        elapsed < Duration::from_secs(5),
        "took {elapsed:?} to give up on a refused connection:\n{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    let line = lines[0];
    for part in [
        "pincer: cannot connect to anthropic: ",
        &format!("http://127.0.0.1:{port}/v1/messages"),
        "Connection refused",
        "Waiting will not fix this: check the provider's base_url",
    ] {
        assert!(line.contains(part), "`{part}` missing in: {line}");
    }
}

#[tokio::test]
async fn a_base_url_without_a_scheme_is_refused_when_the_config_is_read() {
    for project in [false, true] {
        let sandbox = Sandbox::new();
        let port = closed_port();
        let config = format!("[providers.anthropic]\nbase_url = \"127.0.0.1:{port}\"\n");
        let file = if project {
            sandbox.write(".pincer/config.toml", &config)
        } else {
            let file = sandbox.home().join("config.toml");
            std::fs::write(&file, &config).unwrap();
            file
        };
        let mut cmd = sandbox.command(&["run", "hi"]);
        cmd.env("ANTHROPIC_API_KEY", "test-key");
        let started = Instant::now();
        let out = output(cmd).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(out.status.code(), Some(1));
        assert_eq!(
            text(&out.stderr),
            format!(
                "pincer: {} is not valid: providers.anthropic.base_url `127.0.0.1:{port}` is not \
                 an http:// or https:// address; write it with its scheme, e.g. \
                 `http://127.0.0.1:{port}`\n",
                file.display()
            )
        );
    }
}

/// Three answers: overloaded twice, then the text.
async fn overloaded_twice() -> MockModel {
    let mock = MockModel::start().await;
    mock.push(Reply::status(529, OVERLOADED));
    mock.push(Reply::status(529, OVERLOADED));
    mock.push(Reply::fixture("anthropic/text.sse"));
    mock
}

fn fast_retries(sandbox: &Sandbox) {
    std::fs::write(
        sandbox.home().join("config.toml"),
        "retry_base_delay_ms = 10\n",
    )
    .unwrap();
}

#[tokio::test]
async fn each_retry_is_reported_once_by_pincer_run() {
    let sandbox = Sandbox::new();
    fast_retries(&sandbox);
    let mock = overloaded_twice().await;
    let mut cmd = sandbox.command(&["run", "hi"]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let out = output(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(mock.requests().len(), 3);
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("overloaded"))
        .collect();
    assert_eq!(reports.len(), 2, "{stderr}");
    for line in reports {
        assert!(
            line.starts_with("pincer: anthropic is overloaded: Overloaded; retrying in "),
            "{line}"
        );
    }
}

#[tokio::test]
async fn each_retry_is_reported_once_to_the_editor() {
    let sandbox = Sandbox::new();
    fast_retries(&sandbox);
    let mock = overloaded_twice().await;
    let mut acp = support::spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp.new_session(&sandbox.work()).await;
    let id = acp.send("session/prompt", prompt(&session, "hi")).await;
    let (response, before) = acp.until_response(id).await;
    assert_eq!(response["result"], json!({"stopReason": "end_turn"}));
    // Not coalesced: each notice is its own update.
    let notices: Vec<Value> = updates_of(&before)
        .into_iter()
        .filter(|u| u.to_string().contains("overloaded") || u.to_string().contains("Retrying in"))
        .collect();
    assert_eq!(notices.len(), 2, "{notices:#?}");
    for (n, notice) in notices.iter().enumerate() {
        let text = notice["content"]["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("anthropic is overloaded: Overloaded. Retrying in ")
                && text.ends_with(&format!("(attempt {}).\n", n + 1)),
            "{notice}"
        );
    }
    acp.close_stdin();
    acp.wait_exit().await;
    let Acp { stderr, .. } = acp;
    let stderr = stderr.await.unwrap();
    // The editor's log (pincer's stderr) does not tell it a second time.
    assert!(!stderr.contains("overloaded"), "{stderr}");
}

/// Claude Code's, Codex's and OpenClaw's credential files under the
/// sandbox's HOME, each with a secret that must never be printed.
fn other_tools_credentials(sandbox: &Sandbox) -> Vec<String> {
    let marker = sandbox
        .dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let secrets = vec![
        format!("sk-ant-oat01-claude-{marker}"),
        format!("sk-codex-{marker}"),
        format!("sk-openclaw-{marker}"),
    ];
    let write = |path: &str, text: String| {
        let path = sandbox.home().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        ".claude/.credentials.json",
        json!({"claudeAiOauth": {"accessToken": secrets[0], "refreshToken": format!("{}-refresh", secrets[0]), "expiresAt": 4_102_444_800_000u64}}).to_string(),
    );
    write(
        ".codex/auth.json",
        json!({"OPENAI_API_KEY": secrets[1]}).to_string(),
    );
    write(
        ".openclaw/agents/main/agent/auth-profiles.json",
        json!({"version": 1, "profiles": {"google:work": {"type": "api_key", "provider": "google", "key": secrets[2]}}}).to_string(),
    );
    secrets
}

fn assert_no_secret(secrets: &[String], out: &Output) {
    for secret in secrets {
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !text(bytes).contains(secret.as_str()),
                "a secret on {stream}: {}",
                text(bytes)
            );
        }
    }
}

#[tokio::test]
async fn auth_list_shows_other_tools_credentials_read_only_and_never_their_secrets() {
    let sandbox = Sandbox::new();
    let secrets = other_tools_credentials(&sandbox);
    let home = sandbox.home();
    let out = output(sandbox.command(&["auth", "list", "--json"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_no_secret(&secrets, &out);
    let mut rows: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    rows.sort_by_key(|r| r["id"].as_str().unwrap_or_default().to_string());
    let row = |id: &str, provider: &str, file: &str| {
        json!({"id": id, "provider": provider, "kind": "external",
               "file": home.join(file).display().to_string(), "readOnly": true, "state": "ready"})
    };
    assert_eq!(
        rows,
        vec![
            row("claude-code", "anthropic", ".claude/.credentials.json"),
            row("codex", "openai", ".codex/auth.json"),
            row(
                "openclaw:google:work",
                "google",
                ".openclaw/agents/main/agent/auth-profiles.json"
            ),
        ]
    );
    let out = output(sandbox.command(&["auth", "list"])).await;
    assert_eq!(out.status.code(), Some(0));
    assert_no_secret(&secrets, &out);
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    for (id, file) in [
        ("claude-code", ".claude/.credentials.json"),
        ("codex", ".codex/auth.json"),
        (
            "openclaw:google:work",
            ".openclaw/agents/main/agent/auth-profiles.json",
        ),
    ] {
        let suffix = format!("external read-only ({})", home.join(file).display());
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{id} ")) && l.ends_with(&suffix)),
            "no read-only row for {id}:\n{stdout}"
        );
    }
}

#[test]
fn login_does_not_echo_the_key_typed_on_a_terminal() {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let sandbox = Sandbox::new();
    let key = format!(
        "sk-typed-{}",
        sandbox
            .dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "")
    );
    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 200,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_pincer"));
    cmd.args(["login", "--provider", "anthropic", "--api-key"]);
    cmd.env_clear();
    cmd.env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd.env("HOME", sandbox.home());
    cmd.env("PINCER_HOME", sandbox.home());
    cmd.cwd(sandbox.work());
    let mut child = pty.slave.spawn_command(cmd).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let mut writer = pty.master.take_writer().unwrap();
    let seen = Arc::new(Mutex::new(Vec::<u8>::new()));
    let sink = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let shown = || text(&seen.lock().unwrap());
    runtime.block_on(wait_until(
        "no key prompt on the terminal",
        Duration::from_secs(20),
        || shown().contains("API key"),
    ));
    // Typed once echo is off (a key pasted before pincer reads would be
    // echoed by any program); if echo never goes off, it is typed anyway
    // and shows.
    let echo_off = || {
        pty.master
            .get_termios()
            .is_some_and(|t| t.local_flags.bits() & 0o10 == 0)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !echo_off() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    writer.write_all(format!("{key}\r").as_bytes()).unwrap();
    writer.flush().unwrap();
    let status = runtime
        .block_on(async {
            tokio::time::timeout(
                Duration::from_secs(20),
                tokio::task::spawn_blocking(move || child.wait()),
            )
            .await
        })
        .expect("pincer login did not exit")
        .unwrap()
        .unwrap();
    runtime.block_on(wait_until(
        "no confirmation on the terminal",
        Duration::from_secs(20),
        || shown().contains("Saved anthropic:default"),
    ));
    assert!(status.success(), "{}", shown());
    let screen = shown();
    assert!(!screen.contains(&key), "the key was echoed:\n{screen}");
    // Not a character of it, in order or not.
    assert!(!screen.contains("sk-typed"), "{screen}");
    let stored =
        std::fs::read_to_string(sandbox.home().join("agents/main/auth-profiles.json")).unwrap();
    assert!(stored.contains(&key), "the key was not stored: {stored}");
}

#[tokio::test]
async fn doctor_reports_the_setup_without_secrets_and_fails_on_what_is_broken() {
    let sandbox = Sandbox::new();
    let secrets = other_tools_credentials(&sandbox);
    let mock = MockModel::start().await;
    let env_key = "sk-ant-env-doctor-000000";
    // The project has an MCP server; untrusted, it must not start.
    let marker = sandbox.dir.path().join("mcp-started");
    sandbox.write(
        ".pincer/config.toml",
        &format!(
            "[mcp.servers.evil]\ncommand = \"sh\"\nargs = [\"-c\", \"touch {}\"]\n",
            marker.display()
        ),
    );
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[mcp.servers.mine]\ncommand = \"my-mcp-server\"\nargs = [\"--token\", \"tok-secret-arg\"]\n",
    )
    .unwrap();
    let mut cmd = sandbox.command(&["doctor", "--json"]);
    cmd.env("ANTHROPIC_API_KEY", env_key)
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let out = output(cmd).await;
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{stderr}",
        text(&out.stdout)
    );
    let mut all_secrets = secrets.clone();
    all_secrets.push(env_key.to_string());
    all_secrets.push("tok-secret-arg".to_string());
    assert_no_secret(&all_secrets, &out);
    assert!(
        !marker.exists(),
        "doctor started the untrusted project's MCP server"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let home = sandbox.home();
    let work = sandbox.work();
    assert_eq!(report["ok"], true);
    assert_eq!(
        report["versions"],
        json!({"pincer": env!("CARGO_PKG_VERSION"), "os": std::env::consts::OS, "arch": std::env::consts::ARCH})
    );
    assert_eq!(
        report["config_files"],
        json!([
            {"path": home.join("config.toml"), "kind": "user", "exists": true},
            {"path": work.join(".pincer/config.toml"), "kind": "project", "exists": true, "trust": "untrusted"},
            {"path": home.join("agents/main/auth-profiles.json"), "kind": "auth-profiles", "exists": false},
        ])
    );
    assert_eq!(report["trust"]["root"], json!(work));
    assert_eq!(report["trust"]["state"], "untrusted");
    assert_eq!(
        report["model"],
        json!({
            "id": "anthropic/claude-sonnet-4-5",
            "credential": "env:ANTHROPIC_API_KEY",
            "has_credentials": true,
            "endpoint": {"url": format!("{}/", mock.anthropic_url()), "answers": true, "status": 400, "error": null}
        })
    );
    // The probe carried no credential.
    let probes = mock.requests();
    assert_eq!(probes.len(), 1);
    assert_eq!(probes[0].path, "/");
    assert_eq!(probes[0].header("x-api-key"), None);
    assert_eq!(probes[0].header("authorization"), None);
    let credentials: Vec<(String, Vec<Value>)> = report["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["provider"].as_str().unwrap().to_string(),
                p["sources"].as_array().unwrap().clone(),
            )
        })
        .filter(|(_, sources)| !sources.is_empty())
        .collect();
    assert_eq!(
        credentials,
        vec![
            (
                "anthropic".to_string(),
                vec![
                    json!({"id": "env:ANTHROPIC_API_KEY"}),
                    json!({"id": "claude-code", "read_only_file": home.join(".claude/.credentials.json")}),
                ]
            ),
            (
                "google".to_string(),
                vec![
                    json!({"id": "openclaw:google:work", "read_only_file": home.join(".openclaw/agents/main/agent/auth-profiles.json")})
                ]
            ),
            (
                "openai".to_string(),
                vec![json!({"id": "codex", "read_only_file": home.join(".codex/auth.json")})]
            ),
        ]
    );
    assert_eq!(
        report["mcp_servers"],
        json!([
            {"name": "mine", "origin": "config", "target": "my-mcp-server", "would_start": true},
            {"name": "evil", "origin": "project", "target": null, "would_start": false,
             "why_not": "the project is not trusted; `pincer trust` after reading .pincer/config.toml"},
        ])
    );
    assert_eq!(report["problems"], json!([]));

    // Plain text says the same, also without secrets.
    let mut cmd = sandbox.command(&["doctor"]);
    cmd.env("ANTHROPIC_API_KEY", env_key)
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url());
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(0));
    assert_no_secret(&all_secrets, &out);
    let stdout = text(&out.stdout);
    for line in [
        "Model: anthropic/claude-sonnet-4-5",
        "  credential: env:ANTHROPIC_API_KEY",
        "  evil (project): not started: the project is not trusted",
        "No problems found.",
    ] {
        assert!(stdout.contains(line), "`{line}` missing:\n{stdout}");
    }

    // Broken: no credential for the model, and its endpoint does not answer.
    let empty = Sandbox::new();
    let port = closed_port();
    let mut cmd = empty.command(&["doctor", "--json"]);
    cmd.env("ANTHROPIC_BASE_URL", format!("http://127.0.0.1:{port}"));
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert_no_secret(&all_secrets, &out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["model"]["has_credentials"], false);
    assert_eq!(report["model"]["endpoint"]["answers"], false);
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[1].as_str().unwrap().contains("does not answer"),
        "{problems:?}"
    );
}

#[tokio::test]
async fn doctor_shows_the_project_s_checkpoint_store_and_its_limits() {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        "[checkpoints]\nmax_size = \"2GB\"\n",
    )
    .unwrap();
    let model_url = format!("http://127.0.0.1:{}", closed_port());
    let doctor = |json: bool| {
        let mut cmd = sandbox.command(if json {
            &["doctor", "--json"][..]
        } else {
            &["doctor"][..]
        });
        cmd.env("ANTHROPIC_API_KEY", "sk-ant-test")
            .env("ANTHROPIC_BASE_URL", &model_url);
        output(cmd)
    };
    let report: Value = serde_json::from_slice(&doctor(true).await.stdout).unwrap();
    let root = std::path::PathBuf::from(report["trust"]["root"].as_str().unwrap());
    let dir = pincer::checkpoint::store_dir(&sandbox.home(), &root);
    assert_eq!(
        report["checkpoints"],
        json!({"dir": dir, "size": 0, "max_size": 2_000_000_000u64, "max_file": 10_485_760})
    );
    assert!(!dir.exists(), "doctor created the store");

    let store =
        pincer::checkpoint::store::Store::open(&dir, pincer::checkpoint::store::Limits::default())
            .unwrap();
    store.put_bytes(&[b'x'; 3000]).unwrap();
    store.put_bytes(&[b'y'; 1000]).unwrap();
    let report: Value = serde_json::from_slice(&doctor(true).await.stdout).unwrap();
    assert_eq!(report["checkpoints"]["size"], 4000);
    let stdout = text(&doctor(false).await.stdout);
    assert!(
        stdout.contains(&format!(
            "Checkpoints: {}\n  3.9 KiB of 1.9 GiB (files over 10.0 MiB are not kept)\n",
            dir.display()
        )),
        "{stdout}"
    );
}

#[tokio::test]
async fn completion_scripts_are_generated_and_bash_completes_subcommands() {
    let sandbox = Sandbox::new();
    for (shell, start) in [
        ("bash", "_pincer() {"),
        ("zsh", "#compdef pincer"),
        ("fish", "# Print an optspec for argparse"),
    ] {
        let out = output(sandbox.command(&["completions", shell])).await;
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        assert!(script.starts_with(start), "{shell}: {script}");
        assert!(script.contains("doctor"), "{shell} misses a subcommand");
        std::fs::write(sandbox.dir.path().join(format!("pincer.{shell}")), script).unwrap();
    }
    let bash_file = sandbox.dir.path().join("pincer.bash");
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&bash_file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{}", text(&check.stderr));
    // What bash does on `pincer ru<TAB>`: the function `complete -p`
    // names, called with COMP_WORDS / COMP_CWORD.
    let probe = format!(
        r#"source '{}'
spec=$(complete -p pincer)
fn=$(printf '%s\n' "$spec" | sed -n 's/.*-F \([^ ]*\).*/\1/p')
complete_line() {{
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 ))
  COMP_LINE="$*"; COMP_POINT=${{#COMP_LINE}}
  COMPREPLY=()
  "$fn" pincer "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
  printf '%s\n' "${{COMPREPLY[@]}}"
}}
echo "spec: $spec"
echo "--- ru"
complete_line pincer ru
echo "--- auth"
complete_line pincer auth ''
"#,
        bash_file.display()
    );
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&probe)
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let ru: Vec<&str> = stdout
        .split("--- ru\n")
        .nth(1)
        .unwrap()
        .split("--- auth\n")
        .next()
        .unwrap()
        .lines()
        .collect();
    assert_eq!(ru, ["run"], "{stdout}");
    assert!(
        stdout
            .split("--- auth\n")
            .nth(1)
            .unwrap()
            .lines()
            .any(|l| l == "list"),
        "{stdout}"
    );
}
