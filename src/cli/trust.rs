//! `pincer trust`, `pincer trust --list` and `pincer untrust`: the user's
//! decisions about projects' configuration, made from the shell.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use crate::config::trust::{Decision, TrustStore};
use crate::config::{Settings, project::Why};

fn project_dir(dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let dir = match dir {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    dir.canonicalize()
        .map_err(|e| anyhow::anyhow!("cannot use {}: {e}", dir.display()))
}

/// Trusts the project at `dir` as its files are now, and says what that
/// lets its configuration do.
pub fn trust(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = project_dir(dir)?;
    let settings = Settings::load_from_process(&dir)?;
    let project = &settings.project;
    TrustStore::new(&settings.paths.config_dir).set(
        &project.root,
        &project.hash,
        Decision::Trusted,
    )?;
    println!("Trusted {}.", project.root.display());
    match &project.config_file {
        None => println!(
            "It has no .pincer/config.toml; its .pincer/SYSTEM.md, if any, may now replace pincer's opening instructions."
        ),
        Some(file) if project.grants.is_empty() => {
            println!("{} asks for nothing that needs trust.", file.display())
        }
        Some(file) => println!("{} may now:", file.display()),
    }
    if !project.grants.is_empty() {
        if project.config_file.is_none() {
            println!("The project may now:");
        }
        for grant in &project.grants {
            println!("  - {grant}");
        }
    }
    let never: Vec<&str> = project
        .ignored
        .iter()
        .filter(|i| i.why == Why::Never)
        .map(|i| i.key.as_str())
        .collect();
    if !never.is_empty() {
        println!(
            "Still ignored, because pincer never takes them from a project: {}.",
            never.join(", ")
        );
    }
    println!("If these files change, pincer treats the project as untrusted again.");
    Ok(())
}

/// Forgets the decision about the project at `dir`.
pub fn untrust(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = project_dir(dir)?;
    let settings = Settings::load_from_process(&dir)?;
    let root = &settings.project.root;
    if TrustStore::new(&settings.paths.config_dir).remove(root)? {
        println!(
            "Forgot your decision about {}; pincer will ask again.",
            root.display()
        );
    } else {
        println!("{} was neither trusted nor rejected.", root.display());
    }
    Ok(())
}

/// Every remembered decision, and whether it still applies.
pub fn list() -> anyhow::Result<()> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let settings = Settings::load_from_process(&cwd)?;
    let entries = TrustStore::new(&settings.paths.config_dir).list()?;
    if entries.is_empty() {
        println!("No trusted or rejected projects. `pincer trust DIR` trusts one.");
        return Ok(());
    }
    for (root, entry) in entries {
        let current = Settings::load_from_process(std::path::Path::new(&root))
            .ok()
            .map(|s| s.project.hash);
        let state = match (
            entry.decision,
            current.as_deref() == Some(entry.hash.as_str()),
        ) {
            (Decision::Trusted, true) => "trusted",
            (Decision::Rejected, true) => "rejected",
            (_, false) => "changed since you decided (pincer will ask again)",
        };
        println!("{root}\t{state}\t{}", entry.at);
    }
    Ok(())
}
