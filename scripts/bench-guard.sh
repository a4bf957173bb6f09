#!/usr/bin/env bash
# scripts/bench-guard.sh — each call sbx-shell's guard answers, against the floor of the same
# kind of answer measured in the same run: a supervisor that reads the path from the
# program's memory, does the call itself and answers with its value (SEND) or, for an open,
# hands the descriptor over (ADDFD|SEND), waiting in RECV with the sync wake-up
# (scripts/floor.c). The same program makes the calls under sbx-shell, on both Linux
# backends, as an unprivileged user (nobody), on a tmpfs. Records the table in
# docs/benchmarks.md between the "guard" markers (the rest of that file is left as it is).
#
# Usage: scripts/bench-guard.sh [--no-record]
#   --no-record   print the table only
#
# Environment:
#   ROUNDS   interleaved rounds, the median is kept (default 5)
#   CALLS    calls per round (default 20000)
#   SBX_BIN  an sbx-shell binary to measure instead of this checkout's release build
#            (to compare with another revision; implies --no-record)
# Needs root (to mount the tmpfs and run as nobody), bwrap, cc, setpriv and taskset
# (util-linux).
set -euo pipefail
cd "$(dirname "$0")/.."

record=1
[ "${1:-}" = "--no-record" ] && record=0
[ "$(id -u)" -eq 0 ] || { echo "needs root, to mount a tmpfs and run as nobody. Hint: sudo $0" >&2; exit 1; }
for tool in bwrap:bubblewrap cc:gcc setpriv:util-linux taskset:util-linux; do
  command -v "${tool%%:*}" >/dev/null || {
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${tool##*:}" >/dev/null
  }
done

rounds=${ROUNDS:-5}
calls=${CALLS:-20000}
revision=$(git describe --always --dirty 2>/dev/null || echo unknown)
if [ -n "${SBX_BIN:-}" ]; then
  record=0
else
  cargo build --release --locked --quiet
  SBX_BIN="$PWD/target/release/sbx-shell"
fi

# Outside /tmp (private inside the sandbox); a tmpfs, so that the file system's own cost is
# small beside the round trip and the same for every subject.
base=/var/tmp/sbx-bench-guard
mkdir -p "$base/mnt"
mountpoint -q "$base/mnt" || mount -t tmpfs -o size=1g,mode=0755 tmpfs "$base/mnt"
trap 'umount "$base/mnt" 2>/dev/null; rm -rf "$base"' EXIT
mnt="$base/mnt"
install -m 0755 "$SBX_BIN" "$mnt/sbx-shell"
cc -O2 -o "$mnt/floor" scripts/floor.c
mkdir -p "$mnt/home" "$mnt/ws"
chown 65534:65534 "$mnt/home" "$mnt/ws"

as_nobody() {
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    env -i HOME="$mnt/home" PATH=/usr/bin:/bin sh -c "cd $mnt/ws && $*"
}

# µs per call, from a line "OP MODE: X us per call".
us() { awk '{print $3}'; }

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

ops=(create open mkdir rename link symlink unlink chmod)
declare -A got
for round in $(seq "$rounds"); do
  for op in "${ops[@]}"; do
    got[$op/bare]+=" $(as_nobody "$mnt/floor bare $op $calls w" | us)"
    got[$op/floor]+=" $(as_nobody "$mnt/floor floor $op $calls w" | us)"
    got[$op/pinned]+=" $(as_nobody "$mnt/floor pinned $op $calls w" | us)"
    for backend in bwrap landlock; do
      got[$op/$backend]+=" $(as_nobody "$mnt/sbx-shell -q --backend $backend -- $mnt/floor bare $op $calls w" | us)"
      got[$op/$backend-pinned]+=" $(as_nobody "taskset -c 0 $mnt/sbx-shell -q --backend $backend -- $mnt/floor bare $op $calls w" | us)"
    done
  done
  echo "round $round of $rounds done" >&2
done

# Calls that return EINTR under a timer whose handler has no SA_RESTART: a signal that came
# before the call was received (bare: none). The floor has the same window.
eintr() { sed -n 's/.*, \([0-9]*\) EINTR$/\1/p'; }
eintr_rows=$(
  for period in 1000 20; do
    for op in create mkdir rename; do
      f=$(as_nobody "SIGNAL_US=$period $mnt/floor floor $op $calls w" | eintr)
      b=$(as_nobody "SIGNAL_US=$period $mnt/sbx-shell -q --backend bwrap -- $mnt/floor bare $op $calls w" | eintr)
      l=$(as_nobody "SIGNAL_US=$period $mnt/sbx-shell -q --backend landlock -- $mnt/floor bare $op $calls w" | eintr)
      awk -v p="$period" -v op="$op" -v n="$calls" -v f="$f" -v b="$b" -v l="$l" 'BEGIN {
        printf "| %s µs | %s | %.2f %% | %.2f %% | %.2f %% |\n", p, op, 100 * f / n, 100 * b / n, 100 * l / n }'
    done
  done
)

kernel=$(uname -r)
table=$(
  echo "| call | bare µs | floor µs | bwrap µs | × floor | landlock µs | × floor | one CPU: floor µs | bwrap µs | × floor | landlock µs | × floor |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  for op in "${ops[@]}"; do
    bare=$(median ${got[$op/bare]})
    floor=$(median ${got[$op/floor]})
    pinned=$(median ${got[$op/pinned]})
    b=$(median ${got[$op/bwrap]})
    l=$(median ${got[$op/landlock]})
    bp=$(median ${got[$op/bwrap-pinned]})
    lp=$(median ${got[$op/landlock-pinned]})
    awk -v op="$op" -v bare="$bare" -v f="$floor" -v p="$pinned" -v b="$b" -v l="$l" -v bp="$bp" -v lp="$lp" 'BEGIN {
      printf "| %s | %.1f | %.1f | %.1f | %.2f× | %.1f | %.2f× | %.1f | %.1f | %.2f× | %.1f | %.2f× |\n",
        op, bare, f, b, b / f, l, l / f, p, bp, bp / p, lp, lp / p }'
  done
)
report=$(cat <<EOF
<!-- guard: written by scripts/bench-guard.sh -->
## The guard against the kernel's floor

Made by \`scripts/bench-guard.sh\` on $(date -u +%Y-%m-%d) (sbx-shell $revision, release
build), on $(nproc) cores, Linux $kernel, as nobody, on a tmpfs; $calls calls per round,
median of $rounds interleaved rounds. "floor": the same calls answered by the reference
supervisor (\`scripts/floor.c\`), which reads the path, does the call itself and answers
with its value (SEND) or, for \`create\` and \`open\`, hands the descriptor over
(ADDFD|SEND). Under bwrap, \`unlink\` and \`chmod\` are not sent to the guard (Landlock
alone sends them: \`unlink\` to keep \`/dev/shm\`, \`chmod\` as every metadata change).
"One CPU": every process of the run on CPU 0 (\`taskset\`), so that each hand-over
between program and supervisor is a switch on one CPU and what is compared is the work
each side does; the columns before are as the scheduler places them, which on this
machine swings between rounds by as much as the guard's own work.

$table

Calls that returned EINTR under an interval timer whose handler has no \`SA_RESTART\`: a
signal that arrived before the call was received, which the kernel interrupts as any
wait (the call did nothing; bare, none return EINTR; with \`SA_RESTART\` none do either):

| timer | call | floor | sbx-shell bwrap | sbx-shell landlock |
|---|---|---|---|---|
$eintr_rows
<!-- end of guard -->
EOF
)
echo "$report"
if [ "$record" = 1 ]; then
  python3 - "$report" <<'PY'
import re, sys
path = "docs/benchmarks.md"
text = open(path).read()
new = sys.argv[1]
pattern = re.compile(r"<!-- guard: written by scripts/bench-guard.sh -->.*?<!-- end of guard -->", re.S)
text = pattern.sub(lambda m: new, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + new + "\n"
open(path, "w").write(text)
PY
fi
