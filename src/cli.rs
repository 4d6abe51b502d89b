//! Command-line frontends that are not ACP: `pincer run` prints to a
//! terminal or a pipe. (These are the only library modules that write to
//! stdout; in `pincer acp` stdout belongs to the protocol.)

pub mod auth;
pub mod channels;
pub mod cluster;
pub mod completions;
pub mod cron;
pub mod doctor;
pub mod mcp;
pub mod run;
pub mod sandbox;
pub mod sessions;
pub mod tools;
pub mod trust;
pub mod workflow;

/// `text` made safe to print on a terminal: control characters (C0, DEL,
/// C1) and Unicode's bidirectional overrides become `�`, so that a name,
/// key or title someone else chose (a stranger's chat display name, a
/// session's title) cannot move the cursor, clear the screen, retitle the
/// window, write the clipboard (OSC 52) or reorder what the owner reads.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    fn unsafe_char(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
    }
    if text.chars().any(unsafe_char) {
        text.chars()
            .map(|c| if unsafe_char(c) { '\u{FFFD}' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

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

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn terminal_controls_and_bidi_overrides_are_replaced() {
        let hostile = "Eve\x1b]0;owned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\u{9b}31m\x7f\u{202e}gnp.exe\ttab\nline";
        assert_eq!(
            shown(hostile),
            "Eve\u{fffd}]0;owned\u{fffd}\u{fffd}[2J\u{fffd}]52;c;ZXZpbA==\u{fffd}\u{fffd}31m\u{fffd}\u{fffd}gnp.exe\u{fffd}tab\u{fffd}line"
        );
        assert!(matches!(
            shown("plain Ünïcode ✓"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
