//! Who may talk to the agent through a chat channel: the user ids the
//! user's config allows, plus those the owner approved by pairing. A
//! stranger who writes gets a pairing code and nothing else; the owner
//! approves it on the gateway's machine (`pincer channels approve CODE`).
//! Codes are random, short-lived, one per stranger, and few at a time per
//! channel (a new stranger evicts the oldest waiting code of the channel,
//! so that a crowd on one channel neither fills the disk nor closes
//! pairing on the others). A stranger is answered when their code is new
//! and then at most once a minute, so that writing again and again cannot
//! spend the bot's rate limit on replies.
//!
//! The approvals and pending codes live in one file readable by the user
//! only, written whole and renamed into place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How long a pairing code can be approved.
pub const CODE_TTL: Duration = Duration::from_secs(3600);

/// The most codes waiting at once on one channel; a new one evicts the
/// oldest.
pub const MAX_PENDING_PER_CHANNEL: usize = 16;

/// How often a stranger who keeps writing is told their code again.
pub const REPLY_INTERVAL: Duration = Duration::from_secs(60);

/// Letters and digits a person reads without confusing them (no 0/O, 1/I/L).
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a valid access file ({source}); fix or remove it")]
    Corrupt {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no pairing code {0} is waiting (codes last an hour; ask for a new one)")]
    UnknownCode(String),
    #[error("no randomness for a pairing code: {0}")]
    Random(String),
}

/// A code waiting for the owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub channel: String,
    pub user: String,
    /// A name to show the owner (the platform's display name), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Seconds since the Unix epoch.
    pub expires: u64,
    /// When the stranger was last told this code (seconds since the
    /// epoch; 0: never).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub answered: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a stranger's message leads to: their code, and whether to tell
/// it to them now.
#[derive(Debug, PartialEq, Eq)]
pub struct Pairing {
    pub code: String,
    pub reply: bool,
}

#[derive(Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Stored {
    /// Approved user ids, per channel.
    #[serde(default)]
    approved: BTreeMap<String, Vec<String>>,
    /// Waiting codes.
    #[serde(default)]
    pending: BTreeMap<String, Pending>,
}

/// The access file and what it holds.
pub struct Access {
    path: PathBuf,
    stored: Stored,
}

impl Access {
    /// The file at `path` (absent: nobody approved yet).
    pub fn load(path: &Path) -> Result<Self, AccessError> {
        let stored = match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| AccessError::Corrupt {
                path: path.to_path_buf(),
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Stored::default(),
            Err(source) => {
                return Err(AccessError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Ok(Self {
            path: path.to_path_buf(),
            stored,
        })
    }

    /// `user` may use the agent through `channel`: listed in the config's
    /// `allow`, or approved.
    pub fn allowed(&self, channel: &str, user: &str, configured: &[String]) -> bool {
        configured.iter().any(|u| u == user)
            || self
                .stored
                .approved
                .get(channel)
                .is_some_and(|users| users.iter().any(|u| u == user))
    }

    /// The code `user` of `channel` gives the owner: the one already
    /// waiting for them, else a new one (evicting the channel's oldest when
    /// [`MAX_PENDING_PER_CHANNEL`] wait). `reply` is true for a new code
    /// and then once per [`REPLY_INTERVAL`]. `now` is seconds since the
    /// epoch.
    pub fn pair(
        &mut self,
        channel: &str,
        user: &str,
        name: Option<&str>,
        now: u64,
    ) -> Result<Pairing, AccessError> {
        self.expire(now);
        if let Some((code, pending)) = self
            .stored
            .pending
            .iter_mut()
            .find(|(_, p)| p.channel == channel && p.user == user)
        {
            let code = code.clone();
            let reply = now >= pending.answered.saturating_add(REPLY_INTERVAL.as_secs());
            if reply {
                pending.answered = now;
                self.save()?;
            }
            return Ok(Pairing { code, reply });
        }
        let mut waiting: Vec<(u64, String)> = self
            .stored
            .pending
            .iter()
            .filter(|(_, p)| p.channel == channel)
            .map(|(code, p)| (p.expires, code.clone()))
            .collect();
        if waiting.len() >= MAX_PENDING_PER_CHANNEL {
            waiting.sort();
            let excess = waiting.len() + 1 - MAX_PENDING_PER_CHANNEL;
            for (_, code) in waiting.into_iter().take(excess) {
                self.stored.pending.remove(&code);
            }
        }
        let code = loop {
            let code = new_code()?;
            if !self.stored.pending.contains_key(&code) {
                break code;
            }
        };
        self.stored.pending.insert(
            code.clone(),
            Pending {
                channel: channel.to_string(),
                user: user.to_string(),
                name: name.map(|n| n.chars().take(100).collect()),
                expires: now + CODE_TTL.as_secs(),
                answered: now,
            },
        );
        self.save()?;
        Ok(Pairing { code, reply: true })
    }

    /// The owner approves `code` (case and spaces as typed): its user may
    /// use the channel from now on.
    pub fn approve(&mut self, code: &str, now: u64) -> Result<Pending, AccessError> {
        self.expire(now);
        let wanted: String = code
            .chars()
            .filter(|c| !c.is_whitespace() && *c != '-')
            .flat_map(char::to_uppercase)
            .collect();
        let pending = self
            .stored
            .pending
            .remove(&wanted)
            .ok_or_else(|| AccessError::UnknownCode(code.trim().to_string()))?;
        let users = self
            .stored
            .approved
            .entry(pending.channel.clone())
            .or_default();
        if !users.contains(&pending.user) {
            users.push(pending.user.clone());
        }
        self.save()?;
        Ok(pending)
    }

    /// Codes still waiting at `now`.
    pub fn pending(&self, now: u64) -> Vec<(String, Pending)> {
        self.stored
            .pending
            .iter()
            .filter(|(_, p)| p.expires > now)
            .map(|(c, p)| (c.clone(), p.clone()))
            .collect()
    }

    /// Approved users, per channel.
    pub fn approved(&self) -> &BTreeMap<String, Vec<String>> {
        &self.stored.approved
    }

    fn expire(&mut self, now: u64) {
        self.stored.pending.retain(|_, p| p.expires > now);
    }

    fn save(&self) -> Result<(), AccessError> {
        let write = |source| AccessError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent() {
            crate::config::trust::create_private_dir(dir).map_err(write)?;
        }
        let bytes = serde_json::to_vec_pretty(&self.stored).unwrap_or_default();
        crate::config::trust::write_private(&self.path, &bytes).map_err(write)
    }
}

/// Eight letters and digits from the OS's randomness (about 39 bits: a
/// code lives an hour, and only the owner's terminal accepts it).
fn new_code() -> Result<String, AccessError> {
    // Bytes past the last whole multiple of the alphabet's size are
    // dropped, so that every letter is as likely as the others.
    let cut = 256 - 256 % ALPHABET.len();
    let mut code = String::with_capacity(CODE_LEN);
    while code.len() < CODE_LEN {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| AccessError::Random(e.to_string()))?;
        for b in bytes.iter().map(|b| *b as usize).filter(|b| *b < cut) {
            if code.len() < CODE_LEN {
                code.push(ALPHABET[b % ALPHABET.len()] as char);
            }
        }
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const NOW: u64 = 1_800_000_000;

    #[test]
    fn a_stranger_gets_one_code_which_the_owner_approves() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("channels").join("access.json");
        let mut access = Access::load(&path).unwrap();
        let configured = vec!["111".to_string()];
        assert!(access.allowed("telegram", "111", &configured));
        assert!(!access.allowed("telegram", "222", &configured));

        let code = access
            .pair("telegram", "222", Some("Eve"), NOW)
            .unwrap()
            .code;
        assert_eq!(code.len(), CODE_LEN);
        assert!(code.bytes().all(|b| ALPHABET.contains(&b)), "{code}");
        // Asking again gives the same code, not a new one.
        assert_eq!(
            access.pair("telegram", "222", None, NOW + 5).unwrap().code,
            code
        );
        assert!(!access.allowed("telegram", "222", &configured));

        // The owner types it in lower case with a space: still the code.
        let typed = format!("{} {}", &code[..4].to_lowercase(), &code[4..]);
        let approved = Access::load(&path)
            .unwrap()
            .approve(&typed, NOW + 60)
            .unwrap();
        assert_eq!(approved.user, "222");
        let reloaded = Access::load(&path).unwrap();
        assert!(reloaded.allowed("telegram", "222", &configured));
        // Approved on one channel only.
        assert!(!reloaded.allowed("slack", "222", &configured));
        assert_eq!(reloaded.pending(NOW + 60), Vec::new());

        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn codes_expire_and_unknown_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let mut access = Access::load(&path).unwrap();
        let code = access.pair("discord", "9", None, NOW).unwrap().code;
        let late = NOW + CODE_TTL.as_secs();
        let error = access.approve(&code, late).unwrap_err();
        assert!(matches!(error, AccessError::UnknownCode(_)), "{error}");
        assert!(!access.allowed("discord", "9", &[]));
        assert!(matches!(
            access.approve("NOPE1234", NOW).unwrap_err(),
            AccessError::UnknownCode(_)
        ));
        // After expiry the stranger gets a fresh code.
        let again = access.pair("discord", "9", None, late).unwrap();
        assert_ne!(again.code, code);
        assert!(again.reply);
    }

    #[test]
    fn a_crowd_on_one_channel_evicts_its_oldest_codes_and_closes_no_channel() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let mut access = Access::load(&path).unwrap();
        // Far more strangers than ever fit, one second apart, on one channel.
        let codes: Vec<String> = (0..200u64)
            .map(|n| {
                access
                    .pair("telegram", &n.to_string(), None, NOW + n)
                    .unwrap()
                    .code
            })
            .collect();
        let waiting = Access::load(&path).unwrap().pending(NOW + 200);
        let mut kept: Vec<String> = waiting.iter().map(|(c, _)| c.clone()).collect();
        kept.sort();
        let mut newest = codes[200 - MAX_PENDING_PER_CHANNEL..].to_vec();
        newest.sort();
        assert_eq!(kept, newest);
        // The oldest code is gone: the owner cannot approve it any more.
        assert!(matches!(
            access.approve(&codes[0], NOW + 201).unwrap_err(),
            AccessError::UnknownCode(_)
        ));
        // A stranger on another channel still gets a code, told at once.
        let other = access.pair("slack", "U1", None, NOW + 202).unwrap();
        assert!(other.reply);
        assert!(
            Access::load(&path)
                .unwrap()
                .pending(NOW + 202)
                .iter()
                .any(|(c, p)| *c == other.code && p.channel == "slack")
        );
    }

    #[test]
    fn a_stranger_who_keeps_writing_is_told_once_a_minute() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        let replies: Vec<u64> = (0..200u64)
            .filter(|n| {
                Access::load(&path)
                    .unwrap()
                    .pair("telegram", "222", Some("Eve"), NOW + n / 2)
                    .unwrap()
                    .reply
            })
            .collect();
        // 100 seconds of two messages a second: told at 0 s and at 60 s.
        assert_eq!(replies, vec![0, 120]);
    }

    #[test]
    fn a_corrupt_file_is_named_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.json");
        std::fs::write(&path, "{not json").unwrap();
        let error = Access::load(&path).err().unwrap().to_string();
        assert!(
            error.contains("access.json") && error.contains("fix or remove"),
            "{error}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
    }
}
