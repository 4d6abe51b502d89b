//! Reading one transcript line into an [`Entry`]: the on-disk field
//! names, the `type` that picks the record, and the message read straight
//! into its type in the same pass.

use serde::Deserialize;

use std::path::PathBuf;

use super::{Entry, LeftFile, Record};
use crate::agent::{Mode, QueueMode};
use crate::checkpoint::turn::FileChange;
use crate::context::ClientPrompt;
use crate::llm::{Message, ThinkingLevel, ToolResultMessage};
use crate::tools::{CallInfo, Display};

/// An entry as it lies on disk, read field by field. Deriving
/// `Deserialize` for [`Entry`] would go through `flatten` and the `type`
/// tag, which buffer every line as a tree and copy it before the message
/// is read. Here the fields are read in one pass ([`EntryVisitor`]): the
/// message straight into its type when `type` came before it, as pincer
/// writes it; otherwise kept as raw JSON until `type` says what it is.
#[derive(Default)]
struct RawEntry {
    kind: Option<String>,
    id: Option<String>,
    parent_id: Option<String>,
    timestamp: Option<String>,
    message: Option<MessageField>,
    call: Option<CallInfo>,
    display: Vec<Display>,
    details: serde_json::Value,
    model: Option<String>,
    level: Option<ThinkingLevel>,
    mode: Option<Mode>,
    sandbox: Option<crate::tools::sandbox::SandboxMode>,
    queue: Option<QueueMode>,
    prompt: Option<ClientPrompt>,
    title: Option<String>,
    by_user: bool,
    text: Option<String>,
    summary: Option<String>,
    time: Option<String>,
    kept: Option<usize>,
    tokens_before: u64,
    read_files: Vec<String>,
    modified_files: Vec<String>,
    runtime: Option<String>,
    resume: Option<String>,
    data: Option<serde_json::Value>,
    prompt_id: Option<String>,
    files: Option<Vec<FileChange>>,
    outside: Vec<PathBuf>,
    to: Option<String>,
    of: Option<String>,
    restored: Vec<PathBuf>,
    left: Vec<LeftFile>,
    off: bool,
    stop: Option<String>,
    cost: f64,
}

/// An entry's `message`, read as what its `type` says, or kept raw when
/// the `type` came after it.
enum MessageField {
    Message(Message),
    ToolResult(ToolResultMessage),
    Raw(Box<serde_json::value::RawValue>),
}

/// The keys of an entry; unknown ones are skipped.
#[derive(Deserialize)]
#[serde(field_identifier)]
enum Field {
    #[serde(rename = "type")]
    Kind,
    #[serde(rename = "id")]
    Id,
    #[serde(rename = "parentId")]
    ParentId,
    #[serde(rename = "timestamp")]
    Timestamp,
    #[serde(rename = "message")]
    Message,
    #[serde(rename = "call")]
    Call,
    #[serde(rename = "display")]
    Display,
    #[serde(rename = "details")]
    Details,
    #[serde(rename = "model")]
    Model,
    #[serde(rename = "level")]
    Level,
    #[serde(rename = "mode")]
    Mode,
    #[serde(rename = "sandbox")]
    Sandbox,
    #[serde(rename = "queue")]
    Queue,
    #[serde(rename = "prompt")]
    Prompt,
    #[serde(rename = "title")]
    Title,
    // Record's fields keep their snake_case names on disk.
    #[serde(rename = "by_user")]
    ByUser,
    #[serde(rename = "text")]
    Text,
    #[serde(rename = "summary")]
    Summary,
    #[serde(rename = "time")]
    Time,
    #[serde(rename = "kept")]
    Kept,
    #[serde(rename = "tokens_before")]
    TokensBefore,
    #[serde(rename = "read_files")]
    ReadFiles,
    #[serde(rename = "modified_files")]
    ModifiedFiles,
    #[serde(rename = "runtime")]
    Runtime,
    #[serde(rename = "resume")]
    Resume,
    #[serde(rename = "data")]
    Data,
    #[serde(rename = "prompt_id")]
    PromptId,
    #[serde(rename = "files")]
    Files,
    #[serde(rename = "outside")]
    Outside,
    #[serde(rename = "to")]
    To,
    #[serde(rename = "of")]
    Of,
    #[serde(rename = "restored")]
    Restored,
    #[serde(rename = "left")]
    Left,
    #[serde(rename = "off")]
    Off,
    #[serde(rename = "stop")]
    Stop,
    #[serde(rename = "cost")]
    Cost,
    #[serde(other)]
    Other,
}

struct EntryVisitor;

impl<'de> serde::de::Visitor<'de> for EntryVisitor {
    type Value = RawEntry;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a transcript entry")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RawEntry, A::Error> {
        fn once<T, E: serde::de::Error>(slot: &Option<T>, name: &'static str) -> Result<(), E> {
            match slot {
                Some(_) => Err(E::duplicate_field(name)),
                None => Ok(()),
            }
        }
        let mut e = RawEntry::default();
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Kind => {
                    once(&e.kind, "type")?;
                    e.kind = Some(map.next_value()?);
                }
                Field::Id => {
                    once(&e.id, "id")?;
                    e.id = Some(map.next_value()?);
                }
                Field::ParentId => e.parent_id = map.next_value()?,
                Field::Timestamp => {
                    once(&e.timestamp, "timestamp")?;
                    e.timestamp = Some(map.next_value()?);
                }
                Field::Message => {
                    once(&e.message, "message")?;
                    e.message = match e.kind.as_deref() {
                        Some("message") => map
                            .next_value::<Option<Message>>()?
                            .map(MessageField::Message),
                        Some("tool_result") => map
                            .next_value::<Option<ToolResultMessage>>()?
                            .map(MessageField::ToolResult),
                        _ => map
                            .next_value::<Option<Box<serde_json::value::RawValue>>>()?
                            .map(MessageField::Raw),
                    };
                }
                Field::Call => e.call = map.next_value()?,
                Field::Display => e.display = map.next_value()?,
                Field::Details => e.details = map.next_value()?,
                Field::Model => e.model = map.next_value()?,
                Field::Level => e.level = map.next_value()?,
                Field::Mode => e.mode = map.next_value()?,
                Field::Sandbox => e.sandbox = map.next_value()?,
                Field::Queue => e.queue = map.next_value()?,
                Field::Prompt => e.prompt = map.next_value()?,
                Field::Title => e.title = map.next_value()?,
                Field::ByUser => e.by_user = map.next_value()?,
                Field::Text => e.text = map.next_value()?,
                Field::Summary => e.summary = map.next_value()?,
                Field::Time => e.time = map.next_value()?,
                Field::Kept => e.kept = map.next_value()?,
                Field::TokensBefore => e.tokens_before = map.next_value()?,
                Field::ReadFiles => e.read_files = map.next_value()?,
                Field::ModifiedFiles => e.modified_files = map.next_value()?,
                Field::Runtime => e.runtime = map.next_value()?,
                Field::Resume => e.resume = map.next_value()?,
                Field::Data => e.data = map.next_value()?,
                Field::PromptId => e.prompt_id = map.next_value()?,
                Field::Files => e.files = map.next_value()?,
                Field::Outside => e.outside = map.next_value()?,
                Field::To => e.to = map.next_value()?,
                Field::Of => e.of = map.next_value()?,
                Field::Restored => e.restored = map.next_value()?,
                Field::Left => e.left = map.next_value()?,
                Field::Off => e.off = map.next_value()?,
                Field::Stop => e.stop = map.next_value()?,
                Field::Cost => e.cost = map.next_value::<Option<f64>>()?.unwrap_or_default(),
                Field::Other => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        use serde::de::Error;
        for (slot, name) in [
            (&e.kind, "type"),
            (&e.id, "id"),
            (&e.timestamp, "timestamp"),
        ] {
            if slot.is_none() {
                return Err(A::Error::missing_field(name));
            }
        }
        Ok(e)
    }
}

impl RawEntry {
    fn into_entry(self) -> Result<Entry, String> {
        fn need<T>(field: Option<T>, name: &str, kind: &str) -> Result<T, String> {
            field.ok_or_else(|| format!("a `{kind}` entry needs `{name}`"))
        }
        let kind_owned = need(self.kind, "type", "transcript")?;
        let kind = kind_owned.as_str();
        let message = need(self.message, "message", kind);
        let record = match kind {
            "message" => Record::Message {
                message: match message? {
                    MessageField::Message(message) => message,
                    MessageField::Raw(raw) => {
                        serde_json::from_str(raw.get()).map_err(|e| e.to_string())?
                    }
                    MessageField::ToolResult(_) => unreachable_kind(kind)?,
                },
                time: self.time,
            },
            "tool_result" => Record::ToolResult {
                message: match message? {
                    MessageField::ToolResult(message) => message,
                    MessageField::Raw(raw) => {
                        serde_json::from_str(raw.get()).map_err(|e| e.to_string())?
                    }
                    MessageField::Message(_) => unreachable_kind(kind)?,
                },
                call: self.call,
                display: self.display,
                details: self.details,
            },
            "model_change" => Record::ModelChange {
                model: need(self.model, "model", kind)?,
            },
            "thinking_change" => Record::ThinkingChange {
                level: need(self.level, "level", kind)?,
            },
            "mode_change" => Record::ModeChange {
                mode: need(self.mode, "mode", kind)?,
            },
            "sandbox_change" => Record::SandboxChange {
                sandbox: need(self.sandbox, "sandbox", kind)?,
            },
            "queue_change" => Record::QueueChange {
                queue: need(self.queue, "queue", kind)?,
            },
            "system_prompt" => Record::SystemPrompt {
                prompt: need(self.prompt, "prompt", kind)?,
            },
            "title" => Record::Title {
                title: need(self.title, "title", kind)?,
                by_user: self.by_user,
            },
            "command" => Record::Command {
                text: need(self.text, "text", kind)?,
            },
            "notice" => Record::Notice {
                text: need(self.text, "text", kind)?,
            },
            "compaction" => Record::Compaction {
                summary: need(self.summary, "summary", kind)?,
                kept: need(self.kept, "kept", kind)?,
                tokens_before: self.tokens_before,
                read_files: self.read_files,
                modified_files: self.modified_files,
            },
            "workflow" => Record::Workflow {
                data: need(self.data, "data", kind)?,
            },
            "runtime" => Record::Runtime {
                runtime: need(self.runtime, "runtime", kind)?,
                resume: self.resume,
            },
            "checkpoint" => Record::Checkpoint {
                prompt_id: self.prompt_id,
                files: need(self.files, "files", kind)?,
                outside: self.outside,
                off: self.off,
            },
            "rewind" => Record::Rewind {
                to: need(self.to, "to", kind)?,
                files: self.files.unwrap_or_default(),
            },
            "redo" => Record::Redo {
                of: need(self.of, "of", kind)?,
                files: self.files.unwrap_or_default(),
            },
            "restore_end" => Record::RestoreEnd {
                of: need(self.of, "of", kind)?,
                restored: self.restored,
                left: self.left,
            },
            "helper_end" => Record::HelperEnd {
                stop: need(self.stop, "stop", kind)?,
                cost: self.cost,
            },
            other => return Err(format!("unknown entry type `{other}`")),
        };
        Ok(Entry {
            id: need(self.id, "id", kind)?,
            parent_id: self.parent_id,
            timestamp: need(self.timestamp, "timestamp", kind)?,
            record,
        })
    }
}

/// A message read as one kind of entry's while the entry is another's:
/// cannot happen, since the message is read by the `type` seen before it.
fn unreachable_kind<T>(kind: &str) -> Result<T, String> {
    Err(format!(
        "a `{kind}` entry's message was read as another kind's"
    ))
}

impl<'de> Deserialize<'de> for Entry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_map(EntryVisitor)?
            .into_entry()
            .map_err(serde::de::Error::custom)
    }
}
