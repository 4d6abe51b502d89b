//! `pincer tools`: which tools the model is offered in a directory, and for
//! each one that is not, the policy step that took it away.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use crate::agent::Mode;
use crate::config::Settings;

/// Prints the effective tool list for `cwd` (default: the current
/// directory) with `model` (default: the configured one) in `mode`
/// (default: the configured default mode).
/// The tools of the MCP servers configured for the directory are listed
/// too (the servers are started for that, then stopped).
pub async fn list(
    cwd: Option<PathBuf>,
    model: Option<String>,
    mode: Option<Mode>,
    json: bool,
) -> anyhow::Result<()> {
    let cwd = match cwd {
        Some(dir) => dir.canonicalize().unwrap_or(dir),
        None => std::env::current_dir()?,
    };
    let settings = Settings::load_from_process(&cwd)?;
    let model = settings.default_model(model.as_deref())?;
    let mode = mode.unwrap_or_else(|| settings.default_mode());
    let policy = crate::agent::setup::tool_policy(&settings, &model)?;
    let mut tools = crate::tools::builtin();
    let servers = &settings.config.mcp;
    super::report_project(&settings);
    let sandbox = crate::agent::setup::sandbox(&settings);
    sandbox.set_model(&model.provider, &model.id);
    let manager = crate::mcp::Manager::start(
        crate::mcp::confine(settings.mcp_specs(&cwd, &[]), Some(&sandbox), servers),
        vec![cwd.clone()],
        servers.startup_timeout(),
    );
    manager.ready().await;
    tools.extend(manager.tools_now());
    manager.shutdown().await;
    let rows: Vec<(&str, Result<(), String>)> = tools
        .iter()
        .map(|tool| {
            let verdict = policy
                .check(tool.name(), tool.mutating(), mode)
                .map_err(|why| why.to_string());
            (tool.name(), verdict)
        })
        .collect();
    if json {
        for (name, verdict) in &rows {
            let line = match verdict {
                Ok(()) => serde_json::json!({"tool": name, "offered": true}),
                Err(why) => serde_json::json!({"tool": name, "offered": false, "removedBy": why}),
            };
            println!("{line}");
        }
        return Ok(());
    }
    println!(
        "Tools for {} in {} (`{}` mode):",
        model.full_id(),
        cwd.display(),
        mode.id()
    );
    let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    for (name, verdict) in &rows {
        match verdict {
            Ok(()) => println!("  {name:width$}  offered"),
            Err(why) => println!("  {name:width$}  not offered: {why}"),
        }
    }
    Ok(())
}
