//! Where a headless run's prompt comes from: the argument, standard input,
//! or both, composed the way `codex exec` does it so that scripts written
//! for one work with the other (`cat log | pincer run "explain this"`).

/// The argument that means "read the prompt from stdin".
pub const STDIN_ARG: &str = "-";

/// What was piped in, if anything: `None` when stdin is a terminal, which
/// is never read (a person at a terminal did not mean to type a prompt
/// there, and waiting on them would look like a hang).
pub fn read_piped_stdin() -> Result<Option<String>, String> {
    use std::io::{IsTerminal, Read};
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the prompt from stdin: {e}"))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "stdin is not UTF-8 text; pipe text into `pincer run`".to_string())
}

/// The prompt from the argument and what was piped in.
///
/// - `-`, or no argument: stdin is the whole prompt.
/// - An argument and non-empty stdin: the argument is the instruction and
///   stdin follows it inside `<stdin>` tags, as `codex exec` sends it.
/// - An argument and empty (or no) stdin: the argument alone.
///
/// A prompt that is empty or only whitespace is an error: there is nothing
/// to ask.
pub fn compose(arg: Option<&str>, stdin: Option<&str>) -> Result<String, String> {
    if arg == Some(STDIN_ARG) && stdin.is_none() {
        return Err(
            "`pincer run -` reads the prompt from stdin, but stdin is a terminal; pipe the prompt in"
                .to_string(),
        );
    }
    let piped = stdin.filter(|s| !s.trim().is_empty());
    let instruction = arg.filter(|a| *a != STDIN_ARG && !a.trim().is_empty());
    let prompt = match (instruction, piped) {
        (Some(arg), Some(piped)) => {
            let close = if piped.ends_with('\n') { "" } else { "\n" };
            format!("{arg}\n\n<stdin>\n{piped}{close}</stdin>")
        }
        (Some(arg), None) => arg.to_string(),
        (None, Some(piped)) => piped.to_string(),
        (None, None) => String::new(),
    };
    if prompt.trim().is_empty() {
        return Err(
            "the prompt is empty; pass it as an argument (`pincer run \"…\"`) or pipe it in (`echo … | pincer run`)"
                .to_string(),
        );
    }
    Ok(prompt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_argument_and_stdin_combine_as_codex_exec_does() {
        assert_eq!(
            compose(Some("explain this"), Some("line 1\nline 2\n")),
            Ok("explain this\n\n<stdin>\nline 1\nline 2\n</stdin>".to_string())
        );
        assert_eq!(
            compose(Some("explain"), Some("no newline")),
            Ok("explain\n\n<stdin>\nno newline\n</stdin>".to_string())
        );
        assert_eq!(compose(Some("hi"), Some("  \n")), Ok("hi".to_string()));
        assert_eq!(compose(Some("hi"), None), Ok("hi".to_string()));
        assert_eq!(compose(None, Some("asked\n")), Ok("asked\n".to_string()));
        assert_eq!(compose(Some("-"), Some("asked")), Ok("asked".to_string()));
        // An empty argument with piped text: the text is the prompt.
        assert_eq!(compose(Some(""), Some("asked")), Ok("asked".to_string()));
    }

    #[test]
    fn an_empty_prompt_is_refused() {
        for (arg, stdin) in [
            (None, None),
            (None, Some("")),
            (Some("-"), Some(" \n")),
            (Some("  "), None),
            (Some(""), Some("\n")),
        ] {
            let error = compose(arg, stdin).unwrap_err();
            assert!(
                error.starts_with("the prompt is empty"),
                "{arg:?} {stdin:?}: {error}"
            );
        }
        assert!(
            compose(Some("-"), None)
                .unwrap_err()
                .contains("stdin is a terminal")
        );
    }
}
