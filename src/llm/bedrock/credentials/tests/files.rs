//! Environment variables, the shared files and their profiles.

use pretty_assertions::assert_eq;

use super::*;

pub(super) const CREDENTIALS: &str = "\
# a comment
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = default-secret

[dev]
AWS_ACCESS_KEY_ID=AKIDDEV
aws_secret_access_key = dev-secret
aws_session_token = dev-token
";

const CONFIG: &str = "\
[default]
region = eu-west-1

[profile   dev]
region = us-west-2
s3 =
    max_concurrent_requests = 20

; keys may live in the config file too
[profile ops]
aws_access_key_id = AKIDOPS
aws_secret_access_key = ops-secret
region = ap-south-1

[profile lonely-role]
role_arn = arn:aws:iam::1:role/x

[profile loop-a]
role_arn = arn:aws:iam::1:role/a
source_profile = loop-b

[profile loop-b]
role_arn = arn:aws:iam::1:role/b
source_profile = loop-a

[profile half-sso]
sso_session = missing
";

#[tokio::test]
async fn environment_keys_come_first() {
    let home = home_with(Some(CREDENTIALS), Some(CONFIG));
    let settings = load(
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "env-secret"),
            ("AWS_SESSION_TOKEN", "env-token"),
            ("AWS_PROFILE", "dev"),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        settings,
        AwsSettings {
            profile: "dev".to_string(),
            bearer_token: None,
            credentials: Some((
                keys("AKIDENV", "env-secret", Some("env-token")),
                Source::Environment
            )),
            region: Some("us-west-2".to_string()),
        }
    );
    assert!(matches!(settings.auth(), Some(Auth::SigV4(c)) if c.access_key_id == "AKIDENV"));
}

#[tokio::test]
async fn the_bearer_token_wins_and_skips_credentials() {
    let home = home_with(
        None,
        Some("[profile sso]\nsso_session = x\nregion = us-east-2\n"),
    );
    let pairs = [
        ("AWS_BEARER_TOKEN_BEDROCK", "ABSK-key"),
        ("AWS_PROFILE", "sso"),
    ];
    let settings = load(&pairs, Some(home.path())).await.unwrap();
    assert_eq!(settings.credentials, None);
    assert_eq!(settings.region.as_deref(), Some("us-east-2"));
    assert!(matches!(settings.auth(), Some(Auth::Bearer(t)) if t.expose() == "ABSK-key"));
    assert_eq!(
        region(&env(&pairs), Some(home.path())),
        Ok(Some("us-east-2".to_string()))
    );
}

#[tokio::test]
async fn profiles_from_the_shared_files() {
    let home = home_with(Some(CREDENTIALS), Some(CONFIG));
    let path = |name: &str| home.path().join(".aws").join(name);
    let load_profile = async |profile: Option<&str>| {
        let pairs: Vec<(&str, &str)> = profile
            .map(|p| vec![("AWS_PROFILE", p)])
            .unwrap_or_default();
        load(&pairs, Some(home.path())).await
    };

    let default = load_profile(None).await.unwrap();
    assert_eq!(
        default.credentials,
        Some((
            keys("AKIDDEFAULT", "default-secret", None),
            Source::File {
                path: path("credentials"),
                profile: "default".to_string()
            }
        ))
    );
    assert_eq!(default.region.as_deref(), Some("eu-west-1"));

    let dev = load_profile(Some("dev")).await.unwrap();
    assert_eq!(
        dev.credentials.unwrap().0,
        keys("AKIDDEV", "dev-secret", Some("dev-token"))
    );
    assert_eq!(dev.region.as_deref(), Some("us-west-2"));

    let ops = load_profile(Some("ops")).await.unwrap();
    assert_eq!(
        ops.credentials,
        Some((
            keys("AKIDOPS", "ops-secret", None),
            Source::File {
                path: path("config"),
                profile: "ops".to_string()
            }
        ))
    );
    assert_eq!(ops.region.as_deref(), Some("ap-south-1"));

    assert_eq!(
        load_profile(Some("nope")).await,
        Err(CredentialsError::ProfileNotFound {
            profile: "nope".to_string(),
            credentials: path("credentials"),
            config: path("config"),
        })
    );
    let invalid = |profile: &str, problem: String| {
        Err(CredentialsError::InvalidProfile {
            profile: profile.to_string(),
            problem,
        })
    };
    assert_eq!(
        load_profile(Some("lonely-role")).await,
        invalid(
            "lonely-role",
            "it has role_arn but neither source_profile nor credential_source".to_string()
        )
    );
    assert_eq!(
        load_profile(Some("loop-a")).await,
        invalid(
            "loop-a",
            "source_profile links form a cycle: loop-a -> loop-b -> loop-a".to_string()
        )
    );
    assert_eq!(
        load_profile(Some("half-sso")).await,
        invalid(
            "half-sso",
            format!(
                "its sso_session `missing` has no [sso-session missing] section in {}",
                path("config").display()
            )
        )
    );
}

#[tokio::test]
async fn region_order() {
    let home = home_with(None, Some(CONFIG));
    let region_of = async |pairs: &[(&str, &str)]| {
        load(pairs, Some(home.path()))
            .await
            .unwrap()
            .region
            .unwrap_or_default()
    };
    assert_eq!(
        region_of(&[("AWS_REGION", "r1"), ("AWS_DEFAULT_REGION", "r2")]).await,
        "r1"
    );
    assert_eq!(
        region_of(&[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "r2")]).await,
        "r2"
    );
    assert_eq!(region_of(&[("AWS_PROFILE", "dev")]).await, "us-west-2");
    assert_eq!(region_of(&[]).await, "eu-west-1");
    assert_eq!(
        region(&env(&[("AWS_PROFILE", "ops")]), Some(home.path())),
        Ok(Some("ap-south-1".to_string()))
    );
}

#[tokio::test]
async fn file_locations_can_be_moved() {
    let home = home_with(None, None);
    std::fs::write(home.path().join("creds.ini"), CREDENTIALS).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let config = elsewhere.path().join("cfg");
    std::fs::write(&config, "[profile dev]\nregion = ca-central-1\n").unwrap();
    let settings = load(
        &[
            ("AWS_SHARED_CREDENTIALS_FILE", "~/creds.ini"),
            ("AWS_CONFIG_FILE", config.to_str().unwrap()),
            ("AWS_PROFILE", "dev"),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    assert_eq!(
        settings.credentials.unwrap().1,
        Source::File {
            path: home.path().join("creds.ini"),
            profile: "dev".to_string()
        }
    );
    assert_eq!(settings.region.as_deref(), Some("ca-central-1"));
}

#[tokio::test]
async fn nothing_found_is_not_an_error_but_half_a_pair_is() {
    let home = home_with(None, None);
    assert_eq!(
        load(&[], Some(home.path())).await.unwrap(),
        AwsSettings {
            profile: "default".to_string(),
            bearer_token: None,
            credentials: None,
            region: None,
        }
    );
    assert_eq!(load(&[], None).await.unwrap().auth(), None);
    assert_eq!(
        load(&[("AWS_ACCESS_KEY_ID", "AKID")], None).await,
        Err(CredentialsError::PartialEnvironment {
            set: "AWS_ACCESS_KEY_ID",
            missing: "AWS_SECRET_ACCESS_KEY"
        })
    );
    assert_eq!(
        load(&[("AWS_WEB_IDENTITY_TOKEN_FILE", "/token")], None).await,
        Err(CredentialsError::PartialEnvironment {
            set: "AWS_WEB_IDENTITY_TOKEN_FILE",
            missing: "AWS_ROLE_ARN"
        })
    );
    let half = home_with(Some("[default]\naws_access_key_id = AKID\n"), None);
    assert!(matches!(
        load(&[], Some(half.path())).await,
        Err(CredentialsError::IncompleteProfile { .. })
    ));
}

#[tokio::test]
async fn an_unreadable_file_is_an_error_naming_it() {
    let home = home_with(None, None);
    // A directory where the file should be cannot be read as text.
    std::fs::create_dir(home.path().join(".aws/credentials")).unwrap();
    let Err(CredentialsError::Unreadable { path, .. }) = load(&[], Some(home.path())).await else {
        panic!("a directory is not a credentials file");
    };
    assert_eq!(path, home.path().join(".aws/credentials"));
}

#[tokio::test]
async fn debug_output_has_no_secrets() {
    let home = home_with(Some(CREDENTIALS), None);
    let settings = load(
        &[
            ("AWS_PROFILE", "dev"),
            ("AWS_BEARER_TOKEN_BEDROCK", "bearer-secret"),
        ],
        Some(home.path()),
    )
    .await
    .unwrap();
    let with_keys = load(&[("AWS_PROFILE", "dev")], Some(home.path()))
        .await
        .unwrap();
    let printed = format!("{settings:?} {with_keys:?} {:#?}", with_keys.auth());
    for secret in ["bearer-secret", "dev-secret", "dev-token"] {
        assert!(!printed.contains(secret), "{secret} leaked: {printed}");
    }
    assert!(printed.contains("AKIDDEV"), "{printed}");
}
