//! `pincer workflow list|check|dry-run|run`: workflows from the terminal.
//! `dry-run` prints the path a run would take for given step outputs
//! without calling any tool or model.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::Settings;

/// `k=v` pairs of `--input`.
pub fn parse_inputs(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .ok_or_else(|| anyhow::anyhow!("--input `{pair}` is not NAME=VALUE"))
        })
        .collect()
}

/// Each workflow with its description and inputs; problems on stderr.
pub fn list() -> anyhow::Result<()> {
    let settings = Settings::load_from_process(&std::env::current_dir()?)?;
    let (workflows, problems) = settings.workflows();
    for problem in &problems {
        eprintln!("pincer: {problem}");
    }
    if workflows.is_empty() {
        println!(
            "No workflows. Put them in {} (or, in a trusted project, .pincer/workflows/).",
            settings.paths.config_dir.join("workflows").display()
        );
    }
    for workflow in workflows.values() {
        let inputs: Vec<String> = workflow
            .inputs
            .iter()
            .map(|(name, input)| match &input.default {
                Some(default) => format!("{name}={default}"),
                None => name.clone(),
            })
            .collect();
        println!(
            "{}  {}\n  inputs: {}\n  file: {}",
            workflow.name,
            workflow.description,
            if inputs.is_empty() {
                "none".to_string()
            } else {
                inputs.join(", ")
            },
            workflow.file.display()
        );
    }
    Ok(())
}

/// Checks every workflow file; fails when any has a problem.
pub fn check() -> anyhow::Result<()> {
    let settings = Settings::load_from_process(&std::env::current_dir()?)?;
    let (workflows, problems) = settings.workflows();
    for problem in &problems {
        println!("{problem}");
    }
    if !problems.is_empty() {
        anyhow::bail!("{} problem(s) in the workflow files", problems.len());
    }
    println!("{} workflow(s), no problems.", workflows.len());
    Ok(())
}

/// Prints the path of `name` for the outputs in `outputs` (JSON or TOML:
/// step id → output), one step id a line.
pub fn dry_run(name: &str, inputs: &[String], outputs: &Path) -> anyhow::Result<()> {
    let settings = Settings::load_from_process(&std::env::current_dir()?)?;
    let (workflows, problems) = settings.workflows();
    let workflow = find(&workflows, &problems, name)?;
    let inputs = workflow
        .bind_inputs(&parse_inputs(inputs)?)
        .map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(outputs)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", outputs.display()))?;
    let given: serde_json::Map<String, serde_json::Value> = match serde_json::from_str(&text) {
        Ok(map) => map,
        Err(json) => toml::from_str(&text).map_err(|toml| {
            anyhow::anyhow!(
                "{} is neither a JSON object ({json}) nor TOML ({toml}) of step id → output",
                outputs.display()
            )
        })?,
    };
    let path = crate::workflow::path::dry_run(workflow, inputs, &given)
        .map_err(|e| anyhow::anyhow!("workflow `{name}`: {e}"))?;
    for step in path {
        println!("{step}");
    }
    Ok(())
}

/// The workflow `name`, or why there is none.
pub fn find<'a>(
    workflows: &'a BTreeMap<String, crate::workflow::Workflow>,
    problems: &[crate::workflow::WorkflowError],
    name: &str,
) -> anyhow::Result<&'a crate::workflow::Workflow> {
    if let Some(workflow) = workflows.get(name) {
        return Ok(workflow);
    }
    let broken: Vec<String> = problems
        .iter()
        .filter(|p| p.file.file_stem().is_some_and(|s| s == name))
        .map(ToString::to_string)
        .collect();
    if !broken.is_empty() {
        anyhow::bail!("workflow `{name}` does not load:\n{}", broken.join("\n"));
    }
    let known: Vec<&str> = workflows.keys().map(String::as_str).collect();
    anyhow::bail!(
        "no workflow `{name}`; known: {}",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    )
}
