//! Slash commands: what the editor's `/` menu offers and what a prompt that
//! starts with one does.
//!
//! Editors build their menu from `available_commands_update` and send a
//! chosen command back as the prompt's text (`/model openai/gpt-5`). Some
//! commands act on the session and answer at once (`/compact`, `/model`,
//! `/think`, `/mode`); the others turn into a prompt for the model (`/init`,
//! `/skill:<name>`, prompt templates). A `/word` that names no command is
//! an ordinary prompt.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, UnstructuredCommandInput,
};

use crate::context::skills::Skill;
use crate::context::templates::Template;

/// A parsed slash command.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Compact now, with optional instructions on what to keep.
    Compact(String),
    /// Show or change the model.
    Model(String),
    /// Show or change the thinking level.
    Think(String),
    /// Show or change the mode.
    Mode(String),
    /// Show or change the sandbox commands run in.
    Sandbox(String),
    /// Run a workflow: its name, then `input=value` pairs (`resume`
    /// continues the run a killed process left behind).
    Workflow(String),
    /// `/undo`, `/redo`, `/rewind N`: the files and the conversation go
    /// back (or forward again); `None`: `/rewind` alone lists the turns.
    Travel(Option<crate::session::rewind::Travel>),
    /// `/tasks`: the session's background tasks; `/tasks stop ID`.
    Tasks(String),
    /// Anything that becomes a prompt for the model.
    Prompt(String),
}

/// What `/init` asks of the model.
const INIT: &str = "Look at this project and write an AGENTS.md file at its root that helps \
coding agents work in it: what the project is, how it is laid out, how to build, test, lint \
and run it (the exact commands), the conventions the code follows, and anything surprising. \
Read the README, the build files and a sample of the code first. Keep it short and concrete. \
If an AGENTS.md (or CLAUDE.md) exists already, improve it instead of starting over.";

/// The commands offered for a session with these skills and templates.
pub fn available(
    skills: &[Skill],
    templates: &[Template],
    workflows: &[(String, String)],
) -> Vec<AvailableCommand> {
    let command = |name: &str, description: &str, hint: Option<&str>| {
        let mut command = AvailableCommand::new(name, description);
        if let Some(hint) = hint {
            command = command.input(AvailableCommandInput::Unstructured(
                UnstructuredCommandInput::new(hint),
            ));
        }
        command
    };
    let mut out = vec![
        command(
            "compact",
            "Summarise the older conversation to free context",
            Some("what the summary should keep (optional)"),
        ),
        command("model", "Show or change the model", Some("provider/model")),
        command(
            "think",
            "Show or change the thinking level",
            Some("off, minimal, low, medium or high"),
        ),
        command(
            "mode",
            "Show or change the mode",
            Some("default, accept-edits, plan or bypass"),
        ),
        command(
            "sandbox",
            "Show or change where commands may write and what they may reach",
            Some("workspace-write, read-only or off"),
        ),
        command(
            "init",
            "Write an AGENTS.md that describes this project for agents",
            None,
        ),
        command(
            "undo",
            "Put back the files of the last turn and take it out of the conversation",
            None,
        ),
        command("redo", "Reverse the last undo or rewind", None),
        command(
            "tasks",
            "List the background tasks and what they said, or stop one",
            Some("stop ID (optional)"),
        ),
        command(
            "rewind",
            "List the turns, or go back to before turn N (files and conversation)",
            Some("N (optional)"),
        ),
    ];
    if !workflows.is_empty() {
        out.push(command(
            "workflow",
            "Run a workflow: its steps, in the order its file decides",
            Some("NAME [input=value …] (quote a value with spaces), or resume"),
        ));
    }
    for (name, description) in workflows {
        out.push(command(
            &format!("workflow:{name}"),
            description,
            Some("input=value … (optional)"),
        ));
    }
    for skill in skills {
        out.push(command(
            &format!("skill:{}", skill.name),
            &skill.description,
            Some("what to do with the skill (optional)"),
        ));
    }
    for template in templates {
        if out.iter().any(|c| c.name == template.name) {
            continue;
        }
        out.push(command(
            &template.name,
            &template.description,
            Some("arguments (optional)"),
        ));
    }
    out
}

/// Parses a prompt's text as a command, if it is one.
pub fn parse(
    text: &str,
    skills: &[Skill],
    templates: &[Template],
) -> Result<Option<Command>, String> {
    let Some(rest) = text.trim_start().strip_prefix('/') else {
        return Ok(None);
    };
    let (name, args) = match rest.find(char::is_whitespace) {
        Some(at) => (&rest[..at], rest[at..].trim()),
        None => (rest, ""),
    };
    let args = args.to_string();
    Ok(Some(match name {
        "compact" => Command::Compact(args),
        "model" => Command::Model(args),
        "think" => Command::Think(args),
        "mode" => Command::Mode(args),
        "sandbox" => Command::Sandbox(args),
        "workflow" => Command::Workflow(args),
        "tasks" => Command::Tasks(args),
        "undo" | "redo" | "rewind" => match crate::session::rewind::Travel::parse(text) {
            Some(parsed) => Command::Travel(parsed?),
            None => return Ok(None),
        },
        "init" => Command::Prompt(if args.is_empty() {
            INIT.to_string()
        } else {
            format!("{INIT}\n\nAlso: {args}")
        }),
        _ => {
            if let Some(workflow) = name.strip_prefix("workflow:") {
                Command::Workflow(format!("{workflow} {args}").trim().to_string())
            } else if let Some(skill_name) = name.strip_prefix("skill:") {
                let Some(skill) = skills.iter().find(|s| s.name == skill_name) else {
                    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
                    return Err(if names.is_empty() {
                        format!("There is no skill `{skill_name}`: no skills were found.")
                    } else {
                        format!(
                            "There is no skill `{skill_name}`. Skills: {}.",
                            names.join(", ")
                        )
                    });
                };
                let body = crate::context::skills::body(skill).map_err(|e| {
                    format!("The skill {} cannot be read: {e}", skill.path.display())
                })?;
                Command::Prompt(skill_prompt(skill, &body, &args))
            } else if let Some(template) = templates.iter().find(|t| t.name == name) {
                Command::Prompt(crate::context::templates::expand(&template.body, &args))
            } else {
                return Ok(None);
            }
        }
    }))
}

/// The prompt `/skill:<name> args` sends: the skill's instructions, where
/// they live (its files are relative to that), and the user's request.
fn skill_prompt(skill: &Skill, body: &str, args: &str) -> String {
    let mut prompt = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        skill.name,
        skill.path.display(),
        skill.dir.display(),
        body.trim()
    );
    if !args.is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(args);
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn skill(dir: &std::path::Path) -> Skill {
        let path = dir.join("SKILL.md");
        std::fs::write(
            &path,
            "---\nname: pdf\ndescription: Work with PDF files\n---\n\nUse scripts/extract.py.\n",
        )
        .unwrap();
        Skill {
            name: "pdf".into(),
            description: "Work with PDF files".into(),
            path,
            dir: dir.to_path_buf(),
        }
    }

    fn template() -> Template {
        Template {
            name: "review".into(),
            description: "Review a file".into(),
            body: "Review $1 for bugs.".into(),
            path: PathBuf::from("/p/.pincer/prompts/review.md"),
        }
    }

    #[test]
    fn commands_parse_with_their_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let skills = [skill(dir.path())];
        let templates = [template()];
        let parse = |text: &str| parse(text, &skills, &templates);
        use crate::session::rewind::Travel;
        assert_eq!(
            parse("/undo").unwrap(),
            Some(Command::Travel(Some(Travel::Undo)))
        );
        assert_eq!(
            parse("/redo").unwrap(),
            Some(Command::Travel(Some(Travel::Redo)))
        );
        assert_eq!(parse("/rewind").unwrap(), Some(Command::Travel(None)));
        assert_eq!(
            parse("/rewind 3").unwrap(),
            Some(Command::Travel(Some(Travel::Rewind(3))))
        );
        assert!(parse("/rewind zero").unwrap_err().contains("turn number"));
        assert!(parse("/rewind 0").is_err());
        assert_eq!(
            parse("/compact keep the API names").unwrap(),
            Some(Command::Compact("keep the API names".into()))
        );
        assert_eq!(
            parse("/compact").unwrap(),
            Some(Command::Compact(String::new()))
        );
        assert_eq!(
            parse("  /model openai/gpt-5\n").unwrap(),
            Some(Command::Model("openai/gpt-5".into()))
        );
        assert_eq!(
            parse("/think high").unwrap(),
            Some(Command::Think("high".into()))
        );
        assert_eq!(
            parse("/mode plan").unwrap(),
            Some(Command::Mode("plan".into()))
        );
        assert_eq!(
            parse("/review src/main.rs").unwrap(),
            Some(Command::Prompt("Review src/main.rs for bugs.".into()))
        );
        let Some(Command::Prompt(init)) = parse("/init").unwrap() else {
            panic!()
        };
        assert!(init.contains("AGENTS.md"));
        let Some(Command::Prompt(text)) = parse("/skill:pdf split report.pdf").unwrap() else {
            panic!()
        };
        assert!(text.starts_with("<skill name=\"pdf\""), "{text}");
        assert!(text.contains("Use scripts/extract.py."), "{text}");
        assert!(
            !text.contains("description:"),
            "front matter leaked: {text}"
        );
        assert!(text.ends_with("</skill>\n\nsplit report.pdf"), "{text}");
        // Not commands: ordinary prompts.
        assert_eq!(parse("/usr/bin is odd").unwrap(), None);
        assert_eq!(parse("fix /compact").unwrap(), None);
        // A missing skill says which exist.
        let error = parse("/skill:nope").unwrap_err();
        assert!(error.contains("`nope`") && error.contains("pdf"), "{error}");
    }

    #[test]
    fn the_menu_lists_builtins_skills_and_templates() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<String> = available(&[skill(dir.path())], &[template()], &[])
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            names,
            [
                "compact",
                "model",
                "think",
                "mode",
                "sandbox",
                "init",
                "undo",
                "redo",
                "tasks",
                "rewind",
                "skill:pdf",
                "review"
            ]
        );
    }
}
