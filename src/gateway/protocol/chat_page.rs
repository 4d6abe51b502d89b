//! The params and answers of what OpenClaw's Control UI asks in the
//! background of its chat: `update.status`, `chat.metadata`,
//! `sessions.branches.list`, `models.authStatus` and
//! `progressCard.refresh` (the `openclaw` package's
//! `UpdateStatusParamsSchema`, `ChatMetadataParamsSchema`,
//! `SessionsBranchesListParamsSchema`, `ModelsAuthStatusParamsSchema` and
//! `ProgressCardRefreshParamsSchema`, and the results its server builds).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `update.status`: whether an update of the gateway is available.
/// `refreshCheckout` asks OpenClaw to look at its git checkout again;
/// pincer has none to look at, so it changes nothing.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStatusParams {
    pub refresh_checkout: Option<bool>,
}

/// `update.status`'s answer: pincer does not update itself (it is updated
/// as it was installed), so there is no restart to report and no update
/// to offer, which the Control UI shows as no banner.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStatus {
    pub sentinel: Option<Value>,
    pub update_available: Option<Value>,
}

/// `chat.metadata`: what the chat of `sessionKey` (or a new chat) offers.
/// `authProfileId` previews a new chat on one model account; pincer
/// chooses among its credentials by the auth profiles' order, for every
/// chat, so it is refused.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataParams {
    pub agent_id: Option<String>,
    pub auth_profile_id: Option<String>,
    pub session_key: Option<String>,
}

/// `chat.metadata`'s answer. `models` is what `models.list` answers (the
/// Control UI compares the two, and loads its catalog again when they
/// differ); `commands` is left out, so the UI reads `commands.list`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub models: Vec<super::models::Model>,
    /// OpenClaw's swarm of agents waiting on each other: pincer's helpers
    /// are its `task` tool, not a swarm.
    pub swarm_enabled: bool,
    pub account_selection: AccountSelection,
    /// Sent for a session: whether its runtime can no longer be changed.
    /// pincer runs every model in its own loop, so there is nothing to
    /// lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_selection_locked: Option<bool>,
}

/// Which model account a chat uses: pincer picks among its credentials
/// itself.
#[derive(Clone, Debug, Serialize)]
pub struct AccountSelection {
    pub kind: &'static str,
    pub label: &'static str,
}

impl AccountSelection {
    pub fn automatic() -> Self {
        Self {
            kind: "automatic",
            label: "Automatic account selection",
        }
    }
}

/// `sessions.branches.list` and `sessions.companion.state`: one session.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionParams {
    pub session_key: String,
    pub agent_id: Option<String>,
}

/// `sessions.branches.list`'s answer.
#[derive(Clone, Debug, Serialize)]
pub struct Branches {
    pub branches: Vec<Branch>,
}

/// A path through a session's transcript. A pincer session has one: a
/// rewind cuts the conversation back rather than keeping the old path to
/// switch to, so the Control UI shows no branch menu.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Branch {
    /// The id of the path's last entry with one (as `chat.history`'s
    /// `__openclaw.id`).
    pub leaf_entry_id: String,
    pub headline: String,
    pub message_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    pub active: bool,
}

/// `models.authStatus`: `refresh` asks OpenClaw to check its providers'
/// usage again; pincer reads its credentials afresh on every call anyway.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthStatusParams {
    pub refresh: Option<bool>,
    pub agent_id: Option<String>,
}

/// `models.authStatus`'s answer: each provider pincer has a credential
/// for, and how it stands. Never a secret: names of variables and
/// profiles only.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthStatus {
    pub ts: u64,
    pub providers: Vec<ProviderAuth>,
    /// How a person could add a credential from the Control UI: pincer's
    /// are added with `pincer login` or an environment variable, so none.
    pub provider_capabilities: Vec<Value>,
}

/// A credential's (and a provider's) standing, worst first: `expired`,
/// `missing`, `expiring`, `ok`, `static` (a key that does not expire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthState {
    Expired,
    Missing,
    Expiring,
    Ok,
    Static,
}

/// One provider's credentials.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderAuth {
    pub provider: String,
    pub auth_provider: String,
    pub display_name: String,
    pub status: AuthState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry: Option<Expiry>,
    pub profiles: Vec<ProfileAuth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<ApiKeySource>,
}

/// One stored credential (a `pincer login` profile, or another tool's
/// login pincer falls back to).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileAuth {
    pub profile_id: String,
    /// `oauth`, `token` or `api_key`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub status: AuthState,
    /// `saved` (pincer's own profiles) or `external` (another tool's).
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expiry: Option<Expiry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub externally_managed: Option<bool>,
}

/// When a credential stops working.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expiry {
    /// Milliseconds since the epoch.
    pub at: u64,
    pub remaining_ms: i64,
    /// How long is left, as `3d`, `5h`, `12m` (or `expired`).
    pub label: String,
}

impl Expiry {
    pub fn new(at: u64, now: u64) -> Self {
        let remaining_ms = at as i64 - now as i64;
        let minutes = remaining_ms / 60_000;
        let label = match minutes {
            m if m <= 0 => "expired".to_string(),
            m if m < 60 => format!("{m}m"),
            m if m < 48 * 60 => format!("{}h", m / 60),
            m => format!("{}d", m / (24 * 60)),
        };
        Self {
            at,
            remaining_ms,
            label,
        }
    }
}

/// Where a provider's plain key comes from: `env` (with the variable's
/// name) or `config` (the config file's `api_key`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKeySource {
    pub source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_var: Option<String>,
}

/// `progressCard.refresh`: ask the agent to bring the card (its plan) up
/// to date, as run `idempotencyKey`.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RefreshParams {
    pub session_key: String,
    pub agent_id: Option<String>,
    pub idempotency_key: String,
}

/// `progressCard.refresh`'s answer: the run that asks, and the card's
/// revision when it was asked (the Control UI waits for a later one).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refreshing {
    pub run_id: String,
    pub status: &'static str,
    pub revision: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_says_how_long_is_left_in_its_largest_unit() {
        let now = 1_000_000_000_000;
        assert_eq!(Expiry::new(now + 5 * 60_000, now).label, "5m");
        assert_eq!(Expiry::new(now + 5 * 3_600_000, now).label, "5h");
        assert_eq!(Expiry::new(now + 3 * 86_400_000, now).label, "3d");
        let gone = Expiry::new(now - 1, now);
        assert_eq!((gone.label.as_str(), gone.remaining_ms), ("expired", -1));
    }

    #[test]
    fn the_worst_standing_sorts_first() {
        let mut states = vec![
            AuthState::Static,
            AuthState::Ok,
            AuthState::Expiring,
            AuthState::Missing,
            AuthState::Expired,
        ];
        states.sort();
        assert_eq!(states.first(), Some(&AuthState::Expired));
        assert_eq!(
            serde_json::to_value(&states).unwrap(),
            serde_json::json!(["expired", "missing", "expiring", "ok", "static"])
        );
    }

    #[test]
    fn params_refuse_what_they_do_not_name() {
        let e = serde_json::from_value::<RefreshParams>(serde_json::json!({
            "sessionKey": "main", "idempotencyKey": "k", "force": true
        }))
        .unwrap_err();
        assert!(e.to_string().contains("force"), "{e}");
        assert!(
            serde_json::from_value::<UpdateStatusParams>(
                serde_json::json!({"refreshCheckout": true})
            )
            .is_ok()
        );
    }
}
