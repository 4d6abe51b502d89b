//! What a headless run prints, in each `--output-format`, and what it
//! records: the run is a session like an editor's, so every finished
//! message goes into its transcript as it ends.
//!
//! - `text`: the answer streams to stdout; tool activity and problems go
//!   to stderr (`--quiet` keeps only problems, `--verbose` adds the
//!   session, model and a closing line with tokens, cost and time).
//! - `json`: only the final result object.
//! - `stream-json` (`--json`): a start event, the `session/update`
//!   notifications an editor would receive, then the result object.

use parking_lot::Mutex;
use std::io::Write;

use agent_client_protocol::v1::schema::SessionNotification;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::acp::updates;
use crate::agent::{AgentEvent, AgentHost, Answer};
use crate::llm::{ToolCall, Usage};
use crate::session::transcript;
use crate::tools::{CallInfo, Display};

/// `--output-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// The answer as plain text on stdout.
    Text,
    /// One JSON object when the run ends: the result.
    Json,
    /// NDJSON: a start event, session/update notifications, the result.
    StreamJson,
}

/// `--quiet` / `--verbose`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verbosity {
    Quiet,
    #[default]
    Normal,
    Verbose,
}

/// Writes one line to stdout; a closed pipe (`| head`) is not worth a
/// panic or an error.
pub fn print_line(value: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{value}");
    let _ = out.flush();
}

/// What the run has done so far, for the result object.
#[derive(Default)]
pub struct Tally {
    pub usage: Usage,
    pub cost: f64,
    pub turns: u32,
    /// The text of the latest assistant message that had any.
    pub final_text: String,
}

/// The agent's view of a script or terminal during one run.
pub struct PrintHost {
    pub session_id: String,
    pub format: OutputFormat,
    pub verbosity: Verbosity,
    /// Shared with the run's helpers, which add what they cost.
    pub tally: std::sync::Arc<Mutex<Tally>>,
    /// Put before each line of tool activity (a helper's name).
    pub prefix: String,
    pub ended_with_newline: Mutex<bool>,
    /// In `text` format, the model's text streams to stdout (a workflow
    /// run prints only its result there).
    pub show_answer: bool,
    /// The spinner and colour, when stderr is a terminal.
    pub terminal: super::terminal::Terminal,
    transcript: Mutex<transcript::Writer>,
    /// The entry id reserved for the streaming assistant message.
    message: Mutex<Option<String>>,
    /// The entry of the prompt that started the run (its checkpoint
    /// names it).
    prompt: Mutex<Option<String>>,
    calls: Mutex<std::collections::HashMap<String, CallInfo>>,
    /// The answer drawn as styled Markdown, when stdout is a terminal and
    /// colour is allowed; `None` prints the model's text as it is.
    markdown: Option<Mutex<super::markdown::Renderer>>,
}

impl PrintHost {
    pub fn new(
        session_id: String,
        format: OutputFormat,
        verbosity: Verbosity,
        transcript: transcript::Writer,
    ) -> Self {
        Self {
            session_id,
            format,
            verbosity,
            tally: std::sync::Arc::new(Mutex::new(Tally::default())),
            prefix: String::new(),
            ended_with_newline: Mutex::new(true),
            show_answer: true,
            terminal: super::terminal::Terminal::detect(
                format == OutputFormat::Text && verbosity != Verbosity::Quiet,
            ),
            transcript: Mutex::new(transcript),
            message: Mutex::new(None),
            prompt: Mutex::new(None),
            calls: Mutex::new(std::collections::HashMap::new()),
            markdown: (format == OutputFormat::Text && styled_stdout())
                .then(|| Mutex::new(super::markdown::Renderer::default())),
        }
    }

    /// Writes the answer's text to stdout, styled when it is a terminal.
    fn answer(&self, text: &str) {
        let shown = match &self.markdown {
            Some(renderer) => renderer.lock().push(text),
            None => text.to_string(),
        };
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(shown.as_bytes());
        let _ = out.flush();
    }

    /// Shows what the styled answer still holds back (a last line without
    /// its newline), at the end of a message.
    fn answer_end(&self) {
        if let Some(renderer) = &self.markdown {
            let rest = renderer.lock().finish();
            if !rest.is_empty() {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(rest.as_bytes());
                let _ = out.flush();
            }
        }
    }

    /// Appends to the transcript. A failure is logged, not fatal: the run
    /// goes on, and the next append tries again.
    pub fn record(&self, record: transcript::Record) {
        if let Err(e) = self.transcript.lock().append(record) {
            tracing::error!(error = %e, "cannot write the session transcript");
        }
    }

    /// Records the prompt that starts the run.
    pub fn record_prompt(&self, record: transcript::Record) {
        match self.transcript.lock().append(record) {
            Ok(id) => *self.prompt.lock() = Some(id),
            Err(e) => tracing::error!(error = %e, "cannot write the session transcript"),
        }
    }

    /// Tool activity and notices on stderr, unless `--quiet`.
    pub fn note(&self, text: &str) {
        if self.format == OutputFormat::Text && self.verbosity != Verbosity::Quiet {
            self.terminal.quiet();
            eprintln!("{}{text}", self.prefix);
        }
    }

    fn record_event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::UserMessage { content, time } => {
                self.record(transcript::Record::Message {
                    message: crate::llm::Message::User {
                        content: content.clone(),
                    },
                    time: Some(time.clone()),
                });
            }
            AgentEvent::MessageStart => {
                *self.message.lock() = Some(self.transcript.lock().reserve());
            }
            AgentEvent::MessageEnd(message) => {
                {
                    let mut tally = self.tally.lock();
                    tally.cost += message.usage.cost.total;
                    tally.usage.input += message.usage.input;
                    tally.usage.output += message.usage.output;
                    tally.usage.cache_read += message.usage.cache_read;
                    tally.usage.cache_write += message.usage.cache_write;
                    tally.turns += 1;
                    let text = message.text();
                    if !text.trim().is_empty() {
                        tally.final_text = text;
                    }
                }
                let record = transcript::Record::Message {
                    message: crate::llm::Message::Assistant((**message).clone()),
                    time: None,
                };
                let reserved = self.message.lock().take();
                let result = match reserved {
                    Some(id) => self.transcript.lock().append_as(id, record),
                    None => self.transcript.lock().append(record),
                };
                if let Err(e) = result {
                    tracing::error!(error = %e, "cannot write the session transcript");
                }
            }
            AgentEvent::ToolExecutionStart { call, info } => {
                self.calls.lock().insert(call.id.clone(), info.clone());
            }
            AgentEvent::ToolExecutionEnd {
                call_id,
                tool_name,
                output,
            } => {
                let call = self.calls.lock().remove(call_id);
                self.record(transcript::Record::ToolResult {
                    message: crate::llm::ToolResultMessage {
                        tool_call_id: call_id.clone(),
                        tool_name: tool_name.clone(),
                        content: output.content.clone(),
                        is_error: output.is_error,
                    },
                    call,
                    display: output.display.clone(),
                    details: output.details.clone(),
                });
            }
            AgentEvent::CompactionEnd {
                result: Ok(done), ..
            } => self.record(transcript::Record::Compaction {
                summary: done.summary.clone(),
                kept: done.kept,
                tokens_before: done.tokens_before,
                read_files: done.files.read.iter().cloned().collect(),
                modified_files: done.files.modified.iter().cloned().collect(),
            }),
            AgentEvent::Retry {
                attempt,
                delay,
                error,
            } => self.record(transcript::Record::Notice {
                text: format!(
                    "{error}. Retrying in {:.1} s (attempt {attempt}).",
                    delay.as_secs_f64()
                ),
            }),
            AgentEvent::Failover { text } | AgentEvent::Notice { text } => {
                self.record(transcript::Record::Notice { text: text.clone() });
            }
            AgentEvent::Checkpoint(changes) => {
                let (files, outside) = changes
                    .clone()
                    .map(|c| (c.files, c.outside))
                    .unwrap_or_default();
                if !outside.is_empty() {
                    let text = crate::session::rewind::outside_notice(&outside);
                    self.record(transcript::Record::Notice { text: text.clone() });
                    self.note(&format!("pincer: {text}"));
                }
                self.record(transcript::Record::Checkpoint {
                    prompt_id: self.prompt.lock().clone(),
                    files,
                    outside,
                    off: changes.is_none(),
                });
            }
            AgentEvent::Runtime { runtime, resume } => self.record(transcript::Record::Runtime {
                runtime: runtime.clone(),
                resume: resume.clone(),
            }),
            _ => {}
        }
    }
}

impl AgentHost for PrintHost {
    fn emit(&self, event: AgentEvent) {
        self.record_event(&event);
        match self.format {
            OutputFormat::Json => {}
            OutputFormat::StreamJson => {
                let cost = self.tally.lock().cost;
                // Printed as a client without plan operations gets it.
                let plan = updates::plan_update(&event, false);
                for update in updates::session_update(&event, cost)
                    .into_iter()
                    .chain(plan)
                {
                    let notification = SessionNotification::new(self.session_id.clone(), update);
                    print_line(&json!({
                        "jsonrpc": "2.0",
                        "method": "session/update",
                        "params": notification,
                    }));
                }
            }
            OutputFormat::Text => match event {
                AgentEvent::TurnStart | AgentEvent::MessageStart => {
                    // The spinner redraws its line: an answer cut mid-line
                    // (before a tool call) keeps its own.
                    if self.terminal.interactive && !*self.ended_with_newline.lock() {
                        println!();
                        *self.ended_with_newline.lock() = true;
                    }
                    self.terminal.wait();
                }
                AgentEvent::ThinkingDelta(_) => self.terminal.quiet(),
                AgentEvent::MessageEnd(_) | AgentEvent::AgentEnd { .. } => {
                    self.terminal.quiet();
                    self.answer_end();
                }
                AgentEvent::TextDelta(_) if !self.show_answer => {}
                AgentEvent::TextDelta(text) => {
                    self.terminal.quiet();
                    self.answer(&text);
                    *self.ended_with_newline.lock() = text.ends_with('\n');
                }
                AgentEvent::ToolExecutionStart { info, .. } => {
                    self.note(&format!("→ {}", info.title))
                }
                AgentEvent::ToolExecutionEnd { output, .. } if output.is_error => {
                    self.note(&format!("  ✗ {}", output.text()));
                }
                AgentEvent::Retry { error, delay, .. } => {
                    self.note(&format!(
                        "pincer: {error}; retrying in {:.1} s",
                        delay.as_secs_f64()
                    ));
                }
                AgentEvent::Failover { text } | AgentEvent::Notice { text } => {
                    self.note(&format!("pincer: {text}"))
                }
                _ => {}
            },
        }
    }

    fn request_permission<'a>(
        &'a self,
        _call: &'a ToolCall,
        _info: &'a CallInfo,
        reason: &'a str,
        _preview: Vec<Display>,
    ) -> BoxFuture<'a, Answer> {
        // Nobody can be asked; the mode already allowed what it allows.
        self.note(&format!("  refused ({reason}); pass --mode to allow more"));
        Box::pin(async { Answer::RejectOnce })
    }
}

/// The token counts of a result, named as Claude Code names them.
pub fn usage_json(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input,
        "output_tokens": usage.output,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    })
}

/// Whether the answer on stdout is drawn with styles: stdout is a terminal
/// and `NO_COLOR` is unset or empty.
fn styled_stdout() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
