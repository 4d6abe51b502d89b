//! Command-line frontends that are not ACP: `pincer run` prints to a
//! terminal or a pipe. (These are the only library modules that write to
//! stdout; in `pincer acp` stdout belongs to the protocol.)

pub mod auth;
pub mod mcp;
pub mod run;
pub mod sessions;
pub mod tools;
