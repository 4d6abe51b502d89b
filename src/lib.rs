//! pincer: a coding agent for editors, speaking the Agent Client Protocol.
//!
//! The binary (`src/main.rs`) only parses the command line; everything else
//! lives here, in the layers ARCHITECTURE.md describes (lowest first: `llm`,
//! `tools` and `auth`, `mcp`, `config`, `context`, `agent`, `workflow`,
//! `session`, then the front doors `acp`, `gateway`, `bridge` and `cli`).
//! `architecture.rs` checks that no import runs up that order.

pub mod acp;
pub mod agent;
pub mod auth;
pub mod bridge;
pub mod checkpoint;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod context;
pub mod gateway;
pub mod json_schema;
pub mod llm;
pub mod mcp;
pub mod parallel;
pub mod process_group;
pub mod session;
pub mod tools;
pub mod units;
pub mod workflow;

#[cfg(test)]
mod architecture;
