//! The system prompt: who pincer is, which tools it has, and where it runs.
//!
//! Project context files, skills and identity files join this prompt in a
//! later step; the environment section is already what the model needs to
//! act on paths and dates correctly.

use std::path::Path;
use std::sync::Arc;

use crate::llm::Model;
use crate::tools::Tool;

const IDENTITY: &str = "You are pincer, a coding agent working inside the user's editor. \
You help with software engineering tasks: reading and explaining code, finding bugs, \
making changes. Be concise and direct. Look at the code before you answer questions \
about it; do not guess file contents.";

const SAFETY: &str = "Only act within what the user asked for. Never reveal secrets \
(API keys, tokens, passwords) you come across in files or output. Tools that change \
the machine or reach outside the working directory ask the user first; when the \
user rejects a call, do not retry it.";

/// Builds the system prompt for one run.
pub fn system_prompt(cwd: &Path, model: &Model, tools: &[Arc<dyn Tool>]) -> String {
    let mut prompt = String::with_capacity(2048);
    prompt.push_str(IDENTITY);
    prompt.push_str("\n\n# Tools\n");
    for tool in tools {
        let first_line = tool.description().lines().next().unwrap_or_default();
        prompt.push_str(&format!("- {}: {}\n", tool.name(), first_line));
    }
    prompt.push_str("\n# Safety\n");
    prompt.push_str(SAFETY);
    prompt.push_str("\n\n# Environment\n");
    // RFC 3339 starts with the date: `2026-11-22T04:50:00Z`.
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let date = now.get(..10).unwrap_or(&now);
    prompt.push_str(&format!("- Current date (UTC): {date}\n"));
    prompt.push_str(&format!(
        "- Operating system: {} ({})\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    prompt.push_str(&format!("- Current working directory: {}\n", cwd.display()));
    prompt.push_str(&format!("- Model: {}\n", model.full_id()));
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_tools_environment_and_model() {
        let model = crate::llm::catalog::Catalog::new(&Default::default(), &|_| None)
            .resolve("anthropic/claude-sonnet-4-5")
            .unwrap();
        let prompt = system_prompt(Path::new("/work/project"), &model, &crate::tools::builtin());
        let today = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        for expected in [
            "- read: ",
            "- bash: ",
            "- Current working directory: /work/project\n",
            "- Model: anthropic/claude-sonnet-4-5\n",
            &format!("- Current date (UTC): {}\n", &today[..10]),
        ] {
            assert!(
                prompt.contains(expected),
                "{expected:?} missing from:\n{prompt}"
            );
        }
    }
}
