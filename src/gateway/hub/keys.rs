//! Session keys (`agent:main:main`, `telegram:dm:123`) and the pincer
//! sessions they name: kept in the data dir (`gateway/keys.json`, the
//! user's alone), looked up, opened (a session is created on a key's first
//! use, or loaded again after it was unloaded) and reset.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Failure, Hub, check_key};

/// How OpenClaw's clients scope a key to the gateway's one agent.
const AGENT_PREFIX: &str = "agent:main:";

/// The least time between two writes of `keys.json` by the saver task.
/// The whole map is written each time, so writing once per new key made
/// a burst of new chats quadratic (5,000 keys: thousands of writes of up
/// to 400 KB). A key made in this window is written with the next; the
/// gateway writes what is left when it stops ([`Hub::write_keys`]).
pub(super) const WRITE_SPACING: Duration = Duration::from_millis(200);

/// Session keys and the pincer sessions they name, kept on disk.
///
/// A gateway with thousands of chats creates keys one after another: the
/// file is written by one saver task that takes every change made while it
/// was writing or waiting out [`WRITE_SPACING`] in its next write (see
/// [`Hub::keys_changed`]), not once per key, and events find a session's
/// key through an index, not a scan.
pub(super) struct KeyMap {
    path: PathBuf,
    keys: BTreeMap<String, String>,
    /// The key of each named session: the first in key order when several
    /// name it.
    by_session: HashMap<String, String>,
    /// Sessions a reset replaced: kept on disk (and by `pincer sessions
    /// list`), no longer listed by the gateway.
    archived: std::collections::BTreeSet<String>,
    /// When a client archived a session (`sessions.patch`), in ms since
    /// the epoch (a reset's are not timed).
    archived_at: BTreeMap<String, u64>,
    /// Changes not yet written.
    dirty: bool,
}

/// `keys.json`, borrowed for writing.
#[derive(serde::Serialize)]
struct StoredKeys<'a> {
    keys: &'a BTreeMap<String, String>,
    archived: &'a std::collections::BTreeSet<String>,
    #[serde(rename = "archivedAt")]
    archived_at: &'a BTreeMap<String, u64>,
}

impl KeyMap {
    pub(super) fn load(path: PathBuf) -> Self {
        let stored = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .unwrap_or_default();
        let keys: BTreeMap<String, String> =
            serde_json::from_value(stored["keys"].clone()).unwrap_or_default();
        let archived = serde_json::from_value(stored["archived"].clone()).unwrap_or_default();
        let archived_at = serde_json::from_value(stored["archivedAt"].clone()).unwrap_or_default();
        let mut by_session = HashMap::new();
        // In key order, so the first key of a session wins.
        for (key, id) in &keys {
            by_session.entry(id.clone()).or_insert_with(|| key.clone());
        }
        Self {
            path,
            keys,
            by_session,
            archived,
            archived_at,
            dirty: false,
        }
    }

    /// Names `id` with `key`; returns the session it named before.
    pub(super) fn insert(&mut self, key: &str, id: &str) -> Option<String> {
        let old = self.keys.insert(key.to_string(), id.to_string());
        if let Some(old) = &old {
            self.unindex(key, old);
        }
        let first = self
            .by_session
            .entry(id.to_string())
            .or_insert_with(|| key.to_string());
        if key < first.as_str() {
            *first = key.to_string();
        }
        self.dirty = true;
        old
    }

    /// Forgets `key`; returns the session it named.
    fn remove(&mut self, key: &str) -> Option<String> {
        let old = self.keys.remove(key)?;
        self.unindex(key, &old);
        self.dirty = true;
        Some(old)
    }

    /// `key` no longer names `id`: its index entry goes to the session's
    /// next key, if another names it (rare: a scan).
    fn unindex(&mut self, key: &str, id: &str) {
        if self.by_session.get(id).is_some_and(|k| k == key) {
            self.by_session.remove(id);
            if let Some((next, _)) = self.keys.iter().find(|(_, named)| named.as_str() == id) {
                self.by_session.insert(id.to_string(), next.clone());
            }
        }
    }

    /// What to write, if anything changed since the last write.
    fn take_changes(&mut self) -> Option<(PathBuf, Vec<u8>)> {
        if !self.dirty {
            return None;
        }
        self.dirty = false;
        let stored = StoredKeys {
            keys: &self.keys,
            archived: &self.archived,
            archived_at: &self.archived_at,
        };
        match serde_json::to_vec(&stored) {
            Ok(bytes) => Some((self.path.clone(), bytes)),
            Err(e) => {
                tracing::warn!(error = %e, "cannot serialise the gateway's session keys");
                None
            }
        }
    }
}

/// The saver's loop: waits for a change, writes, then waits out `spacing`
/// before it looks again, so the changes of a burst go out together.
pub(super) async fn save_changes<F, Fut>(
    dirty: &tokio::sync::Notify,
    spacing: Duration,
    mut write: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    loop {
        dirty.notified().await;
        write().await;
        tokio::time::sleep(spacing).await;
    }
}

/// Writes `keys.json`: the user's alone, like the transcripts (session keys
/// name the user's chats: a Telegram user id, a Slack channel).
fn write_keys(path: &Path, bytes: &[u8]) {
    if let Some(dir) = path.parent()
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        tracing::warn!(error = %e, "cannot create {}", dir.display());
        return;
    }
    if let Err(e) = crate::config::trust::write_private(path, bytes) {
        tracing::warn!(error = %e, "cannot save the gateway's session keys");
    }
}

impl Hub {
    /// The key of a listed session: a helper the hub has not heard of
    /// yet (it has just started) already has the key it will get.
    pub fn key_of_summary(&self, summary: &crate::session::Summary) -> String {
        match self.keys().by_session.get(&summary.id) {
            Some(key) => key.clone(),
            None if summary.spawned_by.is_some() => super::helpers::helper_key(&summary.id),
            None => summary.id.clone(),
        }
    }

    /// The key events of a session carry: the one it was given to, else
    /// its id.
    pub fn key_of(&self, session: &str) -> String {
        let known = self.keys().by_session.get(session).cloned();
        known
            .or_else(|| self.key_elsewhere(session))
            .unwrap_or_else(|| session.to_string())
    }

    /// The keys changed: the saver writes them (at once if it is not
    /// running, as before [`Hub::start`]).
    pub(super) fn keys_changed(&self) {
        if self.keys_saver.get().is_some() {
            self.keys_dirty.notify_one();
        } else {
            self.write_keys();
        }
    }

    /// A key now names a new session: written at once, not when the
    /// saver next may, so that a gateway killed right after (its session
    /// already running) finds the session under its key when it starts
    /// again.
    pub(super) fn key_made(&self) {
        self.write_keys();
    }

    /// Writes the keys if they changed since the last write. The write
    /// itself happens outside the lock; only the saver task (or a caller
    /// before it starts, or at shutdown) writes, one at a time.
    pub fn write_keys(&self) {
        let _one = self.keys_writing.lock();
        let changes = self.keys().take_changes();
        if let Some((path, bytes)) = changes {
            write_keys(&path, &bytes);
        }
    }

    /// The session a key names, if it names one yet.
    pub fn lookup(&self, key: &str) -> Option<String> {
        if let Some(id) = self.keys().keys.get(key) {
            return Some(id.clone());
        }
        let exists = |id: &str| {
            self.registry.is_open(id) || crate::session::find(&self.data_dir, id).is_some()
        };
        if exists(key) {
            return Some(key.to_string());
        }
        // OpenClaw's clients address session `<key>` as `agent:main:<key>`
        // too (the TUI does): the same session, not a new key.
        let rest = key.strip_prefix(AGENT_PREFIX)?;
        if let Some(id) = self.keys().keys.get(rest) {
            return Some(id.clone());
        }
        // A helper's key names its session (see `helpers::helper_key`),
        // also one this gateway never gave out (an editor's helper).
        if let Some(id) = rest.strip_prefix("subagent:") {
            return exists(id).then(|| id.to_string());
        }
        exists(rest).then(|| rest.to_string())
    }

    /// The session a key names, opened (created on first use).
    pub async fn open(self: &Arc<Self>, key: &str) -> Result<String, Failure> {
        let _one = self.opening.lock().await;
        let link = self.link()?;
        // In a cluster, the store says which replica runs the session.
        if let Some(id) = self.open_stored(key).await? {
            self.used(&id);
            if self.keys().insert(key, &id).is_none() {
                self.key_made();
                let waiting = self.conns().by_new_key.remove(key).unwrap_or_default();
                for conn in waiting {
                    self.follow(&conn, &id);
                }
                self.session_changed("create", &id);
            }
            return Ok(id);
        }
        if let Some(id) = self.lookup(key) {
            if self.registry.is_open(&id) {
                self.used(&id);
                return Ok(id);
            }
            // Unloaded while idle, or from an earlier run of the gateway:
            // loaded again from its transcript, in the cwd it names.
            if let Some(header) = crate::session::find(&self.data_dir, &id)
                .and_then(|path| crate::session::read_header(&path))
            {
                link.load_session(&id, header.cwd).await.map_err(|e| {
                    Failure::invalid(format!(
                        "cannot open session {key}: {}",
                        crate::gateway::link::error_text(&e)
                    ))
                })?;
                self.used(&id);
                return Ok(id);
            }
        }
        let id = link.new_session(self.cwd.clone()).await.map_err(|e| {
            Failure::invalid(format!(
                "cannot create a session for {key}: {}",
                crate::gateway::link::error_text(&e)
            ))
        })?;
        self.used(&id);
        self.keys().insert(key, &id);
        self.key_made();
        let waiting = self.conns().by_new_key.remove(key).unwrap_or_default();
        for conn in waiting {
            self.follow(&conn, &id);
        }
        self.session_changed("create", &id);
        Ok(id)
    }

    /// Gives `key` a new session (`/new`, `/reset`, `sessions.reset`),
    /// the old one archived; in a cluster, on the replica that runs the
    /// key's session. With `expected`, only while `key` names that
    /// session.
    pub async fn reset(&self, key: &str, expected: Option<&str>) -> Result<String, Failure> {
        check_key("key", key)?;
        if let Some(elsewhere) = self.elsewhere(key).await {
            if let Some(expected) = expected
                && expected != elsewhere.session
            {
                return Err(no_longer(key, expected));
            }
            return self.reset_elsewhere(&elsewhere, expected).await;
        }
        self.reset_here(key, expected).await
    }

    /// [`Hub::reset`] on this replica.
    pub(super) async fn reset_here(
        &self,
        key: &str,
        expected: Option<&str>,
    ) -> Result<String, Failure> {
        if let Some(expected) = expected
            && self.lookup(key).as_deref() != Some(expected)
        {
            return Err(no_longer(key, expected));
        }
        let _one = self.opening.lock().await;
        let link = self.link()?;
        let id = link
            .new_session(self.cwd.clone())
            .await
            .map_err(|e| Failure::invalid(crate::gateway::link::error_text(&e)))?;
        // The store gives the key the new session first: when it cannot,
        // the old one goes on.
        if let Err(e) = self.rebind_stored(key, &id).await {
            self.registry.unload_idle(&id);
            return Err(e);
        }
        if let Some(old) = self.lookup(key) {
            link.cancel(&old);
        }
        self.used(&id);
        {
            let mut keys = self.keys();
            if let Some(old) = keys.insert(key, &id) {
                keys.archived.insert(old);
            }
        }
        self.key_made();
        self.session_changed("reset", &id);
        Ok(id)
    }

    /// Deletes the session `key` names, with its transcript
    /// (`sessions.delete`); with `archived_only`, only an archived one,
    /// and with `expected`, only while `key` names that session. In a
    /// cluster, the replica that runs it deletes it, and the store forgets
    /// it first. Whether a session was deleted.
    pub async fn delete_key(
        self: &Arc<Self>,
        key: &str,
        archived_only: bool,
        expected: Option<&str>,
    ) -> Result<bool, Failure> {
        check_key("key", key)?;
        if let Some(elsewhere) = self.elsewhere(key).await {
            if let Some(expected) = expected
                && expected != elsewhere.session
            {
                return Err(no_longer(key, expected));
            }
            return self
                .delete_elsewhere(&elsewhere, archived_only, expected)
                .await;
        }
        self.delete_here(key, archived_only, expected).await
    }

    /// [`Hub::delete_key`] on this replica.
    pub(super) async fn delete_here(
        self: &Arc<Self>,
        key: &str,
        archived_only: bool,
        expected: Option<&str>,
    ) -> Result<bool, Failure> {
        let local = self.lookup(key);
        if archived_only && !local.as_ref().is_some_and(|s| self.is_archived(s)) {
            return Err(Failure::invalid(format!(
                "Session {key} is not archived. Archive it first, then delete it."
            )));
        }
        if let Some(expected) = expected
            && local.as_deref() != Some(expected)
        {
            return Err(no_longer(key, expected));
        }
        // The store forgets it first: when it cannot be reached, nothing
        // is deleted.
        let forgotten = self.forget_stored(key).await?;
        let Some(session) = local else {
            // A gone replica's session, forgotten by the store alone.
            if let Some(session) = forgotten {
                self.deleted(key, &session);
                return Ok(true);
            }
            return Ok(false);
        };
        let _ = self.abort(&session);
        let transcript = crate::session::find(self.data_dir(), &session);
        let deleted = self.link()?.delete_session(&session).await.is_ok();
        if let Some(transcript) = &transcript {
            self.forget_usage(transcript);
        }
        self.forget_key(key);
        if deleted {
            self.deleted(key, &session);
        }
        Ok(deleted)
    }

    /// Forks the session `key` names at `point` into a new session, given
    /// `new_key` (default: the key with `:fork:` and a short id): the
    /// history up to there, the files as they are.
    pub fn fork(
        &self,
        key: &str,
        point: &crate::session::rewind::ForkPoint,
        new_key: Option<&str>,
    ) -> Result<(String, String), Failure> {
        let session = self.lookup(key).ok_or_else(|| super::not_found(key))?;
        let path =
            crate::session::find(&self.data_dir, &session).ok_or_else(|| super::not_found(key))?;
        let new_key = match new_key {
            Some(new_key) => {
                check_key("newKey", new_key)?;
                if self.lookup(new_key).is_some() {
                    return Err(Failure::invalid(format!(
                        "`newKey` {new_key} already names a session"
                    )));
                }
                new_key.to_string()
            }
            None => format!(
                "{key}:fork:{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            ),
        };
        check_key("newKey", &new_key)?;
        let forked =
            crate::session::rewind::fork(&self.data_dir, &path, point).map_err(Failure::invalid)?;
        self.keys().insert(&new_key, &forked.id);
        self.key_made();
        self.session_changed("create", &forked.id);
        Ok((new_key, forked.id))
    }

    /// Whether a reset replaced this session, or a client archived it.
    pub fn is_archived(&self, session: &str) -> bool {
        self.keys().archived.contains(session)
    }

    /// When a client archived this session, if it did.
    pub fn archived_at(&self, session: &str) -> Option<u64> {
        self.keys().archived_at.get(session).copied()
    }

    /// Archives a session (`sessions.patch` `archived: true`): it is kept
    /// on disk and no longer listed unless asked for; or brings it back.
    pub fn set_archived(&self, session: &str, archived: bool) {
        {
            let mut keys = self.keys();
            if archived {
                if keys.archived.insert(session.to_string()) {
                    keys.archived_at
                        .insert(session.to_string(), crate::gateway::frames::now_ms());
                }
            } else {
                keys.archived.remove(session);
                keys.archived_at.remove(session);
            }
            keys.dirty = true;
        }
        self.keys_changed();
    }

    pub fn forget_key(&self, key: &str) {
        let removed = self.keys().remove(key).is_some();
        if removed {
            self.keys_changed();
        }
    }

    /// `sessions.cleanup`'s look at the keys: how many there are, and
    /// those that name a session with no transcript left (deleted by
    /// hand, or by `pincer sessions delete`), not open, and not `keep`.
    /// With `fix`, those keys are forgotten (a key's next use makes a new
    /// session either way) and the change written at once.
    pub fn clean_keys(&self, fix: bool, keep: Option<&str>) -> KeysCleaned {
        let stored: Vec<(String, String)> = {
            let keys = self.keys();
            keys.keys
                .iter()
                .map(|(k, id)| (k.clone(), id.clone()))
                .collect()
        };
        let missing: Vec<String> = stored
            .iter()
            .filter(|(key, id)| {
                Some(key.as_str()) != keep
                    && !self.registry.is_open(id)
                    && crate::session::find(&self.data_dir, id).is_none()
            })
            .map(|(key, _)| key.clone())
            .collect();
        if fix && !missing.is_empty() {
            {
                let mut keys = self.keys();
                for key in &missing {
                    keys.remove(key);
                }
            }
            self.write_keys();
        }
        KeysCleaned {
            path: self.keys().path.clone(),
            before: stored.len(),
            missing: missing.len(),
            after: stored.len() - if fix { missing.len() } else { 0 },
        }
    }
}

/// What [`Hub::clean_keys`] found and did.
pub struct KeysCleaned {
    /// `keys.json`.
    pub path: PathBuf,
    pub before: usize,
    /// Keys of sessions whose transcript is gone.
    pub missing: usize,
    pub after: usize,
}

fn no_longer(key: &str, expected: &str) -> Failure {
    Failure::invalid(format!("{key} no longer names session {expected}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_s_key_is_found_by_its_index_and_survives_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway/keys.json");
        let mut keys = KeyMap::load(path.clone());
        assert_eq!(keys.insert("b:chat", "s1"), None);
        assert_eq!(keys.insert("a:alias", "s1"), None);
        // The first key in order names the session, as a scan found it.
        assert_eq!(
            keys.by_session.get("s1").map(String::as_str),
            Some("a:alias")
        );
        assert_eq!(keys.remove("a:alias"), Some("s1".to_string()));
        assert_eq!(
            keys.by_session.get("s1").map(String::as_str),
            Some("b:chat")
        );
        // A reset gives the key another session; the old one has no key.
        assert_eq!(keys.insert("b:chat", "s2"), Some("s1".to_string()));
        assert_eq!(keys.by_session.get("s1"), None);
        assert_eq!(
            keys.by_session.get("s2").map(String::as_str),
            Some("b:chat")
        );

        // Written only when something changed, and read back the same.
        let (to, bytes) = keys.take_changes().unwrap();
        assert_eq!(keys.take_changes(), None);
        write_keys(&to, &bytes);
        let again = KeyMap::load(path);
        assert_eq!(again.keys, keys.keys);
        assert_eq!(again.by_session, keys.by_session);
    }

    /// A burst of changes is written a few times, not once per change:
    /// 400 changes over about 300 ms with a 100 ms spacing make at most a
    /// handful of writes (one per change before the spacing), and the last
    /// change is written.
    #[tokio::test]
    async fn a_burst_of_changes_is_written_a_few_times() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dirty = Arc::new(tokio::sync::Notify::new());
        let changes = Arc::new(AtomicUsize::new(0));
        let writes = Arc::new(AtomicUsize::new(0));
        let written = Arc::new(AtomicUsize::new(0));
        let saver = {
            let (dirty, changes, writes, written) = (
                dirty.clone(),
                changes.clone(),
                writes.clone(),
                written.clone(),
            );
            tokio::spawn(async move {
                save_changes(&dirty, Duration::from_millis(100), || {
                    writes.fetch_add(1, Ordering::SeqCst);
                    written.store(changes.load(Ordering::SeqCst), Ordering::SeqCst);
                    async {}
                })
                .await
            })
        };
        let started = std::time::Instant::now();
        for _ in 0..400 {
            changes.fetch_add(1, Ordering::SeqCst);
            dirty.notify_one();
            tokio::time::sleep(Duration::from_micros(750)).await;
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while written.load(Ordering::SeqCst) < 400 {
            assert!(
                std::time::Instant::now() < deadline,
                "the last change was not written"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        saver.abort();
        // One write at once, then at most one per spacing (100 ms) while
        // changes keep coming: a loaded machine stretches the burst, and
        // with it the number of writes, but never near one per change.
        let elapsed = started.elapsed();
        let writes = writes.load(Ordering::SeqCst);
        let most = elapsed.as_millis() / 100 + 2;
        assert!(
            writes as u128 <= most,
            "{writes} writes for 400 changes in {elapsed:?}"
        );
    }
}
