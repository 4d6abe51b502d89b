use parking_lot::Mutex;
use std::sync::Arc;

use pretty_assertions::assert_eq;

use super::*;

/// A clock the test moves by hand.
struct TestClock(Mutex<SystemTime>);

impl TestClock {
    fn at(millis: u64) -> Arc<Self> {
        Arc::new(Self(Mutex::new(
            SystemTime::UNIX_EPOCH + Duration::from_millis(millis),
        )))
    }

    fn advance(&self, by: Duration) {
        *self.0.lock() += by;
    }
}

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        *self.0.lock()
    }
}

const T0: u64 = 1_800_000_000_000;

fn key(provider: &str, key: &str) -> Credential {
    Credential::ApiKey {
        provider: provider.into(),
        key: key.into(),
    }
}

fn setup(
    profiles: Profiles,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, Resolver, Arc<TestClock>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(profiles_path(dir.path(), DEFAULT_AGENT));
    store.modify(|p| *p = profiles).unwrap();
    let clock = TestClock::at(T0);
    let env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let resolver = Resolver::new(store, env, clock.clone());
    (dir, resolver, clock)
}

fn ids(candidates: &[Candidate]) -> Vec<String> {
    candidates.iter().map(|c| c.id.clone()).collect()
}

#[test]
fn cooldowns_grow_five_fold_to_an_hour_and_billing_doubles_to_a_day() {
    let mut stats = UsageStats::default();
    let minute = 60_000;
    let mut expected = Vec::new();
    let mut got = Vec::new();
    for (n, cooldown) in [1, 5, 25, 60, 60].into_iter().enumerate() {
        let now = T0 + n as u64 * 1_000;
        stats.fail(Failure::RateLimit, now);
        got.push(stats.cooldown_until - now);
        expected.push(cooldown * minute);
    }
    assert_eq!(got, expected);
    assert!(!stats.available(T0 + 4_000 + 59 * minute));
    assert!(stats.available(T0 + 4_000 + 60 * minute));
    // Success clears the streak.
    stats.succeed(T0 + 2 * 3_600_000);
    stats.fail(Failure::Auth, T0 + 2 * 3_600_000);
    assert_eq!(stats.cooldown_until - (T0 + 2 * 3_600_000), minute);

    let hour = 3_600_000;
    let mut billing = UsageStats::default();
    let mut got = Vec::new();
    for n in 0..4u64 {
        let now = T0 + n;
        billing.fail(Failure::Billing, now);
        got.push((billing.disabled_until - now) / hour);
    }
    assert_eq!(got, [5, 10, 20, 24]);
    assert_eq!(billing.disabled_reason.as_deref(), Some("billing"));
    // 24 quiet hours start the counters over.
    let later = T0 + 3 + 24 * hour;
    billing.fail(Failure::Billing, later);
    assert_eq!((billing.disabled_until - later) / hour, 5);
    let mut limited = UsageStats::default();
    limited.fail(Failure::RateLimit, T0);
    limited.fail(Failure::RateLimit, T0 + 1);
    limited.fail(Failure::RateLimit, T0 + 1 + 24 * hour);
    assert_eq!(limited.error_count, 1);
}

#[test]
fn profiles_come_by_kind_then_least_recently_used_with_cooldowns_last() {
    let mut profiles = Profiles::default();
    profiles
        .profiles
        .insert("anthropic:a".into(), key("anthropic", "sk-a"));
    profiles
        .profiles
        .insert("anthropic:b".into(), key("anthropic", "sk-b"));
    profiles.profiles.insert(
        "anthropic:token".into(),
        Credential::Token {
            provider: "anthropic".into(),
            token: "tok".into(),
            expires: None,
        },
    );
    profiles.profiles.insert(
        "anthropic:max".into(),
        Credential::Oauth {
            provider: "anthropic".into(),
            access: "acc".into(),
            refresh: "ref".into(),
            expires: T0 + 3_600_000,
            account: None,
        },
    );
    profiles
        .profiles
        .insert("openai:x".into(), key("openai", "sk-o"));
    let (_dir, resolver, clock) = setup(profiles, &[("ANTHROPIC_API_KEY", "sk-env")]);
    let first = resolver.candidates("anthropic", Some("ANTHROPIC_API_KEY"), None);
    assert_eq!(
        ids(&first),
        [
            "anthropic:max",
            "anthropic:token",
            "anthropic:a",
            "anthropic:b",
            "env:ANTHROPIC_API_KEY"
        ]
    );
    assert_eq!(first[0].secret.expose(), "acc");
    // Round-robin: a used key goes behind the other key.
    resolver.succeeded("anthropic:a");
    let next = ids(&resolver.candidates("anthropic", None, None));
    assert_eq!(next[2..], ["anthropic:b", "anthropic:a"]);
    // A rate-limited profile waits at the end, behind the variable.
    resolver.failed("anthropic:max", Failure::RateLimit);
    let limited = resolver.candidates("anthropic", Some("ANTHROPIC_API_KEY"), None);
    assert_eq!(
        ids(&limited),
        [
            "anthropic:token",
            "anthropic:b",
            "anthropic:a",
            "env:ANTHROPIC_API_KEY",
            "anthropic:max"
        ]
    );
    assert!(!limited[4].available());
    // After its cooldown it leads again.
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        ids(&resolver.candidates("anthropic", None, None))[0],
        "anthropic:max"
    );
    // A pinned session keeps its profile first while it is available.
    let pinned = resolver.candidates("anthropic", None, Some("anthropic:b"));
    assert_eq!(pinned[0].id, "anthropic:b");
}

#[test]
fn a_configured_order_wins_and_expired_tokens_are_skipped() {
    let mut profiles = Profiles::default();
    profiles
        .profiles
        .insert("openai:one".into(), key("openai", "1"));
    profiles
        .profiles
        .insert("openai:two".into(), key("openai", "2"));
    profiles.profiles.insert(
        "openai:old".into(),
        Credential::Token {
            provider: "openai".into(),
            token: "t".into(),
            expires: Some(T0 - 1),
        },
    );
    profiles.order.insert(
        "openai".into(),
        vec![
            "openai:two".into(),
            "openai:one".into(),
            "openai:old".into(),
        ],
    );
    let (_dir, resolver, _clock) = setup(profiles, &[]);
    assert_eq!(
        ids(&resolver.candidates("openai", Some("OPENAI_API_KEY"), None)),
        ["openai:two", "openai:one"]
    );
}

#[test]
fn the_file_is_private_and_concurrent_updates_are_not_lost() {
    let mut profiles = Profiles::default();
    profiles
        .profiles
        .insert("anthropic:a".into(), key("anthropic", "sk-a"));
    let (dir, resolver, _clock) = setup(profiles, &[]);
    let path = profiles_path(dir.path(), DEFAULT_AGENT);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    // Eight writers, each bumping the error count 25 times through its own
    // store handle (as separate processes would).
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let store = Store::new(path.clone());
            scope.spawn(move || {
                for _ in 0..25 {
                    store
                        .modify(|p| {
                            p.usage_stats
                                .entry("anthropic:a".into())
                                .or_default()
                                .error_count += 1;
                        })
                        .unwrap();
                }
            });
        }
    });
    let stats = resolver.store().read().unwrap().usage_stats["anthropic:a"].clone();
    assert_eq!(stats.error_count, 200);
    // The file keeps OpenClaw's field names and never shows up in Debug.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("\"usageStats\"") && text.contains("\"errorCount\": 200"),
        "{text}"
    );
    let credential = key("anthropic", "sk-secret");
    assert_eq!(format!("{credential:?}"), "api_key(anthropic)");
}

#[test]
fn resolution_goes_profiles_env_config_other_tools_then_cooling_profiles() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(
        home.path().join(".claude/.credentials.json"),
        r#"{"claudeAiOauth":{"accessToken":"sk-ant-oat01-cc","expiresAt":99999999999999}}"#,
    )
    .unwrap();
    let mut profiles = Profiles::default();
    profiles
        .profiles
        .insert("anthropic:ok".into(), key("anthropic", "sk-ok"));
    profiles
        .profiles
        .insert("anthropic:hot".into(), key("anthropic", "sk-hot"));
    let home_path = home.path().to_str().unwrap().to_string();
    let (_dir, resolver, _clock) = setup(
        profiles,
        &[("ANTHROPIC_API_KEY", "sk-env"), ("HOME", &home_path)],
    );
    resolver.failed("anthropic:hot", Failure::RateLimit);
    let config = Secret::new("sk-config");
    let got = resolver.candidates_with("anthropic", Some("ANTHROPIC_API_KEY"), Some(&config), None);
    assert_eq!(
        ids(&got),
        [
            "anthropic:ok",
            "env:ANTHROPIC_API_KEY",
            "config",
            "claude-code",
            "anthropic:hot"
        ]
    );
    // An explicit pin that is cooling down does not jump the queue.
    let pinned = resolver.candidates("anthropic", None, Some("anthropic:hot"));
    assert_eq!(pinned[0].id, "anthropic:ok");
}

#[test]
fn a_longer_retry_after_sets_the_cooldown_and_unavailable_profiles_say_why() {
    let hour = 3_600_000;
    let mut stats = UsageStats::default();
    stats.fail_for(Failure::RateLimit, T0, Some(Duration::from_secs(7200)));
    assert_eq!(stats.cooldown_until, T0 + 2 * hour);
    // A short retry-after does not shorten pincer's own cooldown.
    let mut short = UsageStats::default();
    short.fail_for(Failure::RateLimit, T0, Some(Duration::from_secs(5)));
    assert_eq!(short.cooldown_until, T0 + 60_000);
    assert_eq!(
        stats.unavailable(T0).map(|u| u.to_string()),
        Some("cooling down until 2027-01-15T10:00:00Z".to_string())
    );
    assert_eq!(stats.unavailable(T0 + 2 * hour), None);
    let mut billing = UsageStats::default();
    billing.fail(Failure::Billing, T0);
    assert_eq!(
        billing.unavailable(T0),
        Some(Unavailable {
            until: T0 + 5 * hour,
            disabled: Some("billing".to_string()),
        })
    );
    assert_eq!(
        billing.unavailable(T0).unwrap().to_string(),
        "disabled (billing) until 2027-01-15T13:00:00Z"
    );
}
