//! The README's install and test commands are the ones that work on a fresh
//! machine, and `.ci/run` runs exactly the test command the README shows:
//! these read the files themselves, so a change to one without the other
//! goes red.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use pretty_assertions::assert_eq;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The README section under `## title`, up to the next `## `.
fn section(title: &str) -> String {
    let readme = read("README.md");
    let start = readme
        .find(&format!("\n## {title}\n"))
        .unwrap_or_else(|| panic!("README.md has no \"## {title}\" section"));
    let rest = &readme[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

/// The lines of the first ```sh block of `text`.
fn sh_block(text: &str) -> Vec<String> {
    text.split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap_or_else(|| panic!("no ```sh block in:\n{text}"))
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn the_install_command_pins_the_lockfile_and_names_what_it_needs() {
    let install = section("Install and run");
    let command = sh_block(&install);
    assert_eq!(command.len(), 1, "{command:?}");
    assert!(
        command[0].starts_with("cargo install --locked --path . && "),
        "{}",
        command[0]
    );
    // The Rust version the README names is the one Cargo.toml enforces.
    let manifest = read("Cargo.toml");
    let rust_version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("Cargo.toml's [package] sets rust-version");
    assert_eq!(rust_version, "1.95");
    let prose = install.replace('\n', " ");
    assert!(
        prose.contains(&format!("{rust_version} or newer")),
        "{install}"
    );
    // mimalloc and ring compile C code.
    assert!(prose.contains("a C compiler"), "{install}");
}

#[test]
fn ci_runs_exactly_the_readme_test_command_after_installing_nextest() {
    let commands = sh_block(&section("Run the tests"));
    assert_eq!(
        commands,
        vec![
            "cargo install cargo-nextest --locked",
            "cargo nextest run --no-fail-fast",
        ]
    );
    let ci = read(".ci/run");
    let declared = ci
        .lines()
        .find_map(|l| l.strip_prefix("TEST_COMMAND='"))
        .and_then(|l| l.strip_suffix('\''))
        .expect(".ci/run declares TEST_COMMAND='…'");
    assert_eq!(declared, commands[1]);
    assert!(ci.lines().any(|l| l == "$TEST_COMMAND"), "{ci}");
    assert!(
        ci.lines().any(|l| l.trim() == commands[0]),
        ".ci/run installs nextest the way the README says:\n{ci}"
    );
}

/// `.ci/run`'s own guard: it refuses to run when the README shows another
/// test command (run on a copy, stopping before any build).
#[test]
fn ci_refuses_to_run_when_the_readme_shows_another_command() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".ci")).unwrap();
    std::fs::write(dir.path().join(".ci/run"), read(".ci/run")).unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        read("README.md").replace("cargo nextest run --no-fail-fast", "cargo nextest run"),
    )
    .unwrap();
    let out = std::process::Command::new("bash")
        .arg(dir.path().join(".ci/run"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        ".ci/run: README.md's \"Run the tests\" section does not show `cargo nextest run --no-fail-fast`; update one or the other\n"
    );
}

/// Every crate in `cargo tree`'s graph of pincer over `edges`, with the
/// feature sets it is built with (a crate that a proc macro uses too may be
/// built twice, with different ones).
fn dependencies(edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--frozen", "--prefix", "none"])
        .args(["-e", edges, "-f", "{p}|{f}"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines().skip(1) {
        let Some((package, features)) = line.split_once('|') else {
            continue;
        };
        let package = package.split(" (").next().unwrap_or(package).to_string();
        found
            .entry(package)
            .or_default()
            .insert(features.trim_end_matches(" (*)").to_string());
    }
    found
}

/// The dev-dependencies give none of the crates the binary is built from a
/// feature the installed binary lacks. Code the tests and clippy compile
/// then compiles in `cargo install` too, which is why CI no longer builds
/// the binary a second time without them; and `cargo bench` builds the
/// very code `cargo install` does, so the benches' memory figures are the
/// installed binary's (a feature of one crate deep in the tree changes the
/// build's symbols, and with them the release layout of `build.rs`: the
/// hello turn measured 14.6 MB in a bench build where the installed binary
/// took 13.4).
#[test]
fn the_tests_build_every_dependency_with_the_binary_s_features() {
    let binary = dependencies("normal,build");
    let with_tests = dependencies("normal,build,dev");
    assert!(binary.len() > 250, "{}", binary.len());
    assert!(binary.contains_key("nix v0.30.1"), "{binary:?}");
    let differ: Vec<String> = binary
        .iter()
        .filter(|(package, features)| with_tests.get(*package) != Some(features))
        .map(|(package, features)| {
            format!(
                "{package}: {features:?} in the binary, {:?} in the tests",
                with_tests.get(package)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "give the crate these features in [dependencies] or drop what brings \
         them from [dev-dependencies]:\n{}",
        differ.join("\n")
    );
}
