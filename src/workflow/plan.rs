//! A run as a plan: one entry per step in file order, a parallel step's
//! substeps right after it, each moving from pending to in progress to
//! completed as the run goes. The editor gets it as an ACP plan; a
//! headless `stream-json` run prints the same updates.

use std::collections::{HashMap, HashSet};

use super::run::{Recorded, StepEvent};
use super::{StepKind, Workflow};
use crate::tools::todo::{TodoItem, TodoStatus};

/// The plan of one run of a workflow.
#[derive(Clone, Debug)]
pub struct Plan {
    workflow: String,
    ids: Vec<String>,
    items: Vec<TodoItem>,
    /// Steps an interrupted run finished: completed from the start, and
    /// left so while the resumed run walks past them again.
    done: HashSet<String>,
    /// Each parallel step's substeps: they start together with it.
    parallel: HashMap<String, Vec<String>>,
}

impl Plan {
    /// The plan of `workflow`; the steps in `recorded` start completed.
    pub fn new(workflow: &Workflow, recorded: &[Recorded]) -> Self {
        let done: HashSet<String> = recorded.iter().map(|r| r.step.clone()).collect();
        let mut ids = Vec::new();
        let mut items = Vec::new();
        let mut parallel = HashMap::new();
        let mut add = |id: &str, content: String| {
            ids.push(id.to_string());
            items.push(TodoItem {
                content,
                status: if done.contains(id) {
                    TodoStatus::Completed
                } else {
                    TodoStatus::Pending
                },
                priority: None,
            });
        };
        for step in &workflow.steps {
            add(&step.id, format!("{} ({})", step.id, step.kind.name()));
            if let StepKind::Parallel { steps } = &step.kind {
                parallel.insert(
                    step.id.clone(),
                    steps.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
                );
                for inner in steps {
                    add(
                        &inner.id,
                        format!("{} › {} ({})", step.id, inner.id, inner.kind.name()),
                    );
                }
            }
        }
        // A parallel step is done when all of its substeps were.
        for step in &workflow.steps {
            if let StepKind::Parallel { steps } = &step.kind
                && !steps.is_empty()
                && steps.iter().all(|s| done.contains(&s.id))
                && let Some(at) = ids.iter().position(|id| *id == step.id)
            {
                items[at].status = TodoStatus::Completed;
            }
        }
        Self {
            workflow: workflow.name.clone(),
            ids,
            items,
            done,
            parallel,
        }
    }

    pub fn items(&self) -> &[TodoItem] {
        &self.items
    }

    /// Applies a step event of the run; whether the plan changed. Steps of
    /// workflows the run calls are theirs, not this plan's.
    pub fn apply(&mut self, event: &StepEvent<'_>) -> bool {
        match event {
            StepEvent::Started { workflow, step } if *workflow == self.workflow => {
                // A parallel step's substeps start with it, in the same
                // update, whichever of them the runtime polls first.
                let inner = self.parallel.get(*step).cloned().unwrap_or_default();
                let mut changed = self.set(step, TodoStatus::InProgress);
                for id in inner {
                    changed |= self.set(&id, TodoStatus::InProgress);
                }
                changed
            }
            StepEvent::Finished(record) if record.workflow == self.workflow => {
                self.set(&record.step, TodoStatus::Completed)
            }
            _ => false,
        }
    }

    fn set(&mut self, step: &str, status: TodoStatus) -> bool {
        if self.done.contains(step) {
            return false;
        }
        let Some(at) = self.ids.iter().position(|id| id == step) else {
            return false;
        };
        if self.items[at].status == status {
            return false;
        }
        self.items[at].status = status;
        true
    }
}
