//! Session titles written by a model.
//!
//! A new session is named at once after the first line of its first
//! prompt. When the first turn has ended, one short call to a cheap model
//! (by default the cheapest priced model of the session's provider, or the
//! `title_model` setting) turns the opening exchange into a few words, which
//! then name the session in the editor's history. Failing to get a title
//! costs nothing: the first prompt's line stays.

use std::time::Duration;

use futures::StreamExt;

use crate::config::Settings;
use crate::llm::{self, Api, Content, Message, Model, Request, Secret, StreamEvent, ThinkingLevel};

const INSTRUCTIONS: &str = "You name conversations between a user and a coding assistant. \
Reply with a title for the conversation you are given: at most six words, in the language the \
user wrote in, saying what the user wants done. Reply with the title alone: no quotes, no \
trailing punctuation, no explanation.";

/// How much of the first prompt and of the first answer the model sees.
const PROMPT_CHARS: usize = 2_000;
const ANSWER_CHARS: usize = 1_000;

/// The whole call, from request to last byte.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Why no title came back.
#[derive(Debug, thiserror::Error)]
pub enum TitleError {
    #[error(transparent)]
    Llm(#[from] llm::LlmError),
    #[error("the title model did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the title model's answer held no usable title")]
    Empty,
}

/// The model that names a session working with `session_model`, or none
/// when titles come from the first prompt only (`title_model = "none"`, or
/// a configured model that cannot be used).
pub fn model_for(settings: &Settings, session_model: &Model) -> Option<Model> {
    let configured = settings.config.title_model.as_deref().map(str::trim);
    let model = match configured {
        Some("none" | "off" | "") => return None,
        Some(id) => match settings.catalog.resolve(id) {
            Ok(model) => model,
            Err(e) => {
                tracing::warn!(error = %e, "title_model cannot be used; sessions keep their first prompt as title");
                return None;
            }
        },
        None => cheapest(settings, session_model),
    };
    settings.has_credentials(&model).then_some(model)
}

/// The cheapest model of `session_model`'s provider with a known price;
/// the session's own model when none has one (local servers).
fn cheapest(settings: &Settings, session_model: &Model) -> Model {
    let price = |m: &Model| m.pricing.input + m.pricing.output;
    settings
        .catalog
        .provider(&session_model.provider)
        .and_then(|p| {
            p.models
                .iter()
                .filter(|m| price(m) > 0.0)
                .min_by(|a, b| price(a).total_cmp(&price(b)))
        })
        .cloned()
        .unwrap_or_else(|| session_model.clone())
}

/// The request that asks `model` for a title.
pub fn request(model: &Model, prompt: &str, answer: &str) -> Request {
    let excerpt = |text: &str, limit: usize| -> String {
        let mut cut: String = text.trim().chars().take(limit).collect();
        if text.trim().chars().count() > limit {
            cut.push('…');
        }
        cut
    };
    let mut conversation = format!("<user>\n{}\n</user>", excerpt(prompt, PROMPT_CHARS));
    if !answer.trim().is_empty() {
        conversation.push_str(&format!(
            "\n<assistant>\n{}\n</assistant>",
            excerpt(answer, ANSWER_CHARS)
        ));
    }
    // OpenAI's reasoning models think at their default effort unless told
    // otherwise, and thinking tokens count against the cap; the lowest
    // effort and room for it keep the call short. Elsewhere thinking is off.
    let (thinking, max_tokens) = if model.reasoning
        && matches!(
            model.api,
            Api::OpenaiCompletions | Api::OpenaiResponses | Api::GoogleGenerativeAi
        ) {
        (ThinkingLevel::Minimal, 1_024)
    } else {
        (ThinkingLevel::Off, 64)
    };
    Request {
        system: INSTRUCTIONS.to_string(),
        messages: vec![Message::User {
            content: vec![Content::text(conversation)],
        }],
        tools: Vec::new(),
        thinking,
        max_tokens: Some(max_tokens),
        cache_key: None,
        cache_retention: Default::default(),
    }
}

/// Asks `model` for a title for a conversation that began with `prompt`
/// and was first answered with `answer`.
pub async fn generate(
    http: &reqwest::Client,
    model: &Model,
    key: Option<&Secret>,
    prompt: &str,
    answer: &str,
) -> Result<String, TitleError> {
    let request = request(model, prompt, answer);
    let config = llm::StreamConfig {
        idle_timeout: TIMEOUT,
    };
    let collect = async {
        let mut stream = llm::stream(http, model, key, &request, config);
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            if let StreamEvent::TextDelta(delta) = event? {
                text.push_str(&delta);
            }
        }
        Ok::<_, TitleError>(text)
    };
    let text = tokio::time::timeout(TIMEOUT, collect)
        .await
        .map_err(|_| TitleError::Timeout(TIMEOUT))??;
    clean(&text).ok_or(TitleError::Empty)
}

/// A model's answer made into a title: its first line, without a `Title:`
/// label, quotes, markdown or trailing punctuation, whitespace collapsed,
/// at most 80 characters.
pub fn clean(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = ["title:", "title -", "title"]
        .iter()
        .find_map(|label| {
            line.get(..label.len())
                .filter(|head| head.eq_ignore_ascii_case(label))
                .map(|_| &line[label.len()..])
        })
        .filter(|rest| label_ended(rest))
        .unwrap_or(line);
    let line = line
        .trim_matches(|c: char| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '*' | '#' | '“' | '”' | '‘' | '’')
        })
        .trim_end_matches(['.', '!', '。', ':', ';', ','])
        .trim();
    let collapsed = line.split_whitespace().collect::<Vec<_>>().join(" ");
    title_from(&collapsed)
}

/// Whether what follows a `Title` label really is the rest of a label
/// ("Title: Fix it"), not the rest of a word ("Titles for posts").
fn label_ended(rest: &str) -> bool {
    rest.starts_with([':', ' ', '-']) || rest.is_empty()
}

/// The line OpenClaw's ACP bridge puts before every prompt.
fn is_working_directory_line(line: &str) -> bool {
    line.starts_with("[Working directory: ") && line.ends_with(']')
}

/// A title from the first thing the user asked: its first line, cut to 80
/// characters.
pub fn title_from(text: &str) -> Option<String> {
    // OpenClaw's ACP bridge starts every prompt with the editor's working
    // directory: that line names no session.
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !is_working_directory_line(l))?;
    let mut title: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        title.push('…');
    }
    Some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_become_clean_titles() {
        let cases = [
            ("Fix the parser bug", Some("Fix the parser bug")),
            ("  \"Fix the parser bug.\"  ", Some("Fix the parser bug")),
            (
                "Title: Add retry logic\n\nBecause…",
                Some("Add retry logic"),
            ),
            (
                "**Refactor session loading**",
                Some("Refactor session loading"),
            ),
            ("# Speed   up\tgrep", Some("Speed up grep")),
            ("Titles for blog posts", Some("Titles for blog posts")),
            (
                "“Explain the borrow checker”",
                Some("Explain the borrow checker"),
            ),
            ("\n\n   \n", None),
            ("\"\"", None),
        ];
        for (answer, expected) in cases {
            assert_eq!(clean(answer).as_deref(), expected, "{answer:?}");
        }
        let long = "word ".repeat(40);
        let title = clean(&long).unwrap();
        assert!(
            title.chars().count() <= 81 && title.ends_with('…'),
            "{title}"
        );
    }

    fn settings(config: &str) -> (tempfile::TempDir, Settings) {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let env = [
            ("PINCER_HOME", home.path().to_str().unwrap()),
            ("ANTHROPIC_API_KEY", "sk-test"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let settings = Settings::load(home.path(), env).unwrap();
        (home, settings)
    }

    #[test]
    fn the_cheapest_model_of_the_provider_names_sessions_unless_configured() {
        let (_home, s) = settings("");
        let sonnet = s.catalog.resolve("anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(
            model_for(&s, &sonnet).unwrap().full_id(),
            "anthropic/claude-haiku-4-5"
        );
        // A provider without prices (a local server) uses the session's model.
        let (_home, s) = settings(
            "[providers.local]\napi = \"openai-completions\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [{ id = \"qwen\" }]\n",
        );
        let qwen = s.catalog.resolve("local/qwen").unwrap();
        assert_eq!(model_for(&s, &qwen).unwrap().full_id(), "local/qwen");

        let (_home, s) = settings("title_model = \"anthropic/claude-sonnet-4-5\"\n");
        assert_eq!(
            model_for(&s, &sonnet).unwrap().full_id(),
            "anthropic/claude-sonnet-4-5"
        );
        let (_home, s) = settings("title_model = \"none\"\n");
        assert_eq!(model_for(&s, &sonnet), None);
        // A model without a key names nothing rather than failing later.
        let (_home, s) = settings("title_model = \"openai/gpt-5-nano\"\n");
        assert_eq!(model_for(&s, &sonnet), None);
    }

    #[test]
    fn the_request_is_short_and_offers_no_tools() {
        let (_home, s) = settings("");
        let haiku = s.catalog.resolve("anthropic/claude-haiku-4-5").unwrap();
        let r = request(&haiku, &"x".repeat(5_000), "I'll look.");
        assert!(r.tools.is_empty());
        assert_eq!((r.thinking, r.max_tokens), (ThinkingLevel::Off, Some(64)));
        let Message::User { content } = &r.messages[0] else {
            panic!("{:?}", r.messages)
        };
        let Content::Text { text } = &content[0] else {
            panic!()
        };
        assert!(
            text.contains("<assistant>\nI'll look.\n</assistant>"),
            "{text}"
        );
        assert!(text.chars().count() < PROMPT_CHARS + 100, "{}", text.len());
        let mini = s.catalog.resolve("openai/gpt-5-mini").unwrap();
        let r = request(&mini, "hi", "");
        assert_eq!(r.thinking, ThinkingLevel::Minimal);
        assert!(r.max_tokens.unwrap() >= 1_024);
    }

    #[test]
    fn a_title_skips_the_working_directory_line_openclaw_s_bridge_adds() {
        assert_eq!(
            title_from("[Working directory: ~/src/app]\n\nFix the login bug").as_deref(),
            Some("Fix the login bug")
        );
        assert_eq!(title_from("[Working directory: ~/src/app]"), None);
        assert_eq!(
            title_from("[Working directory: is what I asked] why?").as_deref(),
            Some("[Working directory: is what I asked] why?")
        );
    }
}
