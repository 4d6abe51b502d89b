#!/usr/bin/env bash
# Builds the Linux release archive that packaging/registry/agent.json points
# at, then checks it the way the ACP Registry's validator checks an agent:
# unpacked into an empty directory, started with stdin at /dev/null and an
# empty HOME (no config, no credentials), a bare `initialize` whose client
# capabilities carry only `_meta["terminal-auth"]` must answer with auth
# methods a user can act on.
#
#   packaging/release.sh            build, package, check
#   packaging/release.sh --no-build package and check the existing build
#
# Output: dist/pincer-VERSION-x86_64-unknown-linux-gnu.tar.gz (pincer and
# pincer-sandbox, the launcher of sandboxed commands, at the top level).
# Needs cargo, tar and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-gnu
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
if [[ -z "$version" ]]; then
  echo "release.sh: no version = \"...\" line in Cargo.toml" >&2
  exit 1
fi
name="pincer-${version}-${target}"
archive="dist/${name}.tar.gz"

# The registry entry must name this very archive.
if ! grep -q "/v${version}/${name}.tar.gz\"" packaging/registry/agent.json; then
  echo "release.sh: packaging/registry/agent.json does not point linux-x86_64 at v${version}/${name}.tar.gz; update its version and URLs" >&2
  exit 1
fi

if [[ "${1:-}" != "--no-build" ]]; then
  # The release profile (Cargo.toml) is fat LTO, one codegen unit, stripped.
  nice cargo build --release --locked
fi
binary="target/release/pincer"
launcher="target/release/pincer-sandbox"
for built in "$binary" "$launcher"; do
  if [[ ! -x "$built" ]]; then
    echo "release.sh: $built is missing; run without --no-build" >&2
    exit 1
  fi
done

stage=$(mktemp -d)
check=$(mktemp -d)
trap 'rm -rf "$stage" "$check"' EXIT
cp "$binary" "$stage/pincer"
cp "$launcher" "$stage/pincer-sandbox"
cp README.md "$stage/"
mkdir -p dist
# Entries at the top level (`pincer`, not `name/pincer` or `./pincer`): the
# registry runs `cmd: ./pincer` in the directory it unpacks into; pincer
# finds `pincer-sandbox` beside itself.
tar -czf "$archive" -C "$stage" pincer pincer-sandbox README.md

# --- the validator's view -------------------------------------------------
tar -xzf "$archive" -C "$check"
unpacked="$check/pincer"
if [[ ! -x "$unpacked" || ! -x "$check/pincer-sandbox" ]]; then
  echo "release.sh: $archive has no executable ./pincer and ./pincer-sandbox at its top level" >&2
  exit 1
fi
home="$check/home"
mkdir "$home"
# A clean environment: nothing of this machine's config or keys leaks in.
run() { (cd "$check" && env -i HOME="$home" PATH=/usr/bin:/bin "$@"); }

run ./pincer --version </dev/null

# With stdin at /dev/null the agent sees end of input and exits by itself,
# quietly: nothing but JSON-RPC may appear on stdout.
out=$(run timeout 20 ./pincer acp </dev/null) || {
  echo "release.sh: \`pincer acp </dev/null\` failed or hung (exit $?)" >&2
  exit 1
}
if [[ -n "$out" ]]; then
  echo "release.sh: \`pincer acp </dev/null\` wrote to stdout: $out" >&2
  exit 1
fi

init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"_meta":{"terminal-auth":true}},"clientInfo":{"name":"release-check","version":"1.0.0"}}}'
response=$(printf '%s\n' "$init" | run timeout 20 ./pincer acp)
printf '%s\n' "$response" | python3 -c '
import json, os, sys
lines = [l for l in sys.stdin.read().splitlines() if l.strip()]
if len(lines) != 1:
    sys.exit(f"expected one JSON-RPC line, got {len(lines)}: {lines!r}")
msg = json.loads(lines[0])
if msg.get("id") != 1 or "result" not in msg:
    sys.exit(f"initialize failed: {msg!r}")
methods = msg["result"].get("authMethods") or []
# The registry accepts agent and terminal methods (agent is the default type).
usable = [m for m in methods if m.get("type", "agent") in ("agent", "terminal")]
if not usable:
    sys.exit(f"no usable authMethods: {methods!r}")
# Clients of the older terminal-login extension start the login themselves
# from _meta["terminal-auth"]: its command must be a real executable.
legacy = [m["_meta"]["terminal-auth"] for m in methods if "terminal-auth" in (m.get("_meta") or {})]
if not legacy:
    sys.exit("no auth method carries _meta[\"terminal-auth\"] although the client asked for it")
for t in legacy:
    if not (os.path.isfile(t["command"]) and os.access(t["command"], os.X_OK)) or not t.get("args"):
        sys.exit(f"terminal-auth login is not runnable: {t!r}")
print(f"authMethods: {len(methods)} ({len(legacy)} terminal logins): " + ", ".join(m["id"] for m in methods))
'

size=$(stat -c %s "$archive")
binsize=$(stat -c %s "$binary")
echo "ok: $archive ($size bytes; binary $binsize bytes)"
