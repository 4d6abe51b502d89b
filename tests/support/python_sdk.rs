//! The official Python ACP SDK (`agent-client-protocol` on PyPI, pinned in
//! `tests/clients/requirements.txt`) as an independent client of pincer:
//! a virtualenv under the target directory holding it, created on first
//! use and reused while the requirements file is unchanged, and a run of
//! `tests/clients/acp_python_client.py`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use super::acp_client::Sandbox;

/// The one place the SDK version is pinned (CI installs the same file).
const REQUIREMENTS: &str = include_str!("../clients/requirements.txt");
const PACKAGE: &str = "agent-client-protocol";
/// The whole client run: spawn, initialize, session, one prompt turn.
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn sdk_version() -> &'static str {
    let prefix = format!("{PACKAGE}==");
    REQUIREMENTS
        .lines()
        .find_map(|line| line.trim().strip_prefix(&prefix))
        .map(str::trim)
        .unwrap_or_else(|| {
            panic!("tests/clients/requirements.txt must pin {PACKAGE} exactly ({prefix}<version>)")
        })
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => manifest_dir().join(dir),
        None => manifest_dir().join("target"),
    }
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// Runs a setup command, failing the test with its output if it fails.
fn run_setup(program: &Path, args: &[&str], venv: &Path) {
    let shown = format!("{} {}", program.display(), args.join(" "));
    let output = std::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot create the Python virtualenv for the ACP SDK at {}: `{shown}` did not start ({e}); \
                 install python3 with the venv module",
                venv.display()
            )
        });
    assert!(
        output.status.success(),
        "cannot create the Python virtualenv for the ACP SDK at {}: `{shown}` failed ({})\n\
         --- stdout ---\n{}\n--- stderr ---\n{}\n\
         It needs python3 with the venv module and a reachable package index (PIP_INDEX_URL / PIP_FIND_LINKS).",
        venv.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
}

/// The Python of a virtualenv holding the pinned SDK, creating it if its
/// marker (a copy of the requirements it was built from) is missing or stale.
/// A lock file serialises test processes that race to create it.
pub fn ensure_venv() -> PathBuf {
    let version = sdk_version();
    let target = target_dir();
    std::fs::create_dir_all(&target).unwrap();
    let venv = target.join(format!("acp-python-venv-{version}"));
    let marker = venv.join("pincer-requirements.txt");
    let lock = std::fs::File::create(target.join(format!("acp-python-venv-{version}.lock")))
        .expect("create the virtualenv lock file");
    lock.lock().expect("lock the virtualenv lock file");
    if std::fs::read_to_string(&marker).is_ok_and(|built| built == REQUIREMENTS) {
        return venv_python(&venv);
    }
    eprintln!(
        "creating {} with {PACKAGE}=={version} (once per version)",
        venv.display()
    );
    if venv.exists() {
        std::fs::remove_dir_all(&venv).unwrap();
    }
    let venv_arg = venv.to_str().expect("target dir is UTF-8");
    run_setup(Path::new("python3"), &["-m", "venv", venv_arg], &venv);
    let requirements = manifest_dir().join("tests/clients/requirements.txt");
    run_setup(
        &venv_python(&venv),
        &[
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            "-r",
            requirements.to_str().expect("manifest dir is UTF-8"),
        ],
        &venv,
    );
    std::fs::write(&marker, REQUIREMENTS).unwrap();
    venv_python(&venv)
}

/// Runs the Python client in `sandbox`'s work directory with `env`,
/// against `agent`: a command line, or `["--ws", URL]` for an agent on a
/// websocket; returns its one JSON object and its stderr.
pub async fn run_client(
    python: &Path,
    sandbox: &Sandbox,
    agent: &[String],
    env: &[(&str, String)],
) -> (Value, String) {
    let script = manifest_dir().join("tests/clients/acp_python_client.py");
    // The client passes its own environment on to the agent, so this is the
    // same clean environment `Sandbox::command` gives the binary.
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg("-I")
        .arg(&script)
        .arg("--cwd")
        .arg(sandbox.work())
        .args(if agent.first().is_some_and(|a| a == "--ws") {
            None
        } else {
            Some("--")
        })
        .args(agent)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sandbox.home())
        .env("PINCER_HOME", sandbox.home())
        .env("RUST_LOG", "warn")
        .current_dir(sandbox.work())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    let output = tokio::time::timeout(RUN_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the Python ACP client did not finish within {RUN_TIMEOUT:?}"))
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(
        output.status.success(),
        "the Python ACP client failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    let result: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("the client's stdout is not one JSON object ({e})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")
    });
    (result, stderr)
}

/// What the client reports of the tool round trip the tests run (the mock
/// reads hello.txt, then answers) against `pincer acp` directly, whatever
/// the transport: a spawned agent or a websocket.
pub fn direct_tool_round_trip() -> Value {
    json!({
        "protocolVersion": 1,
        "agentName": "pincer",
        "stopReason": "end_turn",
        // Runs of message chunks are collapsed by the client.
        "updates": [
            // Parsed by the official Python SDK: the slash commands
            // announced after session/new, then the turn.
            "available_commands_update",
            "session_info_update",
            "agent_message_chunk",
            "tool_call",
            "tool_call_update",
            "usage_update",
            "agent_message_chunk",
            "usage_update",
        ],
        "toolCalls": [{
            "id": "toolu_01",
            "title": "Read hello.txt",
            "kind": "read",
            "status": "completed",
        }],
        // Reading inside the project needs no permission.
        "permissionRequests": [],
        "text": "I'll read the file.The file says hello.",
        "sdkComplaints": [],
        // The SDK (0.12.1, the newest on PyPI) predates ACP's tool
        // call `name` and the unstable `systemPrompt` capability; it
        // ignores them, as ACP asks of unknown fields.
        "lossyFields": [
            "initialize result.agentCapabilities.sessionCapabilities.systemPrompt: dropped ({\"mode\": {\"override\": {}}})",
            "session/update.update.name: dropped (\"read\")",
            "session/update.update.name: dropped (\"read\")",
        ],
    })
}
