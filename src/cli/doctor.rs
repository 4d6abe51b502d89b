//! `pincer doctor`: one command that says whether pincer can work here and,
//! when it cannot, what to fix. It reports which config files were read,
//! which credentials resolve for each provider (ids and files, never a
//! secret), whether the default model's endpoint answers, how far this
//! directory's project is trusted, which MCP servers would start (it starts
//! none, and never a project's that is not trusted), and the versions.
//! Plain text for people, `--json` for scripts; the exit code is non-zero
//! when something needed is broken.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::auth::CredentialSource;
use crate::config::{Settings, Trust, project::Why};
use crate::llm::Model;

/// How long the endpoint has to answer: enough for a far-away provider,
/// short enough that a dead address does not look like a hang.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything `pincer doctor` found; `--json` prints it as it is.
#[derive(Debug, Serialize)]
pub struct Report {
    pub ok: bool,
    pub versions: Versions,
    pub config_files: Vec<ConfigFile>,
    pub trust: Option<TrustReport>,
    pub model: Option<ModelReport>,
    pub credentials: Vec<ProviderCredentials>,
    pub mcp_servers: Vec<McpServer>,
    /// The project's checkpoint store.
    pub checkpoints: Option<CheckpointsReport>,
    /// What is broken, each with what to do about it.
    pub problems: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct CheckpointsReport {
    pub dir: PathBuf,
    /// Bytes the store holds (0 before the project's first checkpoint).
    pub size: u64,
    pub max_size: u64,
    pub max_file: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Versions {
    pub pincer: &'static str,
    pub os: &'static str,
    pub arch: &'static str,
}

#[derive(Debug, Serialize)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// `user`, `project` or `auth-profiles`.
    pub kind: &'static str,
    pub exists: bool,
    /// For a project file: `trusted`, `trusted-once`, `untrusted`, `rejected`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct TrustReport {
    pub root: PathBuf,
    pub state: &'static str,
    /// Project keys that did not apply, and why.
    pub ignored: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct ModelReport {
    pub id: String,
    /// The credential calls would use (`env:ANTHROPIC_API_KEY`,
    /// `anthropic:default`, `claude-code`); `None` when there is none or
    /// the provider needs none.
    pub credential: Option<String>,
    pub has_credentials: bool,
    pub endpoint: Endpoint,
}

#[derive(Debug, Serialize)]
pub struct Endpoint {
    /// The provider's base URL, without query or user info.
    pub url: String,
    pub answers: bool,
    /// The HTTP status it answered with (any status means it is there).
    pub status: Option<u16>,
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct ProviderCredentials {
    pub provider: String,
    pub sources: Vec<CredentialRow>,
}

#[derive(Debug, Serialize)]
pub struct CredentialRow {
    pub id: String,
    /// The other tool's file it comes from; pincer only reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_file: Option<PathBuf>,
    /// Why it is passed by for now (a cooldown), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct McpServer {
    pub name: String,
    /// `config` (yours) or `project`.
    pub origin: &'static str,
    /// The command's program or the server's address (never its
    /// arguments, environment or headers, which may hold tokens).
    pub target: Option<String>,
    pub would_start: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
}

/// Runs the checks and prints them; `Ok(false)` when something needed is
/// broken.
pub async fn doctor(
    cwd: Option<PathBuf>,
    model: Option<String>,
    json: bool,
) -> anyhow::Result<bool> {
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let report = check(&cwd, model.as_deref()).await;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(report.ok)
}

/// Gathers the report for `cwd`.
pub async fn check(cwd: &Path, model: Option<&str>) -> Report {
    let versions = Versions {
        pincer: env!("CARGO_PKG_VERSION"),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
    };
    let mut report = Report {
        ok: false,
        versions,
        config_files: Vec::new(),
        trust: None,
        model: None,
        credentials: Vec::new(),
        mcp_servers: Vec::new(),
        checkpoints: None,
        problems: Vec::new(),
    };
    let settings = match Settings::load_from_process(cwd) {
        Ok(settings) => settings,
        Err(e) => {
            report
                .problems
                .push(format!("{e}; fix the file, then run `pincer doctor` again"));
            return report;
        }
    };
    report.config_files = config_files(&settings);
    report.trust = Some(trust(&settings));
    report.credentials = credentials(&settings);
    report.mcp_servers = mcp_servers(&settings, cwd);
    report.checkpoints = Some(checkpoints(&settings));
    match settings.default_model(model) {
        Ok(model) => {
            let model_report = model_report(&settings, &model).await;
            if !model_report.has_credentials {
                report.problems.push(settings.credential_hint(&model));
            }
            if !model_report.endpoint.answers {
                report.problems.push(format!(
                    "{}'s endpoint {} does not answer ({}); check [providers.{}] base_url (or its \
                     *_BASE_URL variable) and your network",
                    model.provider,
                    model_report.endpoint.url,
                    model_report
                        .endpoint
                        .error
                        .as_deref()
                        .unwrap_or("no answer"),
                    model.provider,
                ));
            }
            report.model = Some(model_report);
        }
        Err(e) => report.problems.push(format!(
            "no usable model: {e}; set `model = \"provider/model\"` in config.toml or pass --model"
        )),
    }
    report.ok = report.problems.is_empty();
    report
}

fn checkpoints(settings: &Settings) -> CheckpointsReport {
    let dir = crate::checkpoint::store_dir(&settings.paths.data_dir, &settings.project.root);
    let limits = settings.config.checkpoints.limits();
    let (size, error) = match crate::checkpoint::store::Store::size_at(&dir) {
        Ok(size) => (size, None),
        Err(e) => (0, Some(e.to_string())),
    };
    CheckpointsReport {
        dir,
        size,
        max_size: limits.max_size,
        max_file: limits.max_file,
        error,
    }
}

fn config_files(settings: &Settings) -> Vec<ConfigFile> {
    let user = settings.paths.user_config_file();
    let profiles =
        crate::auth::profiles_path(&settings.paths.config_dir, crate::auth::DEFAULT_AGENT);
    let mut files = vec![ConfigFile {
        exists: user.is_file(),
        path: user,
        kind: "user",
        trust: None,
    }];
    if let Some(path) = &settings.project.config_file {
        files.push(ConfigFile {
            path: path.clone(),
            kind: "project",
            exists: true,
            trust: Some(trust_name(settings.project.trust)),
        });
    }
    files.push(ConfigFile {
        exists: profiles.is_file(),
        path: profiles,
        kind: "auth-profiles",
        trust: None,
    });
    files
}

fn trust_name(trust: Trust) -> &'static str {
    match trust {
        Trust::Trusted => "trusted",
        Trust::TrustedOnce => "trusted-once",
        Trust::Untrusted => "untrusted",
        Trust::Rejected => "rejected",
    }
}

fn trust(settings: &Settings) -> TrustReport {
    TrustReport {
        root: settings.project.root.clone(),
        state: trust_name(settings.project.trust),
        ignored: settings
            .project
            .ignored
            .iter()
            .map(|i| match i.why {
                Why::NeedsTrust => format!("{} (until you trust the project)", i.key),
                Why::Never => format!("{} (never from a project)", i.key),
            })
            .collect(),
    }
}

/// A model to ask each provider's credentials for: any of its models will
/// do, credentials are per provider.
fn any_model(settings: &Settings, provider: &str) -> Option<Model> {
    let listed = settings
        .catalog
        .provider(provider)
        .and_then(|p| p.models.first().cloned());
    listed.or_else(|| settings.catalog.resolve(&format!("{provider}/any")).ok())
}

fn credentials(settings: &Settings) -> Vec<ProviderCredentials> {
    let source = settings.credentials();
    let home = settings.env("HOME").map(PathBuf::from);
    settings
        .catalog
        .keyed_provider_names()
        .filter_map(|provider| {
            let model = any_model(settings, provider)?;
            let sources = source
                .attempts(&model)
                .into_iter()
                .filter_map(|attempt| {
                    let id = attempt.id?;
                    let read_only_file = crate::auth::external::source_file(&id)
                        .and_then(|file| Some(home.as_ref()?.join(file)));
                    Some(CredentialRow {
                        id,
                        read_only_file,
                        unavailable: attempt.unavailable.map(|u| u.to_string()),
                    })
                })
                .collect();
            Some(ProviderCredentials {
                provider: provider.to_string(),
                sources,
            })
        })
        .collect()
}

fn mcp_servers(settings: &Settings, cwd: &Path) -> Vec<McpServer> {
    let mut servers: Vec<McpServer> = settings
        .mcp_specs(cwd, &[])
        .into_iter()
        .map(|spec| McpServer {
            name: spec.name,
            origin: match spec.origin {
                crate::mcp::Origin::Project => "project",
                crate::mcp::Origin::Config | crate::mcp::Origin::Editor => "config",
            },
            target: Some(match spec.transport {
                crate::mcp::Transport::Stdio { command, .. } => command.display().to_string(),
                crate::mcp::Transport::Http { url, .. } => without_secrets(&url),
            }),
            would_start: true,
            why_not: None,
        })
        .collect();
    // A project's servers that did not apply show up as ignored keys.
    let mut held_back: Vec<(String, Why)> = Vec::new();
    for ignored in &settings.project.ignored {
        if let Some(rest) = ignored.key.strip_prefix("mcp.servers.") {
            let name = rest.split('.').next().unwrap_or(rest).to_string();
            if !held_back.iter().any(|(n, _)| *n == name) {
                held_back.push((name, ignored.why));
            }
        }
    }
    for (name, why) in held_back {
        servers.push(McpServer {
            name,
            origin: "project",
            target: None,
            would_start: false,
            why_not: Some(match why {
                Why::NeedsTrust => {
                    "the project is not trusted; `pincer trust` after reading .pincer/config.toml"
                        .to_string()
                }
                Why::Never => "pincer never takes this from a project".to_string(),
            }),
        });
    }
    servers
}

/// `url` without user info, query or fragment, which may carry tokens.
fn without_secrets(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut url) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => "(not a URL)".to_string(),
    }
}

async fn model_report(settings: &Settings, model: &Model) -> ModelReport {
    ModelReport {
        id: model.full_id(),
        credential: settings.credential_source(model),
        has_credentials: settings.has_credentials(model),
        endpoint: probe(&model.base_url).await,
    }
}

/// Whether anything answers at `base_url`: one GET without credentials
/// (so that no key goes anywhere for a check), with a short timeout. Any
/// HTTP status counts as an answer; only a failure to connect or to hear
/// back in time does not.
async fn probe(base_url: &str) -> Endpoint {
    let url = without_secrets(base_url);
    let answer = match crate::llm::http_client() {
        Ok(client) => client
            .get(base_url)
            .timeout(PROBE_TIMEOUT)
            .send()
            .await
            .map_err(|e| crate::llm::redact(&crate::llm::describe_reqwest_error(&e))),
        Err(e) => Err(e.to_string()),
    };
    match answer {
        Ok(response) => Endpoint {
            url,
            answers: true,
            status: Some(response.status().as_u16()),
            error: None,
        },
        Err(error) => Endpoint {
            url,
            answers: false,
            status: None,
            error: Some(error),
        },
    }
}

/// The plain-text report.
pub fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let v = &report.versions;
    let _ = writeln!(out, "pincer {} on {} {}", v.pincer, v.os, v.arch);
    if !report.config_files.is_empty() {
        let _ = writeln!(out, "\nConfig files:");
        for file in &report.config_files {
            let state = match (file.exists, file.trust) {
                (false, _) => "not present".to_string(),
                (true, Some(trust)) => format!("read ({trust})"),
                (true, None) => "read".to_string(),
            };
            let _ = writeln!(out, "  {:<14} {}  {state}", file.kind, file.path.display());
        }
    }
    if let Some(trust) = &report.trust {
        let _ = writeln!(
            out,
            "\nProject: {} is {}",
            trust.root.display(),
            trust.state
        );
        for key in &trust.ignored {
            let _ = writeln!(out, "  ignored: {key}");
        }
    }
    if let Some(model) = &report.model {
        let _ = writeln!(out, "\nModel: {}", model.id);
        let credential = match (&model.credential, model.has_credentials) {
            (Some(id), _) => id.clone(),
            (None, true) => "none needed".to_string(),
            (None, false) => "MISSING".to_string(),
        };
        let _ = writeln!(out, "  credential: {credential}");
        let endpoint = &model.endpoint;
        let answer = match (endpoint.status, &endpoint.error) {
            (Some(status), _) => format!("answers (HTTP {status})"),
            (None, Some(error)) => format!("DOES NOT ANSWER: {error}"),
            (None, None) => "DOES NOT ANSWER".to_string(),
        };
        let _ = writeln!(out, "  endpoint: {} {answer}", endpoint.url);
    }
    if !report.credentials.is_empty() {
        let _ = writeln!(out, "\nCredentials:");
        for provider in &report.credentials {
            let sources = if provider.sources.is_empty() {
                "none".to_string()
            } else {
                provider
                    .sources
                    .iter()
                    .map(|row| {
                        let mut text = row.id.clone();
                        if let Some(file) = &row.read_only_file {
                            let _ = write!(text, " (read-only: {})", file.display());
                        }
                        if let Some(why) = &row.unavailable {
                            let _ = write!(text, " ({why})");
                        }
                        text
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(out, "  {:<12} {sources}", provider.provider);
        }
    }
    let _ = writeln!(out, "\nMCP servers:");
    if report.mcp_servers.is_empty() {
        let _ = writeln!(out, "  none configured");
    }
    for server in &report.mcp_servers {
        let target = server.target.as_deref().unwrap_or("-");
        match &server.why_not {
            None => {
                let _ = writeln!(
                    out,
                    "  {} ({}, {target}): would start",
                    server.name, server.origin
                );
            }
            Some(why) => {
                let _ = writeln!(
                    out,
                    "  {} ({}): not started: {why}",
                    server.name, server.origin
                );
            }
        }
    }
    if let Some(store) = &report.checkpoints {
        use crate::config::checkpoints::ByteSize;
        let _ = writeln!(out, "\nCheckpoints: {}", store.dir.display());
        let _ = writeln!(
            out,
            "  {} of {} (files over {} are not kept)",
            ByteSize(store.size),
            ByteSize(store.max_size),
            ByteSize(store.max_file)
        );
        if let Some(error) = &store.error {
            let _ = writeln!(out, "  cannot be read: {error}");
        }
    }
    if report.problems.is_empty() {
        let _ = writeln!(out, "\nNo problems found.");
    } else {
        let _ = writeln!(out, "\nProblems:");
        for problem in &report.problems {
            let _ = writeln!(out, "  - {problem}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn addresses_are_shown_without_what_may_hold_a_token() {
        assert_eq!(
            without_secrets("https://user:pw@mcp.example.com:8443/sse?token=abc#x"),
            "https://mcp.example.com:8443/sse"
        );
        assert_eq!(
            without_secrets("http://127.0.0.1:11434/v1"),
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(without_secrets("localhost:11434"), "localhost:11434");
        assert_eq!(without_secrets("not a url"), "(not a URL)");
    }
}
