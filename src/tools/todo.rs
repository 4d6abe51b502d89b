//! The `todo` tool: the model keeps a short checklist of the task in hand,
//! so a person can follow a multi-step job and the model does not lose its
//! place.
//!
//! Each call writes the whole list (the editor replaces its plan with every
//! update, as ACP `plan` updates do), so there is no hidden state to get out
//! of step: the list lives in the call's result, which the transcript keeps
//! and a replay shows again. The tool changes nothing on the machine, so it
//! never asks and stays offered in the read-only `plan` mode, where it is how
//! the model presents its plan.

use std::path::Path;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CallInfo, Display, Tool, ToolContext, ToolKind, ToolOutput};

/// Most entries a list may have: a checklist a person reads at a glance,
/// not a backlog.
pub const MAX_ENTRIES: usize = 50;
/// Most characters in one entry.
pub const MAX_CONTENT_CHARS: usize = 500;

/// Where an entry stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

/// How much an entry matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoPriority {
    High,
    Medium,
    Low,
}

/// One step of the checklist.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoItem {
    /// What the step is, in a short imperative sentence.
    pub content: String,
    /// pending, in_progress (at most one entry at a time) or completed.
    pub status: TodoStatus,
    /// high, medium or low (default medium).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<TodoPriority>,
}

// Arguments of a `todo` call; the field docs are the schema the model sees.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoInput {
    /// The whole checklist, in order; it replaces the previous one.
    pub todos: Vec<TodoItem>,
}

pub struct TodoTool;

impl Tool for TodoTool {
    fn name(&self) -> &str {
        "todo"
    }

    fn description(&self) -> &str {
        "Write the task's checklist, shown to the user as a plan. Send the whole list each \
         call (it replaces the previous one): entries with content, status (pending, \
         in_progress, completed) and optional priority (high, medium, low). Use it for work \
         of three or more steps: write the list first, mark one entry in_progress before you \
         start it and completed as soon as it is done. In plan mode, present your plan with it. \
         At most 50 entries and one in_progress."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        super::schema_for::<TodoInput>()
    }

    fn describe(&self, _args: &serde_json::Value, _cwd: &Path) -> CallInfo {
        CallInfo {
            title: "Update the todo list".to_string(),
            kind: ToolKind::Think,
            locations: Vec::new(),
        }
    }

    fn mutating(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let input: TodoInput = match super::parse_args(self.name(), args) {
                Ok(input) => input,
                Err(output) => return output,
            };
            run(input.todos)
        })
    }
}

/// Checks a list and, when it is sound, returns it as the call's result
/// (the checklist for the model, the plan for the editor).
fn run(mut todos: Vec<TodoItem>) -> ToolOutput {
    if let Err(problem) = validate(&todos) {
        return ToolOutput::error(format!(
            "The todo list was not changed: {problem}. Send the whole corrected list again."
        ));
    }
    for item in &mut todos {
        item.content = item.content.trim().to_string();
    }
    let mut output = ToolOutput::ok(summary(&todos));
    output.display = vec![Display::Plan(todos)];
    output
}

fn validate(todos: &[TodoItem]) -> Result<(), String> {
    if todos.len() > MAX_ENTRIES {
        return Err(format!(
            "it has {} entries, at most {MAX_ENTRIES} are allowed; merge or drop some",
            todos.len()
        ));
    }
    for (n, item) in todos.iter().enumerate() {
        let content = item.content.trim();
        if content.is_empty() {
            return Err(format!("entry {} has empty content", n + 1));
        }
        let chars = content.chars().count();
        if chars > MAX_CONTENT_CHARS {
            return Err(format!(
                "entry {} is {chars} characters long, at most {MAX_CONTENT_CHARS} are allowed",
                n + 1
            ));
        }
    }
    let in_progress: Vec<String> = todos
        .iter()
        .enumerate()
        .filter(|(_, item)| item.status == TodoStatus::InProgress)
        .map(|(n, _)| (n + 1).to_string())
        .collect();
    if in_progress.len() > 1 {
        return Err(format!(
            "entries {} are all in_progress; at most one entry may be in_progress",
            in_progress.join(", ")
        ));
    }
    Ok(())
}

/// The list as a Markdown checklist (what the model sees, and the call's
/// content in the editor).
pub fn checklist(todos: &[TodoItem]) -> String {
    todos
        .iter()
        .map(|item| {
            let mark = match item.status {
                TodoStatus::Pending => "[ ]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Completed => "[x]",
            };
            let mut line = format!("- {mark} {}", item.content);
            if item.status == TodoStatus::InProgress {
                line.push_str(" (in progress)");
            }
            match item.priority {
                Some(TodoPriority::High) => line.push_str(" (high priority)"),
                Some(TodoPriority::Low) => line.push_str(" (low priority)"),
                Some(TodoPriority::Medium) | None => {}
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn summary(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list cleared.".to_string();
    }
    let done = todos
        .iter()
        .filter(|item| item.status == TodoStatus::Completed)
        .count();
    format!(
        "Todo list updated ({done} of {} completed):\n{}",
        todos.len(),
        checklist(todos)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    async fn call(args: serde_json::Value) -> ToolOutput {
        let ctx = ToolContext::local(std::env::temp_dir());
        TodoTool.execute(args, &ctx).await
    }

    #[tokio::test]
    async fn a_sound_list_is_the_result_and_the_plan() {
        let out = call(json!({"todos": [
            {"content": " Read the parser ", "status": "completed", "priority": "high"},
            {"content": "Fix the bug", "status": "in_progress"},
            {"content": "Add a test", "status": "pending", "priority": "low"},
        ]}))
        .await;
        assert!(!out.is_error);
        assert_eq!(
            out.text(),
            "Todo list updated (1 of 3 completed):\n\
             - [x] Read the parser (high priority)\n\
             - [~] Fix the bug (in progress)\n\
             - [ ] Add a test (low priority)"
        );
        assert_eq!(
            out.display,
            vec![Display::Plan(vec![
                TodoItem {
                    content: "Read the parser".into(),
                    status: TodoStatus::Completed,
                    priority: Some(TodoPriority::High),
                },
                TodoItem {
                    content: "Fix the bug".into(),
                    status: TodoStatus::InProgress,
                    priority: None,
                },
                TodoItem {
                    content: "Add a test".into(),
                    status: TodoStatus::Pending,
                    priority: Some(TodoPriority::Low),
                },
            ])]
        );
    }

    #[tokio::test]
    async fn an_empty_list_clears_the_plan() {
        let out = call(json!({"todos": []})).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "Todo list cleared.");
        assert_eq!(out.display, vec![Display::Plan(Vec::new())]);
    }

    #[tokio::test]
    async fn unsound_lists_are_refused_without_a_plan() {
        let many: Vec<_> = (0..=MAX_ENTRIES)
            .map(|n| json!({"content": format!("step {n}"), "status": "pending"}))
            .collect();
        let cases = [
            (
                json!({"todos": [
                    {"content": "a", "status": "in_progress"},
                    {"content": "b", "status": "pending"},
                    {"content": "c", "status": "in_progress"},
                ]}),
                "The todo list was not changed: entries 1, 3 are all in_progress; at most one \
                 entry may be in_progress. Send the whole corrected list again.",
            ),
            (
                json!({"todos": [{"content": "  ", "status": "pending"}]}),
                "The todo list was not changed: entry 1 has empty content. Send the whole \
                 corrected list again.",
            ),
            (
                json!({"todos": many}),
                "The todo list was not changed: it has 51 entries, at most 50 are allowed; \
                 merge or drop some. Send the whole corrected list again.",
            ),
            (
                json!({"todos": [{"content": "x".repeat(501), "status": "pending"}]}),
                "The todo list was not changed: entry 1 is 501 characters long, at most 500 \
                 are allowed. Send the whole corrected list again.",
            ),
        ];
        for (args, expected) in cases {
            let out = call(args).await;
            assert!(out.is_error);
            assert_eq!(out.text(), expected);
            assert!(out.display.is_empty());
        }
        let out = call(json!({"todos": [{"content": "a", "status": "doing"}]})).await;
        assert!(out.is_error);
        assert!(out.text().starts_with("Invalid arguments for todo:"));
        assert!(out.display.is_empty());
    }

    #[test]
    fn it_never_asks_and_is_a_planning_step() {
        assert!(!TodoTool.mutating());
        assert_eq!(
            TodoTool.describe(&json!({}), Path::new("/")),
            CallInfo {
                title: "Update the todo list".into(),
                kind: ToolKind::Think,
                locations: Vec::new(),
            }
        );
    }
}
