//! Agent definitions: the helpers the model may hand a job to (the `task`
//! tool). Each is a Markdown file whose front matter names it (`name`,
//! `description`, and optionally `model`, `tools`, `thinking`) and whose
//! body is the helper's instructions.
//!
//! They come from the user's `<config dir>/agents/*.md` and, once the user
//! trusts the project, from its `.pincer/agents/*.md` and Claude Code's
//! `.claude/agents/*.md` (same format; Claude Code's tool names are
//! understood). An untrusted project's definitions are not read: a
//! definition chooses instructions and a model, which a stranger's
//! repository does not get to choose. The nearest definition of a name
//! wins: the project's over the user's.

use std::path::{Path, PathBuf};

use super::Sources;
use super::frontmatter::{self, FrontMatter};
use crate::llm::ThinkingLevel;

/// One helper the model may start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    pub name: String,
    /// When to use it: what the `task` tool tells the model.
    pub description: String,
    /// The model it runs on (`provider/model` or a catalog alias);
    /// `None`: the parent's.
    pub model: Option<String>,
    /// The only tools it may use (pincer's names); `None`: the parent's.
    /// The parent's policy still applies: a list only narrows.
    pub tools: Option<Vec<String>>,
    pub thinking: Option<ThinkingLevel>,
    /// Its instructions (the file's body).
    pub prompt: String,
    pub path: PathBuf,
}

/// The definitions `sources` offer, nearest first, and what was wrong
/// with the files that were skipped.
pub fn discover(sources: &Sources) -> (Vec<Definition>, Vec<String>) {
    let mut found: Vec<Definition> = Vec::new();
    let mut problems = Vec::new();
    for dir in dirs(sources) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md") && p.is_file())
            .collect();
        files.sort();
        for path in files {
            let Some(definition) = load(&path, &mut problems) else {
                continue;
            };
            match found.iter().find(|d| d.name == definition.name) {
                Some(winner) => problems.push(format!(
                    "agent `{}` at {} is hidden by the one of the same name at {}",
                    definition.name,
                    definition.path.display(),
                    winner.path.display()
                )),
                None => found.push(definition),
            }
        }
    }
    (found, problems)
}

/// Where definitions are looked for, nearest first: the project's (only
/// when trusted), then the user's.
fn dirs(sources: &Sources) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if sources.project_trusted {
        for dir in sources.project_dirs() {
            dirs.push(dir.join(".pincer").join("agents"));
            dirs.push(dir.join(".claude").join("agents"));
        }
    }
    dirs.push(sources.config_dir.join("agents"));
    dirs
}

/// The largest definition file read; anything longer is not a prompt.
const MAX_FILE: u64 = 256 * 1024;

fn load(path: &Path, problems: &mut Vec<String>) -> Option<Definition> {
    let skipped = |why: &str| format!("agent {} was skipped: {why}", path.display());
    if std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_FILE) {
        problems.push(skipped("it is larger than 256 KiB"));
        return None;
    }
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(skipped(&format!("it could not be read ({e})")));
            return None;
        }
    };
    let FrontMatter { mut fields, body } = match frontmatter::parse(&text) {
        Ok(front) => front,
        Err(_) => {
            problems.push(skipped(
                "it has no closed front matter; start it with `---`, `name: <name>`, \
                 `description: <when to use it>`, and another `---`",
            ));
            return None;
        }
    };
    let name = fields.remove("name").unwrap_or_default();
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !valid {
        problems.push(skipped(
            "its `name` is missing or not made of letters, digits, `-` and `_`",
        ));
        return None;
    }
    let description = fields.remove("description").unwrap_or_default();
    if description.trim().is_empty() {
        problems.push(skipped("its front matter has no `description`"));
        return None;
    }
    let thinking = match fields.remove("thinking") {
        None => None,
        Some(level) => match ThinkingLevel::parse(level.trim()) {
            Some(level) => Some(level),
            None => {
                problems.push(skipped(&format!(
                    "`thinking: {level}` is not one of off, minimal, low, medium, high"
                )));
                return None;
            }
        },
    };
    let model = fields
        .remove("model")
        .map(|m| m.trim().to_string())
        // Claude Code's `inherit` means the parent's model.
        .filter(|m| !m.is_empty() && m != "inherit");
    let tools = fields.remove("tools").map(|list| tool_names(&list));
    Some(Definition {
        name,
        description: description.trim().to_string(),
        model,
        tools,
        thinking,
        prompt: body.trim().to_string(),
        path: path.to_path_buf(),
    })
}

/// A `tools` value (`Read, Grep`, `[read, grep]`, or an indented `- read`
/// list) as pincer's tool names; Claude Code's names are translated.
pub fn tool_names(list: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in list.split(|c: char| c == ',' || c.is_whitespace()) {
        let word = word.trim_matches(|c: char| matches!(c, '[' | ']' | '"' | '\'' | '-'));
        if word.is_empty() {
            continue;
        }
        let name = match word {
            "Read" => "read",
            "Write" => "write",
            "Edit" | "MultiEdit" => "edit",
            "Bash" => "bash",
            "BashOutput" | "KillShell" => "process",
            "Grep" => "grep",
            "Glob" => "find",
            "LS" => "ls",
            "TodoWrite" => "todo",
            "Task" | "Agent" => "task",
            "AskUserQuestion" => "ask_user",
            other => other,
        };
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(config: &Path, cwd: &Path, trusted: bool) -> Sources {
        Sources {
            cwd: cwd.to_path_buf(),
            config_dir: config.to_path_buf(),
            project_trusted: trusted,
        }
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn definitions_come_from_the_user_and_a_trusted_project_only() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        std::fs::create_dir(work.path().join(".git")).unwrap();
        write(
            &home.path().join("agents/reviewer.md"),
            "---\nname: reviewer\ndescription: Reviews a diff\nthinking: high\n---\nYou review.\n",
        );
        // The agent's own workspace lives beside the definitions.
        std::fs::create_dir_all(home.path().join("agents/main/workspace")).unwrap();
        write(
            &work.path().join(".pincer/agents/reviewer.md"),
            "---\nname: reviewer\ndescription: The project's reviewer\nmodel: openai/gpt-4o\n---\nProject review.\n",
        );
        write(
            &work.path().join(".claude/agents/explorer.md"),
            "---\nname: explorer\ndescription: Finds code\ntools: Read, Grep, Glob, Bash\nmodel: inherit\n---\nExplore.\n",
        );
        let (untrusted, problems) = discover(&sources(home.path(), work.path(), false));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(untrusted.len(), 1);
        assert_eq!(untrusted[0].description, "Reviews a diff");
        assert_eq!(untrusted[0].thinking, Some(ThinkingLevel::High));
        assert_eq!(untrusted[0].prompt, "You review.");

        let (trusted, problems) = discover(&sources(home.path(), work.path(), true));
        let names: Vec<&str> = trusted.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["reviewer", "explorer"]);
        assert_eq!(trusted[0].description, "The project's reviewer");
        assert_eq!(trusted[0].model.as_deref(), Some("openai/gpt-4o"));
        assert_eq!(trusted[1].model, None);
        assert_eq!(
            trusted[1].tools.as_deref(),
            Some(&["read", "grep", "find", "bash"].map(String::from)[..])
        );
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("hidden"), "{problems:?}");
    }

    #[test]
    fn broken_definitions_are_skipped_with_a_reason() {
        let home = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        write(&home.path().join("agents/a.md"), "no front matter\n");
        write(
            &home.path().join("agents/b.md"),
            "---\nname: ../evil\ndescription: x\n---\n",
        );
        write(
            &home.path().join("agents/c.md"),
            "---\nname: c\ndescription: x\nthinking: lots\n---\n",
        );
        write(&home.path().join("agents/d.md"), "---\nname: d\n---\n");
        let (found, problems) = discover(&sources(home.path(), work.path(), true));
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(problems.len(), 4, "{problems:?}");
    }

    #[test]
    fn tool_lists_are_read_in_every_written_form() {
        assert_eq!(tool_names("[read, \"grep\"]"), ["read", "grep"]);
        assert_eq!(tool_names("- Read - Edit - MultiEdit"), ["read", "edit"]);
        assert_eq!(tool_names(""), Vec::<String>::new());
    }
}
