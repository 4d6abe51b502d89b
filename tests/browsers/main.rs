//! The tests that drive real browsers (Debian's headless Chromium and
//! Firefox through their WebDriver servers; tests/support/browser.rs and
//! tests/support/webdriver.rs), in a binary of their own beside tests/it/
//! and tests/gateway/: the web page, its markdown
//! renderer, the two browsers on desktop and phone screens, and
//! accessibility. They share one build of `tests/support`; nextest's
//! `browsers` test group (.config/nextest.toml) keeps them from running
//! alongside each other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod control_ui;
mod web_a11y;
mod web_browsers;
mod web_markdown;
mod web_page;
