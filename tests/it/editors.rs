//! The editor configurations under `editors/` and the ACP Registry entry
//! under `packaging/registry/` are what users copy: a typo there is a broken
//! install. Each shipped file is parsed by a real parser of its language,
//! the values that name pincer's interfaces (config option ids, auth
//! methods, the command) are checked against the running binary, and the
//! one client that runs headless here, acpx (npm), drives `pincer acp`
//! with the shipped config against the mock model.
//!
//! acpx is installed on first use into the target directory (`npm install
//! --prefix`, pinned below) and reused; the test needs node and npm, never
//! skips. The Neovim and Emacs plugins are not on any registry this project
//! can reach, so their files are only checked for syntax (`luac5.4 -p`,
//! `emacs --batch`); a test that finds either missing installs it from
//! Debian itself (`.ci/debian-tool`, as the browser tests do), so the
//! README's test command alone passes on a fresh machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};

/// The acpx release the test drives (npm).
const ACPX_VERSION: &str = "0.1.15";
/// One acpx run: start, initialize, session, one prompt turn with a tool.
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn shipped(relative: &str) -> String {
    let path = manifest_dir().join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the shipped file {}: {e}", path.display()))
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => manifest_dir().join(dir),
        None => manifest_dir().join("target"),
    }
}

/// Zed's settings are JSON with comments (and trailing commas); nothing
/// looser, so a file Zed would reject fails here too.
fn parse_jsonc(relative: &str) -> Value {
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..Default::default()
    };
    jsonc_parser::parse_to_serde_value(&shipped(relative), &options)
        .unwrap_or_else(|e| panic!("{relative} is not valid JSON with comments: {e}"))
}

fn parse_json(relative: &str) -> Value {
    serde_json::from_str(&shipped(relative))
        .unwrap_or_else(|e| panic!("{relative} is not valid JSON: {e}"))
}

/// Every file under `editors/` and `packaging/`, relative to the manifest
/// directory, sorted.
fn shipped_files() -> Vec<String> {
    let mut files = Vec::new();
    for root in ["editors", "packaging"] {
        let mut stack = vec![manifest_dir().join(root)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let relative = path.strip_prefix(manifest_dir()).unwrap();
                    files.push(relative.to_str().unwrap().to_string());
                }
            }
        }
    }
    files.sort();
    files
}

#[test]
fn every_shipped_file_is_checked_here() {
    // A new config must get a check below before it ships.
    assert_eq!(
        shipped_files(),
        [
            "editors/acpx/acpxrc.json",
            "editors/emacs/pincer-agent-shell.el",
            "editors/jetbrains/README.md",
            "editors/jetbrains/acp.json",
            "editors/neovim/agentic.lua",
            "editors/neovim/avante.lua",
            "editors/neovim/codecompanion.lua",
            "editors/toad/pincer.toml",
            "editors/zed/settings.json",
            "packaging/registry/agent.json",
            "packaging/registry/icon.svg",
            "packaging/release.sh",
        ]
    );
}

#[test]
fn json_and_toml_configs_parse_and_start_pincer_acp() {
    let zed = parse_jsonc("editors/zed/settings.json");
    let entry = &zed["agent_servers"]["pincer"];
    assert_eq!(
        (&entry["type"], &entry["command"], &entry["args"]),
        (&json!("custom"), &json!("pincer"), &json!(["acp"]))
    );
    // Model and thinking come from config options, not from variables.
    assert_eq!(entry["env"], json!({"RUST_LOG": "warn"}));

    assert_eq!(
        parse_json("editors/jetbrains/acp.json"),
        json!({"agent_servers": {"pincer": {
            "command": "pincer", "args": ["acp"], "env": {"RUST_LOG": "warn"}
        }}})
    );

    let mut acpx = parse_json("editors/acpx/acpxrc.json");
    acpx.as_object_mut().unwrap().remove("//");
    assert_eq!(
        acpx,
        json!({"defaultAgent": "pincer", "agents": {"pincer": {"command": "pincer acp"}}})
    );

    let toad: toml::Table = toml::from_str(&shipped("editors/toad/pincer.toml"))
        .unwrap_or_else(|e| panic!("editors/toad/pincer.toml is not valid TOML: {e}"));
    assert_eq!(
        (
            toad["protocol"].as_str(),
            toad["run_command"]["*"].as_str(),
            toad["type"].as_str(),
        ),
        (Some("acp"), Some("pincer acp"), Some("coding"))
    );
}

/// Runs a syntax checker on `files`, failing with its output.
fn check_syntax(program: &str, args: &[&str], what: &str) {
    let output = std::process::Command::new(program)
        .args(args)
        .current_dir(manifest_dir())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `{program}` to check {what} ({e}); install it (Debian: see .ci/run)")
        });
    assert!(
        output.status.success(),
        "{what} has a syntax error ({program}: {})\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn neovim_configs_are_valid_lua() {
    support::ensure_tool("luac5.4", "lua5.4");
    for file in [
        "editors/neovim/codecompanion.lua",
        "editors/neovim/avante.lua",
        "editors/neovim/agentic.lua",
    ] {
        check_syntax("luac5.4", &["-p", file], file);
    }
}

#[test]
fn emacs_config_is_readable_elisp() {
    // Balanced parentheses, then every form read to the end of the file:
    // what `load` does before it evaluates anything.
    support::ensure_tool("emacs", "emacs-nox");
    let script = r#"
(let ((file (car command-line-args-left)))
  (with-temp-buffer
    (insert-file-contents file)
    (emacs-lisp-mode)
    (check-parens)
    (goto-char (point-min))
    (let ((forms 0))
      (condition-case nil
          (while t (read (current-buffer)) (setq forms (1+ forms)))
        (end-of-file nil))
      (skip-chars-forward " \t\n")
      (unless (eobp) (error "unread text at %d" (point)))
      (princ (format "%d forms\n" forms)))))"#;
    check_syntax(
        "emacs",
        &[
            "--batch",
            "-Q",
            "--eval",
            script,
            "editors/emacs/pincer-agent-shell.el",
        ],
        "editors/emacs/pincer-agent-shell.el",
    );
}

#[tokio::test]
async fn zed_default_config_options_are_options_pincer_accepts() {
    let zed = parse_jsonc("editors/zed/settings.json");
    let entry = &zed["agent_servers"]["pincer"];
    let defaults = entry["default_config_options"]
        .as_object()
        .expect("the Zed entry sets default_config_options");
    let mut ids: Vec<&str> = defaults.keys().map(String::as_str).collect();
    ids.sort();
    assert_eq!(ids, ["model", "thought_level"]);

    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let mut acp = support::spawn_anthropic(&sandbox, &mock);
    acp.initialize().await;
    let session = acp
        .call(
            "session/new",
            json!({"cwd": sandbox.work(), "mcpServers": []}),
        )
        .await;
    let session_id = session["sessionId"].as_str().unwrap().to_string();
    let announced = session["configOptions"].as_array().unwrap();
    for (id, value) in defaults {
        let option = announced
            .iter()
            .find(|o| o["id"] == id.as_str())
            .unwrap_or_else(|| panic!("pincer announces no config option `{id}`"));
        let values: Vec<&Value> = option["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| &o["value"])
            .collect();
        assert!(
            values.contains(&value),
            "`{id}` = {value} is not among pincer's values {values:?}"
        );
        // What Zed sends for a default when a thread starts.
        let result = acp
            .call(
                "session/set_config_option",
                json!({"sessionId": session_id, "configId": id, "value": value}),
            )
            .await;
        let current = result["configOptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id.as_str())
            .map(|o| o["currentValue"].clone());
        assert_eq!(current, Some(value.clone()), "after setting `{id}`");
    }
    let modes: Vec<&Value> = session["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert!(
        modes.contains(&&entry["default_mode"]),
        "default_mode {} is not one of {modes:?}",
        entry["default_mode"]
    );
}

/// Runs a setup command, failing the test with its output if it fails.
fn run_setup(program: &str, args: &[&str], what: &str) {
    let shown = format!("{program} {}", args.join(" "));
    let output = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot install {what}: `{shown}` did not start ({e}); install node and npm")
        });
    assert!(
        output.status.success(),
        "cannot install {what}: `{shown}` failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}\n\
         It needs npm and a reachable npm registry.",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// acpx's entry script, installing the pinned version under the target
/// directory if it is not there. A lock file serialises test processes that
/// race to install it.
fn ensure_acpx() -> PathBuf {
    let target = target_dir();
    std::fs::create_dir_all(&target).unwrap();
    let prefix = target.join(format!("acpx-{ACPX_VERSION}"));
    let script = prefix.join("node_modules/acpx/dist/cli.js");
    let lock = std::fs::File::create(target.join(format!("acpx-{ACPX_VERSION}.lock"))).unwrap();
    lock.lock().unwrap();
    let installed = std::fs::read_to_string(prefix.join("node_modules/acpx/package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|package| package["version"] == ACPX_VERSION);
    if !installed || !script.is_file() {
        eprintln!("installing acpx@{ACPX_VERSION} into {}", prefix.display());
        run_setup(
            "npm",
            &[
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                prefix.to_str().unwrap(),
                &format!("acpx@{ACPX_VERSION}"),
            ],
            "acpx",
        );
    }
    assert!(script.is_file(), "acpx has no {}", script.display());
    script
}

#[tokio::test]
async fn acpx_drives_pincer_with_the_shipped_config() {
    let acpx = tokio::task::spawn_blocking(ensure_acpx)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let sandbox = Sandbox::new();
    sandbox.write("hello.txt", "hello\n");
    // The shipped file, as a project config: acpx finds pincer by the
    // command in it (`pincer acp`, looked up on PATH).
    sandbox.write(".acpxrc.json", &shipped("editors/acpx/acpxrc.json"));
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/tool_read.sse"));
    mock.push(Reply::fixture("anthropic/after_tool.sse"));

    // acpx's JSON format is the conversation, one JSON-RPC message a line,
    // both directions.
    let messages = run_acpx(
        &acpx,
        &sandbox,
        &mock,
        &["--format", "json", "exec", "Read hello.txt"],
    )
    .await;
    let result_of = |method: &str| -> Value {
        let id = messages
            .iter()
            .find(|m| m["method"] == method && m.get("id").is_some())
            .unwrap_or_else(|| panic!("acpx sent no {method}\n{messages:#?}"))["id"]
            .clone();
        messages
            .iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .unwrap_or_else(|| panic!("no answer to {method}\n{messages:#?}"))["result"]
            .clone()
    };
    assert_eq!(result_of("initialize")["agentInfo"]["name"], "pincer");
    assert_eq!(
        result_of("session/prompt"),
        json!({"stopReason": "end_turn"})
    );

    let updates: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "I'll read the file.The file says hello.");
    let tool_calls: Vec<(Value, Value)> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
        .map(|u| (u["sessionUpdate"].clone(), u["status"].clone()))
        .collect();
    assert_eq!(
        tool_calls,
        [
            (json!("tool_call"), json!("in_progress")),
            (json!("tool_call_update"), json!("completed")),
        ]
    );
    // The model saw the file through pincer's read tool.
    assert_eq!(mock.violations(), Vec::<String>::new());
    assert_eq!(mock.requests().len(), 2);
    let results = support::tool_results(&mock, 1);
    assert_eq!(results.len(), 1);
    assert_eq!((results[0].0.as_str(), results[0].1), ("toolu_01", false));
    assert!(
        results[0].2.contains("hello"),
        "the tool result does not hold the file: {:?}",
        results[0].2
    );
}

/// Runs acpx (the pinned one) with `args` in `sandbox`'s work dir, where
/// the shipped config makes pincer its default agent against `mock`;
/// returns its JSON lines, failing with its output when it fails.
async fn run_acpx(acpx: &Path, sandbox: &Sandbox, mock: &MockModel, args: &[&str]) -> Vec<Value> {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_pincer")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let child = tokio::process::Command::new("node")
        .arg(acpx)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", sandbox.home())
        .env("PINCER_HOME", sandbox.home())
        .env("RUST_LOG", "warn")
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .current_dir(sandbox.work())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start node {}: {e}", acpx.display()));
    let output = tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("acpx {args:?} did not finish within {RUN_TIMEOUT:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "acpx {args:?} failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("acpx printed a non-JSON line ({e}): {line}\n{stderr}"))
        })
        .collect()
}

/// What acpx users do: `acpx sessions new`, then `acpx prompt` in a new
/// process, which loads the saved session from a new `pincer acp`. A
/// session never prompted used to exist only in the first process's
/// memory, and the load answered -32002.
#[tokio::test]
async fn acpx_prompts_a_session_an_earlier_process_created() {
    let acpx = tokio::task::spawn_blocking(ensure_acpx)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    let sandbox = Sandbox::new();
    sandbox.write(".acpxrc.json", &shipped("editors/acpx/acpxrc.json"));
    let mock = MockModel::start().await;
    mock.push(Reply::fixture("anthropic/text.sse"));

    run_acpx(
        &acpx,
        &sandbox,
        &mock,
        &["--format", "json", "--ttl", "1", "sessions", "new"],
    )
    .await;
    assert_eq!(mock.requests().len(), 0);
    let messages = run_acpx(
        &acpx,
        &sandbox,
        &mock,
        &["--format", "json", "--ttl", "1", "prompt", "Hello"],
    )
    .await;
    let methods: Vec<&str> = messages
        .iter()
        .filter(|m| m.get("id").is_some())
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert!(
        methods.contains(&"session/load") && !methods.contains(&"session/new"),
        "the prompt did not load the saved session: {methods:?}\n{messages:#?}"
    );
    let load_id = messages
        .iter()
        .find(|m| m["method"] == "session/load")
        .unwrap()["id"]
        .clone();
    let load = messages
        .iter()
        .find(|m| m["id"] == load_id && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to session/load: {messages:#?}"));
    assert!(load.get("error").is_none(), "{load}");
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn registry_entry_matches_the_crate_version_and_names_versioned_archives() {
    let version = env!("CARGO_PKG_VERSION");
    let agent = parse_json("packaging/registry/agent.json");
    assert_eq!(
        agent["version"], version,
        "agent.json's version is not Cargo.toml's"
    );
    assert_eq!(agent["id"], "pincer");
    assert_eq!(agent["license"], env!("CARGO_PKG_LICENSE"));
    for field in ["name", "description", "repository"] {
        assert!(
            agent[field].as_str().is_some_and(|s| !s.is_empty()),
            "agent.json has no {field}"
        );
    }
    let repository = agent["repository"].as_str().unwrap();
    let archive = |triple: &str, ext: &str| {
        format!("{repository}/releases/download/v{version}/pincer-{version}-{triple}.{ext}")
    };
    let unix = |triple: &str| json!({"archive": archive(triple, "tar.gz"), "cmd": "./pincer", "args": ["acp"]});
    assert_eq!(
        agent["distribution"],
        json!({"binary": {
            "linux-x86_64": unix("x86_64-unknown-linux-gnu"),
            "linux-aarch64": unix("aarch64-unknown-linux-gnu"),
            "darwin-x86_64": unix("x86_64-apple-darwin"),
            "darwin-aarch64": unix("aarch64-apple-darwin"),
            "windows-x86_64": {
                "archive": archive("x86_64-pc-windows-msvc", "zip"),
                "cmd": "pincer.exe",
                "args": ["acp"],
            },
        }})
    );
    // release.sh builds exactly the archive the Linux entry names.
    let script = shipped("packaging/release.sh");
    assert!(
        script.contains(r#"name="pincer-${version}-${target}""#)
            && script.contains("target=x86_64-unknown-linux-gnu"),
        "release.sh does not name its archive pincer-VERSION-x86_64-unknown-linux-gnu"
    );
}

#[test]
fn registry_icon_is_16_pixels_square_and_monochrome() {
    let svg = shipped("packaging/registry/icon.svg");
    let root = svg.split('>').next().unwrap();
    for attribute in [r#"width="16""#, r#"height="16""#, r#"viewBox="0 0 16 16""#] {
        assert!(
            root.contains(attribute),
            "icon.svg's <svg> lacks {attribute}"
        );
    }
    // The registry's rule: paint only with currentColor (or none/inherit).
    for paint in ["fill=\"", "stroke=\"", "fill:", "stroke:"] {
        for (at, _) in svg.match_indices(paint) {
            let value: String = svg[at + paint.len()..]
                .chars()
                .take_while(|c| !matches!(c, '"' | ';'))
                .collect();
            assert!(
                ["currentColor", "none", "inherit"].contains(&value.trim()),
                "icon.svg paints with {value:?}; the registry allows only currentColor, none, inherit"
            );
        }
    }
    assert!(
        svg.contains("currentColor"),
        "icon.svg does not use currentColor"
    );
}
