//! Which session a run carries on (`--continue`, `--resume`) and in which
//! directory, and what of it the new run takes over: the history, the
//! model, and the end of a prompt the model never answered.

use std::path::PathBuf;

use super::{Continue, Failure, RunOptions};
use crate::agent::{AgentMessage, RunStop};
use crate::config::Settings;
use crate::llm::Model;
use crate::session::transcript;

use super::output::PrintHost;

/// The session a run continues: its transcript as loaded, and where.
pub(super) struct Resumed {
    pub(super) path: PathBuf,
    pub(super) loaded: transcript::Transcript,
}

fn data_dir() -> Result<PathBuf, Failure> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Ok(crate::config::Paths::from_env(&env)
        .map_err(|e| Failure::Other(e.into()))?
        .data_dir)
}

/// The working directory and, when continuing, the stored session.
pub(super) fn locate(options: &RunOptions) -> Result<(PathBuf, Option<Resumed>), Failure> {
    let given = match &options.cwd {
        Some(dir) => Some(
            dir.canonicalize()
                .map_err(|e| Failure::Usage(format!("--cwd {}: {e}", dir.display())))?,
        ),
        None => None,
    };
    let cwd = match &given {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| Failure::Other(e.into()))?,
    };
    crate::session::check_cwd(&cwd).map_err(|e| Failure::Usage(format!("--cwd: {e}")))?;
    let path = match &options.session {
        Continue::New => return Ok((cwd, None)),
        Continue::Latest => {
            let sessions = crate::session::list(&data_dir()?, Some(&cwd));
            let Some(latest) = sessions.into_iter().next() else {
                return Err(Failure::Usage(format!(
                    "--continue: there is no session in {} yet; run without --continue to start one",
                    cwd.display()
                )));
            };
            latest.path
        }
        Continue::Id(id) => crate::cli::sessions::resolve(&data_dir()?, id)
            .map_err(|e| Failure::Usage(format!("--resume: {e}")))?,
    };
    let loaded = transcript::load(&path).map_err(|e| Failure::Other(e.into()))?;
    let session_cwd = loaded.header.cwd.clone();
    if let Some(dir) = given
        && dir != session_cwd
    {
        return Err(Failure::Usage(format!(
            "session {} works in {}, not {}; drop --cwd or pass --cwd {}",
            loaded.header.id,
            session_cwd.display(),
            dir.display(),
            session_cwd.display()
        )));
    }
    crate::session::check_cwd(&session_cwd)
        .map_err(|e| Failure::Usage(format!("session {}: {e}", loaded.header.id)))?;
    Ok((session_cwd, Some(Resumed { path, loaded })))
}

/// The model: `--model`, else the one the continued session used (when it
/// still resolves and has credentials), else the configured default.
pub(super) fn choose_model(
    settings: &Settings,
    options: &RunOptions,
    restored: Option<&crate::session::Restored>,
) -> Result<Model, Failure> {
    if options.model.is_none()
        && let Some(id) = restored.and_then(|r| r.model.as_deref())
        && let Ok(model) = settings.catalog.resolve(id)
        && settings.has_credentials(&model)
    {
        return Ok(model);
    }
    settings
        .default_model(options.model.as_deref())
        .map_err(|e| Failure::Usage(e.to_string()))
}

/// A prompt whose run failed or was cancelled before the model answered
/// gets its end recorded, as an editor's session does, so that a replay
/// shows it and a continuation does not send it again.
pub(super) fn record_unanswered(
    host: &PrintHost,
    history: &[AgentMessage],
    model: &Model,
    stop: &RunStop,
) {
    let error = match stop {
        RunStop::Failed(error) => Some(error),
        RunStop::Cancelled => None,
        _ => return,
    };
    if let Some(end) = crate::session::unanswered_end(history, model, error) {
        host.record(end);
    }
}
