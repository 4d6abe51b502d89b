//! `pincer auth list`, `pincer login --api-key`, `pincer logout`: the
//! stored credentials, for people and scripts. Secrets are read from stdin
//! and never printed.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::time::SystemTime;

use crate::auth::{self, Credential, Store};
use crate::config::Settings;

fn settings() -> anyhow::Result<Settings> {
    let cwd = std::env::current_dir()?;
    Ok(Settings::load(&cwd, std::env::vars().collect())?)
}

fn store(settings: &Settings) -> Store {
    Store::new(auth::profiles_path(
        &settings.paths.config_dir,
        auth::DEFAULT_AGENT,
    ))
}

fn time(ms: u64) -> String {
    let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// Lists profiles (id, provider, kind, expiry, state) and the environment
/// variables that also hold keys — names only.
pub fn list(json: bool) -> anyhow::Result<()> {
    let settings = settings()?;
    let store = store(&settings);
    let profiles = store.read()?;
    let now = SystemTime::now();
    let now_ms = auth::millis(now);
    let mut rows = Vec::new();
    for (id, credential) in &profiles.profiles {
        let stats = profiles.usage_stats.get(id).cloned().unwrap_or_default();
        let state = match auth::cooldown_left(&stats, now) {
            Some(left) if stats.disabled_until > now_ms => format!(
                "disabled for {} ({})",
                humantime::format_duration(std::time::Duration::from_secs(left.as_secs())),
                stats.disabled_reason.as_deref().unwrap_or("errors")
            ),
            Some(left) => format!(
                "cooling down for {}",
                humantime::format_duration(std::time::Duration::from_secs(left.as_secs()))
            ),
            None if credential.expires().is_some_and(|e| e <= now_ms) => "expired".to_string(),
            None => "ready".to_string(),
        };
        rows.push(serde_json::json!({
            "id": id,
            "provider": credential.provider(),
            "kind": credential.kind(),
            "expires": credential.expires().map(time),
            "lastUsed": (stats.last_used > 0).then(|| time(stats.last_used)),
            "state": state,
        }));
    }
    let mut env_keys: BTreeMap<String, String> = BTreeMap::new();
    for name in settings.catalog.provider_names() {
        if let Some(var) = settings
            .catalog
            .provider(name)
            .and_then(|p| p.api_key_env.clone())
            && settings.env(&var).is_some()
        {
            env_keys.insert(name.to_string(), var);
        }
    }
    if json {
        for row in &rows {
            println!("{row}");
        }
        for (provider, var) in &env_keys {
            println!(
                "{}",
                serde_json::json!({"id": format!("env:{var}"), "provider": provider, "kind": "env", "state": "ready"})
            );
        }
        return Ok(());
    }
    if rows.is_empty() && env_keys.is_empty() {
        println!(
            "No credentials. Run `pincer login --provider <name> --api-key` or set a provider's environment variable."
        );
    }
    for row in &rows {
        println!(
            "{:<28} {:<10} {:<8} expires {:<22} {}",
            row["id"].as_str().unwrap_or_default(),
            row["provider"].as_str().unwrap_or_default(),
            row["kind"].as_str().unwrap_or_default(),
            row["expires"].as_str().unwrap_or("never"),
            row["state"].as_str().unwrap_or_default(),
        );
    }
    for (provider, var) in &env_keys {
        println!(
            "{:<28} {provider:<10} env      (from the environment)",
            format!("env:{var}")
        );
    }
    println!("Profiles file: {}", store.path().display());
    Ok(())
}

/// Stores an API key read from stdin as profile `id` (default
/// `<provider>:default`).
pub fn login_api_key(provider: &str, id: Option<String>) -> anyhow::Result<()> {
    let settings = settings()?;
    if settings.catalog.provider(provider).is_none() {
        anyhow::bail!(
            "unknown provider `{provider}`; known: {}",
            settings
                .catalog
                .provider_names()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // One line: a key piped in, or pasted at the prompt in a terminal
    // (an editor's terminal login runs exactly this).
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprint!("Paste the {provider} API key and press Enter: ");
    }
    let mut key = String::new();
    std::io::stdin().read_line(&mut key)?;
    let key = key.trim().to_string();
    if key.is_empty() {
        anyhow::bail!(
            "no key on stdin; pipe it in, e.g. `pincer login --provider {provider} --api-key < key.txt`"
        );
    }
    let id = id.unwrap_or_else(|| format!("{provider}:default"));
    let store = store(&settings);
    store.modify(|profiles| {
        profiles.profiles.insert(
            id.clone(),
            Credential::ApiKey {
                provider: provider.to_string(),
                key,
            },
        );
        profiles.usage_stats.remove(&id);
    })?;
    println!("Saved {id} in {}.", store.path().display());
    Ok(())
}

/// Removes a profile.
pub fn logout(id: &str) -> anyhow::Result<()> {
    let settings = settings()?;
    let store = store(&settings);
    let removed = store.modify(|profiles| {
        let removed = profiles.profiles.remove(id).is_some();
        profiles.usage_stats.remove(id);
        for order in profiles.order.values_mut() {
            order.retain(|p| p != id);
        }
        removed
    })?;
    if !removed {
        anyhow::bail!("no profile {id}; `pincer auth list` shows them");
    }
    println!("Removed {id}.");
    Ok(())
}
