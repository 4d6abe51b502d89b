//! pincer: a coding agent for editors, speaking the Agent Client Protocol.
//!
//! The binary (`src/main.rs`) only parses the command line; everything else
//! lives here, in the layers DESIGN.md describes: `llm` (provider wire
//! formats), `agent` (the loop), `tools`, `acp` (the editor-facing server),
//! and `config` (files, paths, model selection).

pub mod acp;
pub mod agent;
pub mod auth;
pub mod bridge;
pub mod cli;
pub mod config;
pub mod context;
pub mod gateway;
pub mod llm;
pub mod mcp;
pub mod parallel;
pub mod process_group;
pub mod session;
pub mod tools;
pub mod workflow;
