//! Credentials other tools keep, used as a last resort and never written:
//! Claude Code's OAuth login (`~/.claude/.credentials.json`), the API key
//! Codex stores (`~/.codex/auth.json`), and OpenClaw's auth profiles
//! (`~/.openclaw/agents/main/agent/auth-profiles.json`).
//!
//! Codex's ChatGPT tokens are not used: they work only against ChatGPT's
//! own backend, not the OpenAI API. Expired tokens are skipped; refreshing
//! them is the owning tool's job.

use std::path::Path;

use serde_json::Value;

use super::{Candidate, Profiles};
use crate::llm::Secret;

/// Where each tool keeps what pincer reads, under the home directory.
pub const CLAUDE_CODE_FILE: &str = ".claude/.credentials.json";
/// The credential id of Claude Code's own login. A session whose turns run
/// through Claude Code never has pincer call a model with it: that login
/// is the CLI's, for the CLI's use.
pub const CLAUDE_CODE_ID: &str = "claude-code";
pub const CODEX_FILE: &str = ".codex/auth.json";
pub const OPENCLAW_FILE: &str = ".openclaw/agents/main/agent/auth-profiles.json";

/// The file (under the home directory) a credential id from
/// [`candidates`] was read from; `None` for ids that are not another
/// tool's. Listings name the file so a person knows where to change it:
/// pincer itself never writes there.
pub fn source_file(id: &str) -> Option<&'static str> {
    match id {
        CLAUDE_CODE_ID => Some(CLAUDE_CODE_FILE),
        "codex" => Some(CODEX_FILE),
        id if id.starts_with("openclaw:") => Some(OPENCLAW_FILE),
        _ => None,
    }
}

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text)
        .inspect_err(|e| tracing::debug!(path = %path.display(), error = %e, "ignoring an unreadable credentials file"))
        .ok()
}

fn candidate(id: &str, secret: &str) -> Candidate {
    Candidate {
        id: id.to_string(),
        secret: Secret::new(secret),
        stored: false,
        unavailable: None,
    }
}

/// The other tools' credentials for `provider`, valid at `now` (ms).
pub fn candidates(provider: &str, home: &Path, now: u64) -> Vec<Candidate> {
    let mut out = Vec::new();
    if provider == "anthropic"
        && let Some(oauth) =
            read_json(&home.join(CLAUDE_CODE_FILE)).and_then(|v| v.get("claudeAiOauth").cloned())
        && let Some(token) = oauth.get("accessToken").and_then(Value::as_str)
        && oauth
            .get("expiresAt")
            .and_then(Value::as_u64)
            .is_none_or(|expires| expires > now)
    {
        out.push(candidate(CLAUDE_CODE_ID, token));
    }
    if provider == "openai"
        && let Some(key) = read_json(&home.join(CODEX_FILE))
            .and_then(|v| {
                v.get("OPENAI_API_KEY")
                    .and_then(Value::as_str)
                    .map(String::from)
            })
            .filter(|k| !k.is_empty())
    {
        out.push(candidate("codex", &key));
    }
    let openclaw = home.join(OPENCLAW_FILE);
    if let Some(profiles) =
        read_json(&openclaw).and_then(|v| serde_json::from_value::<Profiles>(v).ok())
    {
        for id in profiles.ordered(provider, now) {
            let Some(credential) = profiles.profiles.get(&id) else {
                continue;
            };
            if credential.expires().is_some_and(|e| e <= now) {
                continue;
            }
            out.push(candidate(
                &format!("openclaw:{id}"),
                credential.secret().expose(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_tools_credentials_are_read_for_their_providers() {
        let home = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = home.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            ".claude/.credentials.json",
            r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-cc","refreshToken":"r","expiresAt":2000}}"#,
        );
        write(
            ".codex/auth.json",
            r#"{"OPENAI_API_KEY":"sk-codex","tokens":{"access_token":"chatgpt-only"}}"#,
        );
        write(
            ".openclaw/agents/main/agent/auth-profiles.json",
            r#"{"version":1,"profiles":{"anthropic:oc":{"type":"api_key","provider":"anthropic","key":"sk-oc"},
                "openai:old":{"type":"token","provider":"openai","token":"t","expires":500}}}"#,
        );
        let ids = |provider: &str, now: u64| -> Vec<(String, String)> {
            candidates(provider, home.path(), now)
                .into_iter()
                .map(|c| (c.id, c.secret.expose().to_string()))
                .collect()
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            ids("anthropic", 1000),
            [
                pair("claude-code", "sk-ant-oat01-cc"),
                pair("openclaw:anthropic:oc", "sk-oc")
            ]
        );
        // Expired Claude Code token: skipped.
        assert_eq!(
            ids("anthropic", 3000),
            [pair("openclaw:anthropic:oc", "sk-oc")]
        );
        // Codex's key, never its ChatGPT token; the expired OpenClaw token is skipped.
        assert_eq!(ids("openai", 1000), [pair("codex", "sk-codex")]);
        assert!(ids("google", 1000).is_empty());
        // Nothing is written to the other tools' files.
        let before = std::fs::read_to_string(home.path().join(".codex/auth.json")).unwrap();
        let _ = ids("openai", 1000);
        assert_eq!(
            std::fs::read_to_string(home.path().join(".codex/auth.json")).unwrap(),
            before
        );
    }
}
