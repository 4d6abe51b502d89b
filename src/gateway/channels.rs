//! Chat channels (Telegram, Slack, Discord, WhatsApp) bridged to the
//! gateway's sessions. Being built (issue 18); so far the parts every
//! channel shares: who may use it ([`access`]: the allow-list and pairing
//! codes), cutting a long reply into messages the platform accepts
//! ([`split`]) and the agent's markdown in each platform's markup
//! ([`format`]).

pub mod access;
pub mod format;
pub mod split;
