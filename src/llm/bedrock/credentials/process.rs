//! `credential_process`: a profile names a command that prints credentials
//! as JSON (`{"Version": 1, "AccessKeyId": …, "SecretAccessKey": …,
//! "SessionToken": …, "Expiration": …}`), the way tools such as aws-vault
//! and 1Password's plugin hand keys to the AWS SDKs.
//!
//! The command runs through the shell, as in the SDKs, with no stdin (an
//! ACP agent has no terminal to prompt on). Output without `Expiration` is
//! treated as never expiring, as the AWS CLI documents.

use std::process::Stdio;
use std::time::Duration;

use super::{CredentialsError, JsonCredentials, Temporary, excerpt};

/// Long enough for a helper that waits on a browser login.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `command` of `profile` and parses what it prints.
pub(super) async fn run(profile: &str, command: &str) -> Result<Temporary, CredentialsError> {
    let fail = |message: String| CredentialsError::Process {
        profile: profile.to_string(),
        message,
    };
    // Only the program is named in messages; arguments may carry secrets.
    let program = command.split_whitespace().next().unwrap_or_default();
    let mut shell = shell(command);
    shell
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(TIMEOUT, shell.output()).await {
        Err(_) => {
            return Err(fail(format!(
                "`{program}` did not finish within {} s",
                TIMEOUT.as_secs()
            )));
        }
        Ok(Err(error)) => return Err(fail(format!("could not run `{program}`: {error}"))),
        Ok(Ok(output)) => output,
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(fail(format!(
            "`{program}` exited with {}: {}",
            output.status,
            excerpt(&stderr, 300)
        )));
    }
    parse(&String::from_utf8_lossy(&output.stdout))
        .map_err(|message| fail(format!("`{program}` printed {message}")))
}

fn parse(stdout: &str) -> Result<Temporary, String> {
    let value: serde_json::Value =
        serde_json::from_str(stdout).map_err(|_| "something other than JSON".to_string())?;
    match value.get("Version").and_then(serde_json::Value::as_u64) {
        Some(1) => {}
        Some(other) => return Err(format!("Version {other}; only Version 1 is defined")),
        None => return Err("JSON without \"Version\": 1".to_string()),
    }
    let credentials: JsonCredentials = serde_json::from_value(value).map_err(|error| {
        format!(
            "JSON that is not credentials ({error}); AccessKeyId and SecretAccessKey are required"
        )
    })?;
    credentials.into_temporary()
}

#[cfg(unix)]
fn shell(command: &str) -> tokio::process::Command {
    let mut shell = tokio::process::Command::new("sh");
    shell.arg("-c").arg(command);
    shell
}

#[cfg(windows)]
fn shell(command: &str) -> tokio::process::Command {
    let mut shell = tokio::process::Command::new("cmd.exe");
    shell.arg("/C").arg(command);
    shell
}
