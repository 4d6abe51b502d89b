//! `pincer completions bash|zsh|fish`: shell completion scripts generated
//! from the command-line definition itself (clap_complete), so that every
//! subcommand and flag is offered as soon as it exists, with nothing to keep
//! in step by hand.

pub use clap_complete::Shell;

/// `shell`'s completion script for `command` (the whole `pincer` command
/// line). Built in memory: clap_complete panics when its writer fails, and
/// stdout may be a pipe that closes early (`| head`).
pub fn script(shell: Shell, command: &mut clap::Command) -> Vec<u8> {
    let name = command.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(shell, command, name, &mut out);
    out
}
