//! Chat channels (Telegram, Slack, Discord, WhatsApp) bridged to the
//! gateway's sessions. Being built (issue 18); so far the part every
//! channel shares for its replies: cutting a long reply into messages the
//! platform accepts ([`split`]).

pub mod split;
