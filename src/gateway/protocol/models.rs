//! The params of OpenClaw's `models.list` (the `openclaw` package's
//! `ModelsListParamsSchema`).

use serde::Deserialize;

/// `models.list`: pincer has one catalog, with every detail, for every
/// session and view; a provider narrows it (OpenClaw's CLI asks so).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    pub provider: Option<String>,
    pub agent_id: Option<String>,
    pub session_key: Option<String>,
    pub view: Option<String>,
    pub include_details: Option<bool>,
    /// Discovering a provider's models: refused by name.
    pub refresh: Option<bool>,
    /// Only models whose catalog is ready without discovering more:
    /// pincer's catalog is its config's, always ready, so this asks for
    /// what it answers anyway.
    pub prepared_only: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::params;
    use serde_json::json;

    #[test]
    fn the_models_params_take_openclaw_s_fields_and_refuse_others() {
        let query: ListParams = params(
            "models.list",
            json!({"provider": "anthropic", "view": "all", "includeDetails": true}),
        )
        .unwrap();
        assert_eq!(query.provider.as_deref(), Some("anthropic"));
        let refused = params::<ListParams>("models.list", json!({"search": "x"})).unwrap_err();
        assert!(
            refused.starts_with("models.list: `search` is not supported by pincer"),
            "{refused}"
        );
        let flag = params::<ListParams>("models.list", json!({"refresh": "no"})).unwrap_err();
        assert_eq!(
            flag,
            "models.list: `refresh` must be a boolean, not string \"no\""
        );
    }
}

/// A model of the catalog a session can use, in OpenClaw's published
/// catalog's shape: what it reads, and that its credential is here.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    /// `provider/id`.
    pub id: String,
    pub name: String,
    pub provider: String,
    pub context_window: u64,
    pub reasoning: bool,
    pub input: Vec<&'static str>,
    pub available: bool,
}

/// `models.list`'s answer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Listed {
    pub models: Vec<Model>,
}
