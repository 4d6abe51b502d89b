//! Link-time layout of the release binary.
//!
//! Most of `pincer acp`'s resident memory is its own code: the kernel maps
//! an executable's pages 64 KB around each page touched, and a hello turn
//! touches a few thousand functions spread over all 24 MB of `.text`, so
//! two thirds of it became resident. `packaging/hot-functions.txt` lists
//! the functions that starting, `initialize`, `session/new` and a prompt
//! with a tool call run, and the linker places them together at the front
//! of `.text`. Functions missing from the list (renamed since it was made)
//! stay where they would have been: a stale list costs memory, never
//! correctness. `packaging/hot-functions.sh` makes it anew.
//!
//! Only for release builds linked by LLD, the default linker of
//! `x86_64-unknown-linux-gnu` (other linkers and targets are left alone).
//! `PINCER_LINK_MAP=<file>` also writes the linker's map, which the script
//! reads.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=packaging/hot-functions.txt");
    println!("cargo::rerun-if-env-changed=PINCER_LINK_MAP");
    println!("cargo::rerun-if-env-changed=PINCER_NO_HOT_FUNCTIONS");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let release = var("PROFILE") == "release";
    let lld_default = var("TARGET") == "x86_64-unknown-linux-gnu"
        // A linker chosen in the flags may not know the option.
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link");
    if !release || !lld_default || std::env::var_os("PINCER_NO_HOT_FUNCTIONS").is_some() {
        return;
    }
    let list = std::path::Path::new(&var("CARGO_MANIFEST_DIR")).join("packaging/hot-functions.txt");
    if list.exists() {
        println!(
            "cargo::rustc-link-arg-bin=pincer=-Wl,--symbol-ordering-file={},--no-warn-symbol-ordering",
            list.display()
        );
    }
    let map = var("PINCER_LINK_MAP");
    if !map.is_empty() {
        // Mangled names, as the ordering list needs them.
        println!("cargo::rustc-link-arg-bin=pincer=-Wl,-Map={map},--no-demangle");
    }
}
