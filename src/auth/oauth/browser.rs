//! Opening an address in the user's browser, for logins pincer runs itself
//! (an editor's `authenticate`, `pincer login`).
//!
//! `$BROWSER` comes first (the usual convention: commands separated by
//! `:`, `%s` standing for the address, else the address is the last
//! argument), then the platform's opener (`open` on macOS, `xdg-open` where
//! there is a display). The browser gets no stdin and no stdout: in
//! `pincer acp` stdout is the protocol. A browser that exits at once with a
//! failure counts as not started, and the next one is tried; one that is
//! still running after a moment, or exited cleanly, has the address.

use std::process::Stdio;
use std::time::Duration;

/// How long a browser command is watched for an immediate failure.
const GRACE: Duration = Duration::from_secs(3);

/// The commands to try, each as program and arguments, the address in
/// place.
pub fn candidates(url: &str, env: impl Fn(&str) -> Option<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    if let Some(browser) = env("BROWSER") {
        for entry in browser.split(':').filter(|e| !e.trim().is_empty()) {
            let mut words: Vec<String> = entry.split_whitespace().map(str::to_string).collect();
            if words.iter().any(|w| w.contains("%s")) {
                for word in &mut words {
                    *word = word.replace("%s", url);
                }
            } else {
                words.push(url.to_string());
            }
            out.push(words);
        }
    }
    if cfg!(target_os = "macos") {
        out.push(vec!["open".to_string(), url.to_string()]);
    } else if env("DISPLAY").is_some() || env("WAYLAND_DISPLAY").is_some() {
        out.push(vec!["xdg-open".to_string(), url.to_string()]);
    }
    out
}

/// Starts the first browser that will; returns its program, or, when none
/// did, what was tried and why each failed.
pub async fn open(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<String, Vec<String>> {
    let mut failures = Vec::new();
    for command in candidates(url, env) {
        let Some((program, args)) = command.split_first() else {
            continue;
        };
        let spawned = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // The browser outlives the login; tokio reaps it when it exits.
            .kill_on_drop(false)
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                failures.push(format!("{program}: {e}"));
                continue;
            }
        };
        match tokio::time::timeout(GRACE, child.wait()).await {
            Ok(Ok(status)) if !status.success() => {
                failures.push(format!("{program}: exited with {status}"));
            }
            Ok(Err(e)) => failures.push(format!("{program}: {e}")),
            Ok(Ok(_)) | Err(_) => return Ok(program.clone()),
        }
    }
    Err(failures)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |key| {
            vars.iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn browser_follows_the_convention_then_the_platform_opener() {
        let url = "http://x/a?b=c";
        let got = candidates(
            url,
            env(&[("BROWSER", "firefox -new-tab:chromium --app=%s")]),
        );
        let mut want = vec![
            vec![
                "firefox".to_string(),
                "-new-tab".to_string(),
                url.to_string(),
            ],
            vec!["chromium".to_string(), format!("--app={url}")],
        ];
        if cfg!(target_os = "macos") {
            want.push(vec!["open".to_string(), url.to_string()]);
        }
        assert_eq!(got, want);
        // No display, no BROWSER: nothing to start (on Linux).
        if !cfg!(target_os = "macos") {
            assert!(candidates(url, env(&[])).is_empty());
            assert_eq!(
                candidates(url, env(&[("WAYLAND_DISPLAY", "wayland-0")])),
                vec![vec!["xdg-open".to_string(), url.to_string()]]
            );
        }
    }

    #[tokio::test]
    async fn a_browser_that_fails_at_once_is_not_taken_for_started() {
        let failures = open(
            "http://x/",
            env(&[("BROWSER", "/nonexistent/browser:false")]),
        )
        .await
        .unwrap_err();
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(
            failures[0].starts_with("/nonexistent/browser: "),
            "{failures:?}"
        );
        assert!(
            failures[1].starts_with("false: exited with"),
            "{failures:?}"
        );
        assert_eq!(
            open("http://x/", env(&[("BROWSER", "false:true")])).await,
            Ok("true".to_string())
        );
    }
}
