//! The checks a workflow passes before it may run: every step and tool it
//! names exists, every step can be reached, a loop has a budget, every
//! template and condition parses and reads only inputs that exist and
//! steps that can have run before it, and every schema is a schema.
//!
//! Besides these errors, one warning: a model's answer printed into a
//! `bash` or `process` command without `shell_quote` (the model's text is
//! not the workflow author's, and may hold `;` or `$(…)`).

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::Value;

use super::{Known, Step, StepKind, Workflow, WorkflowError, template};

/// The steps a run may enter from `step` (top-level ids).
pub(super) fn targets(step: &Step) -> Vec<&str> {
    let mut out: Vec<&str> = step.transitions.iter().map(|t| t.to.as_str()).collect();
    if let StepKind::Condition {
        then, otherwise, ..
    } = &step.kind
    {
        out.push(then);
        out.extend(otherwise.as_deref());
    }
    out.extend(step.next.as_deref());
    out
}

pub(super) fn check(
    workflow: &mut Workflow,
    budgeted: bool,
    known: &dyn Known,
) -> Vec<WorkflowError> {
    let mut errors = Vec::new();
    let file = workflow.file.clone();
    let err = |step: &Step, message: String| WorkflowError {
        file: file.clone(),
        line: Some(step.line),
        step: Some(step.id.clone()),
        message,
    };
    if workflow.steps.is_empty() {
        errors.push(WorkflowError {
            file: file.clone(),
            line: None,
            step: None,
            message: "a workflow needs at least one step".to_string(),
        });
        return errors;
    }
    // Ids: unique across the file, parallel steps' included.
    let mut seen: HashSet<&str> = HashSet::new();
    let mut all: Vec<&Step> = Vec::new();
    fn flatten<'a>(steps: &'a [Step], out: &mut Vec<&'a Step>) {
        for step in steps {
            out.push(step);
            if let StepKind::Parallel { steps } = &step.kind {
                flatten(steps, out);
            }
        }
    }
    flatten(&workflow.steps, &mut all);
    for step in &all {
        if step.id.is_empty() {
            errors.push(err(step, "a step needs a non-empty `id`".to_string()));
        } else if !seen.insert(step.id.as_str()) {
            errors.push(err(step, "another step has the same id".to_string()));
        }
    }
    let top: HashMap<&str, &Step> = workflow.steps.iter().map(|s| (s.id.as_str(), s)).collect();
    let nested: HashSet<&str> = all
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| !top.contains_key(id))
        .collect();
    // What each step names.
    for step in &all {
        for target in targets(step) {
            if nested.contains(target) {
                errors.push(err(
                    step,
                    format!(
                        "`{target}` runs inside a parallel step; go to the parallel step instead"
                    ),
                ));
            } else if !top.contains_key(target) {
                errors.push(err(step, format!("unknown step `{target}`")));
            }
        }
        match &step.kind {
            StepKind::Tool { tool, .. } if !tool.is_empty() && !known.tool_exists(tool) => {
                errors.push(err(step, format!("unknown tool `{tool}`")));
            }
            StepKind::Workflow { workflow: name, .. }
                if !name.is_empty() && !known.workflow_exists(name) =>
            {
                errors.push(err(step, format!("unknown workflow `{name}`")));
            }
            StepKind::Workflow { workflow: name, .. } if *name == workflow.name => {
                errors.push(err(
                    step,
                    "a workflow cannot run itself as a step".to_string(),
                ));
            }
            StepKind::Llm {
                schema: Some(schema),
                ..
            } if !known.schemas_known_valid() => {
                if let Err(e) = crate::json_schema::Schema::compile(schema) {
                    errors.push(err(
                        step,
                        format!("the schema is not a valid JSON schema: {e}"),
                    ));
                }
            }
            StepKind::Parallel { steps } => {
                if steps.is_empty() {
                    errors.push(err(step, "a parallel step needs steps".to_string()));
                }
                for inner in steps {
                    if matches!(
                        inner.kind,
                        StepKind::Condition { .. } | StepKind::Parallel { .. }
                    ) {
                        errors.push(err(
                            inner,
                            format!(
                                "a parallel step runs tool, llm and workflow steps, not `{}` steps",
                                inner.kind.name()
                            ),
                        ));
                    }
                }
            }
            _ => {}
        }
        if let Some(timeout) = step.timeout
            && !(timeout > 0.0 && timeout.is_finite())
        {
            errors.push(err(
                step,
                "`timeout` must be a positive number of seconds".to_string(),
            ));
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    // Reachability and loops over the top-level graph.
    let start = workflow.steps[0].id.as_str();
    let reach = |from: &str| -> HashSet<&str> {
        // Steps reachable from `from` by one edge or more.
        let mut out: HashSet<&str> = HashSet::new();
        let mut todo: Vec<&str> = targets(top[from]);
        while let Some(id) = todo.pop() {
            if out.insert(id) {
                todo.extend(targets(top[id]));
            }
        }
        out
    };
    let mut reachable = reach(start);
    reachable.insert(start);
    for step in &workflow.steps {
        if !reachable.contains(step.id.as_str()) {
            errors.push(err(
                step,
                format!("unreachable: no path from the first step `{start}` leads here"),
            ));
        }
    }
    let after: HashMap<&str, HashSet<&str>> = workflow
        .steps
        .iter()
        .map(|s| (s.id.as_str(), reach(&s.id)))
        .collect();
    let looped = workflow
        .steps
        .iter()
        .find(|s| after[s.id.as_str()].contains(s.id.as_str()));
    if let Some(step) = looped
        && !budgeted
    {
        errors.push(err(
            step,
            "this step is on a cycle, and the workflow has no `budget`: set `budget` (the most steps one run may execute)".to_string(),
        ));
    }
    if !budgeted {
        workflow.budget = all.len() as u32;
    }
    if workflow.budget == 0 {
        errors.push(WorkflowError {
            file: file.clone(),
            line: None,
            step: None,
            message: "`budget` must be at least 1".to_string(),
        });
    }
    // What can have run before each step: a step from which it can be
    // reached (itself too, when it is on a cycle).
    let before = |id: &str| -> BTreeSet<String> {
        workflow
            .steps
            .iter()
            .filter(|s| reachable.contains(s.id.as_str()) && after[s.id.as_str()].contains(id))
            .flat_map(|s| {
                let mut ids = vec![s.id.clone()];
                if let StepKind::Parallel { steps } = &s.kind {
                    ids.extend(steps.iter().map(|i| i.id.clone()));
                }
                ids
            })
            .collect()
    };
    let inputs: BTreeSet<String> = workflow.inputs.keys().cloned().collect();
    for step in &workflow.steps {
        let earlier = before(&step.id);
        check_templates(step, &inputs, &earlier, &err, &mut errors);
        if let StepKind::Parallel { steps } = &step.kind {
            for inner in steps {
                check_templates(inner, &inputs, &earlier, &err, &mut errors);
            }
        }
    }
    errors
}

/// Every template and expression of `step`: it parses, and reads only
/// `inputs` that exist and steps of `earlier`.
fn check_templates(
    step: &Step,
    inputs: &BTreeSet<String>,
    earlier: &BTreeSet<String>,
    err: &dyn Fn(&Step, String) -> WorkflowError,
    errors: &mut Vec<WorkflowError>,
) {
    let mut sources: Vec<(String, bool)> = Vec::new();
    match &step.kind {
        StepKind::Tool { params, .. } => strings(params, &mut sources),
        StepKind::Llm { prompt, .. } => sources.push((prompt.clone(), false)),
        StepKind::Condition { expr, .. } => sources.push((expr.clone(), true)),
        StepKind::Workflow { inputs, .. } => {
            for value in inputs.values() {
                strings(value, &mut sources);
            }
        }
        StepKind::Parallel { .. } => {}
    }
    sources.extend(step.transitions.iter().map(|t| (t.when.clone(), true)));
    for (source, expression) in sources {
        let names = match template::references(&source, expression) {
            Ok(names) => names,
            Err(e) => {
                errors.push(err(step, e));
                continue;
            }
        };
        for name in names {
            let mut parts = name.split('.');
            match (parts.next(), parts.next()) {
                (Some("inputs"), Some(input)) if inputs.contains(input) => {}
                (Some("inputs"), Some(input)) => {
                    errors.push(err(step, format!("`{source}` reads the unknown input `{input}`")));
                }
                (Some("steps"), Some(id)) if earlier.contains(id) => {}
                (Some("steps"), Some(id)) => errors.push(err(
                    step,
                    format!("`{source}` reads step `{id}`, which cannot have run before this step"),
                )),
                (Some("inputs" | "steps"), None) => {}
                (Some(other), _) => errors.push(err(
                    step,
                    format!("`{source}` reads `{other}`; templates read `inputs.<name>` and `steps.<id>.output`"),
                )),
                (None, _) => {}
            }
        }
    }
}

/// The tool steps whose shell command prints an `llm` step's output
/// without `shell_quote`, one warning per expression.
pub(super) fn warnings(workflow: &Workflow) -> Vec<WorkflowError> {
    let steps = workflow.all_steps();
    let models: HashSet<&str> = steps
        .values()
        .filter(|s| matches!(s.kind, StepKind::Llm { .. }))
        .map(|s| s.id.as_str())
        .collect();
    let from_model = |name: &str| {
        let mut parts = name.split('.');
        parts.next() == Some("steps") && parts.next().is_some_and(|id| models.contains(id))
    };
    let mut shells: Vec<&Step> = steps
        .values()
        .copied()
        .filter(|s| matches!(&s.kind, StepKind::Tool { tool, .. } if tool == "bash" || tool == "process"))
        .collect();
    shells.sort_by_key(|s| (s.line, s.id.clone()));
    let mut out = Vec::new();
    for step in shells {
        let StepKind::Tool { tool, params } = &step.kind else {
            continue;
        };
        let Some(command) = params.get("command").and_then(Value::as_str) else {
            continue;
        };
        for expr in template::unquoted_prints(command, &from_model) {
            out.push(WorkflowError {
                file: workflow.file.clone(),
                line: Some(step.line),
                step: Some(step.id.clone()),
                message: format!(
                    "warning: the `{tool}` command prints a model's answer without `shell_quote` \
                     (`{{{{ {expr} }}}}`); the model's text may hold `;`, `$(…)` or quotes \
                     that run commands of their own: write `{{{{ {expr} | shell_quote }}}}`"
                ),
            });
        }
    }
    out
}

/// The string leaves of `value` (templates).
fn strings(value: &Value, out: &mut Vec<(String, bool)>) {
    match value {
        Value::String(text) => out.push((text.clone(), false)),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}
