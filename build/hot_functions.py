#!/usr/bin/env python3
"""Lists the functions a typical `pincer acp` session runs, for the linker.

Usage: hot_functions.py BINARY LINK_MAP OUTPUT

BINARY is a release build of pincer linked with `PINCER_LINK_MAP=LINK_MAP`
(see build.rs). The script runs it under Valgrind's callgrind against a
local mock of Anthropic's Messages API (the fixtures in fixtures/anthropic)
for one editor session: initialize, session/new, a prompt whose answer reads
a file with the `read` tool, a second plain prompt, session/list, and the end
of input. Every instruction address executed inside the binary is mapped,
through the link map, to the input section holding it, and the symbols of
those sections are written to OUTPUT, one a line, in their present order,
as patterns: the parts of a Rust symbol that depend on the build rather
than on the code (v0's crate disambiguators and back-references) become
`*`, so that the list also fits a build from
another directory, profile or toolchain (build.rs turns it into a linker
script's section patterns). A pattern may match a few more functions than
the one it came from; they are placed with the hot ones, nothing worse.
"""

import http.server
import json
import os
import re
import socketserver
import subprocess
import sys
import tempfile
import threading
from bisect import bisect_right
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "anthropic"
# Where Valgrind may have loaded a position-independent executable; the
# one whose entry point ran is the one.
VALGRIND_BASES = (0, 0x108000, 0x400000, 0x4000000, 0x108000000)


def fixture_for(body):
    """The reply a real model would give to this request."""
    if "tools" not in body:
        return "title.sse"
    last = body["messages"][-1]
    content = last.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    if any(b.get("type") == "tool_result" for b in blocks):
        return "after_tool.sse"
    if any("hello.txt" in (b.get("text") or "") for b in blocks):
        return "tool_read.sse"
    return "text.sse"


class Model(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        sse = (FIXTURES / fixture_for(body)).read_bytes()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(sse)))
        self.end_headers()
        self.wfile.write(sse)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def run_session(binary, out_file):
    server = Server(("127.0.0.1", 0), Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tmp = Path(tempfile.mkdtemp(prefix="pincer-hot-"))
    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    work.mkdir()
    (work / "hello.txt").write_text("hello from the workspace\n")
    env = dict(
        os.environ,
        PINCER_HOME=str(home),
        HOME=str(home),
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}",
    )
    valgrind = [
        "valgrind", "--tool=callgrind", "--dump-instr=yes",
        f"--callgrind-out-file={out_file}", binary, "acp",
    ]
    child = subprocess.Popen(valgrind, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=work, env=env)

    def call(id, method, params):
        message = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
        child.stdin.write((json.dumps(message) + "\n").encode())
        child.stdin.flush()
        while True:
            line = child.stdout.readline()
            if not line:
                sys.exit(f"pincer ended before answering {method}")
            reply = json.loads(line)
            if reply.get("id") == id and "method" not in reply:
                if "error" in reply:
                    sys.exit(f"{method}: {reply['error']}")
                return reply["result"]

    call(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = call(1, "session/new", {"cwd": str(work), "mcpServers": []})["sessionId"]
    for id, text in [(2, "What does hello.txt say?"), (3, "hello")]:
        prompt = [{"type": "text", "text": text}]
        result = call(id, "session/prompt", {"sessionId": session, "prompt": prompt})
        if result.get("stopReason") != "end_turn":
            sys.exit(f"prompt {id} ended with {result}")
    call(4, "session/list", {})
    child.stdin.close()
    child.wait()
    server.shutdown()


def entry_point(binary):
    """The ELF header's entry point (`e_entry`)."""
    with open(binary, "rb") as f:
        header = f.read(32)
    return int.from_bytes(header[24:32], "little")


def executed_addresses(out_file, binary):
    """Instruction addresses executed inside `binary`, as link addresses."""
    name = os.path.realpath(binary)
    objects, addresses = {}, set()
    inside, last = False, 0
    position = re.compile(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s")
    for line in open(out_file):
        if line.startswith(("ob=", "cob=")):
            m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
            if m.group(2):
                objects[m.group(1)] = m.group(2)
            if line.startswith("ob="):
                inside = objects[m.group(1)] == name
            continue
        m = position.match(line)
        if not m:
            continue
        token = m.group(1)
        if token.startswith("0x"):
            last = int(token, 16)
        elif token != "*":
            last += int(token)
        if inside:
            addresses.add(last)
    entry = entry_point(binary)
    base = next((b for b in VALGRIND_BASES if entry + b in addresses), None)
    if base is None:
        sys.exit("the entry point never ran: where did Valgrind load the binary?")
    return {address - base for address in addresses}


def sections(link_map):
    """(start, size, symbols) of every input section in `.text`.

    LLD's map has one line per output section, input section and symbol,
    told apart by how far the name is indented (by 8 more each level)."""
    out = []
    in_text = False
    level = None
    for line in open(link_map):
        parts = line.split(maxsplit=4)
        if len(parts) < 5 or not re.fullmatch(r"[0-9a-f]+", parts[0]):
            continue
        vma, size = int(parts[0], 16), int(parts[2], 16)
        name = parts[4].strip()
        column = line.index(parts[4], len(line) - len(line.lstrip()) + 1)
        if level is None:
            level = column  # the first line is an output section
        depth = (column - level) // 8
        if depth == 0:
            in_text = name == ".text"
        elif in_text and depth == 1:
            out.append([vma, size, []])
        elif in_text and depth == 2 and out:
            out[-1][2].append(name)
    return out


def pattern(symbol):
    """`symbol` with its build-dependent parts replaced by `*`. Legacy
    names (`_ZN…17h<hash>E`) are kept whole: every instance of a generic
    function has the same legacy name but its hash, so a pattern would take
    them all (.cargo/config.toml asks for v0 names)."""
    # LTO numbers the local copies it makes of a function (`….7506`), in
    # an order that changes from build to build: any number fits.
    symbol = re.sub(r"\.[0-9]+$", "*", symbol)
    if symbol.startswith("_R"):
        # Crate roots (`Cs<disambiguator>_`) and back-references
        # (`B<offset>_`, offsets that move with the disambiguators' length).
        # Replacing more than that only widens the pattern.
        return re.sub(r"(Cs|B)[0-9A-Za-z]*_", r"\1*_", symbol)
    return symbol


def main():
    binary, link_map, output = sys.argv[1:4]
    binary = os.path.realpath(binary)
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, "callgrind.out")
        run_session(binary, out_file)
        addresses = executed_addresses(out_file, binary)
    table = sections(link_map)
    starts = [s[0] for s in table]
    hot = {}
    for address in addresses:
        i = bisect_right(starts, address) - 1
        if i >= 0 and address < table[i][0] + max(table[i][1], 1):
            hot[i] = table[i]
    if not hot:
        sys.exit("no executed address fell inside .text: is the map from this binary?")
    names = []
    for i in sorted(hot):
        for symbol in hot[i][2]:
            # Rust's functions and C's (mimalloc's allocator, every
            # allocation) have sections of their own, named after them.
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.]*", symbol) and pattern(symbol) not in names:
                names.append(pattern(symbol))
    hot_bytes = sum(s[1] for s in hot.values())
    Path(output).write_text("".join(n + "\n" for n in names))
    print(f"{len(hot)} sections, {hot_bytes / 1e6:.2f} MB of code, {len(names)} symbols -> {output}")


if __name__ == "__main__":
    main()
