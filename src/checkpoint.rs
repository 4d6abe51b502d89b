//! Checkpoints: the files a turn changed, kept as they were before it, so
//! that undo, redo, rewind and fork can put them back. This module owns the
//! project's content-addressed store ([`store`]) and the snapshots that
//! find what a command changed ([`tree`]); the sessions decide when to take
//! them.

pub mod store;
pub mod tree;
