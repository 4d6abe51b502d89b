//! `pincer mcp list`: the MCP servers configured for a directory, whether
//! they start, and the tools they offer.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use crate::config::Settings;
use crate::mcp::{Manager, Origin, Status, Transport};

/// Starts every configured server for `cwd` (default: the current
/// directory), waits for them, prints what they offer, and stops them.
pub async fn list(cwd: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let cwd = match cwd {
        Some(dir) => dir.canonicalize().unwrap_or(dir),
        None => std::env::current_dir()?,
    };
    let settings = Settings::load_from_process(&cwd)?;
    let config = &settings.config.mcp;
    super::report_project(&settings);
    let sandbox = crate::agent::setup::sandbox(&settings);
    let manager = Manager::start(
        crate::mcp::confine(settings.mcp_specs(&cwd, &[]), Some(&sandbox), config),
        vec![cwd.clone()],
        config.startup_timeout(),
    );
    manager.ready().await;
    let reports = manager.reports();
    manager.shutdown().await;
    let disabled: Vec<&String> = config
        .servers
        .iter()
        .filter(|(_, s)| s.enabled == Some(false))
        .map(|(name, _)| name)
        .collect();
    if json {
        for r in &reports {
            let line = serde_json::json!({
                "server": r.name,
                "transport": describe(&r.transport),
                "status": status_id(&r.status),
                "error": match &r.status { Status::Failed(why) => Some(why), _ => None },
                "tools": r.tools.iter().map(|(name, read_only)| serde_json::json!({"name": name, "readOnly": read_only})).collect::<Vec<_>>(),
            });
            println!("{line}");
        }
        for name in disabled {
            println!(
                "{}",
                serde_json::json!({"server": name, "status": "disabled"})
            );
        }
        return Ok(());
    }
    if reports.is_empty() && disabled.is_empty() {
        println!(
            "No MCP servers configured for {}. Add [mcp.servers.<name>] with `command` or `url` to config.toml; editors also pass their own servers to each session.",
            cwd.display()
        );
        return Ok(());
    }
    println!("MCP servers for {}:", cwd.display());
    for r in &reports {
        debug_assert_ne!(r.origin, Origin::Editor);
        // A server that started and was then stopped here was ready.
        let status = match &r.status {
            Status::Stopped => "ready".to_string(),
            other => other.to_string(),
        };
        println!("  {} ({}): {status}", r.name, describe(&r.transport));
        for (tool, read_only) in &r.tools {
            let note = if *read_only { "  (read-only)" } else { "" };
            println!("    {tool}{note}");
        }
    }
    for name in disabled {
        println!("  {name}: disabled");
    }
    Ok(())
}

fn status_id(status: &Status) -> &'static str {
    match status {
        Status::Starting => "starting",
        Status::Ready | Status::Stopped => "ready",
        Status::Failed(_) => "failed",
    }
}

fn describe(transport: &Transport) -> String {
    match transport {
        Transport::Stdio {
            command,
            args,
            confined,
            ..
        } => {
            let mut text = command.display().to_string();
            for arg in args {
                text.push(' ');
                text.push_str(arg);
            }
            if matches!(confined, crate::mcp::Confined::By { .. }) {
                text.push_str(", in the sandbox");
            }
            text
        }
        Transport::Http { url, .. } => url.clone(),
    }
}
