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
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    prompt.push_str(&format!("- Current date (UTC): {}\n", civil_date(now)));
    prompt.push_str(&format!(
        "- Operating system: {} ({})\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    prompt.push_str(&format!("- Current working directory: {}\n", cwd.display()));
    prompt.push_str(&format!("- Model: {}\n", model.full_id()));
    prompt
}

/// `YYYY-MM-DD` of a Unix timestamp (Howard Hinnant's civil-from-days).
fn civil_date(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(951_782_400), "2000-02-29");
        assert_eq!(civil_date(1_795_314_600), "2026-11-22");
    }
}
