//! Which commands a command line runs, so that a permission given for one
//! call ("always allow `cargo test`") can be matched against the next.
//!
//! A scope is a program and, for tools known to have subcommands, the
//! subcommand: `cargo test`, `git status`, `rm`. A command line gets one
//! scope per simple command in it, including commands that run inside
//! substitutions and here-documents, so a permission for `echo` never lets
//! `echo $(rm -rf x)` through. Both `bash` and `process start` are scoped
//! this way.
//!
//! What a command runs with matters as much as what it runs: `PAGER=sh git
//! log`, `GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager … git status` or
//! `LD_PRELOAD=x ls` run other code than the program named, so assignments
//! are part of the scope (`PAGER=sh git log`), and "always allow `git`"
//! never covers them. Where a command writes matters too: the targets of
//! output redirections (`>`, `>>`, `&>`, `>|`, `2>`) and of `tee` are
//! reported as [`WriteTarget`]s, which the tools turn into the call's
//! locations (so a target outside the project is seen as such) and, when
//! the target is not plainly inside the working directory, into a scope of
//! its own (`> /etc/x`), so that an allowed program cannot write anywhere.

/// The prefix of every simple command in `command` ("cargo test", "rm"),
/// distinct, in order of appearance. Commands inside `$(…)`, backticks,
/// process substitutions and unquoted here-documents count too, so
/// `echo $(rm x)` needs "rm x" allowed as well as "echo".
pub fn command_prefixes(command: &str) -> Vec<String> {
    analyze(command).prefixes
}

/// A file a command line writes to, by redirection or `tee`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteTarget {
    /// A literal path (quotes removed), relative to the working directory
    /// unless absolute or starting with `~`.
    Path(String),
    /// A target only the shell can resolve (a variable, a substitution, a
    /// glob, or a relative path after the line changed directory), as
    /// written.
    Unknown(String),
}

/// What a command line runs and where it writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// See [`command_prefixes`].
    pub prefixes: Vec<String>,
    /// Redirection and `tee` targets, in order, without the harmless
    /// devices (`/dev/null`, `/dev/stdout`, `/dev/stderr`).
    pub writes: Vec<WriteTarget>,
}

impl CommandLine {
    /// The scopes a permission for this line must cover: the prefixes, and
    /// `> TARGET` for every write target that is not a plain relative path
    /// (which stays inside the working directory unless a symlink leads out,
    /// which the call's locations show).
    pub fn scopes(&self) -> Vec<String> {
        let mut scopes = self.prefixes.clone();
        for target in &self.writes {
            let scope = match target {
                WriteTarget::Path(path) if plainly_relative(path) => continue,
                WriteTarget::Path(path) | WriteTarget::Unknown(path) => format!("> {path}"),
            };
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }

    /// The literal write targets resolved against `cwd`, for the call's
    /// locations.
    pub fn write_paths(&self, cwd: &std::path::Path) -> Vec<std::path::PathBuf> {
        self.writes
            .iter()
            .filter_map(|target| match target {
                WriteTarget::Path(path) => Some(crate::tools::resolve_path(cwd, path)),
                WriteTarget::Unknown(_) => None,
            })
            .collect()
    }
}

/// A relative path that does not climb out with `..` or start at home.
fn plainly_relative(path: &str) -> bool {
    let path = std::path::Path::new(path);
    !path.as_os_str().is_empty()
        && path.is_relative()
        && !path.starts_with("~")
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

/// Devices a redirection may name without writing a file.
const HARMLESS_TARGETS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr"];

/// Programs that change the working directory of the rest of the line, so
/// a relative target after them may be anywhere.
const CHANGES_DIRECTORY: &[&str] = &["cd", "pushd", "popd"];

/// Reads `command` into the commands it runs and the files it writes.
pub fn analyze(command: &str) -> CommandLine {
    let chars: Vec<char> = command.chars().collect();
    let mut scan = Scan::new(&chars);
    scan.list(false);
    let mut found = scan.commands;
    found.sort_by_key(|(start, _)| *start);
    let mut prefixes: Vec<String> = Vec::new();
    let mut targets: Vec<(usize, Word)> = scan.targets;
    let mut moved_at: Option<usize> = None;
    for (start, words) in &found {
        for prefix in scopes_of(words) {
            if !prefixes.contains(&prefix) {
                prefixes.push(prefix);
            }
        }
        if let Some((program, args)) = program_of(words) {
            if CHANGES_DIRECTORY.contains(&program.value.as_str()) {
                moved_at = Some(moved_at.map_or(*start, |at: usize| at.min(*start)));
            }
            if program.value == "tee" && !program.expanded {
                targets.extend(tee_files(args).into_iter().map(|w| (*start, w)));
            }
        }
    }
    targets.sort_by_key(|(at, _)| *at);
    let mut writes = Vec::new();
    for (_, word) in targets {
        let literal = !word.expanded && !word.raw.contains(['*', '?', '[']);
        let moved = moved_at.is_some() && !std::path::Path::new(&word.value).is_absolute();
        let target = if literal && !moved && !word.value.is_empty() {
            if HARMLESS_TARGETS.contains(&word.value.as_str()) {
                continue;
            }
            WriteTarget::Path(word.value)
        } else {
            WriteTarget::Unknown(word.raw)
        };
        if !writes.contains(&target) {
            writes.push(target);
        }
    }
    CommandLine { prefixes, writes }
}

/// The program word of a simple command and the words after it.
fn program_of(words: &[Word]) -> Option<(&Word, &[Word])> {
    let at = words
        .iter()
        .position(|w| !w.is_assignment() && !RESERVED_PREFIXES.contains(&w.raw.as_str()))?;
    Some((&words[at], &words[at + 1..]))
}

/// The file arguments of `tee`: every word but options (until `--`).
fn tee_files(args: &[Word]) -> Vec<Word> {
    let mut files = Vec::new();
    let mut options = true;
    for word in args {
        if options && word.raw == "--" {
            options = false;
        } else if options && word.raw.starts_with('-') && word.raw.len() > 1 {
            continue;
        } else {
            files.push(word.clone());
        }
    }
    files
}

/// Words that may start a command without being one.
const RESERVED_PREFIXES: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "time",
    "esac", "coproc",
];
/// Words that start compound commands whose following words are not a
/// command (the commands inside are found on their own).
const NOT_COMMANDS: &[&str] = &["for", "select", "case", "function", "in"];

/// Builtins and programs whose `NAME=value` arguments set the environment
/// of what runs later, so each such argument is a scope of its own.
const SETS_ENVIRONMENT: &[&str] = &["export", "declare", "typeset", "readonly", "local", "env"];

/// The scopes of one simple command: "program subcommand", preceded by the
/// command's assignments (`PAGER=x git log`), plus each environment
/// assignment a builtin such as `export` makes; a line of assignments alone
/// is its own scope, since it can change variables already exported
/// (`PATH=…`).
fn scopes_of(words: &[Word]) -> Vec<String> {
    let mut rest = words
        .iter()
        .skip_while(|w| RESERVED_PREFIXES.contains(&w.raw.as_str()))
        .peekable();
    let mut assignments = Vec::new();
    while let Some(word) = rest.next_if(|w| w.is_assignment()) {
        assignments.push(word.raw.as_str());
    }
    let rest: Vec<&Word> = rest.collect();
    let Some(prefix) = prefix_of(&rest) else {
        return if assignments.is_empty() {
            Vec::new()
        } else {
            vec![assignments.join(" ")]
        };
    };
    let mut scopes = vec![if assignments.is_empty() {
        prefix
    } else {
        format!("{} {prefix}", assignments.join(" "))
    }];
    if let Some(program) = rest.first()
        && !program.expanded
        && SETS_ENVIRONMENT.contains(&program.value.as_str())
    {
        scopes.extend(
            rest[1..]
                .iter()
                .filter(|w| w.is_assignment())
                .map(|w| w.raw.clone()),
        );
    }
    scopes
}

/// "program subcommand" of the words from the program on, or `None` if
/// they run nothing.
fn prefix_of(words: &[&Word]) -> Option<String> {
    let mut words = words.iter();
    let program = words.next()?;
    if NOT_COMMANDS.contains(&program.raw.as_str()) {
        return None;
    }
    let name = if program.expanded {
        program.raw.clone()
    } else {
        program.value.clone()
    };
    // Only tools known to have subcommands get one: "always allow `cargo
    // test`" should not allow `cargo publish`, but "always allow `echo`"
    // means every echo, not just `echo hello`. A path ("./build.sh") names a
    // script, never such a tool.
    let bare = !program.raw.contains('/') && !program.expanded;
    let has_subcommands = bare && SUBCOMMAND_TOOLS.contains(&name.as_str());
    match words.next() {
        Some(next) if has_subcommands && is_subcommand(&next.raw) => {
            Some(format!("{name} {}", next.raw))
        }
        _ => Some(name),
    }
}

/// Programs whose second word picks what they do.
const SUBCOMMAND_TOOLS: &[&str] = &[
    "apt",
    "apt-get",
    "brew",
    "bun",
    "bundle",
    "cargo",
    "composer",
    "conda",
    "deno",
    "docker",
    "dotnet",
    "gem",
    "gh",
    "git",
    "go",
    "gradle",
    "helm",
    "kubectl",
    "make",
    "mix",
    "mvn",
    "nix",
    "npm",
    "npx",
    "pip",
    "pip3",
    "pnpm",
    "podman",
    "poetry",
    "rustup",
    "swift",
    "systemctl",
    "terraform",
    "uv",
    "yarn",
    // Wrappers: what they run matters more than that they run.
    "doas",
    "exec",
    "nohup",
    "sudo",
    "xargs",
];

fn is_subcommand(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('-')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A shell word as written (`raw`) and with quotes removed (`value`).
#[derive(Clone, Debug, Default)]
struct Word {
    raw: String,
    value: String,
    /// Holds a parameter, command or arithmetic expansion.
    expanded: bool,
}

impl Word {
    /// `NAME=value` or `NAME+=value`.
    fn is_assignment(&self) -> bool {
        let Some(eq) = self.raw.find('=') else {
            return false;
        };
        let name = self.raw[..eq].strip_suffix('+').unwrap_or(&self.raw[..eq]);
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    }
}

/// A here-document whose body comes after the current line.
#[derive(Debug)]
struct Heredoc {
    delimiter: String,
    strip_tabs: bool,
    /// Unquoted delimiter: the body is expanded, so `$(…)` in it runs.
    expands: bool,
}

/// What the word after a redirection operator is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Redirect {
    /// A file opened for writing (`>`, `>>`, `>|`, `&>`, `<>`).
    Write,
    /// After `>&`: a file descriptor (`2>&1`, `>&-`) or, for any other
    /// word, a file (`>& out` is `&> out`).
    DuplicateOrWrite,
    /// A file read, a descriptor duplicated for reading, a here-string.
    Read,
}

/// The simple command being read.
#[derive(Debug, Default)]
struct Current {
    words: Vec<Word>,
    /// Where the first word started, for ordering.
    start: Option<usize>,
    word: Option<(usize, Word)>,
    /// The next word is a redirection target, not an argument.
    redirect: Option<Redirect>,
    /// The next word is a here-document delimiter (`<<-` strips tabs).
    heredoc: Option<bool>,
}

impl Current {
    fn word_mut(&mut self, at: usize) -> &mut Word {
        &mut self.word.get_or_insert_with(|| (at, Word::default())).1
    }
}

/// A hand-written scanner for the parts of bash syntax that decide where
/// commands start: quotes, escapes, operators, substitutions, comments and
/// here-documents. It does not need to be a full parser: every mistake it
/// can make splits a command in two, which only asks for more permission.
struct Scan<'a> {
    chars: &'a [char],
    pos: usize,
    /// Finished simple commands with where they started.
    commands: Vec<(usize, Vec<Word>)>,
    /// Words that name files opened for writing, with where they are.
    targets: Vec<(usize, Word)>,
    heredocs: Vec<Heredoc>,
}

impl<'a> Scan<'a> {
    fn new(chars: &'a [char]) -> Self {
        Self {
            chars,
            pos: 0,
            commands: Vec::new(),
            targets: Vec::new(),
            heredocs: Vec::new(),
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Reads a command list up to the end, or up to the `)` that closes a
    /// substitution when `in_parens`.
    fn list(&mut self, in_parens: bool) {
        let mut current = Current::default();
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' => {
                    self.end_word(&mut current);
                    self.pos += 1;
                }
                '\n' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                    self.heredoc_bodies();
                }
                ';' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                }
                '&' => {
                    if self.peek_at(1) == Some('>') {
                        // `&>file`, `&>>file`
                        self.end_word(&mut current);
                        self.pos += 2;
                        if self.peek() == Some('>') {
                            self.pos += 1;
                        }
                        current.redirect = Some(Redirect::Write);
                    } else {
                        self.end_command(&mut current);
                        self.pos += 1;
                        if self.peek() == Some('&') {
                            self.pos += 1;
                        }
                    }
                }
                '|' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                    if matches!(self.peek(), Some('|' | '&')) {
                        self.pos += 1;
                    }
                }
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    // Process substitution: a command inside an argument.
                    current.word_mut(self.pos).expanded = true;
                    let start = self.pos;
                    self.pos += 2;
                    self.list(true);
                    self.append_raw(&mut current, start);
                }
                '<' | '>' => self.redirection(&mut current),
                '(' => {
                    let array = current
                        .word
                        .as_ref()
                        .is_some_and(|(_, w)| w.raw.ends_with('=') && w.is_assignment());
                    if array {
                        let start = self.pos;
                        self.skip_parens();
                        self.append_raw(&mut current, start);
                    } else if current.word.is_none()
                        && current.words.is_empty()
                        && self.peek_at(1) == Some('(')
                    {
                        // `(( arithmetic ))`
                        self.pos += 2;
                        self.arithmetic();
                    } else {
                        self.end_command(&mut current);
                        self.pos += 1;
                        depth += 1;
                    }
                }
                ')' => {
                    self.end_command(&mut current);
                    self.pos += 1;
                    if depth == 0 && in_parens {
                        return;
                    }
                    depth = depth.saturating_sub(1);
                }
                '#' if current.word.is_none() => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                _ => self.word_part(&mut current),
            }
        }
        self.end_command(&mut current);
    }

    /// One piece of a word: a quoted string, an escape, an expansion or a
    /// plain character.
    fn word_part(&mut self, current: &mut Current) {
        let start = self.pos;
        let Some(c) = self.peek() else {
            return;
        };
        match c {
            '\'' => {
                self.pos += 1;
                let mut text = String::new();
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == '\'' {
                        break;
                    }
                    text.push(c);
                }
                current.word_mut(start).value.push_str(&text);
            }
            '"' => {
                self.pos += 1;
                let (text, expanded) = self.double_quoted();
                let word = current.word_mut(start);
                word.value.push_str(&text);
                word.expanded |= expanded;
            }
            '\\' => {
                self.pos += 1;
                match self.peek() {
                    // Line continuation.
                    Some('\n') => self.pos += 1,
                    Some(c) => {
                        self.pos += 1;
                        current.word_mut(start).value.push(c);
                    }
                    None => {}
                }
            }
            '$' => {
                let expanded = self.dollar();
                let word = current.word_mut(start);
                word.expanded |= expanded;
                if !expanded {
                    word.value.push('$');
                }
            }
            '`' => {
                self.pos += 1;
                self.backticks();
                current.word_mut(start).expanded = true;
            }
            c => {
                self.pos += 1;
                current.word_mut(start).value.push(c);
            }
        }
        self.append_raw(current, start);
    }

    /// Adds the source from `start` to here to the current word's raw text.
    fn append_raw(&self, current: &mut Current, start: usize) {
        let raw: String = self.chars[start..self.pos].iter().collect();
        current.word_mut(start).raw.push_str(&raw);
    }

    /// The rest of a `"…"` string: its text and whether it expands anything.
    fn double_quoted(&mut self) -> (String, bool) {
        let mut text = String::new();
        let mut expanded = false;
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    break;
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(c @ ('$' | '`' | '"' | '\\')) => {
                            self.pos += 1;
                            text.push(c);
                        }
                        _ => text.push('\\'),
                    }
                }
                '$' => {
                    if self.dollar() {
                        expanded = true;
                    } else {
                        text.push('$');
                    }
                }
                '`' => {
                    self.pos += 1;
                    self.backticks();
                    expanded = true;
                }
                c => {
                    self.pos += 1;
                    text.push(c);
                }
            }
        }
        (text, expanded)
    }

    /// At a `$`: reads the expansion it starts, collecting commands inside.
    /// Returns false for a lone `$` (which is then literal).
    fn dollar(&mut self) -> bool {
        self.pos += 1;
        match self.peek() {
            Some('(') if self.peek_at(1) == Some('(') => {
                self.pos += 2;
                self.arithmetic();
            }
            Some('(') => {
                self.pos += 1;
                self.list(true);
            }
            Some('{') => {
                self.pos += 1;
                self.braced();
            }
            Some('\'') => {
                // ANSI-C quoting: `$'…'` with backslash escapes.
                self.pos += 1;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    match c {
                        '\\' => self.pos += 1,
                        '\'' => break,
                        _ => {}
                    }
                }
            }
            Some(c) if c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c) => {
                if c.is_ascii_alphabetic() || c == '_' {
                    while self
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    {
                        self.pos += 1;
                    }
                } else {
                    self.pos += 1;
                }
            }
            _ => return false,
        }
        true
    }

    /// The rest of `$((…))` or `((…))`: no commands, except substitutions.
    fn arithmetic(&mut self) {
        let mut depth = 2usize;
        while let Some(c) = self.peek() {
            match c {
                '(' => {
                    depth += 1;
                    self.pos += 1;
                }
                ')' => {
                    depth -= 1;
                    self.pos += 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.skip_part(),
            }
        }
    }

    /// The rest of `${…}`, collecting commands in substitutions inside.
    fn braced(&mut self) {
        while let Some(c) = self.peek() {
            if c == '}' {
                self.pos += 1;
                return;
            }
            self.skip_part();
        }
    }

    /// The rest of an array `(…)`, as part of the current word.
    fn skip_parens(&mut self) {
        self.pos += 1;
        let mut depth = 1usize;
        while let Some(c) = self.peek() {
            match c {
                '(' => {
                    depth += 1;
                    self.pos += 1;
                }
                ')' => {
                    self.pos += 1;
                    depth -= 1;
                    if depth == 0 {
                        return;
                    }
                }
                _ => self.skip_part(),
            }
        }
    }

    /// Steps over one quoted string, escape, expansion or character inside
    /// something that is not a command, still collecting substitutions.
    fn skip_part(&mut self) {
        match self.peek() {
            Some('\\') => self.pos += 2,
            Some('\'') => {
                self.pos += 1;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == '\'' {
                        break;
                    }
                }
            }
            Some('"') => {
                self.pos += 1;
                self.double_quoted();
            }
            Some('$') => {
                self.dollar();
            }
            Some('`') => {
                self.pos += 1;
                self.backticks();
            }
            Some(_) => self.pos += 1,
            None => {}
        }
        self.pos = self.pos.min(self.chars.len());
    }

    /// The rest of a backtick substitution: its text, unescaped, is scanned
    /// as a command list of its own.
    fn backticks(&mut self) {
        let start = self.pos;
        let mut inner = Vec::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '`' => break,
                '\\' => match self.peek() {
                    Some(next @ ('`' | '\\' | '$')) => {
                        self.pos += 1;
                        inner.push(next);
                    }
                    _ => inner.push('\\'),
                },
                c => inner.push(c),
            }
        }
        let mut scan = Scan::new(&inner);
        scan.list(false);
        self.commands.extend(
            scan.commands
                .into_iter()
                .map(|(at, words)| (start + at, words)),
        );
        self.targets.extend(
            scan.targets
                .into_iter()
                .map(|(at, word)| (start + at, word)),
        );
    }

    /// At `<` or `>` (not a process substitution): reads the operator; the
    /// next word is its target.
    fn redirection(&mut self, current: &mut Current) {
        // `2>` names a file descriptor, not an argument.
        let fd = current
            .word
            .as_ref()
            .is_some_and(|(_, w)| !w.raw.is_empty() && w.raw.chars().all(|c| c.is_ascii_digit()));
        if fd {
            current.word = None;
        } else {
            self.end_word(current);
        }
        let first = self.peek();
        self.pos += 1;
        if first == Some('<') && self.peek() == Some('<') {
            self.pos += 1;
            if self.peek() == Some('<') {
                // Here-string: `<<< word`.
                self.pos += 1;
                current.redirect = Some(Redirect::Read);
            } else {
                let strip_tabs = self.peek() == Some('-');
                if strip_tabs {
                    self.pos += 1;
                }
                current.heredoc = Some(strip_tabs);
            }
            return;
        }
        let second = self.peek();
        if matches!(second, Some('>' | '&' | '|')) {
            self.pos += 1;
        }
        current.redirect = Some(match (first, second) {
            (Some('>'), Some('&')) => Redirect::DuplicateOrWrite,
            (Some('>'), _) | (Some('<'), Some('>')) => Redirect::Write,
            _ => Redirect::Read,
        });
    }

    fn end_word(&mut self, current: &mut Current) {
        let Some((start, word)) = current.word.take() else {
            return;
        };
        if let Some(strip_tabs) = current.heredoc.take() {
            self.heredocs.push(Heredoc {
                expands: !word.raw.contains(['\'', '"', '\\']),
                delimiter: word.value,
                strip_tabs,
            });
        } else if let Some(redirect) = current.redirect.take() {
            let descriptor = word.raw == "-" || word.raw.chars().all(|c| c.is_ascii_digit());
            let writes = match redirect {
                Redirect::Write => true,
                Redirect::DuplicateOrWrite => !descriptor,
                Redirect::Read => false,
            };
            if writes {
                self.targets.push((start, word));
            }
        } else {
            current.start.get_or_insert(start);
            current.words.push(word);
        }
    }

    fn end_command(&mut self, current: &mut Current) {
        self.end_word(current);
        let finished = std::mem::take(current);
        if let (Some(start), false) = (finished.start, finished.words.is_empty()) {
            self.commands.push((start, finished.words));
        }
    }

    /// After a newline: skips the bodies of pending here-documents,
    /// collecting substitutions in those that expand.
    fn heredoc_bodies(&mut self) {
        for heredoc in std::mem::take(&mut self.heredocs) {
            while self.pos < self.chars.len() {
                let line_start = self.pos;
                let line_end = self.chars[line_start..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |n| line_start + n);
                let line: String = self.chars[line_start..line_end].iter().collect();
                let line = if heredoc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if line == heredoc.delimiter {
                    self.pos = (line_end + 1).min(self.chars.len());
                    break;
                }
                if heredoc.expands {
                    while self.pos < line_end {
                        match self.peek() {
                            Some('$' | '`' | '\\') => self.skip_part(),
                            _ => self.pos += 1,
                        }
                    }
                }
                // A substitution may have run past the line; go on from there.
                self.pos = self.pos.max(line_end + 1).min(self.chars.len());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn scopes(command: &str) -> Vec<String> {
        command_prefixes(command)
    }

    #[test]
    fn scopes_are_program_and_subcommand() {
        assert_eq!(scopes("cargo test --all"), ["cargo test"]);
        assert_eq!(scopes("git status"), ["git status"]);
        assert_eq!(scopes("rm -rf /"), ["rm"]);
        assert_eq!(scopes("ls"), ["ls"]);
        assert_eq!(scopes("./script.sh x"), ["./script.sh"]);
        assert_eq!(scopes("python3 tool.py --fix"), ["python3"]);
        assert_eq!(scopes("echo hello world"), ["echo"]);
        assert_eq!(scopes("git \"status\""), ["git"]);
        assert_eq!(scopes("  npm   run build "), ["npm run"]);
    }

    #[test]
    fn scopes_split_on_operators() {
        assert_eq!(
            scopes("cargo build && cargo test || echo failed; ls"),
            ["cargo build", "cargo test", "echo", "ls"]
        );
        assert_eq!(
            scopes("cat a.txt | grep foo | wc -l"),
            ["cat", "grep", "wc"]
        );
        assert_eq!(scopes("make |& tee log"), ["make", "tee"]);
        assert_eq!(scopes("sleep 5 & rm -rf x"), ["sleep", "rm"]);
        assert_eq!(scopes("cd src\nls"), ["cd", "ls"]);
        assert_eq!(scopes("(cd sub && make)"), ["cd", "make"]);
        assert_eq!(
            scopes("git add . && git commit -m x && git add y"),
            ["git add", "git commit"]
        );
    }

    #[test]
    fn scopes_respect_quotes_and_escapes() {
        assert_eq!(scopes("echo \"a && rm b\""), ["echo"]);
        assert_eq!(scopes("echo 'a; rm b' | cat"), ["echo", "cat"]);
        assert_eq!(scopes(r"echo a\;rm b"), ["echo"]);
        assert_eq!(scopes("echo \"it's\" && ls"), ["echo", "ls"]);
        assert_eq!(scopes("ls \\\n  -la && pwd"), ["ls", "pwd"]);
    }

    #[test]
    fn scopes_include_substituted_commands() {
        assert_eq!(scopes("echo $(rm x)"), ["echo", "rm"]);
        assert_eq!(
            scopes("echo \"$(git rev-parse HEAD)\""),
            ["echo", "git rev-parse"]
        );
        assert_eq!(scopes("echo `whoami` done"), ["echo", "whoami"]);
        assert_eq!(scopes("echo \"`rm -f y`\""), ["echo", "rm"]);
        assert_eq!(scopes("diff <(sort a) <(sort b)"), ["diff", "sort"]);
        assert_eq!(scopes("echo ${X:-$(id -u)}"), ["echo", "id"]);
        assert_eq!(scopes("echo $((1 + $(wc -l < f)))"), ["echo", "wc"]);
        assert_eq!(
            scopes("x=$(date) && echo $x"),
            ["x=$(date)", "date", "echo"]
        );
        assert_eq!(scopes("echo $(cat $(ls))"), ["echo", "cat", "ls"]);
    }

    #[test]
    fn scopes_skip_assignments_redirections_and_keywords() {
        assert_eq!(scopes("FOO=1 make build"), ["FOO=1 make build"]);
        assert_eq!(
            scopes("A=1 B=\"x y\" cargo test"),
            ["A=1 B=\"x y\" cargo test"]
        );
        assert_eq!(
            scopes("cargo test 2>&1 | tail -n 20"),
            ["cargo test", "tail"]
        );
        assert_eq!(scopes("ls > out.txt"), ["ls"]);
        assert_eq!(scopes(">log echo hi"), ["echo"]);
        assert_eq!(scopes("echo hi &> log"), ["echo"]);
        assert_eq!(scopes("wc -l < input.txt"), ["wc"]);
        assert_eq!(scopes("grep x <<< \"$(rm y)\""), ["grep", "rm"]);
        assert_eq!(
            scopes("if cargo test; then echo ok; else exit 1; fi"),
            ["cargo test", "echo", "exit"]
        );
        assert_eq!(scopes("for f in *.rs; do rustfmt $f; done"), ["rustfmt"]);
        assert_eq!(scopes("while true; do sleep 1; done"), ["true", "sleep"]);
        assert_eq!(scopes("! grep -q x f"), ["grep"]);
        assert_eq!(scopes("{ ls; pwd; }"), ["ls", "pwd"]);
        assert_eq!(scopes("ls # && rm -rf /"), ["ls"]);
        assert_eq!(
            scopes("arr=(a b c); echo ${arr[0]}"),
            ["arr=(a b c)", "echo"]
        );
        assert_eq!(scopes("((i++)); echo $i"), ["echo"]);
        assert_eq!(scopes("sudo rm -rf /"), ["sudo rm"]);
        assert_eq!(scopes("$EDITOR file"), ["$EDITOR"]);
    }

    #[test]
    fn scopes_skip_quoted_here_documents_but_not_expanding_ones() {
        assert_eq!(
            scopes("cat <<'EOF' > f.py\nimport os; os.remove('x')\nEOF\npython3 f.py"),
            ["cat", "python3"]
        );
        assert_eq!(
            scopes("cat <<EOF\nhello $(rm -rf z) there\n`id`\nEOF\nls"),
            ["cat", "rm", "id", "ls"]
        );
        assert_eq!(
            scopes("cat <<-END | sh\n\tnot a command\n\tEND\necho after"),
            ["cat", "sh", "echo"]
        );
    }

    #[test]
    fn nothing_to_run_has_no_prefixes() {
        assert_eq!(scopes("X=1"), ["X=1"]);
        assert_eq!(scopes("  # just a comment "), Vec::<String>::new());
        assert_eq!(scopes(""), Vec::<String>::new());
    }

    #[test]
    fn assignments_before_a_command_are_part_of_its_scope() {
        assert_eq!(
            scopes(
                "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='sh -c x' git log"
            ),
            ["GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='sh -c x' git log"]
        );
        assert_eq!(
            scopes("LD_PRELOAD=/tmp/x.so ls"),
            ["LD_PRELOAD=/tmp/x.so ls"]
        );
        assert_eq!(scopes("BASH_ENV=evil bash -c true"), ["BASH_ENV=evil bash"]);
        assert_eq!(
            scopes("GIT_SSH_COMMAND='sh x' git fetch"),
            ["GIT_SSH_COMMAND='sh x' git fetch"]
        );
        assert_eq!(scopes("! PAGER=x git log"), ["PAGER=x git log"]);
        // A bare assignment can change an exported variable for what follows.
        assert_eq!(
            scopes("PATH=/tmp/evil:$PATH; git status"),
            ["PATH=/tmp/evil:$PATH", "git status"]
        );
        assert_eq!(
            scopes("export PAGER=sh GIT_DIR=x && git log"),
            ["export", "PAGER=sh", "GIT_DIR=x", "git log"]
        );
        assert_eq!(scopes("env LD_PRELOAD=x ls"), ["env", "LD_PRELOAD=x"]);
    }

    fn writes(command: &str) -> Vec<WriteTarget> {
        analyze(command).writes
    }

    fn path(p: &str) -> WriteTarget {
        WriteTarget::Path(p.to_string())
    }

    fn unknown(p: &str) -> WriteTarget {
        WriteTarget::Unknown(p.to_string())
    }

    #[test]
    fn output_redirections_are_write_targets() {
        assert_eq!(writes("echo x > /tmp/a"), [path("/tmp/a")]);
        assert_eq!(writes("echo x >/tmp/a"), [path("/tmp/a")]);
        assert_eq!(writes("echo x >> log"), [path("log")]);
        assert_eq!(writes("echo x 1> one 2> two"), [path("one"), path("two")]);
        assert_eq!(writes("echo x 2>>errs"), [path("errs")]);
        assert_eq!(writes("make &> all.log"), [path("all.log")]);
        assert_eq!(writes("make &>> all.log"), [path("all.log")]);
        assert_eq!(writes("echo x >| clobber"), [path("clobber")]);
        assert_eq!(writes("echo x >& both"), [path("both")]);
        assert_eq!(writes("exec 3<> rw"), [path("rw")]);
        assert_eq!(writes("echo x > 'a b'"), [path("a b")]);
        assert_eq!(writes("echo x > ~/.bashrc"), [path("~/.bashrc")]);
        assert_eq!(writes(">out echo hi"), [path("out")]);
        assert_eq!(writes("{ ls; } > list"), [path("list")]);
        assert_eq!(writes("echo $(echo x > inner)"), [path("inner")]);
        assert_eq!(writes("echo `echo x > tick`"), [path("tick")]);
    }

    #[test]
    fn descriptors_devices_and_reads_are_not_write_targets() {
        assert_eq!(writes("cargo test 2>&1 | tail"), []);
        assert_eq!(writes("echo err >&2"), []);
        assert_eq!(writes("exec 3>&-"), []);
        assert_eq!(writes("wc -l < input"), []);
        assert_eq!(writes("cat <<< hi"), []);
        assert_eq!(writes("cat <<EOF > out\nx\nEOF"), [path("out")]);
        assert_eq!(writes("echo x > /dev/null 2>/dev/stderr >/dev/stdout"), []);
    }

    #[test]
    fn tee_files_are_write_targets() {
        assert_eq!(writes("make | tee build.log"), [path("build.log")]);
        assert_eq!(
            writes("echo x | tee -a /tmp/a -- -b"),
            [path("/tmp/a"), path("-b")]
        );
        assert_eq!(writes("echo x | tee /dev/null"), []);
    }

    #[test]
    fn targets_only_the_shell_can_resolve_are_unknown() {
        assert_eq!(
            writes("echo x > $HOME/.profile"),
            [unknown("$HOME/.profile")]
        );
        assert_eq!(writes("echo x > \"$(pwd)/y\""), [unknown("\"$(pwd)/y\"")]);
        assert_eq!(writes("echo x > *.txt"), [unknown("*.txt")]);
        assert_eq!(writes("cd /tmp && echo x > y"), [unknown("y")]);
        assert_eq!(writes("cd /tmp && echo x > /abs"), [path("/abs")]);
    }

    #[test]
    fn write_targets_outside_the_directory_are_scopes() {
        let scopes = |c: &str| analyze(c).scopes();
        assert_eq!(scopes("echo x > out.txt"), ["echo"]);
        assert_eq!(scopes("echo x > ./sub/out.txt"), ["echo"]);
        assert_eq!(scopes("echo x > /tmp/a"), ["echo", "> /tmp/a"]);
        assert_eq!(scopes("echo x > ../a"), ["echo", "> ../a"]);
        assert_eq!(scopes("echo x > ~/.bashrc"), ["echo", "> ~/.bashrc"]);
        assert_eq!(scopes("echo x > $F"), ["echo", "> $F"]);
        assert_eq!(scopes("echo x | tee /etc/x"), ["echo", "tee", "> /etc/x"]);
        assert_eq!(scopes("echo x > /dev/null"), ["echo"]);
        assert_eq!(
            analyze("echo x > a/b.txt 2> /tmp/e").write_paths(std::path::Path::new("/p")),
            [
                std::path::PathBuf::from("/p/a/b.txt"),
                std::path::PathBuf::from("/tmp/e")
            ]
        );
    }
}
