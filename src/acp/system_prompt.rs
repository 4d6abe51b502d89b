//! ACP's client system prompt (`systemPrompt` on `session/new`,
//! `session/load` and `session/resume`), checked and turned into the
//! session's [`ClientPrompt`].
//!
//! ACP requires an agent to refuse what it cannot apply (a mode it does
//! not support, a block that is not text, an empty list) rather than start
//! the session without it, so this runs before anything of the session is
//! created or loaded, and its errors answer the request with `-32602`.

use agent_client_protocol::v1::schema::{
    ContentBlock, SessionSystemPromptCapabilities, SessionSystemPromptModeCapabilities,
    SessionSystemPromptOverrideCapabilities, SystemPrompt, SystemPromptMode,
};

use crate::context::{ClientPrompt, ClientPromptMode};

/// What `initialize` advertises: `append` (always implied) and `override`.
pub fn capabilities() -> SessionSystemPromptCapabilities {
    SessionSystemPromptCapabilities::new().mode(
        SessionSystemPromptModeCapabilities::new()
            .override_(SessionSystemPromptOverrideCapabilities::new()),
    )
}

/// Why a client's `systemPrompt` cannot be used.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SystemPromptError {
    #[error(
        "systemPrompt.mode `{0}` is not supported: pincer supports `append` and `override`; \
         send one of those"
    )]
    Mode(String),
    #[error(
        "systemPrompt.content[{index}] is a `{kind}` block: a system prompt may only hold \
         `text` blocks; send its text instead"
    )]
    Block { index: usize, kind: &'static str },
    #[error(
        "systemPrompt.content has no text: send at least one non-empty `text` block, or leave \
         systemPrompt out to keep the session's instructions"
    )]
    Empty,
}

/// The session's instructions from the request's `systemPrompt`; `None`
/// when the request has none. Text blocks are joined by blank lines.
pub fn client_prompt(
    prompt: Option<&SystemPrompt>,
) -> Result<Option<ClientPrompt>, SystemPromptError> {
    let Some(prompt) = prompt else {
        return Ok(None);
    };
    let mode = match &prompt.mode {
        SystemPromptMode::Append => ClientPromptMode::Append,
        SystemPromptMode::Override => ClientPromptMode::Override,
        SystemPromptMode::Other(other) => return Err(SystemPromptError::Mode(other.clone())),
        other => return Err(SystemPromptError::Mode(format!("{other:?}"))),
    };
    let mut texts = Vec::with_capacity(prompt.content.len());
    for (index, block) in prompt.content.iter().enumerate() {
        let kind = match block {
            ContentBlock::Text(text) => {
                texts.push(text.text.as_str());
                continue;
            }
            ContentBlock::Image(_) => "image",
            ContentBlock::Audio(_) => "audio",
            ContentBlock::ResourceLink(_) => "resource_link",
            ContentBlock::Resource(_) => "resource",
            _ => "unknown",
        };
        return Err(SystemPromptError::Block { index, kind });
    }
    if texts.iter().all(|t| t.trim().is_empty()) {
        return Err(SystemPromptError::Empty);
    }
    Ok(Some(ClientPrompt {
        mode,
        text: texts.join("\n\n"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(value: serde_json::Value) -> Result<Option<ClientPrompt>, SystemPromptError> {
        let prompt: SystemPrompt = serde_json::from_value(value).unwrap();
        client_prompt(Some(&prompt))
    }

    #[test]
    fn text_blocks_in_either_mode_become_the_sessions_instructions() {
        assert_eq!(
            parse(serde_json::json!({"mode": "append", "content": [
                {"type": "text", "text": "Answer in French."},
                {"type": "text", "text": "Be brief."}
            ]})),
            Ok(Some(ClientPrompt::append("Answer in French.\n\nBe brief.")))
        );
        assert_eq!(
            parse(serde_json::json!({"mode": "override", "content": [
                {"type": "text", "text": "You review code."}
            ]})),
            Ok(Some(ClientPrompt {
                mode: ClientPromptMode::Override,
                text: "You review code.".into()
            }))
        );
        assert_eq!(client_prompt(None), Ok(None));
    }

    #[test]
    fn what_pincer_cannot_apply_is_refused() {
        assert_eq!(
            parse(serde_json::json!({"mode": "replace_all", "content": [
                {"type": "text", "text": "x"}
            ]})),
            Err(SystemPromptError::Mode("replace_all".into()))
        );
        assert_eq!(
            parse(serde_json::json!({"mode": "append", "content": [
                {"type": "text", "text": "x"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ]})),
            Err(SystemPromptError::Block {
                index: 1,
                kind: "image"
            })
        );
        assert_eq!(
            parse(serde_json::json!({"mode": "append", "content": []})),
            Err(SystemPromptError::Empty)
        );
        assert_eq!(
            parse(serde_json::json!({"mode": "append", "content": [
                {"type": "text", "text": " \n"}
            ]})),
            Err(SystemPromptError::Empty)
        );
    }
}
