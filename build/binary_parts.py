#!/usr/bin/env python3
"""What each crate costs in the release binary's code.

Usage: binary_parts.py LINK_MAP [N]

LINK_MAP is the linker's map of a release build (`PINCER_LINK_MAP=<file>
cargo build --release`, see build.rs). Each input section of `.text` is
charged to the crate its first symbol's path starts in (for a trait's
method, the implementing type's crate; a generic function is charged where
it was defined, whoever instantiated it), and the N largest crates are
printed with their share of `.text`.
"""

import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hot_functions import sections  # noqa: E402


def crate_of(symbol):
    if symbol.startswith("_ZN"):
        # Legacy mangling: length-prefixed components; a `<T as Trait>`
        # impl's first component spells the type's path with `..`.
        m = re.match(r"_ZN(\d+)", symbol)
        first = symbol[3 + len(m.group(1)):][: int(m.group(1))]
        inner = re.match(r"_\$LT\$(?:\$RF\$|\$BP\$|mut\$u20\$|\$u5b\$)*([A-Za-z_][A-Za-z0-9_]*)", first)
        return inner.group(1) if inner else first
    if symbol.startswith("_R"):
        # v0 mangling: the first crate root, `C<disambiguator>_<len><name>`.
        m = re.search(r"C(?:s[0-9A-Za-z]*_)?(\d+)", symbol)
        if m:
            start = m.end()
            return symbol[start:start + int(m.group(1))]
    return "(C and linker)"


def main():
    link_map = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    by_crate = collections.Counter()
    total = 0
    for _start, size, symbols in sections(link_map):
        total += size
        by_crate[crate_of(symbols[0]) if symbols else "(no symbol)"] += size
    print(f"{'crate':28} {'code':>10} {'share':>6}")
    for crate, size in by_crate.most_common(count):
        print(f"{crate:28} {size / 1e6:8.2f} MB {size / total * 100:5.1f}%")
    print(f"{'all of .text':28} {total / 1e6:8.2f} MB")


if __name__ == "__main__":
    main()
