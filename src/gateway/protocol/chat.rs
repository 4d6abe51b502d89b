//! The params of OpenClaw's chat methods that read and follow a session:
//! `chat.history`/`chat.startup`, `chat.abort`, `chat.subscribe`,
//! `sessions.messages.subscribe`, `sessions.get` and `agent.wait` (their
//! shapes are the `openclaw` package's `ChatHistoryParamsSchema`,
//! `ChatAbortParamsSchema`, `SessionsMessagesSubscribeParamsSchema`,
//! `SessionsGetParamsSchema` and `AgentWaitParamsSchema`).

use serde::Deserialize;

/// `chat.history` and `chat.startup`. Every user message is in the
/// history, so the inputs of the runs asked for (`inputRunIds`) are too.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HistoryParams {
    pub session_key: String,
    pub agent_id: Option<String>,
    pub limit: Option<u64>,
    pub max_bytes: Option<u64>,
    pub input_run_ids: Option<Vec<String>>,
}

/// `chat.abort`: pincer has no side runs, so keeping or stopping them
/// (`preserveSideRuns`) is the same.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AbortParams {
    pub session_key: String,
    pub agent_id: Option<String>,
    pub run_id: Option<String>,
    pub preserve_side_runs: Option<bool>,
}

/// `chat.subscribe` and `chat.unsubscribe`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubscribeParams {
    pub session_key: String,
    pub agent_id: Option<String>,
}

/// `sessions.messages.subscribe` and `…unsubscribe`: a session's
/// approvals reach every client that may answer them, so
/// `includeApprovals` is what pincer does anyway.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessagesSubscribeParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub include_approvals: Option<bool>,
}

/// `sessions.get`: a session's messages.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub limit: Option<u64>,
}

/// `agent.wait`: a run's outcome, waiting up to `timeoutMs` (30 s).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitParams {
    pub run_id: String,
    pub timeout_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::params;
    use serde_json::json;

    #[test]
    fn the_chat_params_take_openclaw_s_fields_and_refuse_others() {
        let history: HistoryParams = params(
            "chat.history",
            json!({"sessionKey": "k", "limit": 5, "maxBytes": 100, "inputRunIds": ["r"]}),
        )
        .unwrap();
        assert_eq!(history.session_key, "k");
        assert_eq!(history.limit, Some(5));
        assert_eq!(history.input_run_ids, Some(vec!["r".to_string()]));
        let refused =
            params::<HistoryParams>("chat.history", json!({"sessionKey": "k", "since": 3}))
                .unwrap_err();
        assert!(
            refused.starts_with("chat.history: `since` is not supported by pincer (it takes"),
            "{refused}"
        );
        // The key is required, and each field has its type.
        let missing = params::<AbortParams>("chat.abort", json!({})).unwrap_err();
        assert!(missing.contains("missing field `sessionKey`"), "{missing}");
        let wrong =
            params::<HistoryParams>("chat.history", json!({"sessionKey": "k", "limit": -1}))
                .unwrap_err();
        assert!(wrong.starts_with("chat.history: invalid value"), "{wrong}");
        let flag = params::<MessagesSubscribeParams>(
            "sessions.messages.subscribe",
            json!({"key": "k", "includeApprovals": "yes"}),
        )
        .unwrap_err();
        assert!(flag.contains("expected a boolean"), "{flag}");
        let wait: WaitParams = params("agent.wait", json!({"runId": "r"})).unwrap();
        assert_eq!((wait.run_id.as_str(), wait.timeout_ms), ("r", None));
    }
}
