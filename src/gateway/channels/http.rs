//! What every channel's HTTP calls share: one client, retries that honour
//! a platform's rate limits, and the backoff of a receiving loop.

use std::future::Future;
use std::time::Duration;

use super::Failure;

/// The longest wait a rate limit is obeyed for in one go: a platform
/// asking for more is waited for again on the next try.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// Tries of one call (rate limits and transient failures).
const TRIES: u32 = 6;

/// An HTTP client for a platform's API: rustls with the system's roots,
/// a connect timeout, and no overall timeout (long polls set their own).
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .read_timeout(Duration::from_secs(120))
        .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// A failure of the network itself.
pub fn network(error: reqwest::Error) -> Failure {
    // The error's text may carry the URL, and a Telegram URL carries the
    // bot's token: keep only what went wrong.
    let error = error.without_url();
    Failure::Transient(format!("network: {error}"))
}

/// The `Retry-After` header in seconds (Slack's and Discord's 429s).
pub fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let seconds: f64 = value.trim().parse().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// The HMAC-SHA256 of `parts` (one after another) under `secret`, in
/// lowercase hex: how Slack and Meta sign their webhooks.
pub fn hmac_sha256_hex(secret: &[u8], parts: &[&[u8]]) -> String {
    use hmac::{Hmac, Mac};
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<sha2::Sha256>::new_from_slice(secret) else {
        return String::new();
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a signature a request carries is `expected`, compared in
/// constant time (no timing tells an attacker how much of it was right).
pub fn same_signature(given: &[u8], expected: &str) -> bool {
    !expected.is_empty() && bool::from(subtle::ConstantTimeEq::ct_eq(given, expected.as_bytes()))
}

/// Runs `call` until it succeeds, waiting out rate limits (as long as the
/// platform asks) and retrying transient failures with backoff; a refusal
/// or a fatal failure is returned at once.
pub async fn retrying<T, F, Fut>(what: &str, call: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
{
    retrying_with(what, tokio::time::sleep, call).await
}

/// [`retrying`], waiting with `sleep`.
async fn retrying_with<T, F, Fut, S, SFut>(what: &str, sleep: S, mut call: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Failure>>,
    S: Fn(Duration) -> SFut,
    SFut: Future<Output = ()>,
{
    let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(8));
    let mut tries = 0;
    loop {
        tries += 1;
        let failure = match call().await {
            Ok(value) => return Ok(value),
            Err(failure) => failure,
        };
        match &failure {
            Failure::RateLimited(wait) if tries < TRIES => {
                tracing::info!(
                    what,
                    wait_ms = wait.as_millis() as u64,
                    "rate limited; waiting"
                );
                sleep((*wait).min(MAX_WAIT)).await;
            }
            Failure::Transient(error) if tries < TRIES => {
                let wait = backoff.wait();
                tracing::info!(what, %error, wait_ms = wait.as_millis() as u64, "retrying");
                sleep(wait).await;
            }
            _ => return Err(failure),
        }
    }
}

/// Exponential backoff with jitter, for reconnecting.
#[derive(Clone, Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            next: first,
        }
    }

    /// The next wait: doubling up to the maximum, with up to a quarter of
    /// jitter so that many clients do not come back in step.
    pub fn wait(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        let jitter = base.as_millis() as u64 / 4;
        let extra = if jitter == 0 {
            0
        } else {
            let mut bytes = [0u8; 8];
            let _ = getrandom::fill(&mut bytes);
            u64::from_le_bytes(bytes) % jitter
        };
        base + Duration::from_millis(extra)
    }

    /// The connection worked: the next failure starts from the beginning.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A `sleep` that returns at once and keeps what it was asked to wait.
    fn recorded() -> (
        Arc<Mutex<Vec<Duration>>>,
        impl Fn(Duration) -> std::future::Ready<()>,
    ) {
        let waits = Arc::new(Mutex::new(Vec::new()));
        let kept = waits.clone();
        (waits, move |wait| {
            kept.lock().push(wait);
            std::future::ready(())
        })
    }

    #[tokio::test]
    async fn rate_limits_are_waited_out_and_refusals_returned_at_once() {
        let calls = AtomicU32::new(0);
        let (waits, sleep) = recorded();
        let result = retrying_with("test", sleep, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(Failure::RateLimited(Duration::from_secs(7))),
                1 => Err(Failure::RateLimited(Duration::from_secs(3600))),
                2 => Err(Failure::Transient("reset".into())),
                _ => Ok(42),
            }
        })
        .await;
        assert_eq!(result, Ok(42));
        let waits = waits.lock().clone();
        // As long as the platform asks, up to MAX_WAIT at a time; then the
        // first backoff (half a second and up to a quarter of jitter).
        assert_eq!(waits[..2], [Duration::from_secs(7), MAX_WAIT]);
        assert!(
            (Duration::from_millis(500)..Duration::from_millis(625)).contains(&waits[2]),
            "{waits:?}"
        );
        assert_eq!(waits.len(), 3);
        let calls = AtomicU32::new(0);
        let (waits, sleep) = recorded();
        let refused: Result<(), _> = retrying_with("test", sleep, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Failure::Refused("chat not found".into()))
        })
        .await;
        assert_eq!(refused, Err(Failure::Refused("chat not found".into())));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert!(waits.lock().is_empty());
    }

    #[tokio::test]
    async fn transient_failures_stop_after_a_few_tries() {
        let calls = AtomicU32::new(0);
        let (waits, sleep) = recorded();
        let result: Result<(), _> = retrying_with("test", sleep, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Failure::Transient("down".into()))
        })
        .await;
        assert!(result.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), TRIES);
        // Backing off between the tries, doubling up to its maximum.
        let waits = waits.lock().clone();
        assert_eq!(waits.len() as u32, TRIES - 1);
        assert!(
            waits
                .windows(2)
                .all(|w| w[1] > w[0] || w[1] >= Duration::from_secs(8)),
            "{waits:?}"
        );
    }

    #[test]
    fn backoff_doubles_to_its_maximum_and_resets() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
        // Jitter adds less than a quarter of the base.
        let within = |wait: Duration, base: u64| {
            let ms = wait.as_millis() as u64;
            (base * 1000..base * 1250).contains(&ms)
        };
        for base in [1, 2, 4, 8, 8, 8] {
            let wait = backoff.wait();
            assert!(within(wait, base), "{wait:?} for a base of {base} s");
        }
        backoff.reset();
        assert!(within(backoff.wait(), 1));
    }
}
