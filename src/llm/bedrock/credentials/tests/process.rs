//! `credential_process`.

use pretty_assertions::assert_eq;

use super::*;

/// An executable script in `dir` that prints `stdout`, fails with `exit`
/// when not 0, and appends a line to `runs` each time it runs.
#[cfg(unix)]
fn script(dir: &Path, name: &str, stdout: &str, exit: i32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let runs = dir.join(format!("{name}.runs"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho run >> '{}'\ncat <<'JSON'\n{stdout}\nJSON\necho 'to stderr' >&2\nexit {exit}\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[cfg(unix)]
fn runs(dir: &Path, name: &str) -> usize {
    std::fs::read_to_string(dir.join(format!("{name}.runs")))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[cfg(unix)]
#[tokio::test]
async fn credential_process_output_becomes_the_credentials_and_is_cached() {
    let home = home_with(None, None);
    let output = serde_json::json!({
        "Version": 1,
        "AccessKeyId": "AKIDPROCESS",
        "SecretAccessKey": "process-secret",
        "SessionToken": "process-token",
        "Expiration": in_an_hour().to_string(),
    });
    let command = script(home.path(), "creds.sh", &output.to_string(), 0);
    std::fs::write(
        home.path().join(".aws/config"),
        format!(
            "[profile tool]\ncredential_process = {} --profile x\n",
            command.display()
        ),
    )
    .unwrap();
    let cache = Cache::new();
    let pairs = [("AWS_PROFILE", "tool")];
    for _ in 0..2 {
        let settings = load_with(&pairs, Some(home.path()), &Endpoints::default(), &cache)
            .await
            .unwrap();
        assert_eq!(
            settings.credentials,
            Some((
                keys("AKIDPROCESS", "process-secret", Some("process-token")),
                Source::Process {
                    profile: "tool".to_string()
                }
            ))
        );
    }
    assert_eq!(
        runs(home.path(), "creds.sh"),
        1,
        "the second load is cached"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn credential_process_failures_name_the_profile() {
    let home = home_with(None, None);
    let failing = script(home.path(), "fail.sh", "", 3);
    let wrong_version = script(home.path(), "v2.sh", r#"{"Version": 2}"#, 0);
    std::fs::write(
        home.path().join(".aws/config"),
        format!(
            "[profile failing]\ncredential_process = {}\n[profile v2]\ncredential_process = {}\n",
            failing.display(),
            wrong_version.display()
        ),
    )
    .unwrap();
    let error = load(&[("AWS_PROFILE", "failing")], Some(home.path()))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        CredentialsError::Process {
            profile: "failing".to_string(),
            message: format!(
                "`{}` exited with exit status: 3: to stderr",
                failing.display()
            ),
        }
    );
    assert_eq!(
        load(&[("AWS_PROFILE", "v2")], Some(home.path()))
            .await
            .unwrap_err(),
        CredentialsError::Process {
            profile: "v2".to_string(),
            message: format!(
                "`{}` printed Version 2; only Version 1 is defined",
                wrong_version.display()
            ),
        }
    );
}
