//! What a profile of the AWS CLI's shared files (`files`) says about
//! credentials, and the walk that gets them.
//!
//! A profile is read as the SDKs read it, in order: `role_arn` (with a
//! `web_identity_token_file`, a `source_profile` or a `credential_source`),
//! IAM Identity Center (`sso_session` or the legacy `sso_start_url`),
//! `credential_process`, static keys. A `source_profile` is followed until
//! a profile with credentials of its own; a source profile with static keys
//! stops there even if it names a role too, as in the SDKs. The walk is
//! planned first (no I/O) and then run: the base credentials, then one
//! AssumeRole per role, innermost first.

use std::path::PathBuf;

use jiff::Timestamp;

use super::files::Files;
use super::sts::RoleStep;
use super::{AwsCredentials, Chain, CredentialsError, Source, metadata, process, sso, sts};

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
