#!/usr/bin/env bash
# Makes build/hot-functions.txt anew: the functions a typical editor
# session runs, which build.rs asks the linker to place together (as symbol patterns) (see
# build.rs for why). Run it after changes that rename or add much of what a
# turn runs; a stale list only costs memory. Needs valgrind and python3.
#
#   build/hot-functions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
map="$PWD/target/release/pincer.map"
# The map names the symbol at every address of this very link.
PINCER_LINK_MAP="$map" cargo build --release --locked --bin pincer
python3 build/hot_functions.py target/release/pincer "$map" build/hot-functions.txt
echo "Now rebuild the release binary (cargo build --release) to use it."
