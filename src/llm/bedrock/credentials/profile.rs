//! The AWS CLI's shared files (`~/.aws/credentials`, `~/.aws/config`) and
//! what a profile in them says about credentials.
//!
//! A profile is read as the SDKs read it. Its settings are those of both
//! files, the credentials file winning. Then, in order: `role_arn` (with a
//! `web_identity_token_file`, a `source_profile` or a `credential_source`),
//! IAM Identity Center (`sso_session` or the legacy `sso_start_url`),
//! `credential_process`, static keys. A `source_profile` is followed until
//! a profile with credentials of its own; a source profile with static keys
//! stops there even if it names a role too, as in the SDKs. The walk is
//! planned first (no I/O) and then run: the base credentials, then one
//! AssumeRole per role, innermost first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use super::{
    AwsCredentials, Chain, CredentialsError, Source, Vars, expand_home, metadata, process, sso, sts,
};
use crate::llm::Secret;

type Section = BTreeMap<String, String>;

/// Both shared files.
pub(super) struct Files {
    credentials: SharedFile,
    config: SharedFile,
}

impl Files {
    /// `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` move the files.
    pub(super) fn read(vars: &Vars, home: Option<&Path>) -> Result<Self, CredentialsError> {
        let file = |override_var: &str, name: &str| -> Option<PathBuf> {
            match vars.get(override_var) {
                Some(path) => Some(expand_home(path, home)),
                None => home.map(|home| home.join(".aws").join(name)),
            }
        };
        Ok(Self {
            credentials: SharedFile::read(file("AWS_SHARED_CREDENTIALS_FILE", "credentials"))?,
            config: SharedFile::read(file("AWS_CONFIG_FILE", "config"))?,
        })
    }

    /// In the config file a profile's section is `[profile name]`, except
    /// `[default]`; in the credentials file it is `[name]`.
    pub(super) fn profile<'a>(&'a self, name: &'a str) -> Option<Profile<'a>> {
        let credentials = self.credentials.section(name);
        let config = self.config.section(&format!("profile {name}")).or_else(|| {
            (name == "default")
                .then(|| self.config.section("default"))
                .flatten()
        });
        (credentials.is_some() || config.is_some()).then_some(Profile {
            name,
            files: self,
            credentials,
            config,
        })
    }

    /// `[sso-session name]`, only in the config file.
    pub(super) fn sso_session(&self, name: &str) -> Option<&Section> {
        self.config.section(&format!("sso-session {name}"))
    }

    pub(super) fn credentials_path(&self) -> PathBuf {
        self.credentials.path_or_default()
    }

    pub(super) fn config_path(&self) -> PathBuf {
        self.config.path_or_default()
    }
}

/// One profile's sections.
pub(super) struct Profile<'a> {
    pub(super) name: &'a str,
    files: &'a Files,
    credentials: Option<&'a Section>,
    config: Option<&'a Section>,
}

impl<'a> Profile<'a> {
    /// A setting from either file, the credentials file first.
    pub(super) fn get(&self, key: &str) -> Option<&'a str> {
        self.credentials
            .and_then(|s| s.get(key))
            .or_else(|| self.config.and_then(|s| s.get(key)))
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }

    /// A setting of the config file only (`region`).
    pub(super) fn config(&self, key: &str) -> Option<&'a str> {
        self.config
            .and_then(|s| s.get(key))
            .map(String::as_str)
            .filter(|value| !value.is_empty())
    }

    pub(super) fn invalid(&self, problem: impl Into<String>) -> CredentialsError {
        CredentialsError::InvalidProfile {
            profile: self.name.to_string(),
            problem: problem.into(),
        }
    }

    /// Static keys, those of the credentials file first, each section
    /// taken whole, with the file they came from.
    fn static_keys(&self) -> Result<Option<(AwsCredentials, PathBuf)>, CredentialsError> {
        let sections = [
            (self.credentials, &self.files.credentials),
            (self.config, &self.files.config),
        ];
        for (section, file) in sections {
            let Some(section) = section else { continue };
            let Some(access_key_id) = section.get("aws_access_key_id") else {
                continue;
            };
            let path = file.path_or_default();
            let Some(secret) = section.get("aws_secret_access_key") else {
                return Err(CredentialsError::IncompleteProfile {
                    profile: self.name.to_string(),
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
            return Ok(Some((credentials, path)));
        }
        Ok(None)
    }
}

/// Where the first credentials of a profile's walk come from.
enum Base {
    Static {
        credentials: AwsCredentials,
        path: PathBuf,
    },
    Process {
        command: String,
    },
    Sso(sso::Settings),
    WebIdentity(sts::WebIdentity),
    /// `credential_source`.
    Environment,
    InstanceMetadata,
    Container,
}

/// A role to assume with the credentials before it.
pub(super) struct RoleStep {
    pub(super) profile: String,
    pub(super) role_arn: String,
    pub(super) session_name: Option<String>,
    pub(super) external_id: Option<String>,
    pub(super) duration_seconds: Option<String>,
}

impl RoleStep {
    fn cache_key(&self) -> String {
        format!("assume-role\0{}\0{}", self.profile, self.role_arn)
    }
}

/// The walk from the requested profile to its base credentials.
struct Plan {
    /// The profile that holds the base credentials.
    base_profile: String,
    base: Base,
    /// The requested profile's role first; assumed in reverse.
    roles: Vec<RoleStep>,
}

/// The credentials of profile `name`, or `None` when it has no credential
/// settings (the chain goes on). `sts_region` is where roles are assumed.
pub(super) async fn resolve(
    chain: &Chain<'_>,
    files: &Files,
    name: &str,
    sts_region: &str,
) -> Result<Option<(AwsCredentials, Source)>, CredentialsError> {
    let Some(plan) = plan(files, name)? else {
        return Ok(None);
    };
    // Only the requested profile's role is used; while it is cached, its
    // sources need not be asked again.
    if let Some(outer) = plan.roles.first()
        && let Some(credentials) = chain.cache.get(&outer.cache_key(), Timestamp::now())
    {
        return Ok(Some((
            credentials,
            Source::AssumeRole {
                profile: outer.profile.clone(),
                role_arn: outer.role_arn.clone(),
            },
        )));
    }
    let (mut credentials, mut source) =
        base_credentials(chain, &plan.base_profile, plan.base, sts_region).await?;
    for step in plan.roles.iter().rev() {
        credentials = chain
            .cached(
                step.cache_key(),
                sts::assume_role(chain, &credentials, step, sts_region),
            )
            .await?;
        source = Source::AssumeRole {
            profile: step.profile.clone(),
            role_arn: step.role_arn.clone(),
        };
    }
    Ok(Some((credentials, source)))
}

async fn base_credentials(
    chain: &Chain<'_>,
    profile: &str,
    base: Base,
    sts_region: &str,
) -> Result<(AwsCredentials, Source), CredentialsError> {
    let named_source_missing = |source: &str, what: &str| CredentialsError::InvalidProfile {
        profile: profile.to_string(),
        problem: format!("credential_source = {source}, but {what}"),
    };
    Ok(match base {
        Base::Static { credentials, path } => (
            credentials,
            Source::File {
                path,
                profile: profile.to_string(),
            },
        ),
        Base::Process { command } => {
            let key = format!("process\0{profile}\0{command}");
            let credentials = chain.cached(key, process::run(profile, &command)).await?;
            let source = Source::Process {
                profile: profile.to_string(),
            };
            (credentials, source)
        }
        Base::Sso(settings) => {
            let credentials = sso::credentials(chain, profile, &settings).await?;
            let source = Source::Sso {
                profile: profile.to_string(),
            };
            (credentials, source)
        }
        Base::WebIdentity(web_identity) => {
            let source = Source::WebIdentity {
                role_arn: web_identity.role_arn.clone(),
            };
            (
                sts::web_identity_credentials(chain, &web_identity, sts_region).await?,
                source,
            )
        }
        Base::Environment => match chain.environment_keys()? {
            Some(credentials) => (credentials, Source::Environment),
            None => {
                return Err(named_source_missing(
                    "Environment",
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set",
                ));
            }
        },
        Base::InstanceMetadata => metadata::instance(chain).await?.ok_or_else(|| {
            named_source_missing(
                "Ec2InstanceMetadata",
                "the instance metadata service is disabled or has no role",
            )
        })?,
        Base::Container => metadata::container(chain).await?.ok_or_else(|| {
            named_source_missing(
                "EcsContainer",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and AWS_CONTAINER_CREDENTIALS_FULL_URI \
                 are not set",
            )
        })?,
    })
}

/// Whether profile `name` leads to credentials of some kind (keys, SSO,
/// `credential_process`, a role with its source), without fetching them.
pub(super) fn has_plan(files: &Files, name: &str) -> bool {
    matches!(plan(files, name), Ok(Some(_)))
}

/// Walks `source_profile` links from `name` to a profile with credentials
/// of its own. No I/O.
fn plan(files: &Files, name: &str) -> Result<Option<Plan>, CredentialsError> {
    let mut roles: Vec<RoleStep> = Vec::new();
    let mut visited: Vec<&str> = Vec::new();
    let mut current = name;
    loop {
        let Some(profile) = files.profile(current) else {
            return match visited.last() {
                None => Ok(None),
                Some(previous) => Err(CredentialsError::InvalidProfile {
                    profile: (*previous).to_string(),
                    problem: format!(
                        "its source_profile `{current}` is in neither {} nor {}",
                        files.credentials_path().display(),
                        files.config_path().display()
                    ),
                }),
            };
        };
        if visited.contains(&current) {
            return Err(profile.invalid(format!(
                "source_profile links form a cycle: {} -> {current}",
                visited.join(" -> ")
            )));
        }
        visited.push(current);
        // A source profile's own keys end the walk, even beside a role.
        if visited.len() > 1
            && let Some((credentials, path)) = profile.static_keys()?
        {
            return done(current, roles, Base::Static { credentials, path });
        }
        if let Some(role_arn) = profile.get("role_arn") {
            if let Some(token_file) = profile.get("web_identity_token_file") {
                return done(
                    current,
                    roles,
                    Base::WebIdentity(sts::WebIdentity {
                        token_file: PathBuf::from(token_file),
                        role_arn: role_arn.to_string(),
                        session_name: profile.get("role_session_name").map(str::to_string),
                    }),
                );
            }
            roles.push(RoleStep {
                profile: current.to_string(),
                role_arn: role_arn.to_string(),
                session_name: profile.get("role_session_name").map(str::to_string),
                external_id: profile.get("external_id").map(str::to_string),
                duration_seconds: profile.get("duration_seconds").map(str::to_string),
            });
            if profile.get("mfa_serial").is_some() {
                return Err(profile.invalid(
                    "roles that need an MFA code (mfa_serial) are not supported; run \
                     `aws configure export-credentials --profile <name> --format env` and \
                     export the result",
                ));
            }
            match (
                profile.get("source_profile"),
                profile.get("credential_source"),
            ) {
                (Some(_), Some(_)) => {
                    return Err(
                        profile.invalid("it sets both source_profile and credential_source")
                    );
                }
                (Some(source), None) if source == current => {
                    // A role assumed with the profile's own keys.
                    let Some((credentials, path)) = profile.static_keys()? else {
                        return Err(profile
                            .invalid("it is its own source_profile but has no aws_access_key_id"));
                    };
                    return done(current, roles, Base::Static { credentials, path });
                }
                (Some(source), None) => {
                    current = source;
                    continue;
                }
                (None, Some(source)) => {
                    let base = match source {
                        "Environment" => Base::Environment,
                        "Ec2InstanceMetadata" => Base::InstanceMetadata,
                        "EcsContainer" => Base::Container,
                        other => {
                            return Err(profile.invalid(format!(
                                "credential_source `{other}` is not one of Environment, \
                                 Ec2InstanceMetadata, EcsContainer"
                            )));
                        }
                    };
                    return done(current, roles, base);
                }
                (None, None) => {
                    return Err(profile.invalid(
                        "it has role_arn but neither source_profile nor credential_source",
                    ));
                }
            }
        }
        if let Some(settings) = sso::Settings::of(files, &profile)? {
            return done(current, roles, Base::Sso(settings));
        }
        if let Some(command) = profile.get("credential_process") {
            return done(
                current,
                roles,
                Base::Process {
                    command: command.to_string(),
                },
            );
        }
        if let Some((credentials, path)) = profile.static_keys()? {
            return done(current, roles, Base::Static { credentials, path });
        }
        if visited.len() == 1 {
            return Ok(None);
        }
        return Err(profile.invalid(format!(
            "it is the source_profile of `{}` but has no credentials",
            visited[visited.len() - 2]
        )));
    }
}

fn done(profile: &str, roles: Vec<RoleStep>, base: Base) -> Result<Option<Plan>, CredentialsError> {
    Ok(Some(Plan {
        base_profile: profile.to_string(),
        base,
        roles,
    }))
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

/// The INI dialect of the AWS shared files: `[section]` headers (inner
/// whitespace collapsed, so `[profile  dev]` is `profile dev`), `key =
/// value` lines with lower-cased keys, `#` and `;` comment lines. Indented
/// lines continue the previous key (nested settings such as `s3 =` blocks);
/// they carry nothing pincer reads and are skipped. Later duplicates win.
pub(super) fn parse_ini(text: &str) -> BTreeMap<String, Section> {
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
