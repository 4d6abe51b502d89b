//! Command-line frontends that are not ACP: `pincer run` prints to a
//! terminal or a pipe. (These are the only library modules that write to
//! stdout; in `pincer acp` stdout belongs to the protocol.)

pub mod auth;
pub mod channels;
pub mod completions;
pub mod cron;
pub mod doctor;
pub mod mcp;
pub mod run;
pub mod sessions;
pub mod tools;
pub mod trust;
pub mod workflow;

/// Tells the person at the terminal (on stderr) which project keys pincer
/// ignored and how to trust the project.
pub fn report_project(settings: &crate::config::Settings) {
    if let Some(report) = settings.project.report() {
        eprintln!("pincer: {report}");
    }
}

/// `pincer gateway token`: a new token for gateway clients, in the file the
/// gateway reads. The token goes to stdout only when asked (`--print`).
#[allow(clippy::print_stdout)]
pub fn gateway_token(print: bool) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_default();
    let settings = match crate::config::Settings::load_from_process(&cwd) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("pincer: {e}");
            return 1;
        }
    };
    let config = settings.config.gateway.clone().unwrap_or_default();
    match crate::gateway::new_token(&settings.paths.config_dir, &config) {
        Ok((file, token)) => {
            eprintln!(
                "pincer: a new gateway token is in {} (readable by you alone); clients send it in their `connect`",
                file.display()
            );
            if settings.env(config.credential_env()).is_some() {
                eprintln!(
                    "pincer: ${} is set and wins over the file; unset it to use the new token",
                    config.credential_env()
                );
            }
            if print {
                println!("{}", token.expose());
            }
            0
        }
        Err(e) => {
            eprintln!("pincer: {e}");
            1
        }
    }
}
