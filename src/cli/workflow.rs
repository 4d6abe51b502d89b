//! `pincer workflow list|check|dry-run|run|resume`: workflows from the
//! terminal. `dry-run` prints the path a run would take for given step
//! outputs without calling any tool or model; `run` runs one headless, as
//! a session `pincer sessions` lists, and `resume` finishes a run a killed
//! process left behind.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::Settings;
use crate::workflow::{find, parse_inputs};

/// Each workflow with its description and inputs; problems on stderr.
pub fn list() -> anyhow::Result<()> {
    let settings = Settings::load_from_process(&std::env::current_dir()?)?;
    let (workflows, problems) = crate::workflow::discover(&settings);
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
    let (workflows, problems) = crate::workflow::discover(&settings);
    for problem in &problems {
        println!("{problem}");
    }
    // Warnings do not fail the check: the workflow runs as written.
    let warnings: Vec<_> = workflows.values().flat_map(|w| &w.warnings).collect();
    for warning in &warnings {
        println!("{warning}");
    }
    if !problems.is_empty() {
        anyhow::bail!("{} problem(s) in the workflow files", problems.len());
    }
    if warnings.is_empty() {
        println!("{} workflow(s), no problems.", workflows.len());
    } else {
        println!(
            "{} workflow(s), no problems, {} warning(s).",
            workflows.len(),
            warnings.len()
        );
    }
    Ok(())
}

/// Prints the path of `name` for the outputs in `outputs` (JSON or TOML:
/// step id → output), one step id a line.
pub fn dry_run(name: &str, inputs: &[String], outputs: &Path) -> anyhow::Result<()> {
    let settings = Settings::load_from_process(&std::env::current_dir()?)?;
    let (workflows, problems) = crate::workflow::discover(&settings);
    let workflow = find(&workflows, &problems, name).map_err(anyhow::Error::msg)?;
    let inputs = workflow
        .bind_inputs(&parse_inputs(inputs).map_err(anyhow::Error::msg)?)
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

/// Which run `pincer workflow run|resume` makes.
#[derive(Clone, Debug)]
pub enum Start {
    /// `run NAME --input k=v`.
    New { name: String, inputs: Vec<String> },
    /// `resume`: the interrupted run of the session `options.session`.
    Resume,
}

/// The exit codes of `pincer workflow run|resume` (those of `pincer run`
/// where they mean the same).
pub const EXIT_CODES_HELP: &str = "Exit codes:
  0    the workflow finished
  1    a step failed (a model call, a template, a step that cannot run)
  2    usage error (unknown workflow, bad --input, nothing to resume)
  5    the workflow used up its step budget
  6    the loop detector stopped a tool step repeating itself
  8    no credentials for the model of an llm step, or they were rejected
  130  cancelled (Ctrl-C / SIGINT)";

/// The exit code for the budget running out.
const BUDGET: i32 = crate::cli::run::exit::MAX_TURNS;

/// Runs a workflow headless; the result is the process exit code. Each
/// step is recorded in the session's transcript as an editor's run
/// records it. `text` prints the last step's output on stdout and each
/// step on stderr; `json` one result object; `stream-json` the start
/// event, the plan and every `session/update` an editor would get, then
/// the result.
pub async fn run(start: Start, options: crate::cli::run::RunOptions) -> i32 {
    use crate::cli::run::{OutputFormat, print_line};
    let started = std::time::Instant::now();
    match execute(&start, &options, started).await {
        Ok(code) => code,
        Err(failure) => {
            let message = failure.to_string();
            if options.format == OutputFormat::Text {
                eprintln!("pincer: {message}");
            } else {
                print_line(&serde_json::json!({
                    "type": "result",
                    "subtype": failure.subtype(),
                    "is_error": true,
                    "exit_code": failure.code(),
                    "error": message,
                    "session_id": null,
                    "duration_ms": started.elapsed().as_millis() as u64,
                }));
            }
            failure.code()
        }
    }
}

/// What `execute` settles before the transcript starts.
struct Chosen {
    workflows: BTreeMap<String, crate::workflow::Workflow>,
    workflow: crate::workflow::Workflow,
    inputs: serde_json::Value,
    run: String,
    recorded: Vec<crate::workflow::run::Recorded>,
}

async fn execute(
    start: &Start,
    options: &crate::cli::run::RunOptions,
    started: std::time::Instant,
) -> Result<i32, crate::cli::run::Failure> {
    use crate::cli::run::{Failure, OutputFormat, Prepared, Verbosity, print_line};
    use crate::session::transcript::Record;
    use crate::workflow::run::{self as runner, Recorded, RunError, Runner, StepEvent};
    use serde_json::{Value, json};

    let mut chosen: Option<Chosen> = None;
    let mut check = |settings: &Settings,
                     model: &crate::llm::Model,
                     restored: Option<&crate::session::Restored>|
     -> Result<(), Failure> {
        let (workflows, problems) = crate::workflow::discover(settings);
        let (name, given, run, recorded) = match start {
            Start::New { name, inputs } => (
                name.clone(),
                Some(parse_inputs(inputs).map_err(Failure::Usage)?),
                format!("wf_{}", uuid::Uuid::new_v4().simple()),
                Vec::new(),
            ),
            Start::Resume => {
                let Some(unfinished) = restored.and_then(|r| r.unfinished_workflow.as_ref()) else {
                    return Err(Failure::Usage(
                        "the session has no interrupted workflow run to resume".to_string(),
                    ));
                };
                (
                    unfinished.workflow.clone(),
                    None,
                    unfinished.run.clone(),
                    Recorded::of(unfinished),
                )
            }
        };
        let workflow = find(&workflows, &problems, &name).map_err(Failure::Usage)?;
        let inputs = match (given, restored.and_then(|r| r.unfinished_workflow.as_ref())) {
            (Some(given), _) => workflow.bind_inputs(&given).map_err(Failure::Usage)?,
            (None, Some(unfinished)) => unfinished.inputs.clone(),
            (None, None) => Value::Null,
        };
        // A workflow of tool steps alone needs no model credentials.
        let asks_model = workflow.all_steps().values().any(|step| {
            matches!(
                step.kind,
                crate::workflow::StepKind::Llm { model: None, .. }
            )
        });
        if asks_model {
            crate::cli::run::check_credentials(settings, model)?;
        }
        chosen = Some(Chosen {
            workflow: workflow.clone(),
            workflows,
            inputs,
            run,
            recorded,
        });
        Ok(())
    };
    let init = match start {
        Start::New { name, .. } => json!({ "workflow": name }),
        Start::Resume => json!({}),
    };
    let Prepared {
        settings,
        cwd,
        session_id,
        tools,
        mcp,
        config,
        mut host,
        http,
        cancel,
        ..
    } = crate::cli::run::prepare(options, &init, &mut check).await?;
    let Some(Chosen {
        workflows,
        workflow,
        inputs,
        run,
        recorded,
    }) = chosen
    else {
        return Err(Failure::Other(anyhow::anyhow!("no workflow was chosen")));
    };
    // stdout carries the workflow's result, not what its llm steps say.
    host.show_answer = false;
    let resuming = matches!(start, Start::Resume);
    // The run is a turn for checkpoints, started by this command.
    host.record_prompt(Record::Command {
        text: match start {
            Start::New { inputs, .. } => {
                format!("/workflow {} {}", workflow.name, inputs.join(" "))
                    .trim_end()
                    .to_string()
            }
            Start::Resume => "/workflow resume".to_string(),
        },
    });
    if !resuming {
        host.record(Record::Workflow {
            data: runner::start_entry(&run, &workflow.name, &inputs),
        });
    }
    let format = options.format;
    let plan = parking_lot::Mutex::new(crate::workflow::plan::Plan::new(&workflow, &recorded));
    let print_plan = |plan: &crate::workflow::plan::Plan| {
        if format == OutputFormat::StreamJson {
            let update = crate::acp::updates::plan_of(plan.items(), false);
            let notification = agent_client_protocol::v1::schema::SessionNotification::new(
                session_id.clone(),
                update,
            );
            print_line(&json!({
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": notification,
            }));
        }
    };
    print_plan(&plan.lock());
    let on_step = |event: StepEvent<'_>| {
        match &event {
            StepEvent::Started { workflow: w, step } => {
                host.note(&format!("▸ {w} › {step}"));
            }
            StepEvent::Finished(record) => {
                host.record(Record::Workflow {
                    data: record.entry(&run),
                });
                if record.error {
                    host.note(&format!(
                        "  ✗ {} failed: {}",
                        record.step,
                        runner::shown(&record.output)
                    ));
                }
            }
        }
        let mut plan = plan.lock();
        if plan.apply(&event) {
            print_plan(&plan);
        }
    };
    // A session on Claude Code never has pincer call with the CLI's
    // login, workflow steps included.
    let model = |name: &str| {
        let model = settings.catalog.resolve(name).ok()?;
        let key = settings.own_call_key(&model, &config.model);
        Some((model, key))
    };
    let recorded = parking_lot::Mutex::new(recorded);
    let runner = Runner {
        client: &http,
        config: &config,
        tools: &tools,
        cwd: &cwd,
        host: &host,
        cancel: &cancel,
        workflows: &workflows,
        model: &model,
        on_step: &on_step,
        recorded: &recorded,
    };
    if let Some(recording) = config.checkpoints.clone() {
        let _ = tokio::task::spawn_blocking(move || recording.begin_turn()).await;
    }
    let result = runner.run(&workflow, inputs).await;
    if let Some(recording) = config.checkpoints.clone() {
        let background = tools.iter().any(|t| t.holds_work());
        let changes = tokio::task::spawn_blocking(move || recording.end_turn(background))
            .await
            .ok()
            .flatten();
        crate::agent::AgentHost::emit(&host, crate::agent::AgentEvent::Checkpoint(changes));
    }
    host.terminal.quiet();
    mcp.shutdown().await;
    host.record(Record::Workflow {
        data: runner::end_entry(&run, &result),
    });
    let (code, subtype, message) = match &result {
        Ok(_) => (crate::cli::run::exit::SUCCESS, "success", None),
        Err(RunError::Cancelled) => (
            crate::cli::run::exit::CANCELLED,
            "error_cancelled",
            Some("cancelled".to_string()),
        ),
        Err(e @ RunError::Budget { .. }) => (BUDGET, "error_budget", Some(e.to_string())),
        Err(e @ RunError::Loop { .. }) => (
            crate::cli::run::exit::LOOP,
            "error_loop_detected",
            Some(e.to_string()),
        ),
        Err(
            e @ RunError::Model {
                error: crate::llm::LlmError::Auth { .. },
                ..
            },
        ) => (
            crate::cli::run::exit::CREDENTIALS,
            "error_credentials",
            Some(format!(
                "{}. {}",
                e.to_string().trim_end_matches('.'),
                settings.credential_hint(&config.model)
            )),
        ),
        Err(e) => (
            crate::cli::run::exit::FAILED,
            "error_during_execution",
            Some(e.to_string()),
        ),
    };
    let notice = match (&result, &message) {
        (Ok(finished), _) => format!(
            "Workflow `{}` finished ({} steps): {}",
            workflow.name,
            finished.steps,
            runner::shown(&finished.output)
        ),
        (Err(_), Some(message)) => format!("Workflow `{}` stopped: {message}", workflow.name),
        (Err(e), None) => format!("Workflow `{}` stopped: {e}", workflow.name),
    };
    if !matches!(result, Err(RunError::Cancelled)) {
        host.record(Record::Notice { text: notice });
    }
    let tally = host.tally.lock();
    let duration_ms = started.elapsed().as_millis() as u64;
    match format {
        OutputFormat::Text => {
            if let Ok(finished) = &result {
                let shown = runner::shown(&finished.output);
                if shown.ends_with('\n') {
                    print!("{shown}");
                } else {
                    println!("{shown}");
                }
            }
            if let Some(message) = &message {
                eprintln!("pincer: workflow `{}` stopped: {message}", workflow.name);
            }
            if options.verbosity == Verbosity::Verbose || host.terminal.interactive {
                let steps = match &result {
                    Ok(finished) => format!("{} steps, ", finished.steps),
                    Err(_) => String::new(),
                };
                let closing = format!(
                    "pincer: workflow `{}`: {steps}{} model call{}, ${:.4}, {:.1} s",
                    workflow.name,
                    tally.turns,
                    if tally.turns == 1 { "" } else { "s" },
                    tally.cost,
                    duration_ms as f64 / 1000.0
                );
                eprintln!("{}", host.terminal.dim(&closing));
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let mut result_line = json!({
                "type": "result",
                "subtype": subtype,
                "is_error": code != crate::cli::run::exit::SUCCESS,
                "exit_code": code,
                "workflow": workflow.name,
                "run": run,
                "session_id": session_id,
                "model": config.model.full_id(),
                "cwd": cwd,
                "num_turns": tally.turns,
                "duration_ms": duration_ms,
                "total_cost_usd": tally.cost,
                "usage": crate::cli::run::usage_json(&tally.usage),
            });
            if let Value::Object(map) = &mut result_line {
                if let Ok(finished) = &result {
                    map.insert(
                        "result".into(),
                        Value::String(runner::shown(&finished.output)),
                    );
                    map.insert("output".into(), finished.output.clone());
                    map.insert("steps".into(), json!(finished.steps));
                }
                if let Some(message) = message {
                    map.insert("error".into(), Value::String(message));
                }
            }
            print_line(&result_line);
        }
    }
    Ok(code)
}
