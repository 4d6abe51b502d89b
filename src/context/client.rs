//! Instructions the client gives for one session (ACP's `systemPrompt` on
//! `session/new`, `session/load` and `session/resume`; `pincer run
//! --append-system-prompt`), and where they go in the system prompt.
//!
//! They are part of the session, not of the project or the user's config:
//! the session's transcript keeps them, so the prompt a session was
//! started with is the prompt it continues with after a reload, and the
//! system prompt (the start of every cached request) stays the same from
//! one call to the next until the client sends different instructions.

use serde::{Deserialize, Serialize};

/// How the client's text combines with pincer's own instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientPromptMode {
    /// pincer's prompt as it is, the client's text after the project's
    /// context.
    Append,
    /// The client's text in place of pincer's persona and guidelines; what
    /// the model needs to work (tools, environment, project context,
    /// skills) stays. See [`super::assemble_with`].
    Override,
}

/// The client's instructions for a session, as text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientPrompt {
    pub mode: ClientPromptMode,
    pub text: String,
}

impl ClientPrompt {
    pub fn append(text: impl Into<String>) -> Self {
        Self {
            mode: ClientPromptMode::Append,
            text: text.into(),
        }
    }

    /// The section that carries appended instructions: under a heading of
    /// its own, so the model (and a person reading a request) can tell the
    /// client's words from the project's context above them.
    pub(super) fn appended_section(&self) -> String {
        format!(
            "# Session instructions\nThe client that runs this session gives these \
             instructions for it:\n\n{}",
            self.text.trim_end()
        )
    }
}
