//! The integration tests of pincer as editors, scripts and the CLI reach
//! it (ACP, tools, sessions, providers, MCP, workflows, the Claude Code
//! runtime), in one binary: a module per area, all sharing one build of
//! `tests/support`. nextest still runs every test in a process of its own,
//! so tests that set process-wide state stay isolated.
//!
//! The tests are three binaries, not one per area (fifty-odd binaries each
//! compiling the 6.7k lines of support and linking pincer's library again
//! made the build most of CI's time on two cores) and not one in all: the
//! gateway's tests (tests/gateway/) and the browser tests (tests/browsers/)
//! are binaries of their own so that the two cores compile them side by
//! side. With this binary and the gateway's as one, its compilation ran
//! alone on one core for the last 13 s of a fresh test build here, and its
//! lint for the last 20 s of `cargo clippy --all-targets`.

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
mod checkpoints;
mod claude_cli_mock;
mod claude_code;
mod claude_code_cli;
mod cli;
mod cli_tools;
mod cluster_services;
mod cluster_store;
mod commands;
mod compaction;
mod editor_fixes;
mod editors;
mod fake_claude;
mod framework;
mod install;
mod live_output;
mod mcp;
mod oauth;
mod plan;
mod portability;
mod prompt_cache;
mod provider_http;
mod providers;
mod python_client;
mod run_cli;
mod sandbox;
mod scripting;
mod sessions;
mod shell_safety;
mod subagents;
mod system_prompt;
mod tools_acp;
mod transport;
mod trust;
mod validation;
mod workflow;
mod workflow_acp;
mod workflow_cli;
mod workflow_run;
