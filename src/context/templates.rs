//! Prompt templates: Markdown files the user runs as `/name args`.
//!
//! Each `*.md` file in the project's `.pincer/prompts/` (the cwd and its
//! ancestors up to the git root, nearest first) or in the user's
//! `<config_dir>/prompts/` is one template named after the file. The body
//! is the message sent; `$ARGUMENTS`/`$@` and `$1`, `$2`… take what the
//! user typed after the name. On a name clash the project's template wins.

use std::path::{Path, PathBuf};

use super::frontmatter;
use super::{Sources, same_path};

/// The longest description taken from a template's first line.
const MAX_DESCRIPTION: usize = 80;

/// One prompt template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// The file stem: what follows the `/`.
    pub name: String,
    /// The front matter's `description`, else the body's first line.
    pub description: String,
    /// The file without its front matter.
    pub body: String,
    pub path: PathBuf,
}

/// The templates for `sources`, by name, and what was wrong with the files
/// that were skipped.
pub fn discover(sources: &Sources) -> (Vec<Template>, Vec<String>) {
    let mut templates: Vec<Template> = Vec::new();
    let mut problems = Vec::new();
    for root in roots(sources) {
        for path in template_files(&root, &mut problems) {
            if let Some(template) = load(path, &mut problems)
                && !templates.iter().any(|t| t.name == template.name)
            {
                templates.push(template);
            }
        }
    }
    templates.sort_by(|a, b| a.name.cmp(&b.name));
    (templates, problems)
}

/// The message for `body` run with `args`: `$ARGUMENTS` and `$@` become all
/// of `args`, `$1`, `$2`… its words (quotes group words: `"a b" c` has
/// `$1` = `a b`; a missing word is empty). A body without any of these gets
/// `args` appended after a blank line, so nothing the user typed is lost.
pub fn expand(body: &str, args: &str) -> String {
    let all = args.trim();
    let words = split_args(all);
    let mut out = String::with_capacity(body.len() + all.len());
    let mut substituted = false;
    let mut rest = body;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(all);
            rest = tail;
            substituted = true;
            continue;
        }
        if let Some(tail) = after.strip_prefix('@') {
            out.push_str(all);
            rest = tail;
            substituted = true;
            continue;
        }
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if let Ok(n) = after[..digits].parse::<usize>()
            && n > 0
        {
            out.push_str(words.get(n - 1).map_or("", String::as_str));
            rest = &after[digits..];
            substituted = true;
            continue;
        }
        out.push('$');
        rest = after;
    }
    out.push_str(rest);
    if !substituted && !all.is_empty() {
        let kept = out.trim_end().len();
        out.truncate(kept);
        out.push_str("\n\n");
        out.push_str(all);
    }
    out
}

/// Splits `args` at whitespace; `"…"` or `'…'` keep a group of words
/// together (an unclosed quote runs to the end).
fn split_args(args: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The template directories, project first, each once.
fn roots(sources: &Sources) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    let candidates = sources
        .project_dirs()
        .into_iter()
        .map(|dir| dir.join(".pincer").join("prompts"))
        .chain([sources.config_dir.join("prompts")]);
    for root in candidates {
        if root.is_dir() && !roots.iter().any(|seen| same_path(seen, &root)) {
            roots.push(root);
        }
    }
    roots
}

/// The `*.md` files in `root`, by name.
fn template_files(root: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(format!(
                "the prompt templates in {} were skipped because the directory could not be \
                 read ({e}); check its permissions",
                root.display()
            ));
            return Vec::new();
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md") && path.is_file())
        .collect();
    files.sort();
    files
}

fn load(path: PathBuf, problems: &mut Vec<String>) -> Option<Template> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem.is_empty()
        || !stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        problems.push(format!(
            "prompt template {} was skipped: its name `{stem}` may only hold letters, digits, \
             `_` and `-`; rename the file",
            path.display()
        ));
        return None;
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            problems.push(format!(
                "prompt template {} was skipped because it could not be read ({e}); make it a \
                 readable UTF-8 file",
                path.display()
            ));
            return None;
        }
    };
    let (description, body) = match frontmatter::parse(&text) {
        Ok(mut front) => (
            front.fields.remove("description").unwrap_or_default(),
            front.body,
        ),
        // A `---` that is never closed is a Markdown rule, not front matter.
        Err(_) => (String::new(), text.as_str()),
    };
    let body = body.trim_start_matches(['\r', '\n']);
    let description = if description.is_empty() {
        first_line(body)
    } else {
        description
    };
    Some(Template {
        name: stem,
        description,
        body: body.to_owned(),
        path,
    })
}

/// The first non-empty line of `body`, without a heading's `#`s, cut to
/// [`MAX_DESCRIPTION`] characters.
fn first_line(body: &str) -> String {
    let line = body
        .lines()
        .map(|line| line.trim().trim_start_matches('#').trim())
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= MAX_DESCRIPTION {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(MAX_DESCRIPTION - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn templates_come_from_project_and_user_with_project_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        let sources = Sources {
            cwd: root.join("repo/sub"),
            config_dir: root.join("home"),
            project_trusted: true,
        };
        let project = root.join("repo/.pincer/prompts");
        let nearer = root.join("repo/sub/.pincer/prompts");
        let user = root.join("home/prompts");
        write(
            &project.join("review.md"),
            "---\ndescription: Review the diff\n---\nReview $ARGUMENTS carefully.\n",
        );
        write(
            &nearer.join("fix_it.md"),
            "\n\n# Fix the failing test\n\nThen run it.\n",
        );
        write(&user.join("review.md"), "User review.\n");
        write(&user.join("long-one.md"), &format!("{}\n", "w".repeat(100)));
        write(&user.join("bad name.md"), "Spaces.\n");
        write(&user.join("notes.txt"), "Not a template.\n");
        write(&user.join("rule.md"), "---\nJust a rule.\n");

        let (templates, problems) = discover(&sources);
        assert_eq!(
            templates,
            [
                Template {
                    name: "fix_it".to_owned(),
                    description: "Fix the failing test".to_owned(),
                    body: "# Fix the failing test\n\nThen run it.\n".to_owned(),
                    path: nearer.join("fix_it.md"),
                },
                Template {
                    name: "long-one".to_owned(),
                    description: format!("{}…", "w".repeat(79)),
                    body: format!("{}\n", "w".repeat(100)),
                    path: user.join("long-one.md"),
                },
                Template {
                    name: "review".to_owned(),
                    description: "Review the diff".to_owned(),
                    body: "Review $ARGUMENTS carefully.\n".to_owned(),
                    path: project.join("review.md"),
                },
                Template {
                    name: "rule".to_owned(),
                    description: "---".to_owned(),
                    body: "---\nJust a rule.\n".to_owned(),
                    path: user.join("rule.md"),
                },
            ]
        );
        assert_eq!(
            problems,
            [format!(
                "prompt template {} was skipped: its name `bad name` may only hold letters, \
                 digits, `_` and `-`; rename the file",
                user.join("bad name.md").display()
            )]
        );
    }

    #[test]
    fn arguments_fill_all_placeholders() {
        assert_eq!(
            expand("Review $ARGUMENTS, then $@.", "  src/lib.rs  tests "),
            "Review src/lib.rs  tests, then src/lib.rs  tests."
        );
    }

    #[test]
    fn positional_arguments_are_words_and_quotes_group_them() {
        assert_eq!(
            expand("from $1 to $2 ($3) [$10] $0 $x $", "\"a b\" 'c d' e"),
            "from a b to c d (e) [] $0 $x $"
        );
    }

    #[test]
    fn substituted_text_is_not_expanded_again() {
        assert_eq!(expand("say $1", "$2 two"), "say $2");
    }

    #[test]
    fn without_placeholders_the_arguments_are_appended() {
        assert_eq!(
            expand("Explain this code.\n", " the parser "),
            "Explain this code.\n\nthe parser"
        );
        assert_eq!(expand("Explain this code.\n", "  "), "Explain this code.\n");
    }

    #[test]
    fn args_split_at_whitespace_with_quotes() {
        assert_eq!(
            split_args("one  \"two three\" fo'ur fi've \"\" \"open end"),
            ["one", "two three", "four five", "", "open end"]
        );
    }
}
