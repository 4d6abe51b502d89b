#!/usr/bin/env bash
# Compares pincer's in-process grep tool with ripgrep on a large tree
# (benches/grep_bench.rs says how; the target is pincer within 1.5x of rg).
#
# Uses `rg` from PATH, else one built earlier into target/bench-tools, else
# installs ripgrep there with `cargo install --locked` (or, failing that, from
# apt when running as root). Then runs the release-built bench. Extra
# arguments go to the bench; PINCER_BENCH_TREE, PINCER_BENCH_RUNS and
# PINCER_BENCH_RG are passed through.
set -euo pipefail

cd "$(dirname "$0")/.."
tools="$PWD/target/bench-tools"

if [[ -z "${PINCER_BENCH_RG:-}" ]]; then
    if command -v rg >/dev/null 2>&1; then
        PINCER_BENCH_RG="$(command -v rg)"
    elif [[ -x "$tools/bin/rg" ]]; then
        PINCER_BENCH_RG="$tools/bin/rg"
    else
        echo "ripgrep not found; installing it into $tools" >&2
        if cargo install ripgrep --locked --root "$tools" >&2; then
            PINCER_BENCH_RG="$tools/bin/rg"
        elif [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
            apt-get update >&2 && apt-get install -y ripgrep >&2
            PINCER_BENCH_RG="$(command -v rg)"
        else
            echo "could not install ripgrep; install it or set PINCER_BENCH_RG" >&2
            exit 1
        fi
    fi
fi
export PINCER_BENCH_RG

# `cargo bench` builds with the release profile.
exec cargo bench --bench grep_bench -- "$@"
