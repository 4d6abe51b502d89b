//! The params of OpenClaw's methods that change one session:
//! `sessions.describe`, `sessions.reset`, `sessions.delete`,
//! `sessions.compact`, `sessions.rewind` and `sessions.fork` (their shapes
//! are the `openclaw` package's `SessionsDescribeParamsSchema`,
//! `SessionsResetParamsSchema`, `SessionsDeleteParamsSchema` and
//! `SessionsCompactParamsSchema`; rewind and fork are pincer's own, in the
//! same style).

use serde::Deserialize;

/// `sessions.describe`: a session's row, which always has its derived
/// title (`includeDerivedTitles` asks for what pincer does anyway).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DescribeParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub include_derived_titles: Option<bool>,
    pub include_last_message: Option<bool>,
}

/// `sessions.reset`: the key gets a fresh session.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub reason: Option<ResetReason>,
    pub expected_session_id: Option<String>,
}

/// Why a session is reset (`/new` or `/reset` in OpenClaw's clients):
/// both give the key a fresh session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResetReason {
    New,
    Reset,
}

/// `sessions.delete`: only `deleteTranscript: true` (or none) is taken.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub delete_transcript: Option<bool>,
    pub expected_session_id: Option<String>,
    pub archived_only: Option<bool>,
}

/// `sessions.compact`: `maxLines` is named so that it is refused with why.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub instructions: Option<String>,
    pub max_lines: Option<serde_json::Value>,
}

/// `sessions.rewind`: back to before a turn, by its number (from 1) or
/// by the id of the user message that started it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub turn: Option<u64>,
    pub message_id: Option<String>,
}

/// `sessions.fork`: a new session with the history before a turn (as
/// for a rewind), or the whole of it; `newKey` names it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub turn: Option<u64>,
    pub message_id: Option<String>,
    pub new_key: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::params;
    use serde_json::json;

    #[test]
    fn the_session_params_take_openclaw_s_fields_and_refuse_others() {
        let reset: ResetParams =
            params("sessions.reset", json!({"key": "k", "reason": "new"})).unwrap();
        assert_eq!(reset.reason, Some(ResetReason::New));
        let wrong = params::<ResetParams>("sessions.reset", json!({"key": "k", "reason": "why"}))
            .unwrap_err();
        assert!(wrong.contains("unknown variant `why`"), "{wrong}");
        let extra = params::<DeleteParams>("sessions.delete", json!({"key": "k", "force": true}))
            .unwrap_err();
        assert!(
            extra.starts_with("sessions.delete: `force` is not supported by pincer"),
            "{extra}"
        );
        let flag = params::<DescribeParams>(
            "sessions.describe",
            json!({"key": "k", "includeLastMessage": 1}),
        )
        .unwrap_err();
        assert!(flag.contains("expected a boolean"), "{flag}");
        let fork: ForkParams = params(
            "sessions.fork",
            json!({"key": "k", "turn": 2, "newKey": "n"}),
        )
        .unwrap();
        assert_eq!(fork.turn, Some(2));
        assert_eq!(fork.new_key.as_deref(), Some("n"));
        let rewind = params::<RewindParams>("sessions.rewind", json!({"key": "k", "newKey": "n"}))
            .unwrap_err();
        assert!(
            rewind.contains("`newKey` is not supported by pincer"),
            "{rewind}"
        );
    }
}
