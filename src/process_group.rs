//! Ending a process and everything it started: the one place where pincer
//! touches the operating system's process control, so that the tools'
//! shells, MCP servers and hooks share it and the rest of the code builds
//! on every platform.
//!
//! On Unix (Linux, macOS) each child pincer starts leads a process group of
//! its own (`setsid` through portable-pty for shells, `process_group(0)` for
//! MCP servers and hooks); signalling the group reaches pipelines,
//! background jobs and their children. This is the path that is built and
//! tested.
//!
//! Windows has neither process groups nor signals. Shells there run on a
//! ConPTY that portable-pty opens, and a tree is ended with `taskkill /T`,
//! which walks the parent links from the root. A Job object would also catch
//! processes whose parent has already exited; it needs the Win32 API
//! (`windows-sys`, unsafe code this crate forbids), so it is left to a
//! dedicated crate if Windows users need it. The Windows path is written to
//! compile by inspection only: no Windows target is installed where pincer
//! is developed.

#[cfg(unix)]
#[path = "process_group/unix.rs"]
mod imp;
#[cfg(windows)]
#[path = "process_group/windows.rs"]
mod imp;
#[cfg(not(any(unix, windows)))]
compile_error!(
    "pincer runs commands as process trees and knows how to end them on Unix and Windows only"
);

pub use imp::{Pid, Signal, current_uid, group_alive, isolate, process_exists, signal_group};
