#!/usr/bin/env bash
# scripts/bench-credentials.sh — what adding a credential costs a connection: the same
# Python client inside sbx-shell (bwrap) through the proxy's end-to-end tunnel (the host on
# the allow-list) and through its interception (`--credential VAR@HOST`: TLS answered by
# sbx-shell, each head rewritten, TLS again to the host), beside the client bare. The
# origin is a local HTTPS server (Python's http.server, keep-alive) with an authority of
# this script's own, made with openssl and removed at the end. Prints a table
# (docs/benchmarks.md keeps the figures by hand).
#
# Environment:
#   ROUNDS    runs of each measure, the median is kept (default 5)
#   FRESH     new connections per run, one request each (default 50)
#   REQUESTS  requests per run over one connection (default 300)
#   MIB       MiB downloaded per run over one connection (default 256)
#   SBX_BIN   the sbx-shell binary (default: this checkout's release build)
# Needs bwrap, python3, openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5} FRESH=${FRESH:-50} REQUESTS=${REQUESTS:-300} MIB=${MIB:-256}
if [ -z "${SBX_BIN:-}" ]; then
  cargo build --release --locked --quiet
  SBX_BIN="$PWD/target/release/sbx-shell"
fi

dir=$(mktemp -d /var/tmp/sbx-bench-credentials.XXXXXX)
cleanup() {
  [ -n "${origin_pid:-}" ] && kill "$origin_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/work"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" -subj "/CN=bench origin CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$dir/origin.key" -out "$dir/origin.csr" -subj "/CN=api.bench.test" 2>/dev/null
printf 'subjectAltName=DNS:api.bench.test\n' > "$dir/ext"
openssl x509 -req -in "$dir/origin.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
  -CAcreateserial -days 2 -extfile "$dir/ext" -out "$dir/origin.pem" 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# The origin: `/small` answers 2 bytes, `/big/N` N MiB; every connection kept alive.
cat > "$dir/origin.py" <<'EOF'
import http.server, ssl, sys
CHUNK = b"x" * (1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_GET(self):
        if self.path.startswith("/big/"):
            n = int(self.path[5:])
            self.send_response(200); self.send_header("Content-Length", str(n << 20)); self.end_headers()
            for _ in range(n):
                self.wfile.write(CHUNK)
        else:
            self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
            self.wfile.write(b"ok")
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[2], sys.argv[3])
s.socket = c.wrap_socket(s.socket, server_side=True)
s.serve_forever()
EOF
python3 "$dir/origin.py" "$port" "$dir/origin.pem" "$dir/origin.key" &
origin_pid=$!

# The client: through HTTPS_PROXY when set (a CONNECT, as every client does), else direct.
cat > "$dir/client.py" <<'EOF'
import http.client, os, socket, ssl, statistics, sys, time
what, count, host, port = sys.argv[1], int(sys.argv[2]), "api.bench.test", int(sys.argv[3])
ctx = ssl.create_default_context(cafile=os.environ["BENCH_CA"])
proxy = os.environ.get("HTTPS_PROXY")
def connect():
    if proxy:
        ph, pp = proxy.rsplit("/", 1)[1].rsplit(":", 1)
        c = http.client.HTTPSConnection(ph, int(pp), context=ctx)
        c.set_tunnel(host, port)
        return c
    c = http.client.HTTPSConnection(host, port, context=ctx)
    c.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=host)
    return c
def get(c, path):
    c.request("GET", path, headers={"Host": f"{host}:{port}", "Authorization": "token " + os.environ.get("BENCH_TOKEN", "x")})
    r = c.getresponse()
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b: break
        n += len(b)
    return n
if what == "fresh":
    times = []
    for _ in range(count):
        t = time.perf_counter(); c = connect(); get(c, "/small"); c.close(); times.append(time.perf_counter() - t)
    print(f"{statistics.median(times) * 1e3:.2f}")
elif what == "reuse":
    c = connect(); get(c, "/small")
    t = time.perf_counter()
    for _ in range(count): get(c, "/small")
    print(f"{(time.perf_counter() - t) / count * 1e6:.0f}")
else:
    c = connect(); get(c, "/small")
    t = time.perf_counter(); n = get(c, f"/big/{count}")
    print(f"{n / (time.perf_counter() - t) / 1e6:.0f}")
EOF
cp "$dir/client.py" "$dir/ca.pem" "$dir/work/"
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $port))" 2>/dev/null && break; sleep 0.1; done

export BENCH_TOKEN=ghp_benchbenchbenchbenchbenchbenchbenchbe
run() { # run WAY MEASURE COUNT
  local way=$1 measure=$2 count=$3
  case $way in
    bare)
      (cd "$dir/work" && BENCH_CA="$dir/ca.pem" python3 client.py "$measure" "$count" "$port") ;;
    tunnel)
      (cd "$dir/work" && SSL_CERT_FILE="$dir/ca.pem" BENCH_CA=ca.pem "$SBX_BIN" --backend bwrap \
        --net "allow=api.bench.test:$port" --resolve api.bench.test:127.0.0.1 -- \
        python3 client.py "$measure" "$count" "$port" 2>/dev/null) ;;
    intercepted)
      # The program trusts the session's authority through SSL_CERT_FILE's bundle.
      (cd "$dir/work" && SSL_CERT_FILE="$dir/ca.pem" "$SBX_BIN" --backend bwrap \
        --credential "BENCH_TOKEN@api.bench.test:$port" --resolve api.bench.test:127.0.0.1 -- \
        sh -c 'BENCH_CA=$SSL_CERT_FILE exec python3 client.py "$@"' sh "$measure" "$count" "$port" 2>/dev/null) ;;
  esac
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '| | new connection + 1 request | 1 request, connection kept | download, one connection |\n|---|---|---|---|\n'
for way in bare tunnel intercepted; do
  fresh=$(for _ in $(seq "$ROUNDS"); do run $way fresh "$FRESH"; done | median)
  reuse=$(for _ in $(seq "$ROUNDS"); do run $way reuse "$REQUESTS"; done | median)
  big=$(for _ in $(seq "$ROUNDS"); do run $way big "$MIB"; done | median)
  printf '| %s | %s ms | %s µs | %s MB/s |\n' "$way" "$fresh" "$reuse" "$big"
done
