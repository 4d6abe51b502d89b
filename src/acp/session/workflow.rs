//! `/workflow NAME [input=value …]` in a session: the workflow runs with
//! the session's model, tools, policy and permission questions; the editor
//! sees it as a plan whose entries change status as steps run, its tool
//! steps as ordinary tool calls and its llm steps streaming. Each step is
//! recorded in the transcript, so `/workflow resume` continues a run a
//! killed process left behind from its last finished step.

use parking_lot::Mutex;
use std::sync::Arc;

use super::{Drain, Session, transcript};
use crate::acp::updates;
use crate::workflow::plan::Plan;
use crate::workflow::run::{self, Recorded, Runner, StepEvent};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ClientCapabilities, PromptResponse, StopReason};
use agent_client_protocol::{Client, Error};

impl Session {
    pub(super) async fn workflow(
        self: &Arc<Self>,
        args: &str,
        http: &reqwest::Client,
        cx: ConnectionTo<Client>,
        client: ClientCapabilities,
        drain: Arc<Drain>,
    ) -> Result<PromptResponse, Error> {
        let settings = self.settings();
        let (workflows, problems) = crate::workflow::discover(&settings);
        // Words as a shell splits them, so a value may hold spaces:
        // `/workflow test-fix command='cargo test -p core'`.
        let Some(words) = shlex::split(args) else {
            self.say(
                &cx,
                "Usage: /workflow NAME [input=value …]. A quote is not closed; quote a value with spaces as input='a value'.\n",
            );
            return Ok(PromptResponse::new(StopReason::EndTurn));
        };
        let mut words = words.into_iter();
        let name = words.next().unwrap_or_default();
        let resume = name == "resume";
        let (workflow_name, inputs, run_id, recorded) = if resume {
            let Some(unfinished) = self.state.lock().unfinished_workflow.clone() else {
                self.say(&cx, "There is no interrupted workflow run to resume.\n");
                return Ok(PromptResponse::new(StopReason::EndTurn));
            };
            let steps = Recorded::of(&unfinished);
            (
                unfinished.workflow,
                Some(unfinished.inputs),
                unfinished.run,
                steps,
            )
        } else {
            (
                name.clone(),
                None,
                format!("wf_{}", uuid::Uuid::new_v4().simple()),
                Vec::new(),
            )
        };
        let workflow = match crate::workflow::find(&workflows, &problems, &workflow_name) {
            Ok(workflow) => workflow,
            Err(e) => {
                let usage = if workflow_name.is_empty() {
                    "Usage: /workflow NAME [input=value …]. ".to_string()
                } else {
                    String::new()
                };
                self.say(&cx, &format!("{usage}{e}\n"));
                return Ok(PromptResponse::new(StopReason::EndTurn));
            }
        };
        let inputs = match inputs {
            Some(inputs) => inputs,
            None => {
                let pairs: Vec<String> = words.collect();
                let bound = crate::workflow::parse_inputs(&pairs)
                    .and_then(|given| workflow.bind_inputs(&given));
                match bound {
                    Ok(inputs) => inputs,
                    Err(e) => {
                        self.say(&cx, &format!("{e}\n"));
                        return Ok(PromptResponse::new(StopReason::EndTurn));
                    }
                }
            }
        };
        let command = self.record_id(transcript::Record::Command {
            text: format!("/workflow {}", args.trim()),
        });
        if !resume {
            self.record(transcript::Record::Workflow {
                data: run::start_entry(&run_id, &workflow.name, &inputs),
            });
        }
        self.state.lock().unfinished_workflow = None;
        // The session's history stays as it is: the steps are the
        // workflow's, shown and recorded as such.
        let _history = self.history.lock().await;
        let (config, cancel) = self.turn_config()?;
        let mut host = self.host(cx.clone(), &client, drain);
        host.conversation = false;
        let operations = client.plan.is_some();
        let plan = Mutex::new(Plan::new(workflow, &recorded));
        self.notify(&cx, updates::plan_of(plan.lock().items(), operations));
        let on_step = |event: StepEvent<'_>| {
            if let StepEvent::Finished(record) = &event {
                self.record(transcript::Record::Workflow {
                    data: record.entry(&run_id),
                });
            }
            let update = {
                let mut plan = plan.lock();
                plan.apply(&event)
                    .then(|| updates::plan_of(plan.items(), operations))
            };
            if let Some(update) = update {
                self.notify(&cx, update);
            }
        };
        // A session on Claude Code never has pincer call with the CLI's
        // login, workflow steps included.
        let model = |name: &str| {
            let model = settings.catalog.resolve(name).ok()?;
            let key = settings.own_call_key(&model, &config.model);
            Some((model, key))
        };
        let recorded = Mutex::new(recorded);
        let runner = Runner {
            client: http,
            config: &config,
            tools: &self.tools,
            cwd: &self.cwd,
            host: &host,
            cancel: &cancel,
            workflows: &workflows,
            model: &model,
            on_step: &on_step,
            recorded: &recorded,
        };
        // A run is a turn for checkpoints: `/undo` puts back what its
        // tool steps changed.
        if let Some(recording) = config.checkpoints.clone() {
            let _ = tokio::task::spawn_blocking(move || recording.begin_turn()).await;
        }
        let result = runner.run(workflow, inputs).await;
        self.record(transcript::Record::Workflow {
            data: run::end_entry(&run_id, &result),
        });
        if let Some(recording) = config.checkpoints.clone() {
            let background = self.tools.iter().any(|t| t.holds_work());
            let changes = tokio::task::spawn_blocking(move || recording.end_turn(background))
                .await
                .ok()
                .flatten();
            let off = changes.is_none();
            let changes = changes.unwrap_or_default();
            self.record(transcript::Record::Checkpoint {
                prompt_id: command,
                files: changes.files,
                outside: changes.outside,
                off,
            });
        }
        match result {
            Ok(finished) => {
                let text = format!(
                    "Workflow `{}` finished ({} steps): {}",
                    workflow.name,
                    finished.steps,
                    run::shown(&finished.output)
                );
                self.record(transcript::Record::Notice { text: text.clone() });
                self.say(&cx, &format!("\n{text}\n"));
                Ok(PromptResponse::new(StopReason::EndTurn))
            }
            // Cancelled on purpose: nothing to resume.
            Err(run::RunError::Cancelled) => Ok(PromptResponse::new(StopReason::Cancelled)),
            Err(e) => {
                let text = format!("Workflow `{}` stopped: {e}", workflow.name);
                self.record(transcript::Record::Notice { text: text.clone() });
                self.say(&cx, &format!("\n{text}\n"));
                Ok(PromptResponse::new(StopReason::EndTurn))
            }
        }
    }
}
