#!/usr/bin/env bash
# scripts/bench-ssh.sh — what sbx-shell's ssh path adds: the latency of one signature
# through the filtered agent against the real ssh-agent, and of one ssh connection through
# the proxy (with the agent) against a direct one. A private sshd on a loopback port, a
# real ssh-agent holding one key, both made here and removed at the end. Prints a table
# (docs/benchmarks.md keeps the figures by hand).
#
# Environment:
#   ROUNDS   runs of each measure, the median is kept (default 5)
#   SIGNS    signatures per run, over one connection (default 300)
#   LOGINS   ssh connections per run (default 20)
#   SBX_BIN  the sbx-shell binary (default: this checkout's release build)
# Needs root (sshd), bwrap, python3, the OpenSSH server and client.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "needs root, to run a private sshd. Hint: sudo $0" >&2; exit 1; }
ROUNDS=${ROUNDS:-5} SIGNS=${SIGNS:-300} LOGINS=${LOGINS:-20}
if [ -z "${SBX_BIN:-}" ]; then
  cargo build --release --locked --quiet
  SBX_BIN="$PWD/target/release/sbx-shell"
fi

dir=$(mktemp -d /var/tmp/sbx-bench-ssh.XXXXXX)
cleanup() {
  [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null
  [ -n "${SSH_AGENT_PID:-}" ] && kill "$SSH_AGENT_PID" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/home/.ssh" "$dir/home/work" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$dir/host" -C host
ssh-keygen -q -t ed25519 -N '' -f "$dir/key" -C key
cp "$dir/key.pub" "$dir/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$dir/sshd_config" <<EOF
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host
PidFile none
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
AllowUsers root
EOF
/usr/sbin/sshd -D -e -f "$dir/sshd_config" 2>/dev/null &
sshd_pid=$!
echo "[bench.test]:$port $(cut -d' ' -f1,2 "$dir/host.pub")" > "$dir/home/.ssh/known_hosts"
eval "$(ssh-agent -s -a "$dir/agent.sock")" >/dev/null
ssh-add -q "$dir/key"
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break; sleep 0.1; done

# One connection to the agent, SIGNS git signatures over it: µs per signature.
cat > "$dir/sign.py" <<'EOF'
import os, socket, struct, sys, time
def string(b): return struct.pack(">I", len(b)) + b
def ask(s, body):
    s.sendall(string(body))
    n = struct.unpack(">I", s.recv(4))[0]
    d = b""
    while len(d) < n: d += s.recv(n - len(d))
    return d
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SSH_AUTH_SOCK"])
a = ask(s, b"\x0b"); l = struct.unpack(">I", a[5:9])[0]; key = a[9:9 + l]
data = b"SSHSIG" + string(b"git") + string(b"") + string(b"sha512") + string(b"\0" * 64)
n = int(sys.argv[1]); t = time.perf_counter()
for _ in range(n):
    r = ask(s, b"\x0d" + string(key) + string(data) + struct.pack(">I", 0))
    assert r[0] == 14, r[0]
print("%.1f" % ((time.perf_counter() - t) / n * 1e6))
EOF
# LOGINS logins in a row: ms per login.
logins='t=$(date +%s%N); for i in $(seq '"$LOGINS"'); do $SSH -p '"$port"' root@bench.test true || exit 1; done; echo $(( ($(date +%s%N) - t) / '"$LOGINS"' / 1000 ))'

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
sbx() {
  local backend=$1; shift
  (cd "$dir/home/work" && HOME="$dir/home" "$SBX_BIN" --quiet --backend "$backend" \
    --ssh-key "$dir/key.pub@bench.test:$port" --ssh-sign-commits \
    --net "allow=bench.test:$port" --resolve bench.test:127.0.0.1 "$@")
}
bare_ssh="ssh -o BatchMode=yes -o HostKeyAlias=[bench.test]:$port -o HostName=127.0.0.1 -o UserKnownHostsFile=$dir/home/.ssh/known_hosts"
in_ssh='ssh -o BatchMode=yes -o UserKnownHostsFile=$HOME/.ssh/known_hosts'

declare -A result
for _ in $(seq "$ROUNDS"); do
  result[sign_bare]+="$(/usr/bin/python3 "$dir/sign.py" "$SIGNS") "
  result[login_bare]+="$(SSH=$bare_ssh sh -c "$logins") "
  for backend in bwrap landlock; do
    result[sign_$backend]+="$(sbx "$backend" -c "/usr/bin/python3 $dir/sign.py $SIGNS") "
    result[login_$backend]+="$(sbx "$backend" -c "SSH=\"$in_ssh\"; $logins") "
  done
done
m() { echo "${result[$1]}" | tr ' ' '\n' | grep -v '^$' | median; }
echo "| | one signature (µs) | one ssh login (µs) |"
echo "|---|---|---|"
echo "| bare: the real agent, a direct connection | $(m sign_bare) | $(m login_bare) |"
echo "| sbx-shell, bwrap: the filtered agent, through the proxy | $(m sign_bwrap) | $(m login_bwrap) |"
echo "| sbx-shell, Landlock alone | $(m sign_landlock) | $(m login_landlock) |"
echo "($(git describe --always --dirty 2>/dev/null), $ROUNDS rounds, median; $SIGNS signatures over one connection, $LOGINS logins in a row)"
