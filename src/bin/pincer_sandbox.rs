//! `pincer-sandbox --policy JSON -- PROGRAM [ARGS]`: the launcher of
//! sandboxed commands, installed beside `pincer`. It does what `pincer
//! sandbox exec` does (`pincer::tools::sandbox::linux`) in a program a
//! fraction of pincer's size, because every command pays for its start:
//! started as `pincer`, the launcher spent 3 ms of each command loading
//! a binary made for everything else (benches/sandbox.rs).
#![allow(clippy::print_stderr)]

fn main() -> std::process::ExitCode {
    #[cfg(target_os = "linux")]
    {
        let code = pincer::tools::sandbox::linux::exec_main(std::env::args_os().skip(1).collect());
        std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("pincer-sandbox: commands are confined this way on Linux only");
        std::process::ExitCode::from(125)
    }
}
