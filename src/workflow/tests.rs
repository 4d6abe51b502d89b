use super::*;
use pretty_assertions::assert_eq;
use serde_json::json;

struct Everything;

impl Known for Everything {
    fn tool_exists(&self, name: &str) -> bool {
        ["read", "write", "edit", "bash", "grep", "find", "ls"].contains(&name)
    }
    fn workflow_exists(&self, name: &str) -> bool {
        name == "release-notes"
    }
}

/// The issue's example, completed.
const REVIEW: &str = r#"name = "review"
description = "Review a file, then suggest a fix or approve"
budget = 20

[inputs.file]
type = "string"
default = "README.md"

[[steps]]
id = "read_file"
kind = "tool"
tool = "read"
params = { path = "{{ inputs.file }}" }
next = "gather"

[[steps]]
id = "gather"
kind = "parallel"
next = "analyse"
  [[steps.steps]]
  id = "list_src"
  kind = "tool"
  tool = "ls"
  params = { path = "src" }
  [[steps.steps]]
  id = "grep_word"
  kind = "tool"
  tool = "grep"
  params = { pattern = "TODO" }

[[steps]]
id = "analyse"
kind = "llm"
prompt = "Review this file; answer with JSON.\n{{ steps.read_file.output }}"
next = "decide"
  [steps.schema]
  type = "object"
  required = ["issues", "summary"]
  [steps.schema.properties.issues]
  type = "integer"
  [steps.schema.properties.summary]
  type = "string"

[[steps]]
id = "decide"
kind = "condition"
if = "steps.analyse.output.issues > 0"
then = "suggest_fix"
else = "approve"

[[steps]]
id = "suggest_fix"
kind = "llm"
prompt = "Suggest a fix for: {{ steps.analyse.output.summary }}"
next = "write_notes"

[[steps]]
id = "write_notes"
kind = "tool"
tool = "write"
params = { path = "REVIEW.md", content = "{{ steps.suggest_fix.output }}" }

[[steps]]
id = "approve"
kind = "llm"
prompt = "Say the file {{ inputs.file }} is approved."
"#;

fn parse(text: &str) -> Result<Workflow, Vec<WorkflowError>> {
    Workflow::parse(Path::new("/w/review.toml"), text, &Everything)
}

/// Each error as `line: step: message`.
fn problems(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_err()
        .into_iter()
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn the_issue_s_example_parses_into_its_steps() {
    let workflow = parse(REVIEW).unwrap();
    assert_eq!(workflow.name, "review");
    assert_eq!(workflow.budget, 20);
    let ids: Vec<(&str, &str, usize)> = workflow
        .steps
        .iter()
        .map(|s| (s.id.as_str(), s.kind.name(), s.line))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("read_file", "tool", 10),
            ("gather", "parallel", 17),
            ("analyse", "llm", 32),
            ("decide", "condition", 45),
            ("suggest_fix", "llm", 52),
            ("write_notes", "tool", 58),
            ("approve", "llm", 64),
        ]
    );
    assert_eq!(workflow.all_steps().len(), 9);
    assert_eq!(
        workflow.bind_inputs(&BTreeMap::new()).unwrap(),
        json!({"file": "README.md"})
    );
}

#[test]
fn the_path_follows_the_outputs_and_nothing_else() {
    let workflow = parse(REVIEW).unwrap();
    let outputs = |issues: i64| -> serde_json::Map<String, Value> {
        serde_json::from_value(json!({
            "read_file": "text", "list_src": "main.rs", "grep_word": "",
            "analyse": {"issues": issues, "summary": "typo"},
            "suggest_fix": "fix the typo", "write_notes": "written", "approve": "approved",
        }))
        .unwrap()
    };
    let inputs = json!({"file": "README.md"});
    let fix = path::dry_run(&workflow, inputs.clone(), &outputs(2)).unwrap();
    assert_eq!(
        fix,
        vec![
            "read_file",
            "gather",
            "list_src",
            "grep_word",
            "analyse",
            "decide",
            "suggest_fix",
            "write_notes"
        ]
    );
    let approve = path::dry_run(&workflow, inputs.clone(), &outputs(0)).unwrap();
    assert_eq!(
        approve,
        vec![
            "read_file",
            "gather",
            "list_src",
            "grep_word",
            "analyse",
            "decide",
            "approve"
        ]
    );
    // The same inputs and outputs, the same path.
    assert_eq!(
        path::dry_run(&workflow, inputs.clone(), &outputs(2)).unwrap(),
        fix
    );
    let mut missing = outputs(1);
    missing.remove("suggest_fix");
    assert_eq!(
        path::dry_run(&workflow, inputs, &missing).unwrap_err(),
        "no output given for step `suggest_fix`: add it to the outputs file"
    );
}

#[test]
fn a_loop_runs_until_its_condition_or_its_budget() {
    let text = r#"
budget = 7
[inputs.tries]
type = "integer"
default = 2
[[steps]]
id = "test"
kind = "tool"
tool = "bash"
params = { command = "cargo test" }
transitions = [{ if = "not steps.test.error", to = "done" }]
next = "fix"
[[steps]]
id = "fix"
kind = "llm"
prompt = "Fix it: {{ steps.test.output }}"
next = "test"
[[steps]]
id = "done"
kind = "llm"
prompt = "Summarise {{ steps.test.output }}"
"#;
    let workflow = parse(text).unwrap();
    let outputs: serde_json::Map<String, Value> =
        serde_json::from_value(json!({"test": "ok", "fix": "patched", "done": "green"})).unwrap();
    assert_eq!(
        path::dry_run(&workflow, json!({"tries": 2}), &outputs).unwrap(),
        vec!["test", "done"]
    );
    // A test step that keeps failing loops until the budget stops it.
    let mut state = path::State::new(json!({}));
    state.record("test", json!("1 failed"), true);
    let test = &workflow.steps[0];
    assert_eq!(path::next(test, &state).unwrap(), Some("fix"));
    state.record("test", json!("ok"), false);
    assert_eq!(path::next(test, &state).unwrap(), Some("done"));
}

#[test]
fn validation_names_the_file_the_line_and_the_step() {
    let text = r#"
[[steps]]
id = "start"
kind = "tool"
tool = "teleport"
next = "nowhere"

[[steps]]
id = "lonely"
kind = "llm"
prompt = "{{ steps.later.output }} and {{ inputs.nope }}"

[[steps]]
id = "later"
kind = "llm"
prompt = "x"
  [steps.schema]
  type = "objekt"
"#;
    assert_eq!(
        problems(text),
        vec![
            "/w/review.toml:3: step `start`: unknown step `nowhere`",
            "/w/review.toml:3: step `start`: unknown tool `teleport`",
            "/w/review.toml:14: step `later`: the schema is not a valid JSON schema: /type: \"objekt\" fits none of the schemas its `anyOf` allows",
        ]
    );
    let text = r#"
[[steps]]
id = "start"
kind = "llm"
prompt = "{{ inputs.nope }}"
next = "a"

[[steps]]
id = "orphan"
kind = "llm"
prompt = "x"

[[steps]]
id = "a"
kind = "llm"
prompt = "{{ steps.b.output }}"
next = "b"

[[steps]]
id = "b"
kind = "llm"
prompt = "{{ steps.a.output }} {{ steps.b.output }}"
next = "a"
"#;
    assert_eq!(
        problems(text),
        vec![
            "/w/review.toml:9: step `orphan`: unreachable: no path from the first step `start` leads here",
            "/w/review.toml:14: step `a`: this step is on a cycle, and the workflow has no `budget`: set `budget` (the most steps one run may execute)",
            "/w/review.toml:3: step `start`: `{{ inputs.nope }}` reads the unknown input `nope`",
        ]
    );
}

#[test]
fn a_template_may_not_read_a_step_that_cannot_have_run() {
    let text = r#"
[[steps]]
id = "decide"
kind = "condition"
if = "inputs.go"
then = "left"
else = "right"
[inputs.go]
type = "boolean"
[[steps]]
id = "left"
kind = "llm"
prompt = "left"
next = "join"
[[steps]]
id = "right"
kind = "llm"
prompt = "right"
next = "join"
[[steps]]
id = "join"
kind = "llm"
prompt = "{{ steps.left.output }}"
next = "after"
[[steps]]
id = "after"
kind = "llm"
prompt = "{{ steps.join.output }} {{ steps.after.output }}"
"#;
    // `left` can have run before `join` (one branch); `after` cannot have
    // run before itself.
    assert_eq!(
        problems(text),
        vec![
            "/w/review.toml:26: step `after`: `{{ steps.join.output }} {{ steps.after.output }}` reads step `after`, which cannot have run before this step"
        ]
    );
}

#[test]
fn bad_toml_and_odd_steps_are_located_too() {
    assert_eq!(
        problems("name = \"x\"\n[[steps]]\nid = 3\n"),
        vec!["/w/review.toml:3: invalid type: integer `3`, expected a string".to_string()]
    );
    let text = r#"
[[steps]]
id = "p"
kind = "parallel"
  [[steps.steps]]
  id = "c"
  kind = "condition"
  if = "true"
  then = "p"
  next = "p"
[[steps]]
id = "w"
kind = "workflow"
workflow = "missing"
[[steps]]
id = "x"
kind = "sing"
"#;
    assert_eq!(
        problems(text),
        vec![
            "/w/review.toml:6: step `c`: a step inside a parallel step cannot have `next` or `transitions`: the parallel step goes on when all of them are done",
            "/w/review.toml:16: step `x`: unknown step kind `sing` (one of tool, llm, condition, parallel, workflow)",
        ]
    );
    let text = r#"
[[steps]]
id = "p"
kind = "parallel"
next = "w"
  [[steps.steps]]
  id = "c"
  kind = "condition"
  if = "true"
  then = "p"
[[steps]]
id = "w"
kind = "workflow"
workflow = "missing"
next = "c"
"#;
    assert_eq!(
        problems(text),
        vec![
            "/w/review.toml:7: step `c`: a parallel step runs tool, llm and workflow steps, not `condition` steps",
            "/w/review.toml:12: step `w`: `c` runs inside a parallel step; go to the parallel step instead",
            "/w/review.toml:12: step `w`: unknown workflow `missing`",
        ]
    );
}

#[test]
fn templates_keep_types_and_refuse_unknown_names() {
    let context = json!({"inputs": {"n": 3, "file": "a.txt"},
        "steps": {"analyse": {"output": {"issues": 2}, "error": false}}});
    assert_eq!(
        template::render("{{ inputs.n }}", &context).unwrap(),
        json!(3)
    );
    assert_eq!(
        template::render("read {{ inputs.file }} ({{ inputs.n }})", &context).unwrap(),
        json!("read a.txt (3)")
    );
    assert_eq!(
        template::render_value(
            &json!({"limit": "{{ inputs.n + 1 }}", "p": ["{{ inputs.file }}"]}),
            &context
        )
        .unwrap(),
        json!({"limit": 4, "p": ["a.txt"]})
    );
    assert!(template::holds("steps.analyse.output.issues > 0", &context).unwrap());
    assert!(template::render("{{ steps.nothing.output }}", &context).is_err());
    assert_eq!(
        template::references("{{ steps.a.output.x }} {{ inputs.f }}", false).unwrap(),
        BTreeSet::from(["inputs.f".to_string(), "steps.a.output.x".to_string()])
    );
}

#[test]
fn inputs_are_typed() {
    let workflow = parse(
        "[inputs.n]\ntype = \"integer\"\n[inputs.flag]\ntype = \"boolean\"\ndefault = false\n[[steps]]\nid = \"a\"\nkind = \"llm\"\nprompt = \"{{ inputs.n }}\"\n",
    )
    .unwrap();
    let given = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        workflow.bind_inputs(&given(&[("n", "4")])).unwrap(),
        json!({"n": 4, "flag": false})
    );
    assert_eq!(
        workflow.bind_inputs(&given(&[("n", "four")])).unwrap_err(),
        "input `n` must be an integer, got `four`"
    );
    assert_eq!(
        workflow.bind_inputs(&given(&[])).unwrap_err(),
        "workflow `review` needs the input `n` (--input n=…)"
    );
    assert_eq!(
        workflow
            .bind_inputs(&given(&[("n", "1"), ("m", "2")]))
            .unwrap_err(),
        "workflow `review` has no input `m` (its inputs: flag, n)"
    );
}

#[test]
fn shell_quote_keeps_a_value_one_word() {
    let context = json!({"inputs": {"base": "HEAD; touch pwned", "quote": "it's", "plain": "v1.2.0", "n": 3}});
    let render = |source: &str| template::render(source, &context).unwrap();
    assert_eq!(
        render("git diff {{ inputs.base | shell_quote }}"),
        json!("git diff 'HEAD; touch pwned'")
    );
    assert_eq!(
        render("echo {{ inputs.quote | shell_quote }}"),
        json!("echo 'it'\\''s'")
    );
    assert_eq!(
        render("git log {{ inputs.plain | shell_quote }}..HEAD"),
        json!("git log v1.2.0..HEAD")
    );
    assert_eq!(render("{{ inputs.n | shell_quote }}"), json!("3"));
    assert_eq!(template::shell_quote(""), "''");
    // What the shell makes of it: the one word, unchanged.
    for word in [
        "HEAD; touch pwned",
        "it's",
        "$(id)",
        "a\nb",
        "`x` \"y\" \\z",
    ] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", template::shell_quote(word)))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), word);
    }
}

#[test]
fn the_built_in_workflows_load_and_a_file_of_the_same_name_replaces_one() {
    let tools: BTreeSet<String> = crate::tools::builtin()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    let (workflows, problems) = load(&[], &tools);
    assert_eq!(problems, Vec::<WorkflowError>::new());
    assert_eq!(
        workflows.keys().collect::<Vec<_>>(),
        vec!["code-review", "release-notes", "test-fix"]
    );
    assert_eq!(
        workflows["test-fix"].file,
        std::path::PathBuf::from("(built in)/test-fix.toml")
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("test-fix.toml"),
        "name = \"test-fix\"\ndescription = \"mine\"\n[[steps]]\nid = \"t\"\nkind = \"tool\"\ntool = \"bash\"\nparams = { command = \"make check\" }\n",
    )
    .unwrap();
    let (workflows, problems) = load(&[dir.path().to_path_buf()], &tools);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(workflows["test-fix"].description, "mine");
    assert_eq!(workflows.len(), 3);
    // A replacement that does not load is reported, and the built-in one
    // does not quietly run in its place.
    std::fs::write(
        dir.path().join("test-fix.toml"),
        "name = \"test-fix\"\n[[steps]]\nid = \"t\"\nkind = \"tool\"\ntool = \"nope\"\n",
    )
    .unwrap();
    let (workflows, problems) = load(&[dir.path().to_path_buf()], &tools);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].to_string().contains("unknown tool `nope`"),
        "{}",
        problems[0]
    );
    assert!(!workflows.contains_key("test-fix"));
    assert!(workflows.contains_key("code-review"));

    // The same holds between files: a trusted project's broken `mine`
    // leaves neither it nor the user's `mine` to run.
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        "[[steps]]\nid = \"t\"\nkind = \"tool\"\ntool = \"ls\"\n",
    )
    .unwrap();
    let dirs = [dir.path().to_path_buf(), project.path().to_path_buf()];
    assert!(load(&dirs, &tools).0.contains_key("mine"));
    std::fs::write(
        project.path().join("mine.toml"),
        "[[steps]]\nid = \"t\"\nkind = \"tool\"\ntool = \"nope\"\n",
    )
    .unwrap();
    let (workflows, problems) = load(&dirs, &tools);
    assert!(!workflows.contains_key("mine"));
    assert!(
        problems
            .iter()
            .any(|p| p.file == project.path().join("mine.toml")),
        "{problems:?}"
    );
}

#[test]
fn the_built_in_workflows_schemas_are_valid() {
    // Loading a built-in workflow does not check its schemas against
    // their meta-schema (the check costs 2 MB): this test does.
    let mut schemas = 0;
    for (name, text) in BUILTIN {
        let workflow = Workflow::parse(&builtin_file(name), text, &Everything);
        let workflow = workflow.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        for step in &workflow.steps {
            if let StepKind::Llm {
                schema: Some(schema),
                ..
            } = &step.kind
            {
                crate::json_schema::Schema::compile(schema)
                    .unwrap_or_else(|e| panic!("{name}, step {}: {e}", step.id));
                schemas += 1;
            }
        }
    }
    assert!(schemas >= 3, "{schemas}");
    // A file's are checked: one that is not a schema does not load.
    let bad =
        "[[steps]]\nid = \"a\"\nkind = \"llm\"\nprompt = \"x\"\nschema = { type = \"objekt\" }\n";
    let problems = Workflow::parse(Path::new("/w/bad.toml"), bad, &Everything).unwrap_err();
    assert!(
        problems[0].message.contains("not a valid JSON schema"),
        "{problems:?}"
    );
}

#[test]
fn workflows_running_each_other_in_a_circle_are_refused() {
    let tools: BTreeSet<String> = crate::tools::builtin()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write(
        "a.toml",
        "[[steps]]\nid = \"first\"\nkind = \"tool\"\ntool = \"ls\"\nnext = \"call_b\"\n\n[[steps]]\nid = \"call_b\"\nkind = \"workflow\"\nworkflow = \"b\"\n",
    );
    write(
        "b.toml",
        "[[steps]]\nid = \"both\"\nkind = \"parallel\"\n  [[steps.steps]]\n  id = \"call_c\"\n  kind = \"workflow\"\n  workflow = \"c\"\n",
    );
    write(
        "c.toml",
        "[[steps]]\nid = \"call_a\"\nkind = \"workflow\"\nworkflow = \"a\"\n",
    );
    // d runs a, but is not on the circle itself.
    write(
        "d.toml",
        "[[steps]]\nid = \"call_a\"\nkind = \"workflow\"\nworkflow = \"a\"\n",
    );
    let (workflows, problems) = load(&[dir.path().to_path_buf()], &tools);
    let shown: Vec<String> = problems
        .iter()
        .map(|p| {
            p.to_string()
                .replace(&format!("{}/", dir.path().display()), "")
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            "a.toml:8: step `call_b`: runs workflow `b`, which runs this one again (a → b → c → a): workflows may not run each other in a circle",
            "b.toml:5: step `call_c`: runs workflow `c`, which runs this one again (b → c → a → b): workflows may not run each other in a circle",
            "c.toml:2: step `call_a`: runs workflow `a`, which runs this one again (c → a → b → c): workflows may not run each other in a circle",
        ]
    );
    assert_eq!(
        workflows.keys().collect::<Vec<_>>(),
        vec!["code-review", "d", "release-notes", "test-fix"]
    );
}

#[test]
fn unquoted_prints_finds_a_model_s_answer_printed_without_shell_quote() {
    let from_plan = |name: &str| name.starts_with("steps.plan.");
    let found = |source: &str| template::unquoted_prints(source, &from_plan);
    assert_eq!(
        found("ls {{ steps.plan.output | shell_quote }}"),
        Vec::<String>::new()
    );
    assert_eq!(
        found("ls {{ steps.plan.output|shell_quote() }}"),
        Vec::<String>::new()
    );
    assert_eq!(
        found("ls {{- steps.plan.output -}}"),
        vec!["steps.plan.output"]
    );
    // Quoting first and changing the quoted text after is not quoted.
    assert_eq!(
        found("ls {{ steps.plan.output | shell_quote | upper }}"),
        vec!["steps.plan.output | shell_quote | upper"]
    );
    assert_eq!(
        found("{% set d = steps.plan.output.dir %}cd {{ d }} && ls {{ d | shell_quote }}"),
        vec!["d"]
    );
    assert_eq!(
        found("{% for a, b in steps.plan.output.pairs %}{{ a }}{{ b | shell_quote }}{% endfor %}"),
        vec!["a"]
    );
    // Other steps and inputs are not a model's answer; a comment prints
    // nothing; a template that does not parse reads nothing here.
    assert_eq!(
        found(
            "{{ steps.run.output }} {{ inputs.x }} {# {{ steps.plan.output }} #} {{ steps.plan.output +"
        ),
        Vec::<String>::new()
    );
}
