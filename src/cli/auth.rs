//! `pincer auth list`, `pincer login`, `pincer logout`: the stored
//! credentials, for people and scripts. Secrets are read from stdin (or
//! come from an OAuth login) and are never printed.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
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

/// Lists profiles (id, provider, kind, account, expiry, state) and the environment
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
            "account": match credential {
                Credential::Oauth { account, .. } => account.clone(),
                _ => None,
            },
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
    let external = external_rows(&settings, now_ms);
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
        for row in &external {
            println!("{row}");
        }
        return Ok(());
    }
    if rows.is_empty() && env_keys.is_empty() && external.is_empty() {
        println!(
            "No credentials. Run `pincer login --provider <name> --api-key` or set a provider's environment variable."
        );
    }
    for row in &rows {
        println!(
            "{:<28} {:<10} {:<8} {:<28} expires {:<22} {}",
            row["id"].as_str().unwrap_or_default(),
            row["provider"].as_str().unwrap_or_default(),
            row["kind"].as_str().unwrap_or_default(),
            row["account"].as_str().unwrap_or("-"),
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
    for row in &external {
        println!(
            "{:<28} {:<10} external read-only ({})",
            row["id"].as_str().unwrap_or_default(),
            row["provider"].as_str().unwrap_or_default(),
            row["file"].as_str().unwrap_or_default(),
        );
    }
    println!("Profiles file: {}", store.path().display());
    Ok(())
}

/// The other tools' credentials pincer would fall back to (Claude Code,
/// Codex, OpenClaw), one row each: id, provider and the file it comes
/// from, marked read-only (pincer never writes, refreshes or removes
/// them; `pincer logout` cannot either). Never the secret.
fn external_rows(settings: &Settings, now_ms: u64) -> Vec<serde_json::Value> {
    let Some(home) = settings.env("HOME").map(std::path::PathBuf::from) else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for provider in settings.catalog.provider_names() {
        for candidate in auth::external::candidates(provider, &home, now_ms) {
            let file = auth::external::source_file(&candidate.id)
                .map(|file| home.join(file).display().to_string());
            rows.push(serde_json::json!({
                "id": candidate.id,
                "provider": provider,
                "kind": "external",
                "file": file,
                "readOnly": true,
                "state": "ready",
            }));
        }
    }
    rows
}

/// How `pincer login` gets the credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// A key read from stdin.
    ApiKey,
    /// The provider's login page (authorization code flow with PKCE).
    OAuth,
}

/// `pincer login` was not told enough and cannot ask (no terminal).
#[derive(Debug, thiserror::Error)]
#[error(
    "pincer login needs to know what to store, and stdin is not a terminal to ask on. Use:\n  pincer login --provider <name> --api-key    a key read from stdin (profile <provider>:default)\n  pincer login --provider <name> --oauth      the provider's login page (profile <provider>:oauth)\n  --profile <id>                              another profile id{known}"
)]
pub struct LoginUsage {
    known: String,
}

/// `pincer login`: with a provider and a method, does that; otherwise asks
/// for what is missing on the terminal (the provider, then the method), or
/// fails with [`LoginUsage`] when there is no terminal to ask on.
pub async fn login(
    provider: Option<String>,
    method: Option<Method>,
    id: Option<String>,
) -> anyhow::Result<()> {
    let (provider, method) = match (provider, method) {
        (Some(provider), Some(method)) => (provider, method),
        (provider, method) => {
            let settings = settings()?;
            let providers: Vec<String> = settings
                .catalog
                .keyed_provider_names()
                .map(str::to_string)
                .collect();
            if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
                let known = if providers.is_empty() {
                    String::new()
                } else {
                    format!("\nProviders: {}", providers.join(", "))
                };
                return Err(LoginUsage { known }.into());
            }
            let stdin = std::io::stdin();
            ask(
                &mut stdin.lock(),
                &mut std::io::stderr(),
                provider,
                method,
                &providers,
                |p| settings.oauth(p).is_some(),
            )?
        }
    };
    match method {
        Method::ApiKey => login_api_key(&provider, id),
        Method::OAuth => login_oauth(&provider, id).await,
    }
}

/// Asks on `output` for what `pincer login` was not given, reading the
/// answers from `input`: the provider (by name or number), then the method
/// (only when the provider has an OAuth login).
pub fn ask(
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    provider: Option<String>,
    method: Option<Method>,
    providers: &[String],
    has_oauth: impl Fn(&str) -> bool,
) -> anyhow::Result<(String, Method)> {
    let mut read = |output: &mut dyn Write, prompt: &str| -> anyhow::Result<String> {
        write!(output, "{prompt}")?;
        output.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            anyhow::bail!("no answer; the login was not started");
        }
        Ok(line.trim().to_string())
    };
    let provider = match provider {
        Some(provider) => provider,
        None => {
            writeln!(output, "Log in to which provider?")?;
            for (n, name) in (1..).zip(providers) {
                writeln!(output, "  {n}) {name}")?;
            }
            loop {
                let answer = read(output, "Provider (name or number): ")?;
                let chosen = answer
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| providers.get(n.checked_sub(1)?))
                    .or_else(|| providers.iter().find(|p| **p == answer));
                match chosen {
                    Some(provider) => break provider.clone(),
                    None => writeln!(output, "No provider `{answer}`.")?,
                }
            }
        }
    };
    let method = match method {
        Some(method) => method,
        None if !has_oauth(&provider) => Method::ApiKey,
        None => {
            writeln!(output, "How do you want to log in to {provider}?")?;
            writeln!(output, "  1) paste an API key")?;
            writeln!(
                output,
                "  2) log in with your account in the browser (OAuth)"
            )?;
            loop {
                match read(output, "Method (1 or 2): ")?.as_str() {
                    "1" => break Method::ApiKey,
                    "2" => break Method::OAuth,
                    other => writeln!(output, "Answer 1 or 2, not `{other}`.")?,
                }
            }
        }
    };
    Ok((provider, method))
}

/// Stores an API key read from stdin as profile `id` (default
/// `<provider>:default`).
pub fn login_api_key(provider: &str, id: Option<String>) -> anyhow::Result<()> {
    let settings = settings()?;
    if crate::llm::catalog::SUBSCRIPTION_PROVIDERS.contains(&provider) {
        anyhow::bail!(
            "`{provider}` runs through your Claude Code CLI, which keeps its own login: run `claude` and log in with /login there. pincer stores no credential for it."
        );
    }
    if settings.catalog.provider(provider).is_none() {
        anyhow::bail!(
            "unknown provider `{provider}`; known: {}",
            settings
                .catalog
                .keyed_provider_names()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // One line: a key piped in, or pasted at the prompt in a terminal
    // (an editor's terminal login runs exactly this).
    let key = if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprint!("Paste the {provider} API key and press Enter (it is not shown): ");
        std::io::stderr().flush()?;
        // Echo off while it is read: a key shown on screen ends up in
        // scrollback, screen recordings and terminal logs.
        // It ends the line itself when Enter is pressed.
        rpassword::read_password()?
    } else {
        let mut key = String::new();
        std::io::stdin().read_line(&mut key)?;
        key
    };
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

/// `pincer login --provider X --oauth`: the authorization code flow with
/// PKCE. The address to open goes to stderr (and to a browser when one can
/// be started); the redirect arrives at a loopback listener (when the
/// provider redirects to one) or is pasted. The profile is `id`, by default
/// `<provider>:oauth` (so that it does not replace an API key stored as
/// `<provider>:default`).
pub async fn login_oauth(provider: &str, id: Option<String>) -> anyhow::Result<()> {
    use crate::auth::oauth::{self, loopback};
    let settings = settings()?;
    let config = settings
        .oauth(provider)
        .ok_or_else(|| oauth::OAuthError::Unconfigured(provider.to_string()))?;
    let pkce = oauth::Pkce::new();
    let state = oauth::new_state();
    // Here the redirect the provider names is used as it is: a page to
    // paste from stays one, as a terminal can take the paste.
    let redirect = if config.redirect_uri.is_empty() {
        Some(loopback::LoopbackRedirect::any_port())
    } else {
        loopback::LoopbackRedirect::parse(&config.redirect_uri)
    };
    let listener = match &redirect {
        Some(redirect) => Some(loopback::Listener::bind(provider, redirect).await?),
        None => None,
    };
    let redirect_uri = match &listener {
        Some(listener) => listener.redirect_uri().to_string(),
        None => config.redirect_uri.clone(),
    };
    let url = oauth::authorize_url(&config, &redirect_uri, &pkce, &state);
    eprintln!("Open this address to log in to {provider}:\n\n{url}\n");
    // A browser that is not there is fine: the address is printed.
    tokio::spawn(async move {
        let _ = oauth::browser::open(&url, |key| std::env::var(key).ok()).await;
    });
    eprintln!("Then paste the address you were sent to (or the code shown) and press Enter:");
    let (code, callback) = tokio::select! {
        line = read_line() => (oauth::code_from(&line?, &state)?, None),
        callback = wait_for_redirect(listener, &state) => {
            let callback = callback?;
            (callback.code.clone(), Some(callback))
        }
    };
    let now = crate::auth::millis(SystemTime::now());
    let http = crate::llm::http_client()?;
    let id = id.unwrap_or_else(|| format!("{provider}:oauth"));
    let store = store(&settings);
    let result = async {
        let tokens =
            oauth::exchange(&http, &config, &code, &pkce, &redirect_uri, &state, now).await?;
        oauth::save(&store, &id, provider, &tokens)?;
        Ok::<_, oauth::OAuthError>(tokens)
    }
    .await;
    if let Some(callback) = callback {
        callback.finish(result.as_ref().map(|_| provider)).await;
    }
    let tokens = result?;
    let account = tokens
        .account
        .as_deref()
        .map(|a| format!(" for {a}"))
        .unwrap_or_default();
    println!(
        "Saved {id}{account} (token expires {}) in {}.",
        time(tokens.expires),
        store.path().display()
    );
    Ok(())
}

/// How long `pincer login --oauth` waits for the browser's redirect.
const REDIRECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

async fn read_line() -> anyhow::Result<String> {
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await??;
    if line.trim().is_empty() {
        anyhow::bail!("nothing was pasted; the login was not finished");
    }
    Ok(line)
}

/// Waits for the browser's redirect on the loopback listener. Without a
/// listener, waits forever (the pasted line wins).
async fn wait_for_redirect(
    listener: Option<crate::auth::oauth::loopback::Listener>,
    state: &str,
) -> Result<crate::auth::oauth::loopback::Callback, crate::auth::oauth::OAuthError> {
    match listener {
        Some(listener) => listener.wait(state, REDIRECT_TIMEOUT).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn providers() -> Vec<String> {
        ["anthropic", "openai", "google"].map(String::from).to_vec()
    }

    fn run_ask(
        input: &str,
        provider: Option<&str>,
        method: Option<Method>,
    ) -> (anyhow::Result<(String, Method)>, String) {
        let mut output = Vec::new();
        let result = ask(
            &mut input.as_bytes(),
            &mut output,
            provider.map(str::to_string),
            method,
            &providers(),
            |p| p == "anthropic",
        );
        (result, String::from_utf8(output).unwrap())
    }

    #[test]
    fn login_asks_for_the_provider_then_the_method() {
        let (result, output) = run_ask("nope\nanthropic\n3\n2\n", None, None);
        assert_eq!(result.unwrap(), ("anthropic".to_string(), Method::OAuth));
        assert_eq!(
            output,
            "Log in to which provider?\n  1) anthropic\n  2) openai\n  3) google\n\
             Provider (name or number): No provider `nope`.\n\
             Provider (name or number): \
             How do you want to log in to anthropic?\n  1) paste an API key\n  2) log in with your account in the browser (OAuth)\n\
             Method (1 or 2): Answer 1 or 2, not `3`.\n\
             Method (1 or 2): "
        );
        // A provider without an OAuth login needs no second question.
        let (result, output) = run_ask("2\n", None, None);
        assert_eq!(result.unwrap(), ("openai".to_string(), Method::ApiKey));
        assert!(!output.contains("Method"), "{output}");
        // Only the missing part is asked for.
        let (result, output) = run_ask("1\n", Some("anthropic"), None);
        assert_eq!(result.unwrap(), ("anthropic".to_string(), Method::ApiKey));
        assert!(!output.contains("Provider"), "{output}");
        // Nothing typed: no login.
        let (result, _) = run_ask("", None, None);
        assert_eq!(
            result.unwrap_err().to_string(),
            "no answer; the login was not started"
        );
    }
}
