//! SSO: the cached token and the portal.

use pretty_assertions::assert_eq;

use super::*;

const SSO_CONFIG: &str = "\
[profile sso]
sso_session = corp
sso_account_id = 111122223333
sso_role_name = Developer
region = eu-central-1

[sso-session corp]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1

[profile legacy]
sso_start_url = https://corp.awsapps.com/start
sso_region = eu-west-1
sso_account_id = 444455556666
sso_role_name = ReadOnly
";

/// `sha1("corp")` and `sha1("https://corp.awsapps.com/start")`, as the
/// AWS CLI names its cache files.
const SESSION_CACHE_FILE: &str = "ee0bfd2552fbd840c02cc48b6e823320543c450f.json";
const LEGACY_CACHE_FILE: &str = "a51746d4aa793ae07b25e90c3a5db96fc7832bd7.json";

fn cache_sso_token(home: &Path, file: &str, token: &str, expires_at: &str) {
    let dir = home.join(".aws/sso/cache");
    std::fs::create_dir_all(&dir).unwrap();
    let json = serde_json::json!({
        "startUrl": "https://corp.awsapps.com/start",
        "region": "eu-west-1",
        "accessToken": token,
        "expiresAt": expires_at,
    });
    std::fs::write(dir.join(file), json.to_string()).unwrap();
}

fn portal_answer(id: &str) -> String {
    serde_json::json!({"roleCredentials": {
        "accessKeyId": id,
        "secretAccessKey": "sso-secret",
        "sessionToken": "sso-token",
        "expiration": in_an_hour().as_millisecond(),
    }})
    .to_string()
}

#[tokio::test]
async fn sso_tokens_are_exchanged_at_the_portal() {
    let home = home_with(None, Some(SSO_CONFIG));
    let expires_at = in_an_hour().to_string();
    cache_sso_token(
        home.path(),
        SESSION_CACHE_FILE,
        "session-token",
        &expires_at,
    );
    // The AWS CLI v1 wrote `UTC` rather than `Z`.
    let legacy_expiry = in_an_hour().strftime("%Y-%m-%dT%H:%M:%SUTC").to_string();
    cache_sso_token(
        home.path(),
        LEGACY_CACHE_FILE,
        "legacy-token",
        &legacy_expiry,
    );
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/federation/credentials",
        200,
        portal_answer("ASIASSO"),
    );
    let endpoints = Endpoints {
        sso_portal: Some(mock.url.clone()),
        ..Endpoints::default()
    };

    for profile in ["sso", "legacy"] {
        let settings = load_with(
            &[("AWS_PROFILE", profile)],
            Some(home.path()),
            &endpoints,
            &Cache::new(),
        )
        .await
        .unwrap();
        assert_eq!(
            settings.credentials,
            Some((
                keys("ASIASSO", "sso-secret", Some("sso-token")),
                Source::Sso {
                    profile: profile.to_string()
                }
            ))
        );
    }
    let seen = mock.seen();
    let calls: Vec<(&str, Option<&str>)> = seen
        .iter()
        .map(|s| (s.query.as_str(), s.header("x-amz-sso_bearer_token")))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "role_name=Developer&account_id=111122223333",
                Some("session-token")
            ),
            (
                "role_name=ReadOnly&account_id=444455556666",
                Some("legacy-token")
            ),
        ]
    );
}

#[tokio::test]
async fn an_expired_or_missing_sso_login_asks_for_aws_sso_login() {
    let home = home_with(None, Some(SSO_CONFIG));
    cache_sso_token(
        home.path(),
        SESSION_CACHE_FILE,
        "old-token",
        "2020-01-01T00:00:00Z",
    );
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/federation/credentials",
        200,
        portal_answer("ASIASSO"),
    );
    let endpoints = Endpoints {
        sso_portal: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    let load_profile = async |profile| {
        load_with(
            &[("AWS_PROFILE", profile)],
            Some(home.path()),
            &endpoints,
            &Cache::new(),
        )
        .await
        .unwrap_err()
    };

    let expired = load_profile("sso").await;
    assert_eq!(
        expired,
        CredentialsError::SsoLogin {
            profile: "sso".to_string(),
            problem: "expired at 2020-01-01T00:00:00Z".to_string(),
        }
    );
    assert_eq!(
        expired.to_string(),
        "the IAM Identity Center (SSO) login of AWS profile `sso` expired at \
         2020-01-01T00:00:00Z; run `aws sso login --profile sso`"
    );
    assert_eq!(
        load_profile("legacy").await,
        CredentialsError::SsoLogin {
            profile: "legacy".to_string(),
            problem: format!(
                "has no cached token ({})",
                home.path()
                    .join(".aws/sso/cache")
                    .join(LEGACY_CACHE_FILE)
                    .display()
            ),
        }
    );
    assert_eq!(mock.requests(), Vec::<String>::new());

    // A token the portal no longer accepts needs a new login too.
    cache_sso_token(
        home.path(),
        SESSION_CACHE_FILE,
        "revoked",
        &in_an_hour().to_string(),
    );
    let mock = Mock::start().await;
    mock.on(
        "GET",
        "/federation/credentials",
        401,
        r#"{"message":"Session token not found or invalid"}"#,
    );
    let endpoints = Endpoints {
        sso_portal: Some(mock.url.clone()),
        ..Endpoints::default()
    };
    assert_eq!(
        load_with(
            &[("AWS_PROFILE", "sso")],
            Some(home.path()),
            &endpoints,
            &Cache::new()
        )
        .await,
        Err(CredentialsError::SsoLogin {
            profile: "sso".to_string(),
            problem: "was rejected by the SSO portal".to_string(),
        })
    );
}
