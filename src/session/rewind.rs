//! Undo, redo and rewind as the transcript keeps them: append-only. A
//! rewind is an entry (`rewind`) that takes the conversation back to
//! before a run's prompt; the entries after it stay in the file and leave
//! what the model sees. A redo (`redo`) brings them back while nothing was
//! said since. Settings changed meanwhile (model, mode, title) stay as
//! they are: only the conversation goes back.
//!
//! [`effective`] reads a transcript's entries into the ones that count
//! now, the runs that can be rewound, what can be redone, and a restore a
//! killed process left unfinished. [`plan`] turns "back to before run N"
//! (or "redo") into the files to put back, checked against the working
//! directory; [`Rewinding`] writes the entries around the restore so that
//! a process killed half-way leaves a session that loads and says which
//! files were put back.

use std::path::{Path, PathBuf};

use crate::checkpoint::restore::{self, Plan};
use crate::checkpoint::store::Store;
use crate::checkpoint::turn::{FileChange, TurnChanges};
use crate::llm::Message;

use super::transcript::{Entry, LeftFile, Record, Writer};

/// A run the transcript recorded a checkpoint for, as `/rewind` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    /// The entry that started it (its prompt, or the command).
    pub prompt_id: String,
    /// The prompt's text.
    pub prompt: String,
    /// When it was sent (RFC 3339).
    pub time: String,
    /// What it changed in the files (`None`: checkpoints were off).
    pub changes: Option<TurnChanges>,
}

/// A rewind that can still be redone: nothing was said since.
#[derive(Clone, Debug, PartialEq)]
pub struct Redoable {
    /// The `rewind` entry.
    pub rewind: String,
    /// The files it put back, as it put them (a redo goes the other way).
    pub files: Vec<FileChange>,
}

/// A rewind or redo whose files were being put back when the process
/// died: no `restore_end` followed it.
#[derive(Clone, Debug, PartialEq)]
pub struct Unfinished {
    pub of: String,
    pub files: Vec<FileChange>,
}

/// A transcript's entries after its rewinds and redos.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effective {
    /// The entries that count, in order: the conversation without what
    /// was rewound, and every setting.
    pub entries: Vec<Entry>,
    /// The rewinds that can be redone, the last on top.
    pub redo: Vec<Redoable>,
    pub unfinished: Option<Unfinished>,
    /// Whether a rewind took anything back: a Claude Code session that
    /// saw it no longer matches the conversation.
    pub rewound: bool,
}

/// Whether an entry is part of the conversation (taken back by a rewind)
/// rather than a setting of the session.
fn is_conversation(record: &Record) -> bool {
    match record {
        Record::Message { .. }
        | Record::ToolResult { .. }
        | Record::Command { .. }
        | Record::Notice { .. }
        | Record::Compaction { .. }
        | Record::Workflow { .. }
        | Record::Checkpoint { .. }
        | Record::Runtime { .. }
        | Record::HelperEnd { .. } => true,
        Record::ModelChange { .. }
        | Record::ThinkingChange { .. }
        | Record::ModeChange { .. }
        | Record::SandboxChange { .. }
        | Record::QueueChange { .. }
        | Record::SystemPrompt { .. }
        | Record::Title { .. }
        | Record::Rewind { .. }
        | Record::Redo { .. }
        | Record::RestoreEnd { .. } => false,
    }
}

/// Applies the rewinds and redos of `entries` (see [`Effective`]). A
/// rewind to an entry that is not there (a damaged file) takes nothing
/// back.
pub fn effective(entries: Vec<Entry>) -> Effective {
    let mut out = Effective {
        entries: Vec::with_capacity(entries.len()),
        ..Effective::default()
    };
    // What each redoable rewind took back, beside `out.redo`.
    let mut taken: Vec<Vec<Entry>> = Vec::new();
    for entry in entries {
        match &entry.record {
            Record::Rewind { to, files } => {
                out.unfinished = Some(Unfinished {
                    of: entry.id.clone(),
                    files: files.clone(),
                });
                let Some(at) = out.entries.iter().rposition(|e| e.id == *to) else {
                    continue;
                };
                let tail = out.entries.split_off(at);
                let (conversation, settings): (Vec<Entry>, Vec<Entry>) =
                    tail.into_iter().partition(|e| is_conversation(&e.record));
                out.entries.extend(settings);
                // The Claude Code session went on past what is left.
                out.entries
                    .retain(|e| !matches!(e.record, Record::Runtime { .. }));
                out.rewound = true;
                out.redo.push(Redoable {
                    rewind: entry.id.clone(),
                    files: files.clone(),
                });
                taken.push(conversation);
            }
            Record::Redo { of, files } => {
                out.unfinished = Some(Unfinished {
                    of: entry.id.clone(),
                    files: files.clone(),
                });
                if out.redo.last().is_some_and(|r| r.rewind == *of) {
                    out.redo.pop();
                    if let Some(back) = taken.pop() {
                        out.entries.extend(
                            back.into_iter()
                                .filter(|e| !matches!(e.record, Record::Runtime { .. })),
                        );
                    }
                }
            }
            Record::RestoreEnd { of, .. } => {
                if out.unfinished.as_ref().is_some_and(|u| u.of == *of) {
                    out.unfinished = None;
                }
            }
            record => {
                // Something new said: what was rewound stays rewound.
                if matches!(record, Record::Message { .. } | Record::Command { .. }) {
                    out.redo.clear();
                    taken.clear();
                }
                out.entries.push(entry);
            }
        }
    }
    out
}

/// The runs of `entries` (effective ones) that recorded a checkpoint,
/// oldest first.
pub fn turns(entries: &[Entry]) -> Vec<Turn> {
    let mut turns = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let Record::Checkpoint {
            prompt_id: Some(prompt_id),
            files,
            outside,
            off,
        } = &entry.record
        else {
            continue;
        };
        let Some(prompt) = entries[..index].iter().rev().find(|e| e.id == *prompt_id) else {
            continue;
        };
        let text = match &prompt.record {
            Record::Message {
                message: Message::User { content },
                ..
            } => crate::tools::text_of(content),
            Record::Command { text } => text.clone(),
            _ => continue,
        };
        turns.push(Turn {
            prompt_id: prompt_id.clone(),
            prompt: text,
            time: prompt.timestamp.clone(),
            changes: (!off).then(|| TurnChanges {
                files: files.clone(),
                outside: outside.clone(),
            }),
        });
    }
    turns
}

/// What going back to before `turns[from]` puts back: the changes of it
/// and every later run, merged.
pub fn changes_since(turns: &[Turn], from: usize) -> (TurnChanges, Vec<usize>) {
    let mut merged = TurnChanges::default();
    let mut unrecorded = Vec::new();
    for (index, turn) in turns.iter().enumerate().skip(from) {
        match &turn.changes {
            Some(changes) => merged.merge(changes.clone()),
            None => unrecorded.push(index),
        }
    }
    (merged, unrecorded)
}

/// A rewind or redo checked against the working directory: what the user
/// is asked about before anything changes.
#[derive(Clone, Debug)]
pub struct Proposal {
    /// The entry the conversation goes back to before (rewind), or the
    /// rewind a redo reverses.
    pub target: Target,
    /// The files, each from what the turns left to what it becomes.
    pub files: Vec<FileChange>,
    pub plan: Plan,
    /// Files the runs wrote outside the working directory: not restored.
    pub outside: Vec<PathBuf>,
    /// Runs whose files were not recorded (checkpoints were off).
    pub unrecorded: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Rewind { to: String },
    Redo { of: String },
}

impl Proposal {
    /// Back to before `turns[from]`.
    pub fn rewind(
        root: &Path,
        store: &Store,
        turns: &[Turn],
        from: usize,
    ) -> std::io::Result<Self> {
        let (changes, unrecorded) = changes_since(turns, from);
        let plan = restore::plan(root, store, changes.undo())?;
        Ok(Self {
            target: Target::Rewind {
                to: turns[from].prompt_id.clone(),
            },
            files: reversed(&changes.files),
            plan,
            outside: changes.outside,
            unrecorded: unrecorded.len(),
        })
    }

    /// The last rewind reversed.
    pub fn redo(root: &Path, store: &Store, redo: &Redoable) -> std::io::Result<Self> {
        let back = TurnChanges {
            files: redo.files.clone(),
            outside: Vec::new(),
        };
        let plan = restore::plan(root, store, back.undo())?;
        Ok(Self {
            target: Target::Redo {
                of: redo.rewind.clone(),
            },
            files: reversed(&redo.files),
            plan,
            outside: Vec::new(),
            unrecorded: 0,
        })
    }
}

/// Each change the other way round.
fn reversed(files: &[FileChange]) -> Vec<FileChange> {
    files
        .iter()
        .map(|c| FileChange {
            path: c.path.clone(),
            before: c.after.clone(),
            after: c.before.clone(),
            shared: false,
        })
        .collect()
}

/// What a rewind or redo did to the files.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    pub restored: Vec<PathBuf>,
    pub left: Vec<LeftFile>,
}

/// Carries out `proposal`: the `rewind` (or `redo`) entry first, then the
/// files (conflicts only when `overwrite`), then the `restore_end` entry.
/// A process killed in between leaves the first entry alone, which the
/// next load finds ([`Effective::unfinished`]) and checks
/// ([`check_unfinished`]).
pub fn carry_out(
    writer: &mut Writer,
    root: &Path,
    store: &Store,
    proposal: &Proposal,
    overwrite: bool,
) -> Result<Outcome, super::transcript::TranscriptError> {
    // Only what will be written is named in the entry: a conflict left
    // alone is no part of it.
    let written: Vec<FileChange> = proposal
        .files
        .iter()
        .filter(|f| {
            proposal.plan.ready.iter().any(|s| s.path == f.path)
                || (overwrite
                    && proposal
                        .plan
                        .conflicts
                        .iter()
                        .any(|(s, _)| s.path == f.path))
        })
        .cloned()
        .collect();
    let of = writer.append(match &proposal.target {
        Target::Rewind { to } => Record::Rewind {
            to: to.clone(),
            files: written,
        },
        Target::Redo { of } => Record::Redo {
            of: of.clone(),
            files: written,
        },
    })?;
    let report = restore::apply(root, store, &proposal.plan, overwrite);
    let outcome = Outcome::of(proposal, report, overwrite);
    writer.append(Record::RestoreEnd {
        of,
        restored: outcome.restored.clone(),
        left: outcome.left.clone(),
    })?;
    Ok(outcome)
}

/// A restore a killed process left unfinished: which of its files are as
/// it wanted them now and which are not. The result is recorded (a
/// `restore_end`), so it is said once.
pub fn check_unfinished(
    writer: &mut Writer,
    root: &Path,
    store: &Store,
    unfinished: &Unfinished,
) -> Result<Outcome, super::transcript::TranscriptError> {
    let mut outcome = Outcome::default();
    for file in &unfinished.files {
        let now = restore::current(root, store, &file.path).ok().flatten();
        let done = match (&now, &file.after) {
            (None, None) => true,
            (Some(now), Some(wanted)) => now.same_as(wanted),
            _ => false,
        };
        if done {
            outcome.restored.push(file.path.clone());
        } else {
            outcome.left.push(LeftFile {
                path: file.path.clone(),
                why: "not put back: the restore was cut off".into(),
            });
        }
    }
    writer.append(Record::RestoreEnd {
        of: unfinished.of.clone(),
        restored: outcome.restored.clone(),
        left: outcome.left.clone(),
    })?;
    Ok(outcome)
}

/// The most diffs a question shows, and the largest file shown as one.
const MAX_DIFFS: usize = 50;
const MAX_DIFF_BYTES: usize = 256 * 1024;

impl Proposal {
    /// Whether there is any file to put back (ready or conflicting).
    pub fn touches_files(&self) -> bool {
        !self.plan.ready.is_empty() || !self.plan.conflicts.is_empty()
    }

    /// What the question before the restore says: which files change, and
    /// what would be lost by overwriting those changed since.
    pub fn summary(&self) -> String {
        let mut text = String::new();
        let names = |paths: &mut dyn Iterator<Item = &Path>| {
            paths
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let ready: Vec<&Path> = self
            .plan
            .ready
            .iter()
            .filter(|s| !is_dir_step(s))
            .map(|s| s.path.as_path())
            .collect();
        if !ready.is_empty() {
            text.push_str(&format!(
                "Puts back {} file{}: {}.",
                ready.len(),
                plural(ready.len()),
                names(&mut ready.iter().copied())
            ));
        }
        let (shared, changed): (Vec<_>, Vec<_>) =
            self.plan.conflicts.iter().partition(|(_, c)| c.shared);
        if !changed.is_empty() {
            text.push_str(&format!(
                "{}Changed since the checkpoint (by you, the editor or another session): {}. They are kept as they are unless you choose to overwrite them, which loses those changes.",
                if text.is_empty() { "" } else { "\n" },
                names(&mut changed.iter().map(|(s, _)| s.path.as_path()))
            ));
        }
        if !shared.is_empty() {
            text.push_str(&format!(
                "{}Changed while another session was running a command in this project at the same moment, so they may be its changes: {}. They are kept as they are unless you choose to overwrite them.",
                if text.is_empty() { "" } else { "\n" },
                names(&mut shared.iter().map(|(s, _)| s.path.as_path()))
            ));
        }
        for (path, why) in &self.plan.not_restorable {
            text.push_str(&format!("\nCannot put back `{}`: {why}.", path.display()));
        }
        if !self.outside.is_empty() {
            text.push_str(&format!(
                "\nFiles written outside the working directory are not put back: {}.",
                names(&mut self.outside.iter().map(PathBuf::as_path))
            ));
        }
        if self.unrecorded > 0 {
            text.push_str(&format!(
                "\n{} of the turns ran with checkpoints off: their file changes stay.",
                self.unrecorded
            ));
        }
        if text.is_empty() {
            text.push_str("No file changes to put back.");
        }
        text.trim_start().to_string()
    }

    /// Each file's change as a diff from what is there now to what the
    /// restore writes (text files; others are named).
    pub fn diffs(&self, root: &Path, store: &Store) -> Vec<crate::tools::Display> {
        use crate::tools::Display;
        // From what is there now: for a conflict, not what the turns left.
        let steps = self
            .plan
            .ready
            .iter()
            .map(|s| (s, s.expected.as_ref()))
            .chain(
                self.plan
                    .conflicts
                    .iter()
                    .map(|(s, c)| (s, c.found.as_ref())),
            );
        let mut out = Vec::new();
        let mut named = Vec::new();
        let is_dir = |e: Option<&crate::checkpoint::tree::Entry>| {
            e.is_some_and(|e| matches!(e.kind, crate::checkpoint::tree::Kind::Dir { .. }))
        };
        for (step, now) in steps {
            // A directory comes and goes with its files.
            if is_dir(now) || is_dir(step.target.as_ref()) {
                continue;
            }
            if out.len() >= MAX_DIFFS {
                named.push(step.path.display().to_string());
                continue;
            }
            let path = root.join(&step.path);
            let now = text_of(store, now);
            let then = text_of(store, step.target.as_ref());
            match (now, then) {
                (Some(old), Some(new)) => out.push(Display::Diff {
                    path,
                    old_text: old,
                    new_text: new.unwrap_or_default(),
                }),
                _ => named.push(format!("{} (not text)", step.path.display())),
            }
        }
        if !named.is_empty() {
            out.push(Display::Text(format!("Also: {}.", named.join(", "))));
        }
        out
    }
}

/// A file's text as an entry holds it: `Some(None)` for no file,
/// `None` when it is not shown as text (binary, too large, a link).
fn text_of(
    store: &Store,
    entry: Option<&crate::checkpoint::tree::Entry>,
) -> Option<Option<String>> {
    use crate::checkpoint::tree::Kind;
    let Some(entry) = entry else {
        return Some(None);
    };
    match (&entry.kind, &entry.content) {
        (Kind::File { .. }, Ok(Some(hash))) => {
            let bytes = store.read(*hash).ok()?;
            if bytes.len() > MAX_DIFF_BYTES {
                return None;
            }
            String::from_utf8(bytes).ok().map(Some)
        }
        (Kind::Symlink { target }, _) => Some(Some(format!("→ {}", target.display()))),
        _ => None,
    }
}

impl Outcome {
    /// What a restore of `proposal` did, from its report.
    pub fn of(proposal: &Proposal, report: restore::Report, overwrite: bool) -> Self {
        let mut outcome = Outcome {
            restored: report.restored,
            left: Vec::new(),
        };
        if !overwrite {
            for (step, conflict) in &proposal.plan.conflicts {
                outcome.left.push(LeftFile {
                    path: step.path.clone(),
                    why: if conflict.shared {
                        "another session ran at the same moment and may have made this change; kept as it is"
                    } else {
                        "changed since the checkpoint; kept as it is"
                    }
                    .into(),
                });
            }
        }
        for (path, why) in &proposal.plan.not_restorable {
            outcome.left.push(LeftFile {
                path: path.clone(),
                why: why.clone(),
            });
        }
        for (path, error) in report.failed {
            outcome.left.push(LeftFile { path, why: error });
        }
        outcome
    }

    /// What the user is told after the restore.
    pub fn report(&self) -> String {
        let mut text = String::new();
        if !self.restored.is_empty() {
            text.push_str(&format!(
                "Put back {} file{}: {}.",
                self.restored.len(),
                plural(self.restored.len()),
                self.restored
                    .iter()
                    .map(|p| format!("`{}`", p.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for left in &self.left {
            text.push_str(&format!("\nLeft `{}`: {}.", left.path.display(), left.why));
        }
        text.trim_start().to_string()
    }
}

/// What the user is told when a run wrote files outside the working
/// directory: undo will not put them back.
pub fn outside_notice(outside: &[PathBuf]) -> String {
    format!(
        "This turn wrote outside the working directory, where undo does not reach: {}.",
        outside
            .iter()
            .map(|p| format!("`{}`", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Whether a change is a directory's (which comes and goes with its
/// files, and is not counted as a file).
fn is_dir_change(change: &FileChange) -> bool {
    [&change.before, &change.after]
        .into_iter()
        .flatten()
        .any(|e| matches!(e.kind, crate::checkpoint::tree::Kind::Dir { .. }))
}

/// Whether a step puts back a directory.
fn is_dir_step(step: &restore::Step) -> bool {
    [&step.expected, &step.target]
        .into_iter()
        .flatten()
        .any(|e| matches!(e.kind, crate::checkpoint::tree::Kind::Dir { .. }))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Which way to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Travel {
    /// Back to before the last turn.
    Undo,
    /// Reverse the last undo or rewind.
    Redo,
    /// Back to before turn N (1-based, as [`list`] numbers them).
    Rewind(usize),
}

impl Travel {
    /// `/undo`, `/redo`, `/rewind N` as typed (`/rewind` alone is the
    /// list, not a travel: `Ok(None)`); `None` for any other text.
    pub fn parse(text: &str) -> Option<Result<Option<Travel>, String>> {
        let text = text.trim();
        let rest = text.strip_prefix('/')?;
        let (name, args) = match rest.find(char::is_whitespace) {
            Some(at) => (&rest[..at], rest[at..].trim()),
            None => (rest, ""),
        };
        Some(match name {
            "undo" => Ok(Some(Travel::Undo)),
            "redo" => Ok(Some(Travel::Redo)),
            "rewind" if args.is_empty() => Ok(None),
            "rewind" => args
                .parse()
                .ok()
                .filter(|n| *n >= 1)
                .map(|n| Some(Travel::Rewind(n)))
                .ok_or_else(|| {
                    format!("`/rewind {args}`: give a turn number (`/rewind` lists them).")
                }),
            _ => return None,
        })
    }
}

/// What `travel` would do to the session `restored` and the files under
/// `root`, and a title for it (`Undo turn 3 (“…”)`).
pub fn propose(
    restored: &super::Restored,
    root: &Path,
    store: &Store,
    travel: &Travel,
) -> Result<(Proposal, String), String> {
    let turns = &restored.turns;
    let checked =
        |p: std::io::Result<Proposal>| p.map_err(|e| format!("The files cannot be checked: {e}"));
    match travel {
        Travel::Undo => {
            let last = turns
                .len()
                .checked_sub(1)
                .ok_or("There is no turn to undo.")?;
            Ok((
                checked(Proposal::rewind(root, store, turns, last))?,
                format!("Undo turn {} (“{}”)", last + 1, short(&turns[last].prompt)),
            ))
        }
        Travel::Rewind(n) => {
            if !(1..=turns.len()).contains(n) {
                return Err(match turns.len() {
                    0 => "There is no turn to go back to.".to_string(),
                    len => format!("There is no turn {n}: the turns are 1 to {len}."),
                });
            }
            Ok((
                checked(Proposal::rewind(root, store, turns, n - 1))?,
                format!(
                    "Rewind to before turn {n} (“{}”)",
                    short(&turns[n - 1].prompt)
                ),
            ))
        }
        Travel::Redo => {
            let redo = restored.redo.last().ok_or("There is nothing to redo.")?;
            Ok((
                checked(Proposal::redo(root, store, redo))?,
                "Redo what was undone".to_string(),
            ))
        }
    }
}

/// A prompt's first line, shortened for a title.
pub fn short(prompt: &str) -> String {
    let line = prompt.lines().next().unwrap_or_default();
    let mut out: String = line.chars().take(60).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

/// What the user is told once a travel is done.
pub fn done_text(what: &str, proposal: &Proposal, outcome: &Outcome) -> String {
    let mut text = format!("{what}: done. ");
    text.push_str(match proposal.target {
        Target::Rewind { .. } => "The model no longer sees those turns.",
        Target::Redo { .. } => "The model sees those turns again.",
    });
    let report = outcome.report();
    if !report.is_empty() {
        text.push('\n');
        text.push_str(&report);
    }
    if !proposal.outside.is_empty() {
        text.push('\n');
        text.push_str(&format!(
            "Not put back (outside the working directory): {}.",
            proposal
                .outside
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if proposal.unrecorded > 0 {
        text.push_str("\nSome of those turns ran with checkpoints off: their file changes stay.");
    }
    text
}

/// `/rewind`'s list: each run with its number, time, prompt and files.
pub fn list(turns: &[Turn]) -> String {
    if turns.is_empty() {
        return "There is no turn to go back to.".to_string();
    }
    let mut text = String::from("Turns (`/rewind N` goes back to before turn N):\n");
    for (index, turn) in turns.iter().enumerate() {
        let prompt: String = turn
            .prompt
            .lines()
            .next()
            .unwrap_or_default()
            .chars()
            .take(80)
            .collect();
        let count = turn
            .changes
            .as_ref()
            .map_or(0, |c| c.files.iter().filter(|f| !is_dir_change(f)).count());
        let files = match &turn.changes {
            Some(_) if count == 0 => "no files".to_string(),
            Some(_) => format!("{count} file{}", plural(count)),
            None => "files not recorded".to_string(),
        };
        let time = turn.time.get(..16).unwrap_or(&turn.time).replace('T', " ");
        text.push_str(&format!("{}. {time} — {prompt} ({files})\n", index + 1));
    }
    text
}

/// Where a fork ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForkPoint {
    /// The whole conversation.
    Whole,
    /// Before turn N (1-based, as [`list`] numbers them): what a rewind to
    /// there would leave.
    BeforeTurn(usize),
    /// Through the turn that holds the entry (a message's id, as replays
    /// give it).
    ThroughTurnOf(String),
}

/// The entries a fork at `point` keeps, of a transcript's `entries`
/// (rewinds applied), and the turns that come after it.
pub fn fork_entries(
    entries: Vec<Entry>,
    point: &ForkPoint,
) -> Result<(Vec<Entry>, Vec<Turn>), String> {
    let kept = effective(entries).entries;
    let turns = turns(&kept);
    let position = |id: &str| kept.iter().position(|e| e.id == id);
    let cut = match point {
        ForkPoint::Whole => kept.len(),
        ForkPoint::BeforeTurn(n) => {
            let turn = n.checked_sub(1).and_then(|i| turns.get(i)).ok_or_else(|| {
                format!("There is no turn {n}: the turns are 1 to {}.", turns.len())
            })?;
            position(&turn.prompt_id).unwrap_or(kept.len())
        }
        ForkPoint::ThroughTurnOf(id) => {
            let at = position(id)
                .ok_or_else(|| format!("There is no message `{id}` in the session."))?;
            // The next run's prompt after it; without checkpoints, the
            // next user message.
            kept.iter()
                .enumerate()
                .skip(at + 1)
                .find(|(_, e)| {
                    if turns.is_empty() {
                        matches!(
                            e.record,
                            Record::Message {
                                message: Message::User { .. },
                                ..
                            }
                        )
                    } else {
                        turns.iter().any(|t| t.prompt_id == e.id)
                    }
                })
                .map_or(kept.len(), |(i, _)| i)
        }
    };
    let after: Vec<Turn> = turns
        .into_iter()
        .filter(|t| position(&t.prompt_id).is_some_and(|i| i >= cut))
        .collect();
    let mut kept = kept;
    kept.truncate(cut);
    Ok((kept, after))
}

/// The entry of the user message a client names (`_session/rewind`, a
/// fork point): by its id, else by the SHA-256 of its text
/// (`sha256:<hex>`) and which occurrence of that text it is (1-based), as
/// JetBrains' clients send it for a message whose id they never got.
pub fn find_message(
    entries: &[Entry],
    id: &str,
    fingerprint: Option<&str>,
    occurrence: Option<u32>,
) -> Option<String> {
    if !id.is_empty() && entries.iter().any(|e| e.id == id) {
        return Some(id.to_string());
    }
    // An id with a `:segment:<n>` suffix names the message it is part of.
    if let Some((base, _)) = id.split_once(":segment:")
        && entries.iter().any(|e| e.id == base)
    {
        return Some(base.to_string());
    }
    let wanted = fingerprint?.strip_prefix("sha256:")?.to_ascii_lowercase();
    let occurrence = occurrence.unwrap_or(1).max(1) as usize;
    entries
        .iter()
        .filter(|e| match &e.record {
            Record::Message {
                message: Message::User { content },
                ..
            } => {
                use sha2::Digest;
                let digest = sha2::Sha256::digest(crate::tools::text_of(content).as_bytes());
                let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
                hex == wanted
            }
            _ => false,
        })
        .nth(occurrence - 1)
        .map(|e| e.id.clone())
}

/// A session made by [`fork`].
#[derive(Clone, Debug)]
pub struct Forked {
    pub id: String,
    pub path: PathBuf,
    /// The directory it works in (its parent's).
    pub cwd: PathBuf,
    /// The parent's turns after the fork point: their files are what
    /// putting the files back to the fork point restores.
    pub after: Vec<Turn>,
}

/// Forks the session stored at `source` at `point`: a new session whose
/// transcript names it as its parent and holds its conversation up to
/// there. The files are left as they are.
pub fn fork(data_dir: &Path, source: &Path, point: &ForkPoint) -> Result<Forked, String> {
    let loaded = super::transcript::load(source).map_err(|e| e.to_string())?;
    let (entries, after) = fork_entries(loaded.entries, point)?;
    let id = format!("sess_{}", uuid::Uuid::new_v4().simple());
    let cwd = loaded.header.cwd.clone();
    let path = super::transcript_path(data_dir, &cwd, &id);
    let header = super::transcript::Header::new(id.clone(), cwd.clone(), Some(loaded.header.id));
    write_fork(&path, &header, entries).map_err(|e| e.to_string())?;
    Ok(Forked {
        id,
        path,
        cwd,
        after,
    })
}

/// Writes a new session at `path` (its `header` names the parent) whose
/// transcript holds `entries` as they are, ids and all.
pub fn write_fork(
    path: &Path,
    header: &super::transcript::Header,
    entries: Vec<Entry>,
) -> Result<(), super::transcript::TranscriptError> {
    let mut writer = Writer::create(path, header)?;
    for entry in entries {
        writer.append_as(entry.id, entry.record)?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "rewind/tests.rs"]
mod tests;
