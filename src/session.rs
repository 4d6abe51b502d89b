//! Sessions on disk: one JSONL transcript per session.
//!
//! This module owns the file format and its reading and writing; which
//! sessions exist, where their files live and how a frontend restores them
//! build on it.

pub mod transcript;
