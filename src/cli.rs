//! Command-line frontends that are not ACP: `pincer run` prints to a
//! terminal or a pipe. (These are the only library modules that write to
//! stdout; in `pincer acp` stdout belongs to the protocol.)

pub mod auth;
pub mod completions;
pub mod doctor;
pub mod mcp;
pub mod run;
pub mod sessions;
pub mod tools;
pub mod trust;

/// Tells the person at the terminal (on stderr) which project keys pincer
/// ignored and how to trust the project.
pub fn report_project(settings: &crate::config::Settings) {
    if let Some(report) = settings.project.report() {
        eprintln!("pincer: {report}");
    }
}
