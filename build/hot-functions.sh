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
# The map names the symbol at every address of this very link. The binary
# traced is laid out without the current list: Valgrind counts only code
# inside an object's `.text` section as that object's, so the functions a
# list gathered into `.text.hot` would be traced as unknown code and left
# out of the new list (a run on a laid-out binary found 246 functions where
# the session runs thousands).
PINCER_NO_HOT_FUNCTIONS=1 PINCER_LINK_MAP="$map" cargo build --release --locked --bin pincer
python3 build/hot_functions.py target/release/pincer "$map" build/hot-functions.txt
echo "Now rebuild the release binary (cargo build --release) to use it."
