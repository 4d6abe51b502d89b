//! What OpenClaw's Control UI asks in the background of its chat (the
//! params and answers are [`protocol::chat_page`]): whether an update is
//! waiting, the chat's metadata, the session's branches, how the model
//! providers' credentials stand, and a refresh of the progress card.
//!
//! [`protocol::chat_page`]: crate::gateway::protocol::chat_page

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ContentBlock, TextContent};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Need, Reply, checked_key, history, need, off_runtime, only_main, reading, typed};
use crate::auth::{self, Credential};
use crate::config::{QueueMode, Settings};
use crate::gateway::conn::Conn;
use crate::gateway::frames::{ErrorShape, answer, now_ms};
use crate::gateway::hub::Hub;
use crate::gateway::protocol::chat::{HistoryBlock, HistoryBody, HistoryMessage};
use crate::gateway::protocol::chat_page::{
    AccountSelection, ApiKeySource, AuthState, AuthStatus, AuthStatusParams, Branch, Branches,
    Expiry, Metadata, MetadataParams, ProfileAuth, ProviderAuth, RefreshParams, Refreshing,
    SessionParams, UpdateStatus, UpdateStatusParams,
};

/// The methods of this file, for `hello-ok`.
pub(super) const METHODS: &[&str] = &[
    "update.status",
    "chat.metadata",
    "sessions.branches.list",
    "models.authStatus",
    "progressCard.refresh",
];

/// A credential that ends within this is `expiring` (OpenClaw warns a day
/// ahead).
const EXPIRING_MS: u64 = 24 * 3_600_000;

/// What a refresh of the progress card asks the agent.
const REFRESH_PROMPT: &str = "Bring your plan up to date: use the todo tool so that each step's status says where the work stands now, then go on.";

/// Runs `method`, one of [`METHODS`].
pub(super) async fn run(hub: &Arc<Hub>, conn: &Arc<Conn>, method: &str, params: Value) -> Reply {
    match method {
        // pincer is updated as it was installed (`cargo install`, a
        // package): the gateway has no update of its own to offer.
        "update.status" => {
            need(conn, Need::Admin)?;
            let _: UpdateStatusParams = typed("update.status", params)?;
            answer(&UpdateStatus::default())
        }
        "chat.metadata" => {
            need(conn, Need::Read)?;
            let query: MetadataParams = typed("chat.metadata", params)?;
            only_main(query.agent_id.as_deref())?;
            if query.auth_profile_id.is_some() {
                return Err(ErrorShape::invalid(
                    "chat.metadata: `authProfileId` (a chat on one model account) is not supported by pincer; it chooses among its credentials by the auth profiles' order for every chat",
                ));
            }
            if let Some(key) = &query.session_key {
                checked_key("sessionKey", key)?;
            }
            let models = reading(hub, |hub| hub.models()).await?;
            answer(&Metadata {
                models,
                swarm_enabled: false,
                account_selection: AccountSelection::automatic(),
                runtime_selection_locked: query.session_key.is_some().then_some(false),
            })
        }
        "sessions.branches.list" => {
            need(conn, Need::Read)?;
            let query: SessionParams = typed("sessions.branches.list", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            let (_, messages) =
                off_runtime(hub, key, |hub, key| history(hub, key, usize::MAX, None)).await?;
            answer(&Branches {
                branches: branch(&messages).into_iter().collect(),
            })
        }
        "models.authStatus" => {
            need(conn, Need::Read)?;
            let query: AuthStatusParams = typed("models.authStatus", params)?;
            // OpenClaw's empty `agentId` is its default agent.
            only_main(query.agent_id.as_deref().filter(|a| !a.is_empty()))?;
            reading(hub, |hub| {
                let settings = Settings::load_from_process(&hub.cwd)
                    .map_err(|e| ErrorShape::invalid(e.to_string()))?;
                answer(&auth_status(&settings, now_ms()))
            })
            .await
        }
        "progressCard.refresh" => {
            need(conn, Need::Write)?;
            let query: RefreshParams = typed("progressCard.refresh", params)?;
            only_main(query.agent_id.as_deref())?;
            let key = checked_key("sessionKey", &query.session_key)?;
            let Some(card) = hub.lookup(key).and_then(|session| hub.card(&session)) else {
                return Err(ErrorShape::invalid("There is no progress card to refresh."));
            };
            // One run per click: the UI sends the same key again when it
            // retries, and the same run answers.
            let digest = Sha256::digest(format!("{key}\0{}", query.idempotency_key));
            let run_id = format!("progress-card-refresh:{}", hex(&digest[..16]));
            let prompt = vec![ContentBlock::Text(TextContent::new(REFRESH_PROMPT))];
            hub.submit(conn, key, &run_id, prompt, Some(QueueMode::Steer))
                .await?;
            answer(&Refreshing {
                run_id,
                status: "accepted",
                revision: card.revision,
            })
        }
        other => Err(ErrorShape::invalid(format!("unknown method: {other}"))),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The session's one path, from `chat.history`'s messages: none before it
/// has an entry of its own.
fn branch(messages: &[HistoryMessage]) -> Option<Branch> {
    let leaf = messages.iter().rev().find_map(|m| m.meta.id.as_deref())?;
    let headline = messages
        .iter()
        .find_map(|m| match &m.body {
            HistoryBody::User { content } => Some(headline(content)),
            _ => None,
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "Conversation".to_string());
    let updated_at = messages
        .last()
        .map(|m| m.timestamp)
        .filter(|ms| *ms > 0)
        .map(|ms| {
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            humantime::format_rfc3339_millis(at).to_string()
        });
    Some(Branch {
        leaf_entry_id: leaf.to_string(),
        headline,
        message_count: messages.len(),
        updated_at,
        active: true,
    })
}

/// A message's first line of text, at most 120 characters (OpenClaw's
/// limit for a headline).
fn headline(content: &[HistoryBlock]) -> String {
    let text = content
        .iter()
        .find_map(|block| match block {
            HistoryBlock::Text { text } => Some(text.as_str()),
            HistoryBlock::Image { .. } => None,
        })
        .unwrap_or_default();
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    crate::llm::truncate(line, 120)
}

/// How each provider pincer has a credential for stands: its `pincer
/// login` profiles, its environment variable or config key, and the other
/// tools' logins pincer falls back to. Providers without any are left
/// out (OpenClaw's UI would raise an alarm for each as `missing`).
pub(super) fn auth_status(settings: &Settings, now: u64) -> AuthStatus {
    let store = auth::Store::new(auth::profiles_path(
        &settings.paths.config_dir,
        auth::DEFAULT_AGENT,
    ));
    let stored = store.read().unwrap_or_default();
    let home = settings.env("HOME").map(std::path::PathBuf::from);
    let mut providers = Vec::new();
    for name in settings.catalog.provider_names() {
        let Some(provider) = settings.catalog.provider(name) else {
            continue;
        };
        let mut profiles: Vec<ProfileAuth> = stored
            .profiles
            .iter()
            .filter(|(_, credential)| credential.provider() == name)
            .map(|(id, credential)| profile(id, credential, now))
            .collect();
        if let Some(home) = &home {
            for candidate in auth::external::candidates(name, home, now) {
                profiles.push(ProfileAuth {
                    kind: if candidate.id == auth::external::CLAUDE_CODE_ID {
                        "oauth"
                    } else {
                        "api_key"
                    },
                    profile_id: candidate.id,
                    status: AuthState::Ok,
                    source: "external",
                    expiry: None,
                    externally_managed: Some(true),
                });
            }
        }
        let api_key = match &provider.api_key_env {
            Some(var) if settings.env(var).is_some() => Some(ApiKeySource {
                source: "env",
                env_var: Some(var.clone()),
            }),
            _ => provider.api_key.as_ref().map(|_| ApiKeySource {
                source: "config",
                env_var: None,
            }),
        };
        if profiles.is_empty() && api_key.is_none() {
            continue;
        }
        let status = profiles
            .iter()
            .map(|p| p.status)
            .min()
            .unwrap_or(AuthState::Static);
        // The soonest end among the profiles that expire.
        let expiry = profiles
            .iter()
            .filter_map(|p| p.expiry.as_ref())
            .min_by_key(|e| e.at)
            .cloned();
        providers.push(ProviderAuth {
            provider: name.to_string(),
            auth_provider: name.to_string(),
            display_name: name.to_string(),
            status,
            expiry,
            profiles,
            api_key,
        });
    }
    AuthStatus {
        ts: now,
        providers,
        provider_capabilities: Vec::new(),
    }
}

/// One `pincer login` profile's standing. An OAuth login is renewed by
/// pincer when its access token ends, so it stays `ok`.
fn profile(id: &str, credential: &Credential, now: u64) -> ProfileAuth {
    let expires = credential.expires();
    let status = match credential {
        Credential::ApiKey { .. } => AuthState::Static,
        Credential::Oauth { .. } => AuthState::Ok,
        Credential::Token { .. } => match expires {
            None => AuthState::Static,
            Some(at) if at <= now => AuthState::Expired,
            Some(at) if at - now < EXPIRING_MS => AuthState::Expiring,
            Some(_) => AuthState::Ok,
        },
    };
    ProfileAuth {
        profile_id: id.to_string(),
        kind: credential.kind(),
        status,
        source: "saved",
        expiry: expires.map(|at| Expiry::new(at, now)),
        externally_managed: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::chat::{AssistantBlock, MessageMeta};
    use serde_json::json;

    #[test]
    fn a_session_s_path_is_its_one_active_branch() {
        let text = |text: &str| vec![HistoryBlock::Text { text: text.into() }];
        let said = |seq, id: Option<&str>, timestamp, body| HistoryMessage {
            body,
            timestamp,
            id: None,
            turn: None,
            meta: MessageMeta {
                seq,
                id: id.map(String::from),
                ..Default::default()
            },
        };
        let answer = |content: &str| HistoryBody::Assistant {
            content: vec![AssistantBlock::Text {
                text: content.into(),
            }],
            model: "m".into(),
            provider: "p".into(),
            stop_reason: "stop",
        };
        let messages = vec![
            said(
                1,
                Some("e1"),
                1_700_000_000_000,
                HistoryBody::User {
                    content: text("\n  Fix the parser\nplease"),
                },
            ),
            said(2, Some("e2"), 1_700_000_001_000, answer("Done")),
            said(3, None, 1_700_000_002_000, answer("cut short")),
        ];
        let branch = branch(&messages).unwrap();
        assert_eq!(branch.leaf_entry_id, "e2");
        assert_eq!(branch.headline, "Fix the parser");
        assert_eq!(branch.message_count, 3);
        assert_eq!(
            branch.updated_at.as_deref(),
            Some("2023-11-14T22:13:22.000Z")
        );
        assert!(branch.active);
        assert!(super::branch(&[]).is_none());
    }

    #[test]
    fn a_long_headline_is_cut_at_a_character_s_edge() {
        let long = "é".repeat(200);
        let cut = headline(&[HistoryBlock::Text { text: long }]);
        assert_eq!(cut.chars().count(), 121);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn each_kind_of_profile_stands_as_openclaw_reports_it() {
        let now = 10 * EXPIRING_MS;
        let key = Credential::ApiKey {
            provider: "openai".into(),
            key: "sk-secret".into(),
        };
        let token = |expires| Credential::Token {
            provider: "anthropic".into(),
            token: "t".into(),
            expires,
        };
        assert_eq!(profile("a", &key, now).status, AuthState::Static);
        assert_eq!(profile("a", &token(None), now).status, AuthState::Static);
        assert_eq!(
            profile("a", &token(Some(now)), now).status,
            AuthState::Expired
        );
        assert_eq!(
            profile("a", &token(Some(now + 1000)), now).status,
            AuthState::Expiring
        );
        assert_eq!(
            profile("a", &token(Some(now + 2 * EXPIRING_MS)), now).status,
            AuthState::Ok
        );
        let oauth = Credential::Oauth {
            provider: "anthropic".into(),
            access: "a".into(),
            refresh: "r".into(),
            expires: now - 1,
            account: None,
        };
        let shown = profile("anthropic:oauth", &oauth, now);
        assert_eq!((shown.status, shown.kind), (AuthState::Ok, "oauth"));
        assert_eq!(shown.expiry.unwrap().label, "expired");
        // Never the secret.
        assert!(
            !json!(profile("k", &key, now))
                .to_string()
                .contains("sk-secret")
        );
    }
}
