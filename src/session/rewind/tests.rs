use pretty_assertions::assert_eq;

use super::*;
use crate::llm::Content;

fn entry(id: &str, record: Record) -> Entry {
    Entry {
        id: id.to_string(),
        parent_id: None,
        timestamp: "2026-11-29T09:00:00.000Z".to_string(),
        record,
    }
}

fn user(id: &str, text: &str) -> Entry {
    entry(
        id,
        Record::Message {
            message: Message::User {
                content: vec![Content::text(text)],
            },
            time: None,
        },
    )
}

fn checkpoint(id: &str, prompt: &str) -> Entry {
    entry(
        id,
        Record::Checkpoint {
            prompt_id: Some(prompt.to_string()),
            files: Vec::new(),
            outside: Vec::new(),
            off: false,
        },
    )
}

fn ids(effective: &Effective) -> Vec<&str> {
    effective.entries.iter().map(|e| e.id.as_str()).collect()
}

#[test]
fn a_rewind_takes_back_the_conversation_but_keeps_the_settings() {
    let entries = vec![
        user("e1", "first"),
        checkpoint("e2", "e1"),
        user("e3", "second"),
        entry(
            "e4",
            Record::ModelChange {
                model: "openai/gpt-5".into(),
            },
        ),
        checkpoint("e5", "e3"),
        entry(
            "e6",
            Record::Runtime {
                runtime: "claude-code".into(),
                resume: Some("cc1".into()),
            },
        ),
        entry(
            "e7",
            Record::Rewind {
                to: "e3".into(),
                files: Vec::new(),
            },
        ),
        entry(
            "e8",
            Record::RestoreEnd {
                of: "e7".into(),
                restored: Vec::new(),
                left: Vec::new(),
            },
        ),
    ];
    let effective = effective(entries.clone());
    assert_eq!(ids(&effective), ["e1", "e2", "e4"]);
    assert!(effective.rewound);
    assert_eq!(effective.unfinished, None);
    assert_eq!(effective.redo.len(), 1);
    let listed = turns(&effective.entries);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].prompt, "first");

    // Redo brings the turn back, after the setting.
    let mut redone = entries.clone();
    redone.push(entry(
        "e9",
        Record::Redo {
            of: "e7".into(),
            files: Vec::new(),
        },
    ));
    let effective = effective_of(redone.clone());
    // The Claude Code session went on past the rewind: not resumed.
    assert_eq!(ids(&effective), ["e1", "e2", "e4", "e3", "e5"]);
    assert!(effective.redo.is_empty());
    assert_eq!(turns(&effective.entries).len(), 2);
    // Cut off before its restore ended.
    assert_eq!(effective.unfinished.map(|u| u.of), Some("e9".to_string()));

    // Something said after a rewind: there is nothing to redo, and a redo
    // entry that comes anyway changes nothing.
    let mut said = entries;
    said.push(user("e9", "third"));
    said.push(entry(
        "e10",
        Record::Redo {
            of: "e7".into(),
            files: Vec::new(),
        },
    ));
    let effective = effective_of(said);
    assert_eq!(ids(&effective), ["e1", "e2", "e4", "e9"]);
}

fn effective_of(entries: Vec<Entry>) -> Effective {
    effective(entries)
}

#[test]
fn undo_twice_and_redo_twice_come_back_in_order() {
    let mut entries = vec![
        user("e1", "one"),
        checkpoint("e2", "e1"),
        user("e3", "two"),
        checkpoint("e4", "e3"),
        entry(
            "e5",
            Record::Rewind {
                to: "e3".into(),
                files: Vec::new(),
            },
        ),
        entry(
            "e6",
            Record::Rewind {
                to: "e1".into(),
                files: Vec::new(),
            },
        ),
    ];
    assert!(ids(&effective(entries.clone())).is_empty());
    assert_eq!(
        effective(entries.clone())
            .redo
            .iter()
            .map(|r| r.rewind.as_str())
            .collect::<Vec<_>>(),
        ["e5", "e6"]
    );
    entries.push(entry(
        "e7",
        Record::Redo {
            of: "e6".into(),
            files: Vec::new(),
        },
    ));
    assert_eq!(ids(&effective(entries.clone())), ["e1", "e2"]);
    entries.push(entry(
        "e8",
        Record::Redo {
            of: "e5".into(),
            files: Vec::new(),
        },
    ));
    assert_eq!(ids(&effective(entries)), ["e1", "e2", "e3", "e4"]);
}

#[test]
fn a_rewind_to_an_entry_that_is_not_there_takes_nothing_back() {
    let entries = vec![
        user("e1", "one"),
        entry(
            "e2",
            Record::Rewind {
                to: "e99".into(),
                files: Vec::new(),
            },
        ),
    ];
    let effective = effective(entries);
    assert_eq!(ids(&effective), ["e1"]);
    assert!(effective.redo.is_empty());
    assert!(!effective.rewound);
}
