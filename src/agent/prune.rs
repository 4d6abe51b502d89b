//! Trimming old tool results once a prompt cache has expired.
//!
//! Anthropic caches a prompt's prefix for a few minutes (5 by default).
//! While the cache is warm, re-sending large old tool results is cheap;
//! once it has expired, the whole prefix is paid for again. So when a
//! session comes back after longer than the cache's TTL, old tool results
//! over 4,000 characters are cut to their head and tail in the session's
//! memory — the next call re-creates the cache with the smaller history.
//! The last three assistant turns and every image are left alone, and the
//! transcript keeps the full results.

use std::time::{Duration, SystemTime};

use super::AgentMessage;
use crate::llm::{Api, Content, Message};

/// Pruning settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub enabled: bool,
    /// How long the provider keeps a prompt cache (`cache_ttl` in config).
    pub ttl: Duration,
    /// Results longer than this are trimmed.
    pub min_chars: usize,
    pub head_chars: usize,
    pub tail_chars: usize,
    /// Tool results of the last this many assistant turns are kept whole.
    pub protect_turns: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            enabled: true,
            ttl: Duration::from_secs(5 * 60),
            min_chars: 4_000,
            head_chars: 1_500,
            tail_chars: 1_500,
            protect_turns: 3,
        }
    }
}

impl Settings {
    /// Whether a call to a model of `api` after the previous call at
    /// `last_call` finds its cache expired.
    pub fn due(&self, api: Api, last_call: Option<SystemTime>, now: SystemTime) -> bool {
        self.enabled
            && api == Api::AnthropicMessages
            && last_call
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|idle| idle > self.ttl)
    }
}

/// Trims old tool results in place; returns how many were trimmed.
pub fn prune(history: &mut [AgentMessage], settings: &Settings) -> usize {
    let protect_from = history
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, e)| {
            matches!(
                e,
                AgentMessage::Llm {
                    message: Message::Assistant(_)
                }
            )
        })
        .nth(settings.protect_turns.saturating_sub(1))
        .map_or(0, |(index, _)| index);
    let mut trimmed = 0;
    for entry in &mut history[..protect_from] {
        let AgentMessage::Llm {
            message: Message::ToolResult(result),
        } = entry
        else {
            continue;
        };
        if result
            .content
            .iter()
            .any(|c| matches!(c, Content::Image { .. }))
        {
            continue;
        }
        let text: String = result
            .content
            .iter()
            .filter_map(|c| match c {
                Content::Text { text } => Some(text.as_str()),
                Content::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let chars = text.chars().count();
        if chars <= settings.min_chars {
            continue;
        }
        let head: String = text.chars().take(settings.head_chars).collect();
        let tail: String = text
            .chars()
            .skip(chars.saturating_sub(settings.tail_chars))
            .collect();
        let omitted = chars - settings.head_chars - settings.tail_chars;
        result.content = vec![Content::text(format!(
            "{head}\n\n[… {omitted} characters of this old tool result were trimmed to save context; run the tool again if you need them …]\n\n{tail}"
        ))];
        trimmed += 1;
    }
    trimmed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{AssistantMessage, ToolResultMessage};
    use pretty_assertions::assert_eq;

    fn assistant() -> AgentMessage {
        AgentMessage::Llm {
            message: Message::Assistant(AssistantMessage {
                content: Vec::new(),
                provider: "anthropic".into(),
                api: Api::AnthropicMessages,
                model: "m".into(),
                auth_profile: None,
                stop_reason: crate::llm::StopReason::ToolUse,
                error_message: None,
                usage: Default::default(),
            }),
        }
    }

    fn result(content: Vec<Content>) -> AgentMessage {
        AgentMessage::Llm {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: "c".into(),
                tool_name: "read".into(),
                content,
                is_error: false,
            }),
        }
    }

    fn text_of(entry: &AgentMessage) -> String {
        match entry {
            AgentMessage::Llm {
                message: Message::ToolResult(r),
            } => match &r.content[0] {
                Content::Text { text } => text.clone(),
                Content::Image { .. } => "[image]".into(),
            },
            _ => panic!(),
        }
    }

    #[test]
    fn old_long_results_keep_head_and_tail_and_recent_turns_stay_whole() {
        let long = format!(
            "{}{}{}",
            "h".repeat(1_500),
            "m".repeat(7_000),
            "t".repeat(1_500)
        );
        let image = Content::Image {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        };
        let mut history = vec![
            assistant(),
            result(vec![Content::text(long.clone())]), // 1: trimmed
            result(vec![Content::text("short")]),      // 2: short
            result(vec![image.clone(), Content::text(long.clone())]), // 3: image
            assistant(),
            result(vec![Content::text(long.clone())]), // 5: protected
            assistant(),
            result(vec![Content::text(long.clone())]), // 7: protected
            assistant(),
            result(vec![Content::text(long.clone())]), // 9: protected
        ];
        assert_eq!(prune(&mut history, &Settings::default()), 1);
        let trimmed = text_of(&history[1]);
        assert!(trimmed.starts_with(&"h".repeat(1_500)), "{trimmed}");
        assert!(trimmed.ends_with(&"t".repeat(1_500)));
        assert!(trimmed.contains("[… 7000 characters of this old tool result were trimmed"));
        assert!(!trimmed.contains("mmm"));
        assert_eq!(text_of(&history[2]), "short");
        assert_eq!(text_of(&history[3]), "[image]");
        for index in [5, 7, 9] {
            assert_eq!(text_of(&history[index]), long, "{index}");
        }
        // Trimming twice changes nothing more.
        let again = history.clone();
        assert_eq!(prune(&mut history, &Settings::default()), 0);
        assert_eq!(history, again);
    }

    #[test]
    fn pruning_is_due_only_for_anthropic_after_the_cache_expired() {
        let settings = Settings::default();
        let now = SystemTime::now();
        let six_minutes_ago = now - Duration::from_secs(360);
        let a_minute_ago = now - Duration::from_secs(60);
        assert!(settings.due(Api::AnthropicMessages, Some(six_minutes_ago), now));
        assert!(!settings.due(Api::AnthropicMessages, Some(a_minute_ago), now));
        assert!(!settings.due(Api::AnthropicMessages, None, now));
        assert!(!settings.due(Api::OpenaiCompletions, Some(six_minutes_ago), now));
        let off = Settings {
            enabled: false,
            ..settings
        };
        assert!(!off.due(Api::AnthropicMessages, Some(six_minutes_ago), now));
    }
}
