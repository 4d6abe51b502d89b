//! The AWS CLI's shared files (`~/.aws/credentials`, `~/.aws/config`),
//! parsed, and a profile's settings in them: what the profile walk
//! (`profile`) and IAM Identity Center (`sso`) read. A profile's settings
//! are those of both files, the credentials file winning.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{AwsCredentials, CredentialsError, Vars, expand_home};
use crate::llm::Secret;

pub(super) type Section = BTreeMap<String, String>;

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
    pub(super) fn static_keys(
        &self,
    ) -> Result<Option<(AwsCredentials, PathBuf)>, CredentialsError> {
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
