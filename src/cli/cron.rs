//! `pincer cron list`: the `[[cron]]` jobs and the `[heartbeat]` of the
//! user's config, with their next and last runs. It reads the config and
//! the record the gateway keeps (`cron.json` in the data dir), so it works
//! whether a gateway runs or not.
#![allow(clippy::print_stdout)]

use serde_json::Value;

use crate::config::Settings;
use crate::gateway::scheduler::{Plan, Record, listing};

/// Prints each job and the heartbeat (`json`: the gateway's `cron.list`
/// answer, on one line).
pub fn list(json: bool) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    let settings = Settings::load_from_process(&cwd)?;
    let plan = Plan::new(
        &settings.config.cron,
        settings.config.heartbeat.as_ref(),
        &settings.paths.config_dir,
        &settings.paths.data_dir,
    );
    let record = Record::load(&plan.state_file).map_err(anyhow::Error::msg)?;
    let list = listing(&plan, &record, &jiff::Zoned::now());
    if json {
        println!("{list}");
        return Ok(());
    }
    let jobs = list["jobs"].as_array().cloned().unwrap_or_default();
    if jobs.is_empty() && list["heartbeat"].is_null() {
        println!(
            "No scheduled runs. Add [[cron]] jobs (name, schedule, prompt) or a [heartbeat] to {}.",
            settings.paths.user_config_file().display()
        );
        return Ok(());
    }
    for job in &jobs {
        let name = job["name"].as_str().unwrap_or_default();
        if let Some(error) = job["error"].as_str() {
            println!("{name}\n  error: {error}\n");
            continue;
        }
        println!(
            "{name}\n  schedule: {} ({})\n  next run: {}\n  last run: {}\n  target: {}\n  session: {}\n  missed runs: {}\n",
            text(&job["schedule"]),
            text(&job["timezone"]),
            time(&job["nextRun"]),
            last(job),
            job["target"]
                .as_str()
                .unwrap_or("none (the reply stays in the session)"),
            text(&job["sessionKey"]),
            text(&job["missed"]),
        );
    }
    let heartbeat = &list["heartbeat"];
    if let Some(error) = heartbeat["error"].as_str() {
        println!("heartbeat\n  error: {error}");
    } else if !heartbeat.is_null() {
        let hours = heartbeat["activeHours"].as_str().unwrap_or("any hour");
        let prompt = heartbeat["prompt"].as_str().unwrap_or_default();
        let empty = if heartbeat["promptEmpty"] == true {
            " (missing or without a task: runs are skipped)"
        } else {
            ""
        };
        println!(
            "heartbeat\n  every: {} min, active hours: {hours}\n  next run: {}\n  last run: {}\n  target: {}\n  session: {}\n  prompt: {prompt}{empty}",
            heartbeat["everyMinutes"],
            time(&heartbeat["nextRun"]),
            last(heartbeat),
            heartbeat["target"]
                .as_str()
                .unwrap_or("none (the reply stays in the session)"),
            text(&heartbeat["sessionKey"]),
        );
    } else {
        println!("heartbeat: off");
    }
    Ok(())
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn time(value: &Value) -> &str {
    value["text"].as_str().unwrap_or("none")
}

fn last(row: &Value) -> String {
    match (row["lastRun"]["text"].as_str(), row["lastStatus"].as_str()) {
        (Some(at), Some(status)) => format!("{at} ({status})"),
        (Some(at), None) => at.to_string(),
        (None, Some(status)) => format!("never ({status})"),
        (None, None) => "never".to_string(),
    }
}
