//! Who may use the gateway: the credential (a token or a password, never in
//! a URL), its constant-time check, the refusal of placeholder values that
//! OpenClaw once accepted (`""`, `"undefined"`), and a per-address limit on
//! failed attempts so that a token cannot be guessed by trying.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::gateway::{AuthMode, GatewayConfig};
use crate::llm::Secret;

/// The shortest token accepted: 16 characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// The gateway's credential.
#[derive(Debug)]
pub struct Credential {
    pub mode: AuthMode,
    secret: Secret,
}

/// Why a client's credential was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    Missing,
    Mismatch,
}

impl Credential {
    pub fn new(mode: AuthMode, secret: Secret) -> Self {
        Self { mode, secret }
    }

    /// Checks what a client offered. Both sides are hashed first, so the
    /// comparison takes the same time whatever the lengths.
    pub fn check(&self, offered: Option<&str>) -> Result<(), Refusal> {
        let offered = offered
            .filter(|o| !is_placeholder(o))
            .ok_or(Refusal::Missing)?;
        let a = Sha256::digest(offered.as_bytes());
        let b = Sha256::digest(self.secret.expose().as_bytes());
        if bool::from(a.ct_eq(&b)) {
            Ok(())
        } else {
            Err(Refusal::Mismatch)
        }
    }
}

/// Values that are no credential at all, whatever a client or a config
/// says: empty, blank, and what JavaScript makes of a missing value.
pub fn is_placeholder(value: &str) -> bool {
    let value = value.trim();
    value.is_empty()
        || value.eq_ignore_ascii_case("undefined")
        || value.eq_ignore_ascii_case("null")
}

/// Where the credential was found, for the startup message.
#[derive(Debug, PartialEq, Eq)]
pub enum Source {
    Env(String),
    File(PathBuf),
    /// A token file pincer just created (loopback only).
    Created(PathBuf),
}

/// Finds the configured credential. Without one, a loopback gateway gets a
/// new token file; any other address is refused.
pub fn resolve(
    config: &GatewayConfig,
    config_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    bind: &str,
) -> Result<(Credential, Source), String> {
    let loopback = crate::config::gateway::is_loopback(bind);
    let mode = config.auth();
    let what = mode.as_str();
    let check = |value: String, place: &str| -> Result<Secret, String> {
        let value = value.trim().to_string();
        if is_placeholder(&value) {
            return Err(format!(
                "the gateway {what} in {place} is empty or a placeholder; run `pincer gateway token` for a real one"
            ));
        }
        if mode == AuthMode::Token && value.chars().count() < MIN_TOKEN_LEN {
            return Err(format!(
                "the gateway token in {place} is shorter than {MIN_TOKEN_LEN} characters; run `pincer gateway token` for a strong one"
            ));
        }
        Ok(Secret::new(value))
    };
    let var = config.credential_env();
    // A variable set to nothing is a mistake to report, not an absence
    // (`PINCER_GATEWAY_TOKEN=$TYPO` must not fall back to another token).
    if let Some(value) = env(var) {
        let secret = check(value, &format!("${var}"))?;
        return Ok((Credential::new(mode, secret), Source::Env(var.to_string())));
    }
    let file = config.credential_file(config_dir);
    match std::fs::read_to_string(&file) {
        Ok(value) => {
            let secret = check(value, &file.display().to_string())?;
            return Ok((Credential::new(mode, secret), Source::File(file)));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    }
    if !loopback {
        return Err(format!(
            "refusing to listen on {bind}, beyond this machine, without a {what} you set: set ${var} or run `pincer gateway token` first"
        ));
    }
    if mode == AuthMode::Password {
        return Err(format!(
            "auth = \"password\" needs a password: set ${var} or write it to {}",
            file.display()
        ));
    }
    let token = create_token(&file)?;
    Ok((Credential::new(mode, token), Source::Created(file)))
}

/// A new random token (256 bits, URL-safe base64) in `file`, readable by
/// the user alone.
pub fn create_token(file: &Path) -> Result<Secret, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
    use base64::Engine;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    write_private(file, &format!("{token}\n"))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok(Secret::new(token))
}

/// Writes a file only its owner may read (0600 on Unix), replacing it.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let partial = path.with_extension("partial");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&partial)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&partial, path)
}

/// Failed connects per address, and the lockout they lead to.
#[derive(Debug)]
pub struct Limiter {
    max: u32,
    window: Duration,
    failures: Mutex<HashMap<IpAddr, VecDeque<Instant>>>,
}

impl Limiter {
    pub fn new(max: u32, window: Duration) -> Self {
        Self {
            max,
            window,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// How long `peer` must still wait, if it is locked out.
    pub fn locked(&self, peer: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let mut failures = self.lock();
        let times = failures.get_mut(&peer)?;
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) >= self.window)
        {
            times.pop_front();
        }
        if times.is_empty() {
            failures.remove(&peer);
            return None;
        }
        (times.len() as u32 >= self.max)
            .then(|| {
                times
                    .front()
                    .map(|first| self.window - now.duration_since(*first))
            })
            .flatten()
    }

    pub fn failed(&self, peer: IpAddr) {
        let mut failures = self.lock();
        // Addresses are few, but an attacker may have many: old entries go
        // when the map grows.
        if failures.len() > 10_000 {
            let window = self.window;
            failures.retain(|_, times| times.back().is_some_and(|t| t.elapsed() < window));
        }
        let times = failures.entry(peer).or_default();
        times.push_back(Instant::now());
        while times.len() > self.max as usize {
            times.pop_front();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, VecDeque<Instant>>> {
        self.failures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Credential {
        Credential::new(AuthMode::Token, Secret::new("a-long-enough-token-value"))
    }

    #[test]
    fn placeholders_are_no_credential() {
        for offered in ["", "  ", "undefined", "UNDEFINED", "null"] {
            assert_eq!(
                token().check(Some(offered)),
                Err(Refusal::Missing),
                "{offered:?}"
            );
        }
        assert_eq!(token().check(None), Err(Refusal::Missing));
        assert_eq!(
            token().check(Some("a-long-enough-token-valuE")),
            Err(Refusal::Mismatch)
        );
        assert_eq!(token().check(Some("a-long-enough-token-value")), Ok(()));
    }

    #[test]
    fn a_placeholder_or_short_configured_token_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = GatewayConfig::default();
        for value in ["", "undefined", "null", "short"] {
            let env = |k: &str| (k == "PINCER_GATEWAY_TOKEN").then(|| value.to_string());
            let err = resolve(&config, dir.path(), &env, "127.0.0.1").unwrap_err();
            assert!(err.contains("PINCER_GATEWAY_TOKEN"), "{err}");
        }
    }

    #[test]
    fn without_a_credential_only_loopback_starts_and_gets_a_private_token() {
        let dir = tempfile::tempdir().unwrap();
        let config = GatewayConfig::default();
        let none = |_: &str| None;
        let err = resolve(&config, dir.path(), &none, "0.0.0.0").unwrap_err();
        assert!(err.contains("refusing to listen"), "{err}");
        assert!(!dir.path().join("gateway/token").exists());
        let (credential, source) = resolve(&config, dir.path(), &none, "127.0.0.1").unwrap();
        let file = dir.path().join("gateway/token");
        assert_eq!(source, Source::Created(file.clone()));
        let stored = std::fs::read_to_string(&file).unwrap();
        assert_eq!(credential.check(Some(stored.trim())), Ok(()));
        assert!(stored.trim().len() >= 43);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // The next start reads the same token.
        let (_, again) = resolve(&config, dir.path(), &none, "0.0.0.0").unwrap();
        assert_eq!(again, Source::File(file));
    }

    #[test]
    fn failures_lock_an_address_out_for_the_window_only() {
        let limiter = Limiter::new(3, Duration::from_millis(200));
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        for _ in 0..2 {
            limiter.failed(a);
            assert_eq!(limiter.locked(a), None);
        }
        limiter.failed(a);
        assert!(limiter.locked(a).is_some());
        assert_eq!(limiter.locked(b), None);
        std::thread::sleep(Duration::from_millis(220));
        assert_eq!(limiter.locked(a), None);
    }
}
