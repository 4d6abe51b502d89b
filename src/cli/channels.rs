//! `pincer channels list|approve`: who may use the chat channels. The
//! owner approves a stranger's pairing code here, on the gateway's machine,
//! so that access is granted by someone who can already run pincer, never
//! from a chat.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use crate::cli::shown;
use crate::config::Paths;
use crate::gateway::channels::access::Access;

fn access_file() -> anyhow::Result<PathBuf> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    Ok(crate::gateway::channels::access_file(
        &Paths::from_env(&env)?.data_dir,
    ))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Approves a pairing code: its user may use its channel from now on.
pub fn approve(code: &str) -> anyhow::Result<()> {
    let mut access = Access::load(&access_file()?)?;
    let pending = access.approve(code, now())?;
    let who = match &pending.name {
        Some(name) => format!("{} ({})", shown(name), shown(&pending.user)),
        None => shown(&pending.user).into_owned(),
    };
    println!("Approved {who} on {}.", shown(&pending.channel));
    Ok(())
}

/// The approved users and the codes waiting, per channel.
pub fn list() -> anyhow::Result<()> {
    let access = Access::load(&access_file()?)?;
    let pending = access.pending(now());
    if access.approved().is_empty() && pending.is_empty() {
        println!(
            "No approved users and no pairing codes waiting (users in a channel's `allow` need neither)."
        );
        return Ok(());
    }
    for (channel, users) in access.approved() {
        for user in users {
            println!("approved  {}  {}", shown(channel), shown(user));
        }
    }
    for (code, p) in pending {
        let left = p.expires.saturating_sub(now()).div_ceil(60);
        println!(
            "waiting   {}  {}{}  code {}  ({left} min left)",
            shown(&p.channel),
            shown(&p.user),
            p.name
                .map(|n| format!(" {}", shown(&n)))
                .unwrap_or_default(),
            shown(&code)
        );
    }
    Ok(())
}
