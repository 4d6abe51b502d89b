//! `pincer sessions list|show|delete|rewind|fork`: stored sessions for people and
//! scripts.
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::cluster::Sessions;

use crate::agent::AgentMessage;
use crate::cli::shown;
use crate::config::Paths;
use crate::llm::{AssistantContent, Content, Message};
use crate::session::{self, rewind, transcript};

fn data_dir() -> anyhow::Result<PathBuf> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Ok(Paths::from_env(&env)?.data_dir)
}

/// The sessions a list shows from the cluster's store, at most.
const CLUSTER_LIST: i64 = 500;

/// The cluster's store (`[cluster] store` in the user's config), opened
/// for reading; `None` when there is none.
async fn cluster_store() -> anyhow::Result<Option<crate::cluster::postgres::Store>> {
    let cwd = std::env::current_dir()?;
    let settings = crate::config::Settings::load_from_process(&cwd)?;
    let Some(url) = settings.config.cluster.store.clone() else {
        return Ok(None);
    };
    let store = crate::cluster::postgres::Store::open_to_read(&url)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(Some(store))
}

/// Lists sessions, newest first: of `cwd` when given, else all; with a
/// cluster's store configured, then the sessions of the cluster that are
/// not here (which replica has each, and the run it has going).
pub async fn list(cwd: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    list_here(cwd.clone(), json)?;
    if cwd.is_some() {
        return Ok(());
    }
    let Some(store) = cluster_store().await? else {
        return Ok(());
    };
    let data = data_dir()?;
    let listed = store
        .listed(CLUSTER_LIST)
        .await
        .map_err(anyhow::Error::msg)
        .context("listing the cluster's sessions")?;
    let elsewhere: Vec<_> = listed
        .into_iter()
        .filter(|l| session::find(&data, &l.session_id).is_none())
        .collect();
    if json {
        for l in &elsewhere {
            let line = serde_json::json!({
                "sessionId": l.session_id,
                "key": l.key,
                "replica": l.replica,
                "running": l.running,
                "updatedAtMs": l.updated_at,
                "inCluster": true,
            });
            println!("{line}");
        }
        return Ok(());
    }
    if !elsewhere.is_empty() {
        println!("\nIn the cluster (`pincer sessions show ID` reads one):");
    }
    for l in &elsewhere {
        let state = if l.running.is_some() { ", running" } else { "" };
        println!(
            "{}  on replica {}{state}  [{}]",
            shown(&l.session_id),
            shown(&l.replica),
            shown(&l.key)
        );
    }
    Ok(())
}

fn list_here(cwd: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let cwd = cwd.map(|c| c.canonicalize().unwrap_or(c));
    let data = data_dir()?;
    let sessions = session::list(&data, cwd.as_deref());
    let keys = gateway_keys(&data);
    if json {
        for s in &sessions {
            let line = serde_json::json!({
                "sessionId": s.id,
                "key": keys.get(&s.id),
                "cwd": s.cwd,
                "title": s.title,
                "updatedAt": s.updated_at,
                "path": s.path,
                "spawnedBy": s.spawned_by,
                "agent": s.agent,
                "interrupted": s.interrupted,
            });
            println!("{line}");
        }
        return Ok(());
    }
    if sessions.is_empty() {
        println!("No sessions.");
    }
    for (depth, s) in session::nested(&sessions) {
        // A helper stands under the session that started it, with its
        // definition's name.
        let helper = match &s.agent {
            Some(agent) if s.spawned_by.is_some() => format!(
                "{}└ helper `{}`{}: ",
                "  ".repeat(depth.saturating_sub(1)),
                shown(agent),
                if s.interrupted { " (interrupted)" } else { "" }
            ),
            _ => String::new(),
        };
        // A session the gateway gave a key (a chat's `telegram:dm:123`,
        // a cron job's) shows it: that is how its owner knows it.
        let key = keys
            .get(&s.id)
            .map(|k| format!("  [{}]", shown(k)))
            .unwrap_or_default();
        println!(
            "{helper}{}  {}  {}  {}{key}",
            shown(&s.id),
            shown(&s.updated_at),
            shown(&s.cwd.display().to_string()),
            shown(s.title.as_deref().unwrap_or("(untitled)"))
        );
    }
    Ok(())
}

/// The gateway's session keys (`<data dir>/gateway/keys.json`), by session
/// id; none when the gateway never ran.
fn gateway_keys(data_dir: &std::path::Path) -> std::collections::HashMap<String, String> {
    let Ok(text) = std::fs::read_to_string(data_dir.join("gateway").join("keys.json")) else {
        return Default::default();
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Default::default();
    };
    value["keys"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(key, id)| Some((id.as_str()?.to_string(), key.clone())))
        .collect()
}

/// Why an id given on the command line names no single session.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LookupError {
    #[error("no session {0}; `pincer sessions list` shows the sessions there are")]
    NotFound(String),
    #[error("`{prefix}` names {} sessions: {}; give more of the id", .matches.len(), .matches.join(", "))]
    Ambiguous {
        prefix: String,
        matches: Vec<String>,
    },
}

/// The transcript of the session `id` names: its whole id, or a prefix
/// that only one session's id starts with (with or without `sess_`), so
/// that people can type the first few characters they see in a list.
pub fn resolve(data_dir: &Path, id: &str) -> Result<PathBuf, LookupError> {
    let id = id.trim();
    if let Some(path) = session::find(data_dir, id) {
        return Ok(path);
    }
    let not_found = || LookupError::NotFound(id.to_string());
    // A prefix is a file name's start: nothing that could leave the
    // sessions directory.
    if id.is_empty() || id.contains(['/', '\\']) || id.starts_with('.') {
        return Err(not_found());
    }
    let mut matches: Vec<(String, PathBuf)> = std::fs::read_dir(session::sessions_dir(data_dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|dir| std::fs::read_dir(dir.path()).ok())
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|path| {
            let stem = path.file_stem()?.to_str()?.to_string();
            let bare = stem.strip_prefix("sess_").unwrap_or(&stem);
            (stem.starts_with(id) || bare.starts_with(id)).then_some((stem, path))
        })
        .collect();
    matches.sort();
    match matches.len() {
        0 => Err(not_found()),
        1 => Ok(matches.remove(0).1),
        _ => Err(LookupError::Ambiguous {
            prefix: id.to_string(),
            matches: matches.into_iter().map(|(stem, _)| stem).collect(),
        }),
    }
}

fn find(id: &str) -> anyhow::Result<PathBuf> {
    Ok(resolve(&data_dir()?, id)?)
}

/// Prints a session's transcript for reading: one here, else (with a
/// cluster's store configured) the store's, by its whole id.
pub async fn show(id: &str) -> anyhow::Result<()> {
    let path = match find(id) {
        Ok(path) => path,
        Err(not_here) => {
            let Some(store) = cluster_store().await? else {
                return Err(not_here);
            };
            let lines = store.lines(id.trim()).await.map_err(anyhow::Error::msg)?;
            if lines.is_empty() {
                return Err(not_here);
            }
            let text = lines.join("\n") + "\n";
            let name = PathBuf::from(format!("the cluster's store, session {}", id.trim()));
            return show_loaded(transcript::parse(&name, text.as_bytes())?);
        }
    };
    show_loaded(transcript::load(&path)?)
}

fn show_loaded(loaded: transcript::Transcript) -> anyhow::Result<()> {
    let restored = session::restore(loaded.entries);
    if let Some(title) = &restored.title {
        println!("# {}\n", shown(title));
    }
    println!(
        "session {} in {}",
        shown(&loaded.header.id),
        shown(&loaded.header.cwd.display().to_string())
    );
    println!("created {}\n", loaded.header.created);
    for entry in &restored.history {
        match entry {
            AgentMessage::Llm {
                message: Message::User { content },
            } => {
                println!("## User\n");
                for part in content {
                    match part {
                        Content::Text { text } => println!("{text}\n"),
                        Content::Image { mime_type, .. } => println!("[image {mime_type}]\n"),
                    }
                }
            }
            AgentMessage::Llm {
                message: Message::Assistant(message),
            } => {
                println!("## Assistant ({}/{})\n", message.provider, message.model);
                for part in &message.content {
                    match part {
                        AssistantContent::Text { text } => println!("{text}\n"),
                        AssistantContent::Thinking {
                            thinking,
                            redacted: false,
                            ..
                        } => println!("> (thinking) {}\n", thinking.replace('\n', "\n> ")),
                        AssistantContent::Thinking { .. } => println!("> (redacted thinking)\n"),
                        AssistantContent::ToolCall(call) => {
                            println!("→ {} {}\n", call.name, call.arguments);
                        }
                    }
                }
                if let Some(error) = &message.error_message {
                    println!("(stopped: {error})\n");
                }
            }
            AgentMessage::Llm {
                message: Message::ToolResult(result),
            } => {
                let mark = if result.is_error { "✗" } else { "✓" };
                let text: Vec<&str> = result
                    .content
                    .iter()
                    .filter_map(|c| match c {
                        Content::Text { text } => Some(text.as_str()),
                        Content::Image { .. } => None,
                    })
                    .collect();
                println!("{mark} {} result:\n{}\n", result.tool_name, text.join("\n"));
            }
            AgentMessage::Notice { text } => println!("(notice: {text})\n"),
            AgentMessage::Time { .. } => {}
            AgentMessage::Summary {
                summary,
                tokens_before,
            } => println!(
                "## Summary of the earlier conversation (compacted from {tokens_before} tokens)\n\n{summary}\n"
            ),
        }
    }
    if !loaded.skipped.is_empty() {
        eprintln!(
            "pincer: skipped unreadable lines {:?} (a process stopped mid-write)",
            loaded.skipped
        );
    }
    Ok(())
}

/// Deletes a session's transcript.
pub fn delete(id: &str) -> anyhow::Result<()> {
    let path = find(id)?;
    session::delete(&path)?;
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| id.to_string());
    println!("Deleted {id}.");
    Ok(())
}

/// The checkpoint store of the project a session works in.
fn store_for(cwd: &Path) -> anyhow::Result<crate::checkpoint::store::Store> {
    let settings = crate::config::Settings::load_from_process(cwd)?;
    Ok(crate::checkpoint::store::Store::existing(
        &crate::checkpoint::store_dir(&settings.paths.data_dir, &settings.project.root),
        settings.config.checkpoints.limits(),
    )?)
}

/// Carries out `travel` on the stored session at `path`, in the directory
/// it works in. `decide` sees what would change and says whether to go
/// ahead (`Some(overwrite)`: also over files changed since) or not.
pub(crate) fn travel_stored(
    path: &Path,
    travel: &rewind::Travel,
    decide: &mut dyn FnMut(&rewind::Proposal, &str) -> anyhow::Result<Option<bool>>,
) -> anyhow::Result<String> {
    let loaded = transcript::load(path)?;
    let cwd = loaded.header.cwd.clone();
    session::check_cwd(&cwd)?;
    let store = store_for(&cwd)?;
    let restored = session::restore(loaded.entries.clone());
    let (proposal, what) =
        rewind::propose(&restored, &cwd, &store, travel).map_err(anyhow::Error::msg)?;
    let overwrite = if proposal.touches_files() {
        match decide(&proposal, &what)? {
            Some(overwrite) => overwrite,
            None => return Ok(format!("{what}: cancelled; nothing changed.")),
        }
    } else {
        false
    };
    let mut writer = transcript::Writer::append_to(path, &loaded)?;
    let outcome = rewind::carry_out(&mut writer, &cwd, &store, &proposal, overwrite)?;
    Ok(rewind::done_text(&what, &proposal, &outcome))
}

/// Asks on the terminal whether to restore, after showing what changes;
/// `yes` answers for the user (conflicts are overwritten only with
/// `overwrite`). Without a terminal and without `yes`, refuses.
fn ask_on_terminal(
    proposal: &rewind::Proposal,
    what: &str,
    yes: bool,
    overwrite: bool,
) -> anyhow::Result<Option<bool>> {
    use std::io::{BufRead, IsTerminal, Write};
    println!("{what}");
    println!("{}", proposal.summary());
    if yes {
        return Ok(Some(overwrite));
    }
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("nothing changed: pass --yes to restore without being asked");
    }
    let conflicts = !proposal.plan.conflicts.is_empty();
    let mut out = std::io::stdout().lock();
    if conflicts && !overwrite {
        write!(
            out,
            "Restore, keeping the files changed since? [y/N, o = overwrite them] "
        )?;
    } else {
        write!(out, "Restore? [y/N] ")?;
    }
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    Ok(match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(overwrite),
        "o" | "overwrite" if conflicts => Some(true),
        _ => None,
    })
}

/// `pincer sessions rewind ID [N]`: lists the turns, or goes back to
/// before turn N, files and conversation.
pub fn rewind(id: &str, turn: Option<usize>, yes: bool, overwrite: bool) -> anyhow::Result<()> {
    let path = find(id)?;
    let Some(n) = turn else {
        let loaded = transcript::load(&path)?;
        print!("{}", rewind::list(&session::restore(loaded.entries).turns));
        return Ok(());
    };
    let text = travel_stored(&path, &rewind::Travel::Rewind(n), &mut |proposal, what| {
        ask_on_terminal(proposal, what, yes, overwrite)
    })?;
    println!("{text}");
    Ok(())
}

/// `pincer sessions fork ID [N]`: a new session with the history before
/// turn N (all of it without N); with `files`, the files are put back to
/// that point too.
pub fn fork(
    id: &str,
    turn: Option<usize>,
    files: bool,
    yes: bool,
    overwrite: bool,
) -> anyhow::Result<()> {
    let data = data_dir()?;
    let path = find(id)?;
    let point = turn.map_or(rewind::ForkPoint::Whole, rewind::ForkPoint::BeforeTurn);
    let forked = rewind::fork(&data, &path, &point).map_err(anyhow::Error::msg)?;
    println!("Forked {} as {}.", id, forked.id);
    if files && !forked.after.is_empty() {
        let store = store_for(&forked.cwd)?;
        let proposal = rewind::Proposal::rewind(&forked.cwd, &store, &forked.after, 0)?;
        if proposal.touches_files() {
            let what = "Put the files back to the fork point";
            if let Some(overwrite) = ask_on_terminal(&proposal, what, yes, overwrite)? {
                let report = crate::checkpoint::restore::apply(
                    &forked.cwd,
                    &store,
                    &proposal.plan,
                    overwrite,
                );
                let outcome = rewind::Outcome::of(&proposal, report, overwrite);
                println!("{}", outcome.report());
            }
        }
    }
    Ok(())
}
