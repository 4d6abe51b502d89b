//! Where Bedrock credentials and the region come from: the environment and
//! the AWS CLI's shared files, read the way the AWS SDKs read them.
//!
//! In order:
//! 1. `AWS_BEARER_TOKEN_BEDROCK`, a Bedrock API key. When it is set AWS
//!    credentials are not looked at, as in the AWS SDKs.
//! 2. `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and the optional
//!    `AWS_SESSION_TOKEN`.
//! 3. Static keys (`aws_access_key_id`, `aws_secret_access_key`,
//!    `aws_session_token`) of the profile `AWS_PROFILE` (or the older
//!    `AWS_DEFAULT_PROFILE`, else `default`) in `~/.aws/credentials`, then in
//!    `~/.aws/config`. `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE`
//!    move the files. In the config file a profile's section is
//!    `[profile name]`, except `[default]`.
//!
//! The region is `AWS_REGION`, then `AWS_DEFAULT_REGION`, then the profile's
//! `region` in the config file.
//!
//! Not covered, and not faked: IAM Identity Center (SSO) logins, role
//! assumption (`role_arn`/`source_profile`), web identity tokens
//! (`AWS_WEB_IDENTITY_TOKEN_FILE`), `credential_process`, and the ECS/EKS
//! container and EC2 instance metadata (IMDS) endpoints. A profile that
//! relies on one of them is an error that says so and how to export static
//! keys instead (`aws configure export-credentials`), rather than a silent
//! fall-through to some other identity. Credentials are read once; expiring
//! session credentials are not refreshed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Auth;
use crate::llm::Secret;

/// Static AWS credentials, for SigV4. `Debug` shows the key id (which AWS
/// treats as an identifier, not a secret) and redacts the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsCredentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub session_token: Option<Secret>,
}

/// Where a set of credentials was found, for messages ("using profile `dev`
/// of ~/.aws/credentials").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    Environment,
    File { path: PathBuf, profile: String },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Environment => f.write_str("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
            Source::File { path, profile } => {
                write!(f, "profile `{profile}` of {}", path.display())
            }
        }
    }
}

/// Everything found about Bedrock access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsSettings {
    /// The profile the files were read for.
    pub profile: String,
    /// `AWS_BEARER_TOKEN_BEDROCK`.
    pub bearer_token: Option<Secret>,
    pub credentials: Option<(AwsCredentials, Source)>,
    pub region: Option<String>,
}

impl AwsSettings {
    /// How to authenticate: the Bedrock API key if there is one, else SigV4.
    pub fn auth(&self) -> Option<Auth<'_>> {
        match (&self.bearer_token, &self.credentials) {
            (Some(token), _) => Some(Auth::Bearer(token)),
            (None, Some((credentials, _))) => Some(Auth::SigV4(credentials)),
            (None, None) => None,
        }
    }
}

/// Why the environment or the shared files do not add up to credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("{set} is set but {missing} is not; set both (or neither, to use ~/.aws/credentials)")]
    PartialEnvironment {
        set: &'static str,
        missing: &'static str,
    },
    #[error("could not read {path}: {message}")]
    Unreadable { path: PathBuf, message: String },
    #[error(
        "AWS profile `{profile}` (AWS_PROFILE) is in neither {credentials} nor {config}; \
         check the name or unset AWS_PROFILE"
    )]
    ProfileNotFound {
        profile: String,
        credentials: PathBuf,
        config: PathBuf,
    },
    #[error("AWS profile `{profile}` in {path} has aws_access_key_id but no aws_secret_access_key")]
    IncompleteProfile { profile: String, path: PathBuf },
    #[error(
        "AWS profile `{profile}` gets its credentials through {mechanism}, which pincer does not \
         support; export static keys with `aws configure export-credentials --profile {profile} \
         --format env`, or set AWS_BEARER_TOKEN_BEDROCK to a Bedrock API key"
    )]
    Unsupported {
        profile: String,
        mechanism: &'static str,
    },
}

/// Reads the environment (through `env`, so tests can supply their own)
/// and the shared files under `home`. Files that do not exist are simply
/// absent; files that exist but cannot be read are errors.
pub fn load(
    env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<AwsSettings, CredentialsError> {
    // Unset and empty are the same thing, as in the SDKs.
    let var = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let explicit_profile = var("AWS_PROFILE").or_else(|| var("AWS_DEFAULT_PROFILE"));
    let profile = explicit_profile
        .clone()
        .unwrap_or_else(|| "default".to_string());
    let file = |override_var: &str, name: &str| -> Option<PathBuf> {
        match var(override_var) {
            Some(path) => Some(expand_home(&path, home)),
            None => home.map(|home| home.join(".aws").join(name)),
        }
    };
    let credentials_file = SharedFile::read(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"))?;
    let config_file = SharedFile::read(file("AWS_CONFIG_FILE", "config"))?;
    let credentials_section = credentials_file.section(&profile);
    let config_section = config_file
        .section(&format!("profile {profile}"))
        .or_else(|| {
            (profile == "default")
                .then(|| config_file.section("default"))
                .flatten()
        });

    let region = var("AWS_REGION")
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .or_else(|| config_section.and_then(|s| s.get("region").cloned()));
    let bearer_token = var("AWS_BEARER_TOKEN_BEDROCK").map(Secret::new);
    if bearer_token.is_some() {
        return Ok(AwsSettings {
            profile,
            bearer_token,
            credentials: None,
            region,
        });
    }

    let credentials = match from_environment(&var)? {
        Some(credentials) => Some((credentials, Source::Environment)),
        None => {
            if explicit_profile.is_some()
                && credentials_section.is_none()
                && config_section.is_none()
            {
                return Err(CredentialsError::ProfileNotFound {
                    profile,
                    credentials: credentials_file.path_or_default(),
                    config: config_file.path_or_default(),
                });
            }
            from_profile(
                &profile,
                credentials_section.map(|s| (s, &credentials_file)),
                config_section.map(|s| (s, &config_file)),
            )?
        }
    };
    Ok(AwsSettings {
        profile,
        bearer_token: None,
        credentials,
        region,
    })
}

fn from_environment(
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<AwsCredentials>, CredentialsError> {
    match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        (Some(access_key_id), Some(secret)) => Ok(Some(AwsCredentials {
            access_key_id,
            secret_access_key: Secret::new(secret),
            session_token: var("AWS_SESSION_TOKEN").map(Secret::new),
        })),
        (Some(_), None) => Err(CredentialsError::PartialEnvironment {
            set: "AWS_ACCESS_KEY_ID",
            missing: "AWS_SECRET_ACCESS_KEY",
        }),
        (None, Some(_)) => Err(CredentialsError::PartialEnvironment {
            set: "AWS_SECRET_ACCESS_KEY",
            missing: "AWS_ACCESS_KEY_ID",
        }),
        (None, None) => Ok(None),
    }
}

type Section = BTreeMap<String, String>;

/// Static keys of the profile, credentials file first. Mechanisms the AWS
/// CLI would prefer over those keys (role assumption, web identity, SSO)
/// are errors, so that pincer never acts as a different identity than
/// `aws` would.
fn from_profile(
    profile: &str,
    credentials: Option<(&Section, &SharedFile)>,
    config: Option<(&Section, &SharedFile)>,
) -> Result<Option<(AwsCredentials, Source)>, CredentialsError> {
    let unsupported = |mechanism| CredentialsError::Unsupported {
        profile: profile.to_string(),
        mechanism,
    };
    for (section, _) in credentials.iter().chain(config.iter()) {
        if section.contains_key("role_arn") {
            return Err(unsupported("role assumption (role_arn)"));
        }
        if section.contains_key("web_identity_token_file") {
            return Err(unsupported("a web identity token"));
        }
        if section.keys().any(|key| key.starts_with("sso_")) {
            return Err(unsupported("IAM Identity Center (SSO)"));
        }
    }
    for (section, file) in credentials.iter().chain(config.iter()) {
        let Some(access_key_id) = section.get("aws_access_key_id") else {
            continue;
        };
        let path = file.path_or_default();
        let Some(secret) = section.get("aws_secret_access_key") else {
            return Err(CredentialsError::IncompleteProfile {
                profile: profile.to_string(),
                path,
            });
        };
        let credentials = AwsCredentials {
            access_key_id: access_key_id.clone(),
            secret_access_key: Secret::new(secret.clone()),
            session_token: section
                .get("aws_session_token")
                .filter(|t| !t.is_empty())
                .map(|t| Secret::new(t.clone())),
        };
        let source = Source::File {
            path,
            profile: profile.to_string(),
        };
        return Ok(Some((credentials, source)));
    }
    if credentials
        .iter()
        .chain(config.iter())
        .any(|(section, _)| section.contains_key("credential_process"))
    {
        return Err(unsupported("credential_process"));
    }
    Ok(None)
}

/// One of the shared files, parsed; empty when it does not exist.
struct SharedFile {
    path: Option<PathBuf>,
    sections: BTreeMap<String, Section>,
}

impl SharedFile {
    fn read(path: Option<PathBuf>) -> Result<Self, CredentialsError> {
        let sections = match &path {
            None => BTreeMap::new(),
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => parse_ini(&text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
                Err(error) => {
                    return Err(CredentialsError::Unreadable {
                        path: path.clone(),
                        message: error.to_string(),
                    });
                }
            },
        };
        Ok(Self { path, sections })
    }

    fn section(&self, name: &str) -> Option<&Section> {
        self.sections.get(name)
    }

    fn path_or_default(&self) -> PathBuf {
        self.path.clone().unwrap_or_default()
    }
}

fn expand_home(path: &str, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    }
}

/// The INI dialect of the AWS shared files: `[section]` headers (inner
/// whitespace collapsed, so `[profile  dev]` is `profile dev`), `key =
/// value` lines with lower-cased keys, `#` and `;` comment lines. Indented
/// lines continue the previous key (nested settings such as `s3 =` blocks);
/// they carry nothing pincer reads and are skipped. Later duplicates win.
fn parse_ini(text: &str) -> BTreeMap<String, Section> {
    let mut sections: BTreeMap<String, Section> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(name) = trimmed
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
            sections.entry(name.clone()).or_default();
            current = Some(name);
            continue;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let (Some(section), Some((key, value))) = (&current, trimmed.split_once('=')) else {
            continue;
        };
        sections
            .entry(section.clone())
            .or_default()
            .insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn home_with(credentials: Option<&str>, config: Option<&str>) -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".aws")).unwrap();
        if let Some(text) = credentials {
            std::fs::write(home.path().join(".aws/credentials"), text).unwrap();
        }
        if let Some(text) = config {
            std::fs::write(home.path().join(".aws/config"), text).unwrap();
        }
        home
    }

    fn keys(id: &str, secret: &str, token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: id.to_string(),
            secret_access_key: Secret::new(secret),
            session_token: token.map(Secret::new),
        }
    }

    const CREDENTIALS: &str = "\
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

[profile sso]
sso_session = corp
sso_account_id = 1

[profile assume]
role_arn = arn:aws:iam::1:role/x
source_profile = default

[profile process]
credential_process = /bin/creds
";

    #[test]
    fn environment_keys_come_first() {
        let home = home_with(Some(CREDENTIALS), Some(CONFIG));
        let settings = load(
            &env(&[
                ("AWS_ACCESS_KEY_ID", "AKIDENV"),
                ("AWS_SECRET_ACCESS_KEY", "env-secret"),
                ("AWS_SESSION_TOKEN", "env-token"),
                ("AWS_PROFILE", "dev"),
            ]),
            Some(home.path()),
        )
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

    #[test]
    fn the_bearer_token_wins_and_skips_credentials() {
        let home = home_with(
            None,
            Some("[profile sso]\nsso_session = x\nregion = us-east-2\n"),
        );
        let settings = load(
            &env(&[
                ("AWS_BEARER_TOKEN_BEDROCK", "ABSK-key"),
                ("AWS_PROFILE", "sso"),
            ]),
            Some(home.path()),
        )
        .unwrap();
        assert_eq!(settings.credentials, None);
        assert_eq!(settings.region.as_deref(), Some("us-east-2"));
        assert!(matches!(settings.auth(), Some(Auth::Bearer(t)) if t.expose() == "ABSK-key"));
    }

    #[test]
    fn profiles_from_the_shared_files() {
        let home = home_with(Some(CREDENTIALS), Some(CONFIG));
        let path = |name: &str| home.path().join(".aws").join(name);
        let load_profile = |profile: Option<&str>| {
            let pairs: Vec<(&str, &str)> = profile
                .map(|p| vec![("AWS_PROFILE", p)])
                .unwrap_or_default();
            load(&env(&pairs), Some(home.path()))
        };

        let default = load_profile(None).unwrap();
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

        let dev = load_profile(Some("dev")).unwrap();
        assert_eq!(
            dev.credentials.unwrap().0,
            keys("AKIDDEV", "dev-secret", Some("dev-token"))
        );
        assert_eq!(dev.region.as_deref(), Some("us-west-2"));

        let ops = load_profile(Some("ops")).unwrap();
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
            load_profile(Some("nope")),
            Err(CredentialsError::ProfileNotFound {
                profile: "nope".to_string(),
                credentials: path("credentials"),
                config: path("config"),
            })
        );
        for (profile, mechanism) in [
            ("sso", "IAM Identity Center (SSO)"),
            ("assume", "role assumption (role_arn)"),
            ("process", "credential_process"),
        ] {
            assert_eq!(
                load_profile(Some(profile)),
                Err(CredentialsError::Unsupported {
                    profile: profile.to_string(),
                    mechanism
                }),
                "{profile}"
            );
        }
    }

    #[test]
    fn region_order() {
        let home = home_with(None, Some(CONFIG));
        let region = |pairs: &[(&str, &str)]| {
            load(&env(pairs), Some(home.path()))
                .unwrap()
                .region
                .unwrap_or_default()
        };
        assert_eq!(
            region(&[("AWS_REGION", "r1"), ("AWS_DEFAULT_REGION", "r2")]),
            "r1"
        );
        assert_eq!(
            region(&[("AWS_REGION", ""), ("AWS_DEFAULT_REGION", "r2")]),
            "r2"
        );
        assert_eq!(region(&[("AWS_PROFILE", "dev")]), "us-west-2");
        assert_eq!(region(&[]), "eu-west-1");
    }

    #[test]
    fn file_locations_can_be_moved() {
        let home = home_with(None, None);
        std::fs::write(home.path().join("creds.ini"), CREDENTIALS).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let config = elsewhere.path().join("cfg");
        std::fs::write(&config, "[profile dev]\nregion = ca-central-1\n").unwrap();
        let settings = load(
            &env(&[
                ("AWS_SHARED_CREDENTIALS_FILE", "~/creds.ini"),
                ("AWS_CONFIG_FILE", config.to_str().unwrap()),
                ("AWS_PROFILE", "dev"),
            ]),
            Some(home.path()),
        )
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

    #[test]
    fn nothing_found_is_not_an_error_but_half_a_pair_is() {
        let home = home_with(None, None);
        assert_eq!(
            load(&env(&[]), Some(home.path())).unwrap(),
            AwsSettings {
                profile: "default".to_string(),
                bearer_token: None,
                credentials: None,
                region: None,
            }
        );
        assert_eq!(load(&env(&[]), None).unwrap().auth(), None);
        assert_eq!(
            load(&env(&[("AWS_ACCESS_KEY_ID", "AKID")]), None),
            Err(CredentialsError::PartialEnvironment {
                set: "AWS_ACCESS_KEY_ID",
                missing: "AWS_SECRET_ACCESS_KEY"
            })
        );
        let half = home_with(Some("[default]\naws_access_key_id = AKID\n"), None);
        assert!(matches!(
            load(&env(&[]), Some(half.path())),
            Err(CredentialsError::IncompleteProfile { .. })
        ));
    }

    #[test]
    fn an_unreadable_file_is_an_error_naming_it() {
        let home = home_with(None, None);
        // A directory where the file should be cannot be read as text.
        std::fs::create_dir(home.path().join(".aws/credentials")).unwrap();
        let Err(CredentialsError::Unreadable { path, .. }) = load(&env(&[]), Some(home.path()))
        else {
            panic!("a directory is not a credentials file");
        };
        assert_eq!(path, home.path().join(".aws/credentials"));
    }

    #[test]
    fn debug_output_has_no_secrets() {
        let home = home_with(Some(CREDENTIALS), None);
        let settings = load(
            &env(&[
                ("AWS_PROFILE", "dev"),
                ("AWS_BEARER_TOKEN_BEDROCK", "bearer-secret"),
            ]),
            Some(home.path()),
        )
        .unwrap();
        let with_keys = load(&env(&[("AWS_PROFILE", "dev")]), Some(home.path())).unwrap();
        let printed = format!("{settings:?} {with_keys:?} {:#?}", with_keys.auth());
        for secret in ["bearer-secret", "dev-secret", "dev-token"] {
            assert!(!printed.contains(secret), "{secret} leaked: {printed}");
        }
        assert!(printed.contains("AKIDDEV"), "{printed}");
    }
}
