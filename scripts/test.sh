#!/usr/bin/env bash
# scripts/test.sh — the one test command (README.md); CI runs exactly this via .ci/run.
#
# Installs what the tests need when it is missing, then checks formatting, the source
# tree's shape (scripts/shape.py: layout, sizes, import graph), lints for Linux
# and macOS (aarch64-apple-darwin, which cannot run here but must build clean), and runs
# every test — unit tests and the end-to-end suite on real ptys and tmux.
#
# Usage: scripts/test.sh [extra arguments for `cargo test`]
#
# Environment:
#   SBX_REQUIRE_ALL   1 (default): a test that would skip for a missing tool fails instead.
#                     Set 0 to allow skips on a machine where you cannot install tools.
#   SBX_NO_INSTALL    1: never install anything; fail with a hint instead.
set -euo pipefail
cd "$(dirname "$0")/.."

export SBX_REQUIRE_ALL="${SBX_REQUIRE_ALL:-1}"
apple_target=aarch64-apple-darwin

say() { printf '==> %s\n' "$*"; }

# System packages the tests drive: tmux (pane tests), bubblewrap (the bwrap backend),
# python3 (/usr/bin/python3: the sandbox attacks), curl (the allow-list's client),
# openssh-server, openssh-client (ssh, ssh-agent, ssh-keygen) and rsync (sbx-shell as the
# login shell of a real sshd; the filtered agent against a real one), git, procps (ps,
# for diagnostics), bsdutils (script) and coreutils (stty); gcc and golang-go (the programs
# that make files under signals), docker.io, podman and mmdebstrap (containers as they
# come, from an image built of Debian's packages).
need_packages() {
  local missing=()
  command -v tmux >/dev/null || missing+=(tmux)
  [ -x /usr/bin/bwrap ] || missing+=(bubblewrap)
  [ -x /usr/bin/python3 ] || missing+=(python3)
  command -v curl >/dev/null || missing+=(curl)
  [ -d /usr/lib/python3/dist-packages/requests ] || missing+=(python3-requests)
  command -v gh >/dev/null || missing+=(gh)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  command -v ssh >/dev/null || missing+=(openssh-client)
  command -v ssh-agent >/dev/null || missing+=(openssh-client)
  command -v git >/dev/null || missing+=(git)
  command -v rsync >/dev/null || missing+=(rsync)
  command -v ps >/dev/null || missing+=(procps)
  command -v script >/dev/null || missing+=(bsdutils)
  command -v stty >/dev/null || missing+=(coreutils)
  command -v bash >/dev/null || missing+=(bash)
  command -v xz >/dev/null || missing+=(xz-utils)
  command -v npm >/dev/null || missing+=(npm)
  command -v vim >/dev/null || missing+=(vim)
  command -v less >/dev/null || missing+=(less)
  command -v su >/dev/null || missing+=(util-linux)
  command -v cc >/dev/null || missing+=(gcc)
  command -v go >/dev/null || missing+=(golang-go)
  command -v dockerd >/dev/null || missing+=(docker.io)
  command -v podman >/dev/null || missing+=(podman)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  printf '%s\n' "${missing[@]}"
}

install_packages() {
  local missing
  mapfile -t missing < <(need_packages | sed '/^$/d')
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "${SBX_NO_INSTALL:-0}" = 1 ]; then
    echo "missing: ${missing[*]}. Hint: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  if ! command -v apt-get >/dev/null; then
    echo "missing: ${missing[*]}, and no apt-get here. Hint: install them with your package manager" >&2
    exit 1
  fi
  say "installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
}

install_rust_parts() {
  if command -v rustup >/dev/null; then
    rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
    rustup target list --installed | grep -qx "$apple_target" || rustup target add "$apple_target"
  fi
}

# An AppArmor 4 parser, to check the profile `sbx-shell setup` installs (`apparmor_parser
# -Q`: parse only, nothing loaded). Ubuntu 24.04 and later have one; elsewhere (Debian 12
# ships AppArmor 3, which lacks the `userns` rule) the parser and the C library it needs
# are taken from Debian 13's packages, unpacked under target/, and run through that C
# library's own loader. Nothing is installed system-wide.
setup_apparmor_parser() {
  if command -v apparmor_parser >/dev/null &&
    apparmor_parser --version 2>/dev/null | grep -Eq 'version [4-9]'; then
    export SBX_APPARMOR_PARSER="$(command -v apparmor_parser)"
    return 0
  fi
  local dir="$PWD/target/apparmor4" arch triplet mirror=http://deb.debian.org/debian
  if [ ! -x "$dir/apparmor_parser" ]; then
    [ "${SBX_NO_INSTALL:-0}" = 1 ] && return 0
    arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
    case "$arch" in amd64) triplet=x86_64-linux-gnu loader=ld-linux-x86-64.so.2 ;;
      arm64) triplet=aarch64-linux-gnu loader=ld-linux-aarch64.so.1 ;;
      *) echo "no AppArmor 4 parser for $arch; the profile test will say so" >&2; return 0 ;;
    esac
    say "fetching an AppArmor 4 parser (Debian 13 packages) into $dir"
    rm -rf "$dir" && mkdir -p "$dir/debs"
    curl -fsSL "$mirror/dists/trixie/main/binary-$arch/Packages.xz" | xz -dc >"$dir/Packages"
    local pkg file sum
    for pkg in apparmor libc6; do
      file=$(awk -v p="$pkg" '$1 == "Package:" { on = ($2 == p) } on && $1 == "Filename:" { print $2; exit }' "$dir/Packages")
      sum=$(awk -v p="$pkg" '$1 == "Package:" { on = ($2 == p) } on && $1 == "SHA256:" { print $2; exit }' "$dir/Packages")
      curl -fsSL "$mirror/$file" -o "$dir/debs/$pkg.deb"
      echo "$sum  $dir/debs/$pkg.deb" | sha256sum -c --quiet
      dpkg-deb -x "$dir/debs/$pkg.deb" "$dir/root"
    done
    # Its configuration names the features file by its system path: point it inside.
    sed "s|^policy-features=.*|policy-features=$dir/root/usr/share/apparmor-features/features|" \
      "$dir/root/etc/apparmor/parser.conf" >"$dir/parser.conf"
    cat >"$dir/apparmor_parser" <<WRAPPER
#!/bin/sh
R="$dir/root"
exec "\$R/usr/lib/$triplet/$loader" --library-path "\$R/usr/lib/$triplet" "\$R/usr/sbin/apparmor_parser" --config-file "$dir/parser.conf" --base "\$R/etc/apparmor.d" "\$@"
WRAPPER
    chmod 755 "$dir/apparmor_parser"
  fi
  export SBX_APPARMOR_PARSER="$dir/apparmor_parser"
}

# The agent CLIs the end-to-end suite drives, from the npm registry, at pinned versions:
# installed once per version set into a cache outside the checkout (a clean clone reuses
# it), and handed to the tests as SBX_AGENTS_BIN. Gemini CLI needs Node.js 20 or later.
AGENTS=(@anthropic-ai/claude-code@2.1.330 @google/gemini-cli@0.61.0 @openai/codex@0.169.0 opencode-ai@1.18.33)
install_agents() {
  local major key cache dir
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -lt 20 ]; then
    echo "Node.js 20 or later is needed for the agent CLIs (found: $(node --version 2>/dev/null || echo none)). Hint: install Node.js 20+ (e.g. from your distribution's backports or nodesource)" >&2
    exit 1
  fi
  key=$(printf '%s\n' "${AGENTS[@]}" | sha256sum | cut -c1-12)
  cache="${SBX_AGENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sbx-shell-tests}"
  # /tmp is private inside the sandbox: agents there could not be run by their path, and
  # the tests would find another copy on PATH. Such a cache moves to /var/tmp.
  case "$(realpath -m "$cache")/" in
    /tmp/*) cache="/var/tmp/sbx-shell-tests-$(id -u)" ;;
  esac
  dir="$cache/agents-$key"
  if [ ! -f "$dir/.complete" ]; then
    [ "${SBX_NO_INSTALL:-0}" = 1 ] && { echo "the agent CLIs are not installed. Hint: run without SBX_NO_INSTALL" >&2; exit 1; }
    say "installing ${AGENTS[*]} into $dir"
    rm -rf "$dir" "$dir.partial" && mkdir -p "$dir.partial"
    npm install --prefix "$dir.partial" --no-audit --no-fund --loglevel=error "${AGENTS[@]}" >/dev/null
    touch "$dir.partial/.complete"
    mv "$dir.partial" "$dir"
  fi
  export SBX_AGENTS_BIN="$dir/node_modules/.bin"
}

# The container tests' engines and image (as root only: the engines run as root; the tests
# say why they cannot run otherwise). A Docker engine of the tests' own — its data, sockets
# and containerd under the cache below, no bridge and no iptables rules, so nothing on the
# host's network changes — stopped when the tests end; a Podman storage of the tests' own;
# and the image both run: Debian bookworm (minbase, python3) built by mmdebstrap from
# Debian's packages, so no image registry is needed. Built once, kept in the cache.
docker_pid=""
start_containers() {
  [ "$(id -u)" -eq 0 ] || return 0
  local cache dir rootfs image=sbx-test-debian:bookworm
  cache="${SBX_AGENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sbx-shell-tests}"
  dir="$cache/containers"
  mkdir -p "$dir"
  rootfs="$dir/bookworm-minbase-python3.tar"
  if [ ! -f "$rootfs" ]; then
    [ "${SBX_NO_INSTALL:-0}" = 1 ] && { echo "the container image is not built. Hint: run without SBX_NO_INSTALL" >&2; exit 1; }
    say "building the container tests' image from Debian's packages (mmdebstrap)"
    # (mmdebstrap tells the format by the name's ending)
    rm -rf "$dir/partial.tar"
    mmdebstrap --quiet --variant=minbase --include=python3 bookworm "$dir/partial.tar" >/dev/null
    mv "$dir/partial.tar" "$rootfs"
  fi
  local sock="$dir/docker.sock"
  # A second socket where an ordinary user can reach it (root's home is closed to others):
  # the container backends' tests run sbx-shell as one too.
  local open_sock=/run/sbx-test-docker.sock
  dockerd --host "unix://$sock" --host "unix://$open_sock" --data-root "$dir/docker" --exec-root "$dir/run" \
    --pidfile "$dir/docker.pid" --bridge none --iptables=false --ip6tables=false \
    --ip-forward=false --ip-masq=false >"$dir/dockerd.log" 2>&1 &
  docker_pid=$!
  local i
  for i in $(seq 150); do
    docker -H "unix://$sock" version >/dev/null 2>&1 && break
    kill -0 "$docker_pid" 2>/dev/null || { tail -5 "$dir/dockerd.log" >&2; echo "dockerd did not start" >&2; exit 1; }
    sleep 0.2
  done
  docker -H "unix://$sock" image inspect "$image" >/dev/null 2>&1 ||
    docker -H "unix://$sock" import "$rootfs" "$image" >/dev/null
  local podman=(podman --root "$dir/podman" --runroot "$dir/podman-run")
  "${podman[@]}" image exists "$image" || "${podman[@]}" import -q "$rootfs" "$image" >/dev/null
  chmod 0666 "$open_sock"
  export SBX_TEST_DOCKER_HOST="unix://$sock" SBX_TEST_DOCKER_OPEN_HOST="unix://$open_sock"
  export SBX_TEST_PODMAN_ROOT="$dir/podman" SBX_TEST_IMAGE="$image"
}

stop_containers() {
  [ -n "$docker_pid" ] || return 0
  kill "$docker_pid" 2>/dev/null || true
  wait "$docker_pid" 2>/dev/null || true
}

install_packages
install_rust_parts
setup_apparmor_parser
install_agents

say "cargo fmt --check"
cargo fmt --check

say "the source tree's shape (scripts/shape.py)"
python3 scripts/shape.py

say "cargo clippy (linux)"
cargo clippy --all-targets --locked -- -D warnings

say "cargo clippy --target $apple_target"
# ring's C and assembly need Apple's SDK to compile, which no Linux machine has; the lint
# needs none of it: its build script is replaced by an empty result (for this target only,
# on the command line: a real macOS build compiles ring as always).
ring_links=$(awk '/^name = "ring"$/ {getline; gsub(/[^0-9.]/, ""); gsub(/\./, "_"); print "ring_core_" $0 "_"}' Cargo.lock)
cargo clippy --all-targets --locked --target "$apple_target" \
  --config "target.$apple_target.$ring_links.rustc-link-search=[]" -- -D warnings

# What a test run must leave as it found it: the user it makes (sbx-ssh-test), what the suite makes in /var/tmp
# (sbx-*; not the agents' cache nor the benchmarks' image) and its tmux sockets (sbx-test-*), and the real user's session and network logs
# (the suite runs with a private HOME; its sessions would name its directories). Only what the suite makes: anything else on the
# machine may come and go meanwhile.
machine_state() {
  local state="${XDG_STATE_HOME:-$HOME/.local/state}/sbx-shell" f
  getent passwd | cut -d: -f1 | grep -x 'sbx-ssh-test' | sed 's/^/user /'
  # This run's places carry its word (support::run_tag); the canaries a sandboxed program
  # would leave if a protection failed are named sbx-*-canary.
  ls -A /var/tmp | grep -E "^sbx-.*-$SBX_TEST_RUN-[0-9]+\$|^sbx-.*-canary" | sed 's/^/in \/var\/tmp: /'
  ls -A "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)" 2>/dev/null | grep "^sbx-test-$SBX_TEST_RUN-" | sed 's/^/tmux socket: /'
  # The suite's sessions run in this run's /var/tmp/sbx-* directories: only lines naming them.
  for f in "$state/sessions.jsonl" "$state/network.log"; do
    echo "$f: $(cat "$f" 2>/dev/null | grep -Ec "/var/tmp/sbx-[a-z-]+-$SBX_TEST_RUN-[0-9]+/") lines of the suite's"
  done
}

# The word this run's places are named with (tests/suite/support.rs, run_tag).
export SBX_TEST_RUN="run$$"
say "cargo test (SBX_REQUIRE_ALL=$SBX_REQUIRE_ALL)"
log=$(mktemp)
trap 'rm -f "$log"; stop_containers' EXIT
start_containers
before=$(machine_state)
set +e
cargo test --locked "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
after=$(machine_state)
# What is new afterwards (leftovers of an earlier, killed run that this one removed are fine).
added=$(comm -13 <(echo "$before" | sort) <(echo "$after" | sort))
if [ -n "$added" ]; then
  echo "the test run left this behind (or changed it):" >&2
  echo "$added" >&2
  status=1
fi
# One closing line over every test binary.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
