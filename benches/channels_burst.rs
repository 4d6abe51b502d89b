//! Chat channels under a burst, on the release binary: 200 Telegram users
//! each write to the bot at the same moment (one local Bot API,
//! tests/support/telegram_api.rs, handing them out 100 per `getUpdates` as
//! Telegram does), and the gateway starts 200 agent runs against the mock
//! model.
//!
//! Reported: p50 / p99 / max of the time from the messages being available
//! to Telegram's long poll until the model received each chat's first
//! request, and the gateway's peak RSS. Targets: p99 ≤ 1 s, RSS ≤ 80 MB. A
//! run in which a chat gets no answer panics: its figures would mean
//! nothing.
//!
//! `PINCER_BENCH_CHATS` (200) changes the size.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use support::acp_client::{Sandbox, peak_rss};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_text;
use support::telegram_api::TelegramApi;

const P99_TARGET_MS: f64 = 1000.0;
const RSS_TARGET_MB: f64 = 80.0;
const FIRST_USER: i64 = 500_000_000;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.saturating_sub(1).min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let chats: usize = std::env::var("PINCER_BENCH_CHATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    println!(
        "pincer channels burst: {chats} Telegram chats at once ({})",
        env!("CARGO_BIN_EXE_pincer")
    );
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let api = TelegramApi::start().await;
    let users: Vec<i64> = (0..chats as i64).map(|i| FIRST_USER + i).collect();
    let allow: Vec<String> = users.iter().map(|u| format!("\"{u}\"")).collect();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [{}]\npoll_timeout_secs = 30\n",
            api.url,
            allow.join(", ")
        ),
    )
    .unwrap();
    for _ in 0..chats {
        mock.push(Reply::sse(anthropic_text("Noted.", 10)));
    }
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    cmd.env("TELEGRAM_BOT_TOKEN", &api.token)
        .env("RUST_LOG", "warn");
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let pid = gateway.child.id().unwrap();
    // The bot is waiting in its long poll before anyone writes.
    api.until("the first long poll", |api| api.is_polling().then_some(()))
        .await;
    let rss_idle = peak_rss(pid);

    let began = Instant::now();
    let mut texts = HashMap::new();
    for user in &users {
        let text = format!("note {user}");
        api.dm(*user, &text);
        texts.insert(text, *user);
    }
    mock.wait_for_requests(chats, Duration::from_secs(120))
        .await;
    let mut latencies: Vec<f64> = Vec::new();
    for request in mock.requests() {
        let first = &request.body["messages"][0]["content"];
        let text = first[0]["text"]
            .as_str()
            .or(first.as_str())
            .unwrap_or_default();
        if texts.remove(text).is_some() {
            latencies.push(request.at.duration_since(began).as_secs_f64() * 1000.0);
        }
    }
    assert!(
        texts.is_empty(),
        "chats with no model request: {}",
        texts.len()
    );
    // Every chat is answered.
    for user in &users {
        api.until_chat(*user, "the reply", |m| m.iter().any(|m| m.text == "Noted."))
            .await;
    }
    let all_answered = began.elapsed();
    let rss = peak_rss(pid);
    gateway.stop().await;

    latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p50 = percentile(&latencies, 0.5);
    let p99 = percentile(&latencies, 0.99);
    let max = latencies.last().copied().unwrap_or_default();
    let rss_mb = rss as f64 / 1024.0 / 1024.0;
    println!(
        "  message in -> first model request: p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms"
    );
    println!(
        "  all {chats} chats answered in Telegram after {:.2} s",
        all_answered.as_secs_f64()
    );
    println!(
        "  gateway peak RSS: {rss_mb:.1} MB (idle {:.1} MB)",
        rss_idle as f64 / 1024.0 / 1024.0
    );
    println!(
        "  targets: p99 <= {P99_TARGET_MS} ms {}, RSS <= {RSS_TARGET_MB} MB {}",
        if p99 <= P99_TARGET_MS {
            "met"
        } else {
            "MISSED"
        },
        if rss_mb <= RSS_TARGET_MB {
            "met"
        } else {
            "MISSED"
        }
    );
}
