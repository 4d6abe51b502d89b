//! Workflows: an explicit graph of steps whose path the framework decides,
//! not the model. A workflow file names typed inputs and steps of five
//! kinds (a fixed `tool` call, an `llm` call with an optional JSON schema,
//! a `condition`, `parallel` steps, another `workflow`); transitions and
//! conditions are expressions over the inputs and earlier outputs.
//!
//! This module owns the file format, where workflows are found (the user's
//! `<config dir>/workflows/`, and a trusted project's
//! `.pincer/workflows/`), and validation with errors that name the file,
//! the line and the step. [`template`] renders `{{ … }}` and evaluates
//! conditions with minijinja; [`path`] walks the graph for given outputs
//! (the dry run, and the runner's choice of the next step).

pub mod path;
pub mod plan;
pub mod run;
pub mod template;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// A workflow file, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Workflow {
    pub name: String,
    pub description: String,
    /// The most steps one run may execute (substeps included).
    pub budget: u32,
    pub inputs: BTreeMap<String, Input>,
    /// In file order; the first one starts the run.
    pub steps: Vec<Step>,
    /// Where it was read from.
    pub file: PathBuf,
    /// What `pincer workflow check` warns about; the workflow runs anyway.
    pub warnings: Vec<WorkflowError>,
}

/// A typed input.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[serde(rename = "type", default)]
    pub kind: InputType,
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputType {
    #[default]
    String,
    Integer,
    Number,
    Boolean,
}

/// One step.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub id: String,
    pub kind: StepKind,
    /// Checked in order after the step; the first whose condition holds
    /// goes on.
    pub transitions: Vec<Transition>,
    /// Where the run goes when no transition holds; `None`: it ends.
    pub next: Option<String>,
    /// Seconds the step may take.
    pub timeout: Option<f64>,
    /// The step's line in its file.
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StepKind {
    Tool {
        tool: String,
        params: Value,
    },
    Llm {
        prompt: String,
        model: Option<String>,
        schema: Option<Value>,
    },
    Condition {
        expr: String,
        then: String,
        otherwise: Option<String>,
    },
    Parallel {
        steps: Vec<Step>,
    },
    Workflow {
        workflow: String,
        inputs: BTreeMap<String, Value>,
    },
}

impl StepKind {
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::Tool { .. } => "tool",
            StepKind::Llm { .. } => "llm",
            StepKind::Condition { .. } => "condition",
            StepKind::Parallel { .. } => "parallel",
            StepKind::Workflow { .. } => "workflow",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transition {
    #[serde(rename = "if")]
    pub when: String,
    pub to: String,
}

/// A problem with a workflow file, located.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}{}{}: {message}", .file.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), step.as_ref().map(|s| format!(": step `{s}`")).unwrap_or_default())]
pub struct WorkflowError {
    pub file: PathBuf,
    pub line: Option<usize>,
    pub step: Option<String>,
    pub message: String,
}

/// The file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    name: Option<String>,
    #[serde(default)]
    description: String,
    budget: Option<u32>,
    #[serde(default)]
    inputs: BTreeMap<String, Input>,
    #[serde(default)]
    steps: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    id: toml::Spanned<String>,
    kind: String,
    next: Option<String>,
    #[serde(default)]
    transitions: Vec<Transition>,
    timeout: Option<f64>,
    // tool
    tool: Option<String>,
    params: Option<Value>,
    // llm
    prompt: Option<String>,
    model: Option<String>,
    schema: Option<Value>,
    // condition
    #[serde(rename = "if")]
    when: Option<String>,
    then: Option<String>,
    #[serde(rename = "else")]
    otherwise: Option<String>,
    // parallel
    #[serde(default)]
    steps: Vec<RawStep>,
    // workflow
    workflow: Option<String>,
    #[serde(default)]
    inputs: BTreeMap<String, Value>,
}

/// Where a workflow's steps may go and what they may read: what the
/// checks need to know besides the file.
pub trait Known {
    fn tool_exists(&self, name: &str) -> bool;
    fn workflow_exists(&self, name: &str) -> bool;
    /// Whether the workflow's schemas are known to be valid (pincer's
    /// built-in workflows, which a test checks), so loading it does not
    /// check them against their meta-schema: that check costs every
    /// process that makes it 2 MB (see `json_schema`).
    fn schemas_known_valid(&self) -> bool {
        false
    }
}

/// The line of byte `offset` in `text`, from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

impl Workflow {
    /// Reads and checks `file`. Its name defaults to the file's stem.
    pub fn parse(file: &Path, text: &str, known: &dyn Known) -> Result<Self, Vec<WorkflowError>> {
        let error = |line: Option<usize>, step: Option<&str>, message: String| WorkflowError {
            file: file.to_path_buf(),
            line,
            step: step.map(str::to_string),
            message,
        };
        let raw: RawWorkflow = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            vec![error(line, None, e.message().to_string())]
        })?;
        let mut errors = Vec::new();
        let steps: Vec<Step> = raw
            .steps
            .into_iter()
            .map(|s| convert(s, text, file, true, &mut errors))
            .collect();
        let name = raw.name.unwrap_or_else(|| {
            file.file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default()
        });
        let mut workflow = Workflow {
            name,
            description: raw.description,
            budget: raw.budget.unwrap_or(0),
            inputs: raw.inputs,
            steps,
            file: file.to_path_buf(),
            warnings: Vec::new(),
        };
        // Checks of the graph would only repeat what is wrong with a step.
        if errors.is_empty() {
            errors.extend(validate::check(&mut workflow, raw.budget.is_some(), known));
        }
        if errors.is_empty() {
            workflow.warnings = validate::warnings(&workflow);
            Ok(workflow)
        } else {
            Err(errors)
        }
    }

    /// Every step by id, substeps of parallel steps included.
    pub fn all_steps(&self) -> HashMap<&str, &Step> {
        fn walk<'a>(steps: &'a [Step], out: &mut HashMap<&'a str, &'a Step>) {
            for step in steps {
                out.insert(step.id.as_str(), step);
                if let StepKind::Parallel { steps } = &step.kind {
                    walk(steps, out);
                }
            }
        }
        let mut out = HashMap::new();
        walk(&self.steps, &mut out);
        out
    }

    /// The inputs of a run: `given` checked against the declared types,
    /// with defaults for the rest.
    pub fn bind_inputs(&self, given: &BTreeMap<String, String>) -> Result<Value, String> {
        let mut out = serde_json::Map::new();
        for name in given.keys() {
            if !self.inputs.contains_key(name) {
                let known: Vec<&str> = self.inputs.keys().map(String::as_str).collect();
                return Err(format!(
                    "workflow `{}` has no input `{name}` (its inputs: {})",
                    self.name,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        for (name, input) in &self.inputs {
            let value = match (given.get(name), &input.default) {
                (Some(text), _) => parse_input(name, input.kind, text)?,
                (None, Some(default)) => default.clone(),
                (None, None) => {
                    return Err(format!(
                        "workflow `{}` needs the input `{name}` (--input {name}=…)",
                        self.name
                    ));
                }
            };
            out.insert(name.clone(), value);
        }
        Ok(Value::Object(out))
    }
}

fn parse_input(name: &str, kind: InputType, text: &str) -> Result<Value, String> {
    let bad = |what: &str| format!("input `{name}` must be {what}, got `{text}`");
    Ok(match kind {
        InputType::String => Value::String(text.to_string()),
        InputType::Integer => {
            Value::from(text.trim().parse::<i64>().map_err(|_| bad("an integer"))?)
        }
        InputType::Number => Value::from(text.trim().parse::<f64>().map_err(|_| bad("a number"))?),
        InputType::Boolean => match text.trim() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => return Err(bad("true or false")),
        },
    })
}

fn convert(
    raw: RawStep,
    text: &str,
    file: &Path,
    top: bool,
    errors: &mut Vec<WorkflowError>,
) -> Step {
    let line = line_of(text, raw.id.span().start);
    let id = raw.id.into_inner();
    let mut fail = |message: String| {
        errors.push(WorkflowError {
            file: file.to_path_buf(),
            line: Some(line),
            step: Some(id.clone()),
            message,
        })
    };
    let mut missing = |field: &str, kind: &str| {
        fail(format!("a `{kind}` step needs `{field}`"));
    };
    let kind = match raw.kind.as_str() {
        "tool" => StepKind::Tool {
            tool: raw.tool.unwrap_or_else(|| {
                missing("tool", "tool");
                String::new()
            }),
            params: raw.params.unwrap_or(Value::Object(Default::default())),
        },
        "llm" => StepKind::Llm {
            prompt: raw.prompt.unwrap_or_else(|| {
                missing("prompt", "llm");
                String::new()
            }),
            model: raw.model,
            schema: raw.schema,
        },
        "condition" => StepKind::Condition {
            expr: raw.when.unwrap_or_else(|| {
                missing("if", "condition");
                String::new()
            }),
            then: raw.then.unwrap_or_else(|| {
                missing("then", "condition");
                String::new()
            }),
            otherwise: raw.otherwise,
        },
        "parallel" => StepKind::Parallel {
            steps: raw
                .steps
                .into_iter()
                .map(|s| convert(s, text, file, false, errors))
                .collect(),
        },
        "workflow" => StepKind::Workflow {
            workflow: raw.workflow.unwrap_or_else(|| {
                missing("workflow", "workflow");
                String::new()
            }),
            inputs: raw.inputs,
        },
        other => {
            errors.push(WorkflowError {
                file: file.to_path_buf(),
                line: Some(line),
                step: Some(id.clone()),
                message: format!(
                    "unknown step kind `{other}` (one of tool, llm, condition, parallel, workflow)"
                ),
            });
            StepKind::Parallel { steps: Vec::new() }
        }
    };
    if !top && (raw.next.is_some() || !raw.transitions.is_empty()) {
        errors.push(WorkflowError {
            file: file.to_path_buf(),
            line: Some(line),
            step: Some(id.clone()),
            message: "a step inside a parallel step cannot have `next` or `transitions`: the parallel step goes on when all of them are done".to_string(),
        });
    }
    Step {
        id,
        kind,
        transitions: raw.transitions,
        next: raw.next,
        timeout: raw.timeout,
        line,
    }
}

mod validate;

/// Where workflows live: the user's directory, then a trusted project's
/// (a project's workflow of the same name wins: it is the one for this
/// project).
pub fn dirs(config_dir: &Path, project_root: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = vec![config_dir.join("workflows")];
    if let Some(root) = project_root {
        dirs.push(root.join(".pincer").join("workflows"));
    }
    dirs
}

/// The workflows a session under `settings` may run: pincer's built-in
/// ones, the user's (`<config dir>/workflows/`), then a trusted project's
/// (`.pincer/workflows/`), by name; and the problems of the files that do
/// not load.
pub fn discover(
    settings: &crate::config::Settings,
) -> (BTreeMap<String, Workflow>, Vec<WorkflowError>) {
    let project = settings
        .project
        .trust
        .trusted()
        .then_some(settings.project.root.as_path());
    let dirs = dirs(&settings.paths.config_dir, project);
    let tools: BTreeSet<String> = crate::tools::builtin()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    load(&dirs, &tools)
}

/// The workflow `name` among `workflows`, or why there is none: the
/// problems of its file when it does not load, else the names there are.
pub fn find<'a>(
    workflows: &'a BTreeMap<String, Workflow>,
    problems: &[WorkflowError],
    name: &str,
) -> Result<&'a Workflow, String> {
    if let Some(workflow) = workflows.get(name) {
        return Ok(workflow);
    }
    let broken: Vec<String> = problems
        .iter()
        .filter(|p| p.file.file_stem().is_some_and(|s| s == name))
        .map(ToString::to_string)
        .collect();
    if !broken.is_empty() {
        return Err(format!(
            "workflow `{name}` does not load:\n{}",
            broken.join("\n")
        ));
    }
    let known: Vec<&str> = workflows.keys().map(String::as_str).collect();
    Err(format!(
        "no workflow `{name}`; known: {}",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    ))
}

/// `NAME=VALUE` pairs (`pincer workflow run --input`, `/workflow NAME
/// input=value`) as a map.
pub fn parse_inputs(pairs: &[String]) -> Result<BTreeMap<String, String>, String> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| format!("--input `{pair}` is not NAME=VALUE"))
        })
        .collect()
}

/// The workflows pincer ships (docs/workflow-examples): there in every
/// session, each replaced by a user's or a trusted project's workflow of
/// the same name.
const BUILTIN: [(&str, &str); 3] = [
    (
        "code-review",
        include_str!("../docs/workflow-examples/code-review.toml"),
    ),
    (
        "release-notes",
        include_str!("../docs/workflow-examples/release-notes.toml"),
    ),
    (
        "test-fix",
        include_str!("../docs/workflow-examples/test-fix.toml"),
    ),
];

/// Where a built-in workflow says it comes from.
fn builtin_file(name: &str) -> PathBuf {
    PathBuf::from(format!("(built in)/{name}.toml"))
}

/// The built-in workflows, parsed and checked once: every session lists
/// them, and `announce_commands` loads workflows on each prompt. They name
/// only built-in tools and no other workflow, so nothing a session
/// configures changes how they check. (Their problems, never expected, are
/// reported with the files'.)
fn builtin() -> &'static (Vec<Workflow>, Vec<WorkflowError>) {
    static PARSED: std::sync::OnceLock<(Vec<Workflow>, Vec<WorkflowError>)> =
        std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        let tools: BTreeSet<String> = crate::tools::builtin()
            .iter()
            .map(|t| t.name().to_string())
            .collect();
        let names: BTreeSet<String> = BUILTIN.iter().map(|(name, _)| name.to_string()).collect();
        let known = Names {
            tools: &tools,
            workflows: &names,
            schemas_known_valid: true,
        };
        let mut parsed = Vec::new();
        let mut problems = Vec::new();
        for (name, text) in BUILTIN {
            match Workflow::parse(&builtin_file(name), text, &known) {
                Ok(workflow) => parsed.push(workflow),
                Err(mut more) => problems.append(&mut more),
            }
        }
        (parsed, problems)
    })
}

/// The built-in workflows, then those of `dirs`, by name, and the problems
/// of the files that do not load (each file is checked knowing every
/// workflow's name). A later file's workflow replaces an earlier one of the
/// same name, built-in ones included; it does so even when it does not
/// load, so its problems are reported rather than the one it was meant to
/// replace quietly running in its place.
pub fn load(
    dirs: &[PathBuf],
    tools: &BTreeSet<String>,
) -> (BTreeMap<String, Workflow>, Vec<WorkflowError>) {
    let (builtin, builtin_problems) = builtin();
    let mut out: BTreeMap<String, Workflow> = builtin
        .iter()
        .map(|w| (w.name.clone(), w.clone()))
        .collect();
    let mut errors = builtin_problems.clone();
    let mut texts: Vec<(PathBuf, String)> = Vec::new();
    for dir in dirs {
        for file in crate::config::project::toml_files(dir) {
            match std::fs::read_to_string(&file) {
                Ok(text) => texts.push((file, text)),
                Err(e) => errors.push(WorkflowError {
                    file,
                    line: None,
                    step: None,
                    message: format!("cannot be read: {e}"),
                }),
            }
        }
    }
    let names: BTreeSet<String> = out
        .keys()
        .cloned()
        .chain(texts.iter().map(|(file, text)| declared_name(file, text)))
        .collect();
    let known = Names {
        tools,
        workflows: &names,
        schemas_known_valid: false,
    };
    for (file, text) in texts {
        match Workflow::parse(&file, &text, &known) {
            Ok(workflow) => {
                out.insert(workflow.name.clone(), workflow);
            }
            Err(mut problems) => {
                out.remove(&declared_name(&file, &text));
                errors.append(&mut problems);
            }
        }
    }
    for (name, problem) in call_cycles(&out) {
        out.remove(&name);
        errors.push(problem);
    }
    (out, errors)
}

/// The `workflow` steps that start a circle of workflows running each
/// other (`a` runs `b`, which runs `a`): a run of one would nest until the
/// depth limit stops it. One file's checks see only its own name; this
/// sees every workflow.
fn call_cycles(workflows: &BTreeMap<String, Workflow>) -> Vec<(String, WorkflowError)> {
    let calls = |workflow: &Workflow| -> Vec<(usize, String, String)> {
        let mut calls: Vec<(usize, String, String)> = workflow
            .all_steps()
            .into_values()
            .filter_map(|step| match &step.kind {
                StepKind::Workflow { workflow, .. } => {
                    Some((step.line, step.id.clone(), workflow.clone()))
                }
                _ => None,
            })
            .collect();
        calls.sort();
        calls
    };
    // The chain of calls from `from` that comes back to `to`, if any.
    let chain_back = |from: &str, to: &str| -> Option<Vec<String>> {
        let mut todo = vec![vec![from.to_string()]];
        let mut seen = BTreeSet::new();
        while let Some(chain) = todo.pop() {
            let last = chain.last()?.clone();
            if last == to {
                return Some(chain);
            }
            if !seen.insert(last.clone()) {
                continue;
            }
            if let Some(workflow) = workflows.get(&last) {
                for (_, _, callee) in calls(workflow) {
                    let mut longer = chain.clone();
                    longer.push(callee);
                    todo.push(longer);
                }
            }
        }
        None
    };
    let mut problems = Vec::new();
    for (name, workflow) in workflows {
        for (line, id, callee) in calls(workflow) {
            if callee == *name {
                // The file's own checks say so.
                continue;
            }
            if let Some(chain) = chain_back(&callee, name) {
                problems.push((name.clone(), WorkflowError {
                    file: workflow.file.clone(),
                    line: Some(line),
                    step: Some(id),
                    message: format!(
                        "runs workflow `{callee}`, which runs this one again ({name} → {}): workflows may not run each other in a circle",
                        chain.join(" → ")
                    ),
                }));
                break;
            }
        }
    }
    problems
}

/// The name a file declares (or its stem), read leniently.
fn declared_name(file: &Path, text: &str) -> String {
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
    }
    toml::from_str::<Named>(text)
        .ok()
        .and_then(|n| n.name)
        .unwrap_or_else(|| {
            file.file_stem()
                .map(|s| s.to_string_lossy().to_string())
                .unwrap_or_default()
        })
}

struct Names<'a> {
    tools: &'a BTreeSet<String>,
    workflows: &'a BTreeSet<String>,
    schemas_known_valid: bool,
}

impl Known for Names<'_> {
    fn tool_exists(&self, name: &str) -> bool {
        // MCP servers' tools exist only once their server runs; the run
        // refuses one that is not there, by name.
        self.tools.contains(name) || name.starts_with("mcp__")
    }
    fn workflow_exists(&self, name: &str) -> bool {
        self.workflows.contains(name)
    }
    fn schemas_known_valid(&self) -> bool {
        self.schemas_known_valid
    }
}

#[cfg(test)]
#[path = "workflow/tests.rs"]
mod tests;
