#!/usr/bin/env bash
# scripts/bench-work.sh — real work (unpacking, a create/rename loop, compiling, installing,
# cloning) bare, under plain bwrap and under sbx-shell on both Linux backends, on a
# journaled ext4 file system; records the table in docs/benchmarks.md between the
# "real work" markers (the rest of that file is left as it is).
#
# Usage: scripts/bench-work.sh [--no-record]
#   --no-record   print the table only
#
# Environment:
#   ROUNDS   interleaved rounds, the median is kept (default 5)
#   ONLY     comma-separated workloads (tar,loop,compileall,pip,npm,clone; default all)
#   BENCH_IMAGE_GB  size of the loop-mounted ext4 image (default 6)
#   SBX_BIN  an sbx-shell binary to measure instead of this checkout's release build
#            (to compare with another revision; implies --no-record)
#   CONTAINERS=1  also plain docker and sbx-shell's docker backend (a Docker engine as the
#            docker client finds it: DOCKER_HOST, a context)
# Needs root (to mount the image), bwrap, python3 with venv, npm, git; the wheels and npm
# packages are downloaded once from their registries into the image.
set -euo pipefail
cd "$(dirname "$0")/.."

record=1
[ "${1:-}" = "--no-record" ] && record=0
[ "$(id -u)" -eq 0 ] || { echo "needs root, to mount a journaled ext4 image. Hint: sudo $0" >&2; exit 1; }
missing=()
[ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

revision=$(git describe --always --dirty 2>/dev/null || echo unknown)
if [ -n "${SBX_BIN:-}" ]; then
  record=0
else
  cargo build --release --locked --quiet
  SBX_BIN="$PWD/target/release/sbx-shell"
fi

# Outside /tmp (private inside the sandbox); the root file system here has no journal,
# which makes every run after an `rm -rf` several times slower for every subject.
base=/var/tmp/sbx-bench-work
mkdir -p "$base/mnt"
if ! mountpoint -q "$base/mnt"; then
  rm -f "$base/ext4.img"
  truncate -s "${BENCH_IMAGE_GB:-6}G" "$base/ext4.img"
  mkfs.ext4 -q -F "$base/ext4.img"
  mount -o loop "$base/ext4.img" "$base/mnt"
fi
trap 'umount "$base/mnt" 2>/dev/null; rm -rf "$base"' EXIT
work="$base/mnt"
assets="$work/assets"
mkdir -p "$assets/wheels" "$assets/npm"
wheels=(requests urllib3 idna certifi charset-normalizer)
python3 -m pip download -q --only-binary=:all: -d "$assets/wheels" "${wheels[@]}"
echo "${wheels[*]}" >"$assets/wheels.txt"
cat >"$assets/npm/package.json" <<'JSON'
{ "name": "bench", "version": "1.0.0", "private": true,
  "dependencies": { "express": "^4.21.0", "lodash": "^4.17.21", "commander": "^12.0.0" } }
JSON
# The lock file, then the cache warmed by `npm ci` itself (what `npm install` leaves in
# the cache is not all that `npm ci --offline` asks for).
(cd "$assets/npm" && npm install -s --no-audit --no-fund --cache "$assets/npm-cache" >/dev/null &&
  rm -rf node_modules && npm ci -s --no-audit --no-fund --cache "$assets/npm-cache" >/dev/null && rm -rf node_modules)

table=$(SBX_BIN="$SBX_BIN" WORK="$work" python3 scripts/bench-work.py)
echo "$table"
[ "$record" = 1 ] || exit 0

section=$(cat <<SECTION
<!-- real work: written by scripts/bench-work.sh -->
## Real work

Made by \`scripts/bench-work.sh\` on $(date -u +%Y-%m-%d) (sbx-shell ${revision}, release
build), on $(nproc) cores, $(uname -sr), $(bwrap --version), on a loop-mounted journaled
ext4; median of ${ROUNDS:-5} interleaved rounds, spawn to exit, ratio to bare in brackets.
See scripts/bench-work.py for each workload.

$table
<!-- end of real work -->
SECTION
)
python3 - "$section" <<'PY'
import re, sys
path = "docs/benchmarks.md"
text = open(path).read()
section = sys.argv[1]
pattern = re.compile(r"<!-- real work: .*?<!-- end of real work -->", re.S)
text = pattern.sub(lambda _: section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section + "\n"
open(path, "w").write(text)
PY
echo "recorded in docs/benchmarks.md"
