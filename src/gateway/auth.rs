//! Who may use the gateway: the credential (a token or a password, never in
//! a URL), its constant-time check, the refusal of placeholder values that
//! OpenClaw once accepted (`""`, `"undefined"`), and limits on failed
//! attempts, per address and in all, so that a credential cannot be guessed
//! by trying, from one address or from many.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::gateway::{AuthMode, GatewayConfig};
use crate::llm::Secret;

/// The shortest token accepted: 16 characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// The shortest password accepted: 12 characters. A person chooses it, so
/// it is shorter than a token may be, but a 2-character password falls to
/// a few hundred guesses from a few addresses in well under a second.
pub const MIN_PASSWORD_LEN: usize = 12;

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
        if mode == AuthMode::Password && value.chars().count() < MIN_PASSWORD_LEN {
            return Err(format!(
                "the gateway password in {place} is shorter than {MIN_PASSWORD_LEN} characters; choose a longer one (or use a token: auth = \"token\" and `pincer gateway token`)"
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

/// Failed connects per address and in all, and the lockouts they lead to.
///
/// Per address (an IPv4 address, an IPv6 /64: see
/// [`super::peers::limit_key`]): after `max` failures within `window` the
/// address waits until the oldest leaves the window. In all: after
/// `global_max` failures within `window` from any addresses, a guesser with
/// many addresses is stopped too. That global lockout must not hand the
/// owner to the attacker, so addresses that authenticated within
/// [`KNOWN_FOR`] are still checked (under their own limit); a new address
/// waits until the window has passed. The cost falls on an owner who comes
/// from an address the gateway has not seen, while someone is guessing.
#[derive(Debug)]
pub struct Limiter {
    max: u32,
    global_max: u32,
    window: Duration,
    state: Mutex<LimiterState>,
}

#[derive(Debug, Default)]
struct LimiterState {
    failures: HashMap<IpAddr, VecDeque<Instant>>,
    /// The last `global_max` failures from anywhere.
    global: VecDeque<Instant>,
    /// Addresses that authenticated, and when they last did.
    known: HashMap<IpAddr, Instant>,
}

/// How long an address that authenticated stays exempt from the global
/// lockout.
pub const KNOWN_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// Addresses remembered as known; the oldest go first.
const MAX_KNOWN: usize = 4096;

impl Limiter {
    pub fn new(max: u32, global_max: u32, window: Duration) -> Self {
        Self {
            max,
            global_max,
            window,
            state: Mutex::new(LimiterState::default()),
        }
    }

    /// How long `peer` must still wait, if it is locked out (its own
    /// failures, or everyone's while it is not a known address).
    pub fn locked(&self, peer: IpAddr) -> Option<Duration> {
        let peer = super::peers::limit_key(peer);
        let now = Instant::now();
        let window = self.window;
        let expired = |t: &Instant| now.duration_since(*t) >= window;
        let mut state = self.lock();
        if let Some(times) = state.failures.get_mut(&peer) {
            while times.front().is_some_and(expired) {
                times.pop_front();
            }
            if times.is_empty() {
                state.failures.remove(&peer);
            } else if times.len() as u32 >= self.max
                && let Some(first) = times.front()
            {
                return Some(window.saturating_sub(now.duration_since(*first)));
            }
        }
        while state.global.front().is_some_and(expired) {
            state.global.pop_front();
        }
        if (state.global.len() as u32) < self.global_max {
            return None;
        }
        let known = state
            .known
            .get(&peer)
            .is_some_and(|t| now.duration_since(*t) < KNOWN_FOR);
        if known {
            return None;
        }
        state
            .global
            .front()
            .map(|first| window.saturating_sub(now.duration_since(*first)))
    }

    pub fn failed(&self, peer: IpAddr) {
        let peer = super::peers::limit_key(peer);
        let now = Instant::now();
        let mut state = self.lock();
        // Addresses are few, but an attacker may have many: old entries go
        // when the map grows.
        if state.failures.len() > 10_000 {
            let window = self.window;
            state
                .failures
                .retain(|_, times| times.back().is_some_and(|t| t.elapsed() < window));
        }
        let times = state.failures.entry(peer).or_default();
        times.push_back(now);
        while times.len() > self.max as usize {
            times.pop_front();
        }
        // Said once a lockout, when it begins (a refused address is not
        // checked again until it ends): the log cannot be flooded by it.
        if times.len() == self.max as usize {
            tracing::warn!(
                "{peer}: {} failed sign-ins; refused for {} s",
                self.max,
                self.window.as_secs()
            );
        }
        state.global.push_back(now);
        while state.global.len() > self.global_max as usize {
            state.global.pop_front();
        }
    }

    /// `peer` authenticated: it is let through a global lockout.
    pub fn succeeded(&self, peer: IpAddr) {
        let peer = super::peers::limit_key(peer);
        let mut state = self.lock();
        if state.known.len() >= MAX_KNOWN && !state.known.contains_key(&peer) {
            let oldest = state.known.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                state.known.remove(&oldest);
            }
        }
        state.known.insert(peer, Instant::now());
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, LimiterState> {
        self.state.lock()
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
    fn a_password_under_twelve_characters_is_refused_like_a_short_token() {
        let dir = tempfile::tempdir().unwrap();
        let config = GatewayConfig {
            auth: Some(AuthMode::Password),
            ..GatewayConfig::default()
        };
        for (value, ok) in [
            ("ab", false),
            ("elevenchars", false),
            ("twelve-chars", true),
        ] {
            let env = |k: &str| (k == "PINCER_GATEWAY_PASSWORD").then(|| value.to_string());
            match resolve(&config, dir.path(), &env, "127.0.0.1") {
                Ok(_) => assert!(ok, "{value:?} was accepted"),
                Err(err) => {
                    assert!(!ok, "{value:?}: {err}");
                    assert!(
                        err.starts_with(
                            "the gateway password in $PINCER_GATEWAY_PASSWORD is shorter than 12 characters"
                        ),
                        "{err}"
                    );
                }
            }
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
        let limiter = Limiter::new(3, 1000, Duration::from_millis(200));
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

    #[test]
    fn ipv6_failures_in_one_64_lock_the_64_and_not_its_neighbour() {
        let limiter = Limiter::new(3, 1000, Duration::from_secs(60));
        for host in ["2001:db8:0:1::1", "2001:db8:0:1::2", "2001:db8:0:1:ffff::3"] {
            limiter.failed(host.parse().unwrap());
        }
        let other_host: IpAddr = "2001:db8:0:1:abcd::9".parse().unwrap();
        assert!(limiter.locked(other_host).is_some(), "the /64 is locked");
        let neighbour: IpAddr = "2001:db8:0:2::1".parse().unwrap();
        assert_eq!(limiter.locked(neighbour), None);
        // IPv4 stays exact.
        for _ in 0..3 {
            limiter.failed("10.0.0.1".parse().unwrap());
        }
        assert!(limiter.locked("10.0.0.1".parse().unwrap()).is_some());
        assert_eq!(limiter.locked("10.0.0.2".parse().unwrap()), None);
    }

    #[test]
    fn the_global_budget_stops_many_addresses_but_not_a_known_one() {
        let limiter = Limiter::new(5, 10, Duration::from_secs(60));
        let owner: IpAddr = "192.0.2.1".parse().unwrap();
        limiter.succeeded(owner);
        // Ten addresses, one failure each: none is near its own limit.
        for i in 0..10u8 {
            let guesser = IpAddr::from([198, 51, 100, i]);
            assert_eq!(limiter.locked(guesser), None, "guess {i}");
            limiter.failed(guesser);
        }
        let fresh: IpAddr = "203.0.113.7".parse().unwrap();
        let wait = limiter.locked(fresh).expect("the global budget is spent");
        assert!(wait <= Duration::from_secs(60), "{wait:?}");
        assert_eq!(limiter.locked(owner), None, "a known address still gets in");
        // The known address's own limit still holds.
        for _ in 0..5 {
            limiter.failed(owner);
        }
        assert!(limiter.locked(owner).is_some());
    }

    #[test]
    fn the_global_lockout_ends_with_its_window() {
        let limiter = Limiter::new(5, 2, Duration::from_millis(200));
        limiter.failed("198.51.100.1".parse().unwrap());
        limiter.failed("198.51.100.2".parse().unwrap());
        let fresh: IpAddr = "203.0.113.7".parse().unwrap();
        assert!(limiter.locked(fresh).is_some());
        std::thread::sleep(Duration::from_millis(220));
        assert_eq!(limiter.locked(fresh), None);
    }
}
