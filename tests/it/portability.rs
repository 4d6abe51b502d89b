//! pincer is built and tested on Linux only (no other target is installed
//! where it is developed), so nothing compiles the Windows path. What keeps
//! a Windows or macOS build possible is structure, checked here: `nix` is a
//! Unix-only dependency, and every use of Unix-only APIs (`nix::`,
//! `std::os::unix`, `libc::`) sits in a module compiled only on Unix or
//! right under a `cfg(unix)` (or Linux) attribute.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Files that are whole modules declared behind `cfg(unix)`, with the file
/// that declares them and the declaration.
const UNIX_ONLY_MODULES: &[(&str, &str, &str)] = &[
    (
        "src/process_group/unix.rs",
        "src/process_group.rs",
        "#[cfg(unix)]\n#[path = \"process_group/unix.rs\"]\nmod imp;",
    ),
    (
        "src/tools/shell/reaper.rs",
        "src/tools/shell.rs",
        "#[cfg(unix)]\nmod reaper;",
    ),
    (
        "src/tools/sandbox/linux.rs",
        "src/tools/sandbox.rs",
        "#[cfg(target_os = \"linux\")]\npub mod linux;",
    ),
    (
        "src/tools/sandbox/proxy.rs",
        "src/tools/sandbox.rs",
        "#[cfg(unix)]\npub mod proxy;",
    ),
];

/// How far above a use its `cfg` attribute may be (the item's signature
/// and the first lines of its body).
const CFG_REACH: usize = 12;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_unix_cfg(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("#[cfg(")
        && (line.contains("unix") || line.contains("target_os = \"linux\""))
        && !line.contains("not(")
}

#[test]
fn nix_is_a_unix_only_dependency() {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(manifest_dir().join("Cargo.toml")).unwrap())
            .unwrap();
    assert!(
        manifest["dependencies"].get("nix").is_none(),
        "nix is an unconditional dependency; move it under [target.'cfg(unix)'.dependencies]"
    );
    assert!(
        manifest["target"]["cfg(unix)"]["dependencies"]
            .get("nix")
            .is_some(),
        "nix is missing from [target.'cfg(unix)'.dependencies]"
    );
}

#[test]
fn unix_only_apis_are_used_only_under_cfg_unix() {
    for (_, parent, declaration) in UNIX_ONLY_MODULES {
        let text = std::fs::read_to_string(manifest_dir().join(parent)).unwrap();
        assert!(
            text.contains(declaration),
            "{parent} no longer declares its Unix-only module as:\n{declaration}"
        );
    }
    let mut files = Vec::new();
    rust_files(&manifest_dir().join("src"), &mut files);
    files.sort();
    let mut ungated = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(manifest_dir())
            .unwrap()
            .to_str()
            .unwrap()
            .replace('\\', "/");
        if UNIX_ONLY_MODULES.iter().any(|(f, _, _)| *f == relative) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let unix_api = code.contains("nix::")
                || code.contains("use nix")
                || code.contains("std::os::unix")
                || code.contains("libc::");
            if !unix_api {
                continue;
            }
            let gated = lines[i.saturating_sub(CFG_REACH)..i]
                .iter()
                .any(|l| is_unix_cfg(l));
            if !gated {
                ungated.push(format!("{relative}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert_eq!(
        ungated,
        Vec::<String>::new(),
        "Unix-only APIs outside cfg(unix)"
    );
}
