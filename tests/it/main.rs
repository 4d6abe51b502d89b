//! Every integration test but the real-browser ones, in one binary: a
//! module per area (each the former `tests/<area>.rs`), all sharing one
//! build of `tests/support`. Fifty-odd binaries each compiling the 6.7k
//! lines of support and linking pincer's library again made the build most
//! of CI's time on two cores; nextest still runs every test in a process of
//! its own, so tests that set process-wide state stay isolated.
//! The browser tests are the other binary, tests/browsers/.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod acp;
mod acp_auth;
mod acp_ids;
mod acp_oauth;
mod acp_shared;
mod agent;
mod ask_user;
mod auth;
mod bridge;
mod bridge_openclaw;
mod bridge_sessions;
mod channels_discord;
mod channels_schedule;
mod channels_slack;
mod channels_telegram;
mod channels_together;
mod channels_whatsapp;
mod claude_cli_mock;
mod claude_code;
mod claude_code_cli;
mod cli;
mod cli_tools;
mod commands;
mod compaction;
mod editor_fixes;
mod editors;
mod fake_claude;
mod framework;
mod gateway;
mod gateway_security;
mod gateway_web_protocol;
mod install;
mod live_output;
mod mcp;
mod oauth;
mod openclaw_bridge;
mod plan;
mod portability;
mod prompt_cache;
mod provider_http;
mod providers;
mod python_client;
mod run_cli;
mod scripting;
mod sessions;
mod shell_safety;
mod system_prompt;
mod tools_acp;
mod transport;
mod trust;
mod validation;
mod workflow;
mod workflow_acp;
mod workflow_cli;
mod workflow_run;
