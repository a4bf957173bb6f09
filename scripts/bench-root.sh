#!/usr/bin/env bash
# scripts/bench-root.sh — start-up and memory of a root user's session against an ordinary
# user's, on a host with many directories, for each backend; prints a table for
# docs/benchmarks.md.
#
# Usage: scripts/bench-root.sh
#
# Environment:
#   BENCH_DIRS   directories made outside the package trees first (default 10000)
#   BENCH_RUNS   starts per subject, alternating; the median is kept (default 21)
#   SBX_BIN      an sbx-shell binary to measure instead of this checkout's release build
# Needs root (to run as nobody), bwrap, python3 and /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "needs root, to start sessions as root and as nobody. Hint: sudo $0" >&2; exit 1; }
for tool in bwrap python3 /usr/bin/time setpriv; do
  command -v "$tool" >/dev/null || { echo "needs $tool. Hint: apt-get install bubblewrap python3 time util-linux" >&2; exit 1; }
done

if [ -n "${SBX_BIN:-}" ]; then
  revision="$SBX_BIN"
else
  revision=$(git describe --always --dirty 2>/dev/null || echo unknown)
  cargo build --release --locked --quiet
fi
# Outside /tmp (private inside the sandbox), where nobody may enter; the binary is copied
# there so that nobody can run it from any checkout.
work=$(mktemp -d -p /var/tmp sbx-bench-root.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cp "${SBX_BIN:-target/release/sbx-shell}" "$work/sbx-shell"
dirs=${BENCH_DIRS:-10000}
python3 - "$work/host" "$dirs" <<'EOF'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    os.makedirs(f"{top}/d{i // 100}/e{i % 100}", exist_ok=True)
EOF
mkdir -p "$work/ws" "$work/home-root" "$work/home-nobody"
chown nobody:nogroup "$work/ws" "$work/home-nobody"

BIN="$work/sbx-shell" WORK="$work" RUNS="${BENCH_RUNS:-21}" python3 - <<'EOF'
import os, statistics, subprocess, time
bin_, work, runs = os.environ["BIN"], os.environ["WORK"], int(os.environ["RUNS"])
subjects = {}
for who in ("root", "nobody"):
    for backend in ("bwrap", "landlock"):
        wrap = [] if who == "root" else ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        env = {"PATH": "/usr/bin:/bin", "HOME": f"{work}/home-{who}", "SHELL": "/bin/sh"}
        argv = wrap + ["/usr/bin/time", "-f", "%M", bin_, "--backend", backend, "--", "/bin/true"]
        subjects[(who, backend)] = (argv, env)
times = {k: [] for k in subjects}
peaks = {k: [] for k in subjects}
for argv, env in subjects.values():  # warm: caches, records, private homes
    subprocess.run(argv, env=env, cwd=f"{work}/ws", check=True, capture_output=True)
for _ in range(runs):
    for key, (argv, env) in subjects.items():
        t = time.perf_counter()
        out = subprocess.run(argv, env=env, cwd=f"{work}/ws", check=True, capture_output=True, text=True)
        times[key].append((time.perf_counter() - t) * 1000)
        peaks[key].append(int(out.stderr.strip().splitlines()[-1]) / 1024)
print("| backend | nobody ms | root ms | root/nobody | nobody peak MB | root peak MB | root/nobody |")
print("|---|---|---|---|---|---|---|")
for backend in ("bwrap", "landlock"):
    n, r = statistics.median(times[("nobody", backend)]), statistics.median(times[("root", backend)])
    pn, pr = statistics.median(peaks[("nobody", backend)]), statistics.median(peaks[("root", backend)])
    print(f"| {backend} | {n:.1f} | {r:.1f} | {r / n:.2f}× | {pn:.1f} | {pr:.1f} | {pr / pn:.2f}× |")
EOF
echo
echo "sbx-shell ${revision}, release build, $(nproc) cores, $(uname -sr); ${dirs} directories made under ${work}/host; ${BENCH_RUNS:-21} starts each, medians; peak: /usr/bin/time's maximum resident set of the session's largest process."
