#!/usr/bin/env bash
# scripts/bench-home.sh — start-up and memory of a session started in the home directory
# (the workspace holds the home: a login shell's) against one started in a project
# directory, for each backend, as an ordinary user; prints a table for docs/benchmarks.md.
# Landlock alone carves the home around its secrets and dot entries and makes the
# session's pool of prepared names (sandbox/carve.rs, session/pool.rs): this measures it.
#
# Usage: scripts/bench-home.sh
#
# Environment:
#   BENCH_RUNS   starts per subject, alternating; the median is kept (default 21)
#   SBX_BIN      an sbx-shell binary to measure instead of this checkout's release build
# Needs root (to run as nobody), bwrap, python3 and /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "needs root, to start sessions as nobody. Hint: sudo $0" >&2; exit 1; }
for tool in bwrap python3 /usr/bin/time setpriv; do
  command -v "$tool" >/dev/null || { echo "needs $tool. Hint: apt-get install bubblewrap python3 time util-linux" >&2; exit 1; }
done
if [ -n "${SBX_BIN:-}" ]; then
  revision="$SBX_BIN"
else
  revision=$(git describe --always --dirty 2>/dev/null || echo unknown)
  cargo build --release --locked --quiet
fi
work=$(mktemp -d -p /var/tmp sbx-bench-home.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cp "${SBX_BIN:-target/release/sbx-shell}" "$work/sbx-shell"
home="$work/home"
# A home as a developer's looks: secrets, dot directories, a few projects.
mkdir -p "$home"/{.ssh,.aws,.config/nvim,.config/gcloud,.cache,.local/share,.npm,.cargo,proj,notes,src/a,src/b}
echo secret > "$home/.aws/credentials"
echo key > "$home/.ssh/id_ed25519"
for f in .bashrc .profile .gitconfig .netrc .viminfo; do echo x > "$home/$f"; done
chown -R nobody:nogroup "$home"

BIN="$work/sbx-shell" HOMEDIR="$home" RUNS="${BENCH_RUNS:-21}" python3 - <<'PY'
import os, statistics, subprocess, time
bin_, home, runs = os.environ["BIN"], os.environ["HOMEDIR"], int(os.environ["RUNS"])
wrap = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
env = {"PATH": "/usr/bin:/bin", "HOME": home, "SHELL": "/bin/sh"}
subjects = {}
for backend in ("bwrap", "landlock"):
    for where in ("project", "home"):
        cwd = f"{home}/proj" if where == "project" else home
        argv = wrap + ["/usr/bin/time", "-f", "%M", bin_, "-q", "--backend", backend, "--", "/bin/true"]
        subjects[(backend, where)] = (argv, cwd)
times = {k: [] for k in subjects}
peaks = {k: [] for k in subjects}
for argv, cwd in subjects.values():
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
for _ in range(runs):
    for key, (argv, cwd) in subjects.items():
        t = time.perf_counter()
        out = subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True, text=True)
        times[key].append((time.perf_counter() - t) * 1000)
        peaks[key].append(int(out.stderr.strip().splitlines()[-1]) / 1024)
print("| backend | project ms | home ms | home/project | project peak MB | home peak MB |")
print("|---|---|---|---|---|---|")
for backend in ("bwrap", "landlock"):
    p, h = statistics.median(times[(backend, "project")]), statistics.median(times[(backend, "home")])
    pp, hp = statistics.median(peaks[(backend, "project")]), statistics.median(peaks[(backend, "home")])
    print(f"| {backend} | {p:.1f} | {h:.1f} | {h / p:.2f}× | {pp:.1f} | {hp:.1f} |")
PY
echo "(revision $revision, $(nproc) cores, $(uname -r))"
