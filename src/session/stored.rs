//! A session kept in a team gateway's store (`[cluster] store`), brought
//! to this machine: the store's lines, checked before they name a file.

use crate::cluster::Sessions;

/// A session's transcript as the store holds it, `lines`, checked to be
/// the transcript of `session` before it names a file here (an id that
/// could leave the sessions directory is refused, whoever wrote it to the
/// store): its header and its text, for a file.
pub fn stored_transcript(
    session: &str,
    lines: &[String],
) -> Result<(super::transcript::Header, String), String> {
    if !super::is_file_id(session) {
        return Err(format!(
            "the store names a session {session:?} that cannot be a file here"
        ));
    }
    let header: super::transcript::Header = lines
        .first()
        .and_then(|line| serde_json::from_str(line).ok())
        .ok_or_else(|| format!("the store has no transcript of session {session}"))?;
    if header.id != session {
        return Err(format!(
            "the store's transcript of {session} names session {}",
            header.id
        ));
    }
    let mut text = lines.join("\n");
    text.push('\n');
    Ok((header, text))
}

/// Copies the session `session` from the cluster's store at `url` into
/// `data_dir`'s sessions, for `pincer acp` to load: `Ok(None)` when the
/// store has no such session. The copy is this machine's from then on;
/// the cluster's session goes on without what is added to it here.
pub async fn copy_from_store(
    url: &str,
    data_dir: &std::path::Path,
    session: &str,
) -> Result<Option<std::path::PathBuf>, String> {
    if !super::is_file_id(session) {
        return Ok(None);
    }
    let store = crate::cluster::postgres::Store::reader(url).await?;
    let lines = store.lines(session).await?;
    if lines.is_empty() {
        return Ok(None);
    }
    let (header, text) = stored_transcript(session, &lines)?;
    let path = super::transcript_path(data_dir, &header.cwd, session);
    let written = path.clone();
    crate::parallel::file_work(move || -> Result<(), String> {
        if let Some(dir) = written.parent() {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        }
        std::fs::write(&written, text).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| format!("{e:?}"))??;
    Ok(Some(path))
}
