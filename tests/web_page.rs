//! The web chat page the gateway serves, in a real browser (Debian's
//! headless Chromium through chromedriver; see tests/support/browser.rs):
//! it logs in with the gateway's token, sends a prompt and shows the
//! streamed reply as markdown, and model text with markup in it stays text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::acp_client::Sandbox;
use support::browser::Browser;
use support::gateway::Gateway;
use support::mock_model::{MockModel, Reply};
use support::sse::anthropic_deltas;

/// The page, logged in with the gateway's token.
async fn logged_in(gateway: &Gateway) -> Browser {
    let browser = Browser::start(1280, 900).await;
    let page = format!("http://{}/", gateway.addr);
    browser.client.goto(&page).await.unwrap();
    let secret = browser.testid("login-secret").await;
    secret
        .send_keys(gateway.token.as_deref().unwrap())
        .await
        .unwrap();
    browser.testid("login-submit").await.click().await.unwrap();
    browser
        .until(
            "the signed-in view (and no login form)",
            "return getComputedStyle(document.getElementById('app')).display !== 'none' \
             && getComputedStyle(document.getElementById('login')).display === 'none';",
        )
        .await;
    browser
}

#[tokio::test]
async fn the_page_logs_in_sends_a_prompt_and_shows_the_streamed_reply_as_markdown() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    mock.push(Reply::Sse {
        body: anthropic_deltas(&["**Hello**", " from ", "`pincer`", "."]),
        delay: std::time::Duration::from_millis(30),
        gate: None,
    });
    let browser = logged_in(&gateway).await;
    browser.screenshot("web-signed-in").await;
    // The token is nowhere in the URL.
    let url = browser.client.current_url().await.unwrap();
    assert!(!url.as_str().contains(gateway.token.as_deref().unwrap()));

    let input = browser.testid("message-input").await;
    input.send_keys("Say hello").await.unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser
        .until(
            "the reply",
            "const m = document.querySelectorAll('[data-testid=message][data-role=assistant]'); \
             return m.length === 1 && m[0].textContent === 'Hello from pincer.';",
        )
        .await;
    let rendered = browser
        .client
        .execute(
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return [m.querySelector('strong')?.textContent, m.querySelector('code')?.textContent];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(rendered, json!(["Hello", "pincer"]));
    browser.screenshot("web-reply").await;
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn markup_in_a_reply_is_shown_as_text_and_never_runs() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let hostile = "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";
    mock.push(Reply::sse(support::sse::anthropic_text(hostile, 10)));
    let browser = logged_in(&gateway).await;
    browser
        .testid("message-input")
        .await
        .send_keys("Show me markup")
        .await
        .unwrap();
    browser.testid("send").await.click().await.unwrap();
    browser
        .until(
            "the reply as text",
            &format!(
                "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
                 return !!m && m.textContent === {};",
                serde_json::to_string(hostile).unwrap()
            ),
        )
        .await;
    let state = browser
        .client
        .execute(
            "const m = document.querySelector('[data-testid=message][data-role=assistant]'); \
             return [typeof window.__pwned, m.querySelectorAll('script, img').length];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(state, json!(["undefined", 0]));
}
