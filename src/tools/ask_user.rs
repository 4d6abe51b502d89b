//! `ask_user`: the model asks the person at the editor a question, with
//! choices or for a typed answer, and gets the answer as the call's result.
//!
//! The tool knows nothing of the wire: it hands a [`Question`] to whatever
//! [`AskUser`] the frontend gave the call (`ToolContext::ask`). Where no one
//! can answer (`pincer run`), the model gets an error result at once instead
//! of a run that hangs; a question the user declines or cancels ends the
//! turn, as cancelling a permission question does.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CallInfo, Tool, ToolContext, ToolKind, ToolOutput, parse_args, schema_for};

/// A question for the user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The call that asks, so the editor shows the question with it.
    pub call_id: String,
    pub text: String,
    /// Empty: the user types the answer.
    pub choices: Vec<Choice>,
}

/// One answer the user may pick.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// The answer as shown to the user and returned to you when picked.
    pub label: String,
    /// What picking it means, if the label alone does not say.
    #[serde(default)]
    pub description: Option<String>,
}

/// What came of a question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The chosen label or the typed text.
    Answer(String),
    /// The user declined or cancelled; the frontend has ended the turn.
    Cancelled,
    /// The question could not be put (the reason, for the model).
    Unavailable(String),
}

/// Someone who can answer: the editor's user, through the frontend.
pub trait AskUser: Send + Sync {
    fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Reply>;
}

/// What `pincer run` and other headless runs tell the model.
pub const NO_ONE_TO_ASK: &str = "No one can answer questions in this run (it has no user attached, e.g. `pincer run`). Do not ask again: decide yourself, and say in your reply what you assumed.";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    /// The question, complete on its own (the user may not have read your
    /// last message).
    question: String,
    /// Answers to pick from. Leave out for a free-text answer.
    #[serde(default)]
    choices: Vec<Choice>,
}

/// Asks the editor's user.
#[derive(Clone, Copy, Debug, Default)]
pub struct AskUserTool;

impl Tool for AskUserTool {
    /// It waits for the user, who may edit files meanwhile: those edits
    /// are not the turn's.
    fn may_change_files(&self) -> bool {
        false
    }

    fn name(&self) -> &str {
        "ask_user"
    }

    fn description(&self) -> &str {
        "Ask the user a question and wait for the answer: give `choices` for the user to pick one (their label is returned), or none for a typed answer. Use it when you cannot go on without a decision only the user can make; do not use it for things you can find out yourself."
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        schema_for::<Args>()
    }

    fn describe(&self, args: &serde_json::Value, _cwd: &std::path::Path) -> CallInfo {
        let title = args["question"]
            .as_str()
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .unwrap_or("Ask the user");
        CallInfo {
            title: title.to_string(),
            kind: ToolKind::Other,
            locations: Vec::new(),
        }
    }

    fn mutating(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        args: serde_json::Value,
        ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let args: Args = match parse_args(self.name(), args) {
                Ok(args) => args,
                Err(output) => return output,
            };
            let question = match question(&ctx.call_id, args) {
                Ok(question) => question,
                Err(text) => return ToolOutput::error(text),
            };
            let Some(asker) = &ctx.ask else {
                return ToolOutput::error(NO_ONE_TO_ASK);
            };
            let reply = tokio::select! {
                reply = asker.ask(&question) => reply,
                () = ctx.cancel.cancelled() => Reply::Cancelled,
            };
            match reply {
                Reply::Answer(text) => ToolOutput::ok(text),
                Reply::Cancelled => {
                    ToolOutput::error("The user cancelled the question; the turn ended.")
                }
                Reply::Unavailable(text) => ToolOutput::error(text),
            }
        })
    }
}

/// At most this many choices: a dialog a person can read at a glance
/// (Claude Code's own question tool offers up to four).
const MAX_CHOICES: usize = 12;
/// Characters of a question, and of a choice's label and description: a
/// model that pastes a file into a dialog is told to put it in its reply.
const MAX_QUESTION: usize = 2_000;
const MAX_LABEL: usize = 200;

/// Checks what the model asked: a question, and distinct, non-empty labels,
/// all of a size an editor's dialog can show.
fn question(call_id: &str, args: Args) -> Result<Question, String> {
    let text = args.question.trim().to_string();
    if text.is_empty() {
        return Err("ask_user needs a non-empty `question`.".to_string());
    }
    if text.chars().count() > MAX_QUESTION {
        return Err(format!(
            "The ask_user question is longer than {MAX_QUESTION} characters; put the details in your reply and ask a short question."
        ));
    }
    if args.choices.len() > MAX_CHOICES {
        return Err(format!(
            "ask_user got {} choices; offer at most {MAX_CHOICES}, or ask for a typed answer.",
            args.choices.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for choice in &args.choices {
        if choice.label.trim().is_empty() {
            return Err("Every choice of ask_user needs a non-empty `label`.".to_string());
        }
        let long = |s: &str| s.chars().count() > MAX_LABEL;
        if long(&choice.label) || choice.description.as_deref().is_some_and(long) {
            return Err(format!(
                "A choice of ask_user has a label or description longer than {MAX_LABEL} characters; keep choices short."
            ));
        }
        if !seen.insert(choice.label.as_str()) {
            return Err(format!(
                "ask_user got the choice `{}` twice; give each choice a distinct label.",
                choice.label
            ));
        }
    }
    Ok(Question {
        call_id: call_id.to_string(),
        text,
        choices: args.choices,
    })
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;
    use std::sync::Arc;

    use super::*;

    /// Answers with `reply` and keeps the question it got.
    struct Scripted {
        reply: Reply,
        asked: Mutex<Vec<Question>>,
    }

    impl AskUser for Scripted {
        fn ask<'a>(&'a self, question: &'a Question) -> BoxFuture<'a, Reply> {
            self.asked.lock().push(question.clone());
            Box::pin(async move { self.reply.clone() })
        }
    }

    fn ctx(ask: Option<Arc<dyn AskUser>>) -> ToolContext {
        ToolContext {
            call_id: "call_1".to_string(),
            ask,
            confine: None,
            ..ToolContext::local(std::env::temp_dir())
        }
    }

    #[tokio::test]
    async fn the_answer_is_the_result_and_the_question_is_passed_whole() {
        let asker = Arc::new(Scripted {
            reply: Reply::Answer("Blue".to_string()),
            asked: Mutex::new(Vec::new()),
        });
        let args = serde_json::json!({
            "question": " Which colour? ",
            "choices": [{"label": "Red"}, {"label": "Blue", "description": "the sky"}],
        });
        let output = AskUserTool.execute(args, &ctx(Some(asker.clone()))).await;
        assert_eq!(output, ToolOutput::ok("Blue"));
        assert_eq!(
            *asker.asked.lock(),
            vec![Question {
                call_id: "call_1".to_string(),
                text: "Which colour?".to_string(),
                choices: vec![
                    Choice {
                        label: "Red".to_string(),
                        description: None
                    },
                    Choice {
                        label: "Blue".to_string(),
                        description: Some("the sky".to_string())
                    },
                ],
            }]
        );
    }

    #[tokio::test]
    async fn without_anyone_to_ask_the_model_gets_an_error_at_once() {
        let output = AskUserTool
            .execute(serde_json::json!({"question": "Why?"}), &ctx(None))
            .await;
        assert_eq!(output, ToolOutput::error(NO_ONE_TO_ASK));
    }

    #[tokio::test]
    async fn bad_questions_are_refused_before_anyone_is_asked() {
        let asker = Arc::new(Scripted {
            reply: Reply::Answer("x".to_string()),
            asked: Mutex::new(Vec::new()),
        });
        for args in [
            serde_json::json!({"question": "  "}),
            serde_json::json!({"question": "Q", "choices": [{"label": ""}]}),
            serde_json::json!({"question": "Q", "choices": [{"label": "a"}, {"label": "a"}]}),
            serde_json::json!({"question": "Q".repeat(MAX_QUESTION + 1)}),
            serde_json::json!({"question": "Q", "choices": (0..=MAX_CHOICES)
                .map(|i| serde_json::json!({"label": i.to_string()}))
                .collect::<Vec<_>>()}),
            serde_json::json!({"question": "Q", "choices": [{"label": "a".repeat(MAX_LABEL + 1)}]}),
            serde_json::json!({"question": "Q", "choices": [{"label": "a", "description": "d".repeat(MAX_LABEL + 1)}]}),
        ] {
            let output = AskUserTool.execute(args, &ctx(Some(asker.clone()))).await;
            assert!(output.is_error, "{output:?}");
        }
        assert!(asker.asked.lock().is_empty());
    }
}
