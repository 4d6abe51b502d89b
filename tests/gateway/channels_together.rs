//! Several channels in one gateway: one whose platform refuses it stops
//! alone, and the others, the gateway and its clients go on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::json;
use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::slack_api::{SlackApi, dm};
use support::sse::anthropic_text;
use support::telegram_api::TelegramApi;

#[tokio::test]
async fn a_broken_channel_stops_alone_and_the_others_keep_answering() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let telegram = TelegramApi::start().await;
    let slack = SlackApi::start("xoxb-together", "xapp-together").await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [\"1\"]\n\n[channels.slack]\napi_url = \"{}\"\nallow = [\"U1\"]\n",
            telegram.url, slack.url
        ),
    )
    .unwrap();
    let token = new_token();
    let mut cmd = gateway_command(&sandbox, &mock, Some(&token), &[]);
    // Telegram's token is refused; Slack's are right.
    cmd.env("TELEGRAM_BOT_TOKEN", "1:revoked")
        .env("SLACK_BOT_TOKEN", "xoxb-together")
        .env("SLACK_APP_TOKEN", "xapp-together");
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    gateway
        .stderr
        .wait_line(TIMEOUT, |l| {
            l.contains("channel telegram stopped").then_some(())
        })
        .await
        .expect("Telegram says it stopped");
    slack
        .wait("Slack's Socket Mode connection", |s| s.connected())
        .await;
    mock.push(Reply::sse(anthropic_text("Slack still works.", 10)));
    slack.push_event(dm("D1", "U1", "hello", "1.000100"));
    slack
        .wait("the Slack reply", |s| {
            s.texts() == vec!["Slack still works.".to_string()]
        })
        .await;
    let mut admin = gateway.admin().await;
    admin.call_ok("health", json!({})).await;
    assert_eq!(
        telegram.calls_of("getme").len(),
        1,
        "Telegram was not retried"
    );
    gateway.stop().await;
}
