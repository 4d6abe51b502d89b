//! The integration tests of `pincer gateway` and what reaches it: the
//! gateway's protocol, its security and resource bounds, the web page's
//! protocol, the chat channels and the scheduler, `pincer acp --connect`
//! (the bridge) and OpenClaw's own `openclaw acp` bridge. One binary with a
//! module per area, sharing one build of `tests/support` (see
//! tests/it/main.rs for why the tests are three binaries).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod acp_socket;
mod bridge;
mod bridge_openclaw;
mod bridge_sessions;
mod channels_discord;
mod channels_schedule;
mod channels_slack;
mod channels_telegram;
mod channels_together;
mod channels_whatsapp;
mod cluster;
mod cluster_channels;
mod cluster_sessions;
mod connect_acp;
mod gateway;
mod gateway_pages;
mod gateway_security;
mod gateway_web_protocol;
mod openclaw_bridge;
