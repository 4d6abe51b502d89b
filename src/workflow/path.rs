//! Which step comes next: decided by the framework from the run's inputs
//! and the outputs of the steps that ran, never by a model. The runner and
//! the dry run (`pincer workflow dry-run`) take the same decisions here,
//! so the same inputs and outputs always take the same path.

use serde_json::{Map, Value, json};

use super::template::holds;
use super::{Step, StepKind, Workflow};

/// What a run knows so far.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    pub inputs: Value,
    /// `steps.<id>` of the templates: `{"output": …, "error": bool}`.
    pub steps: Map<String, Value>,
}

impl State {
    pub fn new(inputs: Value) -> Self {
        Self {
            inputs,
            steps: Map::new(),
        }
    }

    /// What templates and conditions read.
    pub fn context(&self) -> Value {
        json!({"inputs": self.inputs, "steps": self.steps})
    }

    /// Records the output of step `id`.
    pub fn record(&mut self, id: &str, output: Value, error: bool) {
        self.steps
            .insert(id.to_string(), json!({"output": output, "error": error}));
    }
}

/// The step after `step` (whose output is in `state`), or `None` when the
/// run ends there.
pub fn next<'a>(step: &'a Step, state: &State) -> Result<Option<&'a str>, String> {
    let context = state.context();
    if let StepKind::Condition {
        expr,
        then,
        otherwise,
    } = &step.kind
    {
        return Ok(if holds(expr, &context)? {
            Some(then.as_str())
        } else {
            otherwise.as_deref().or(step.next.as_deref())
        });
    }
    for transition in &step.transitions {
        if holds(&transition.when, &context)? {
            return Ok(Some(transition.to.as_str()));
        }
    }
    Ok(step.next.as_deref())
}

/// The output a condition step records: whether it held.
pub fn condition_output(step: &Step, state: &State) -> Result<Value, String> {
    match &step.kind {
        StepKind::Condition { expr, .. } => Ok(Value::Bool(holds(expr, &state.context())?)),
        _ => Ok(Value::Null),
    }
}

/// The path a run of `workflow` takes with `inputs` when each step answers
/// with `outputs[<step id>]`, without running anything: the ids of the
/// steps in order (a parallel step followed by its steps).
pub fn dry_run(
    workflow: &Workflow,
    inputs: Value,
    outputs: &Map<String, Value>,
) -> Result<Vec<String>, String> {
    let steps = workflow.all_steps();
    let mut state = State::new(inputs);
    let mut path: Vec<String> = Vec::new();
    let mut executed = 0u32;
    let given = |id: &str| -> Result<Value, String> {
        outputs
            .get(id)
            .cloned()
            .ok_or_else(|| format!("no output given for step `{id}`: add it to the outputs file"))
    };
    let mut current = workflow.steps.first().map(|s| s.id.as_str());
    while let Some(id) = current {
        let step = steps
            .get(id)
            .ok_or_else(|| format!("unknown step `{id}`"))?;
        let cost = match &step.kind {
            StepKind::Parallel { steps } => 1 + steps.len() as u32,
            _ => 1,
        };
        if executed + cost > workflow.budget {
            return Err(format!(
                "the run would pass its budget of {} steps at `{id}`; the path so far: {}",
                workflow.budget,
                path.join(" → ")
            ));
        }
        executed += cost;
        path.push(id.to_string());
        match &step.kind {
            StepKind::Condition { .. } => {
                let held = condition_output(step, &state)?;
                state.record(id, held, false);
            }
            StepKind::Parallel { steps } => {
                for inner in steps {
                    state.record(&inner.id, given(&inner.id)?, false);
                    path.push(inner.id.clone());
                }
                state.record(id, Value::Null, false);
            }
            _ => state.record(id, given(id)?, false),
        }
        current = next(step, &state)?;
    }
    Ok(path)
}
