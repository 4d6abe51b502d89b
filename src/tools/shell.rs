//! What the `bash` and `process` tools share: both run a command line with
//! `bash -c` under a pseudo-terminal, so both need the same way to start the
//! shell as the leader of its own process group and end that group, the same
//! cleaning of what a program prints to a terminal into the plain text the
//! model reads, the same limit on how much of it one result shows, and the
//! same reading of a command line into the commands a permission covers.
//!
//! The tools differ in when they look at the output (`bash` once the command
//! ends, `process` whenever the model polls) and in how long the shell lives,
//! so what they keep of the output and how they report it stays with each
//! tool.

mod group;
mod output;
mod scopes;

pub(super) use group::{
    CHECK_INTERVAL, Shell, group_alive, read_chunks, signal_group, spawn, terminate_group,
    wait_until,
};
pub(super) use output::{Cleaner, Screen};
pub use scopes::command_prefixes;

/// Most lines of output one result shows.
pub(super) const MAX_LINES: usize = 2_000;
/// Most bytes of output one result shows.
pub(super) const MAX_BYTES: usize = 50 * 1024;
