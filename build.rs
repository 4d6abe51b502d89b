//! Link-time layout of the release binary.
//!
//! Most of `pincer acp`'s resident memory is its own code: the kernel maps
//! an executable's pages 64 KB around each page touched, and a hello turn
//! touches a few thousand functions spread over all 23 MB of `.text`, so
//! two thirds of it became resident. `build/hot-functions.txt` lists
//! the functions that starting, `initialize`, `session/new` and prompts
//! with and without a tool call run, as patterns of their v0 symbol names
//! with the build-dependent parts left out (see `build/hot_functions.py`
//! and `.cargo/config.toml`); this script turns the list into a linker
//! script that gathers their sections into `.text.hot`, in front of
//! `.text`. Functions the list no longer names (renamed since it was made)
//! stay where they would have been: a stale list costs memory, never
//! correctness. `build/hot-functions.sh` makes it anew.
//!
//! Relative relocations are packed (`-z pack-relative-relocs`) when the
//! binary is built for the glibc it is built on and that glibc is 2.36 or
//! later.
//!
//! Only for release builds linked by LLD, the default linker of
//! `x86_64-unknown-linux-gnu` (other linkers and targets are left alone).
//! `PINCER_LINK_MAP=<file>` also writes the linker's map, which the script
//! reads.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=build/hot-functions.txt");
    println!("cargo::rerun-if-env-changed=PINCER_LINK_MAP");
    println!("cargo::rerun-if-env-changed=PINCER_NO_HOT_FUNCTIONS");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let release = var("PROFILE") == "release";
    let lld_default = var("TARGET") == "x86_64-unknown-linux-gnu"
        // A linker chosen in the flags may not know the options.
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if !release || !lld_default {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join("build/hot-functions.txt");
    if let (Ok(text), None) = (
        std::fs::read_to_string(&list),
        std::env::var_os("PINCER_NO_HOT_FUNCTIONS"),
    ) {
        let script = Path::new(&var("OUT_DIR")).join("hot-functions.ld");
        match std::fs::write(&script, linker_script(&text)) {
            Ok(()) => println!(
                "cargo::rustc-link-arg-bin=pincer=-Wl,-T,{}",
                script.display()
            ),
            Err(e) => {
                println!("cargo::warning=the binary is laid out without its hot functions: {e}")
            }
        }
    }
    if glibc_reads_relr(&var("HOST"), &var("TARGET")) {
        // Relative relocations packed (DT_RELR): of the 34,000 the binary
        // has, `.rela.dyn` spends 24 bytes on each, 0.8 MB that the loader
        // reads at every start and that stayed resident; packed, they take
        // a few kilobytes. glibc applies them since 2.36; the binary then
        // names `GLIBC_ABI_DT_RELR`, so an older glibc refuses to start it
        // rather than running it unrelocated.
        println!("cargo::rustc-link-arg-bin=pincer=-Wl,-z,pack-relative-relocs");
    }
    let map = var("PINCER_LINK_MAP");
    if !map.is_empty() {
        // Mangled names, as the list needs them.
        println!("cargo::rustc-link-arg-bin=pincer=-Wl,-Map={map},--no-demangle");
    }
}

/// A script that only adds `.text.hot`, holding the sections of the listed
/// functions, before the default layout's `.text`. Each line of the list is
/// a symbol pattern (`*` for the build-dependent parts), made of the
/// characters of mangled Rust symbols, which a linker script takes bare.
fn linker_script(list: &str) -> String {
    let mut script = String::from("SECTIONS {\n  .text.hot : {\n    *(\n");
    for pattern in list.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let bare = pattern
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_$.*".contains(c));
        // LLVM puts cold functions (a `Vec` growing, a table rehashing:
        // paths every session runs) in `.text.unlikely.` sections.
        if bare {
            let _ = writeln!(script, "      .text.{pattern} .text.unlikely.{pattern}");
        }
    }
    script.push_str("    )\n  }\n}\nINSERT BEFORE .text;\n");
    script
}

/// Whether the binary is built for this machine and its glibc applies
/// packed relative relocations (2.36 or later), from
/// `getconf GNU_LIBC_VERSION` ("glibc 2.36").
fn glibc_reads_relr(host: &str, target: &str) -> bool {
    if host != target || !target.ends_with("-linux-gnu") {
        return false;
    }
    let Ok(out) = std::process::Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text
        .trim()
        .strip_prefix("glibc ")
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
