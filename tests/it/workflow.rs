//! End to end: `pincer workflow` from the terminal, and which workflow
//! files count: the user's always, a project's only while it is trusted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use pretty_assertions::assert_eq;
use support::acp_client::Sandbox;

const REVIEW: &str = include_str!("../../fixtures/workflows/review.toml");

async fn pincer(sandbox: &Sandbox, args: &[&str]) -> (bool, String, String) {
    let out = sandbox
        .command(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn user_workflow(sandbox: &Sandbox, name: &str, text: &str) -> std::path::PathBuf {
    let dir = sandbox.home().join("workflows");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const SHELL_FROM_MODEL: &str = r#"
[inputs.dir]
type = "string"

[[steps]]
id = "plan"
kind = "llm"
prompt = "Which branch and files?"
schema = { type = "object" }
next = "run"

[[steps]]
id = "run"
kind = "tool"
tool = "bash"
params = { command = "git switch {{ steps.plan.output.branch }} && ls {{ steps.plan.output.dir | shell_quote }} {{ inputs.dir }}" }
next = "watch"

[[steps]]
id = "watch"
kind = "tool"
tool = "process"
params = { action = "start", command = "{% for f in steps.plan.output.files %}cat {{f}}; {% endfor %}tail -f {{ steps.plan.output.log | upper }} {{- steps.run.output }}" }
next = "safe"

[[steps]]
id = "safe"
kind = "tool"
tool = "bash"
params = { command = "git log -1 {{ steps.plan.output.branch | shell_quote }}" }
"#;

#[tokio::test]
async fn check_warns_where_a_model_s_answer_reaches_a_shell_command_unquoted() {
    let sandbox = Sandbox::new();
    let file = user_workflow(&sandbox, "deploy", SHELL_FROM_MODEL);
    let (ok, stdout, stderr) = pincer(&sandbox, &["workflow", "check"]).await;
    // A warning, not an error: the check passes and the workflow loads.
    assert!(ok, "{stderr}");
    let warning = |line: usize, step: &str, tool: &str, expr: &str| {
        format!(
            "{}:{line}: step `{step}`: warning: the `{tool}` command prints a model's answer \
             without `shell_quote` (`{{{{ {expr} }}}}`); the model's text may hold `;`, `$(…)` \
             or quotes that run commands of their own: write `{{{{ {expr} | shell_quote }}}}`\n",
            file.display()
        )
    };
    assert_eq!(
        stdout,
        [
            warning(13, "run", "bash", "steps.plan.output.branch"),
            warning(20, "watch", "process", "f"),
            warning(20, "watch", "process", "steps.plan.output.log | upper"),
            "4 workflow(s), no problems, 3 warning(s).\n".to_string(),
        ]
        .concat()
    );
    assert_eq!(stderr, "");
}

#[tokio::test]
async fn dry_run_prints_the_path_the_outputs_decide() {
    let sandbox = Sandbox::new();
    user_workflow(&sandbox, "review", REVIEW);
    let outputs = sandbox.dir.path().join("outputs.json");
    let mut given = serde_json::json!({
        "read_file": "text", "list_src": "main.rs", "grep_word": "",
        "analyse": {"issues": 3, "summary": "typo"},
        "suggest_fix": "fix", "write_notes": "ok", "approve": "fine"
    });
    std::fs::write(&outputs, given.to_string()).unwrap();
    let run = |outputs: std::path::PathBuf| {
        let sandbox = &sandbox;
        async move {
            pincer(
                sandbox,
                &[
                    "workflow",
                    "dry-run",
                    "review",
                    "--outputs",
                    outputs.to_str().unwrap(),
                    "--input",
                    "file=src/lib.rs",
                ],
            )
            .await
        }
    };
    let (ok, stdout, stderr) = run(outputs.clone()).await;
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout,
        "read_file\ngather\nlist_src\ngrep_word\nanalyse\ndecide\nsuggest_fix\nwrite_notes\n"
    );
    given["analyse"]["issues"] = serde_json::json!(0);
    std::fs::write(&outputs, given.to_string()).unwrap();
    let (ok, stdout, _) = run(outputs.clone()).await;
    assert!(ok);
    assert_eq!(
        stdout,
        "read_file\ngather\nlist_src\ngrep_word\nanalyse\ndecide\napprove\n"
    );
    // Nothing was called: no session, no model.
    assert!(!sandbox.home().join("sessions").exists());
    let (ok, _, stderr) = pincer(
        &sandbox,
        &[
            "workflow",
            "dry-run",
            "review",
            "--outputs",
            outputs.to_str().unwrap(),
            "--input",
            "nope=1",
        ],
    )
    .await;
    assert!(!ok);
    assert_eq!(
        stderr,
        "pincer: workflow `review` has no input `nope` (its inputs: file)\n"
    );
}

#[tokio::test]
async fn check_names_the_file_line_and_step_of_each_problem() {
    let sandbox = Sandbox::new();
    user_workflow(&sandbox, "review", REVIEW);
    let broken = user_workflow(
        &sandbox,
        "broken",
        "[[steps]]\nid = \"a\"\nkind = \"tool\"\ntool = \"teleport\"\n",
    );
    let (ok, stdout, stderr) = pincer(&sandbox, &["workflow", "check"]).await;
    assert!(!ok);
    assert_eq!(
        stdout,
        format!(
            "{}:2: step `a`: unknown tool `teleport`\n",
            broken.display()
        )
    );
    assert_eq!(stderr, "pincer: 1 problem(s) in the workflow files\n");
    std::fs::remove_file(&broken).unwrap();
    let (ok, stdout, _) = pincer(&sandbox, &["workflow", "check"]).await;
    assert!(ok);
    // The user's, and the three built in.
    assert_eq!(stdout, "4 workflow(s), no problems.\n");
}

#[tokio::test]
async fn the_built_in_workflows_are_listed_and_a_user_s_file_replaces_one() {
    let sandbox = Sandbox::new();
    let (ok, stdout, _) = pincer(&sandbox, &["workflow", "list"]).await;
    assert!(ok);
    let names: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.split("  ").next().unwrap())
        .collect();
    assert_eq!(names, vec!["code-review", "release-notes", "test-fix"]);
    assert!(
        stdout.contains("  file: (built in)/test-fix.toml\n"),
        "{stdout}"
    );
    let mine = user_workflow(
        &sandbox,
        "test-fix",
        "description = \"make check, once\"\n[[steps]]\nid = \"t\"\nkind = \"tool\"\ntool = \"bash\"\nparams = { command = \"make check\" }\n",
    );
    let (ok, stdout, _) = pincer(&sandbox, &["workflow", "list"]).await;
    assert!(ok);
    assert!(
        stdout.contains(&format!(
            "test-fix  make check, once\n  inputs: none\n  file: {}\n",
            mine.display()
        )),
        "{stdout}"
    );
}

async fn listed(sandbox: &Sandbox) -> bool {
    let (ok, stdout, _) = pincer(sandbox, &["workflow", "list"]).await;
    assert!(ok);
    stdout.contains("review  Review a file")
}

#[tokio::test]
async fn a_project_s_workflows_count_only_while_it_is_trusted() {
    let sandbox = Sandbox::new();
    let file = sandbox.write(".pincer/workflows/review.toml", REVIEW);
    assert!(!listed(&sandbox).await, "untrusted: not listed");
    let out = sandbox
        .command(&["trust", sandbox.work().to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("run the project's workflows (workflows/review.toml)"),
        "{said}"
    );
    assert!(listed(&sandbox).await, "trusted: listed");
    // A changed workflow is a different one: untrusted again.
    std::fs::write(&file, REVIEW.replace("budget = 20", "budget = 21")).unwrap();
    assert!(!listed(&sandbox).await, "changed: not listed");
}
