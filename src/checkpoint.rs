//! Checkpoints: the files a turn changed, kept as they were before it, so
//! that undo, redo, rewind and fork can put them back. This module owns the
//! project's content-addressed store ([`store`]), the snapshots that find
//! what a command changed ([`tree`]) and the restore that puts files back
//! without overwriting what it did not change ([`restore`]), and a turn's
//! changes as the transcript keeps them ([`turn`]); the sessions decide
//! when to take them.

pub mod restore;
pub mod store;
pub mod tree;
pub mod turn;
