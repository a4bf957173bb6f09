#!/usr/bin/env python3
"""Benchmark sbx-shell against a bare pty, `script -qc` and tmux, in one run.

Measures, for each subject, on the same file and the same machine:
  - bulk output throughput: `cat FILE` drained by a reader on the outer pty (MB/s), the
    median of BENCH_RUNS rounds in which the subjects take turns;
  - keystroke echo latency: one byte written to the outer pty, echoed back by `cat` running
    raw inside, p50 and p99 over many keystrokes (microseconds);
  - an idle session over IDLE_SECONDS: CPU time and context switches of the supervisor;
  - peak RSS (VmHWM) of the supervising process(es) after the bulk run;
  - bulk throughput of escape-dense output (a TUI's repaints: cursor moves, colours,
    titles and hyperlinks every few bytes), with sbx-shell's clipboard filter on (the
    default) and off (`--clipboard read-write`, where the output needs no filtering);
  - startup: `sbx-shell --backend B -- true` for each backend, beside `true` itself and the
    same `bwrap … true` that the bwrap backend runs (wall time of spawn to exit, no pty);
  - the allow-list proxy: FILE downloaded by curl from a loopback HTTP server, directly and
    through sbx-shell's proxy (plain HTTP and a CONNECT tunnel, from inside each Linux
    backend): throughput, and time to the first byte as the added latency.

Prints a Markdown table. Invoked by scripts/bench.sh, which builds the binary and records
the result; see that script for the environment variables.
"""
import json
import os
import pty
import random
import select
import signal
import statistics
import subprocess
import sys
import termios
import time

SBX = os.environ["SBX_BIN"]
FILE = os.environ["BENCH_FILE"]
KEYS = int(os.environ.get("BENCH_KEYS", "2000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
IDLE_SECONDS = float(os.environ.get("BENCH_IDLE_SECONDS", "10"))
MARK = b"BENCH-END-MARK"
TMUX_SOCKET = "sbx-bench-%d" % os.getpid()


def subjects():
    """name -> function(shell command line) -> argv that runs it on the outer pty."""
    return {
        "bare pty": lambda cmd: ["sh", "-c", cmd],
        "sbx-shell": lambda cmd: [SBX, "--", "sh", "-c", cmd],
        "script -qc": lambda cmd: ["script", "-qc", cmd, "/dev/null"],
        "tmux": lambda cmd: ["tmux", "-L", TMUX_SOCKET, "-f", "/dev/null",
                             "new-session", "-x", "200", "-y", "50", cmd],
    }


def spawn(argv, rows=50, cols=200):
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(argv[0], argv)
    import fcntl, struct
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return pid, fd


def read_until(fd, needle, timeout=120):
    """Read until `needle` has been seen; returns bytes read."""
    tail, total, end = b"", 0, time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 1)
        if not r:
            continue
        try:
            chunk = os.read(fd, 1 << 20)
        except OSError:
            break
        if not chunk:
            break
        total += len(chunk)
        window = tail + chunk
        if needle in window:
            return total
        tail = window[-len(needle):]
    raise RuntimeError("timed out waiting for %r" % needle)


def finish(pid, fd):
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    subprocess.run(["tmux", "-L", TMUX_SOCKET, "kill-server"], capture_output=True)
    try:
        while select.select([fd], [], [], 0.5)[0] and os.read(fd, 1 << 20):
            pass
    except OSError:
        pass
    os.close(fd)
    os.waitpid(pid, 0)


def supervisor_pids(name, pid):
    """The processes that do the supervising (not the program inside)."""
    if name == "tmux":
        server = subprocess.run(["tmux", "-L", TMUX_SOCKET, "display", "-p", "#{pid}"],
                                capture_output=True, text=True).stdout.strip()
        return [pid] + ([int(server)] if server else [])
    if name == "bare pty":
        return []
    return [pid]


def status_field(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def bulk_once(name, wrap):
    """Seconds for one `cat FILE` through the subject, and the supervisors' peak RSS (KiB)."""
    start = time.perf_counter()
    pid, fd = spawn(wrap("cat %s; printf '%s'; sleep 30" % (FILE, MARK.decode())))
    read_until(fd, MARK, timeout=600)
    seconds = time.perf_counter() - start
    rss = max([status_field(p, "VmHWM") for p in supervisor_pids(name, pid)] or [0])
    finish(pid, fd)
    return seconds, rss


def bulk_all(subjects):
    """Throughput (MB/s, median) and peak RSS per subject. Subjects take turns round by round,
    so that drift in the machine's speed does not favour whoever ran at a good moment."""
    size = os.path.getsize(FILE)
    times = {name: [] for name in subjects}
    rss = {name: 0 for name in subjects}
    for _ in range(RUNS):
        for name, wrap in subjects.items():
            seconds, peak = bulk_once(name, wrap)
            times[name].append(seconds)
            rss[name] = max(rss[name], peak)
    return {name: (size / statistics.median(times[name]) / 1e6, rss[name]) for name in subjects}


def echo(name, wrap):
    """p50, p99 in microseconds of one keystroke echoed back by `cat` in raw mode."""
    pid, fd = spawn(wrap("stty raw -echo; printf READY; exec cat"))
    read_until(fd, b"READY")
    time.sleep(0.5)
    samples = []
    for i in range(KEYS):
        key = bytes([ord("a") + i % 26])
        start = time.perf_counter_ns()
        os.write(fd, key)
        got = b""
        while key not in got:
            select.select([fd], [], [], 5)
            got += os.read(fd, 4096)
        samples.append((time.perf_counter_ns() - start) / 1000)
        time.sleep(0.0005)
    finish(pid, fd)
    samples.sort()
    return samples[len(samples) // 2], samples[int(len(samples) * 0.99)]


def idle(name, wrap):
    """CPU ms and context switches of the supervisors over IDLE_SECONDS of silence."""
    pid, fd = spawn(wrap("printf READY; exec sleep 600"))
    read_until(fd, b"READY")
    time.sleep(1)
    pids = supervisor_pids(name, pid)
    def sample():
        cpu = sum(cpu_ticks(p) for p in pids)
        switches = sum(status_field(p, "voluntary_ctxt_switches")
                       + status_field(p, "nonvoluntary_ctxt_switches") for p in pids)
        return cpu, switches
    before = sample()
    time.sleep(IDLE_SECONDS)
    after = sample()
    finish(pid, fd)
    hz = os.sysconf("SC_CLK_TCK")
    return (after[0] - before[0]) * 1000 / hz, after[1] - before[1]


def head_to_head():
    """sbx-shell against `script` on equal terms: each inside an outer `script` (a real pty
    drained by C, not by this Python reader), timed by /usr/bin/time, rounds alternating.
    Returns {name: (median seconds, median system seconds, median context switches)}."""
    runs = {"sbx-shell": [], "script -qc": []}
    inner = {"sbx-shell": "%s -- cat %s" % (SBX, FILE), "script -qc": "script -qc 'cat %s' /dev/null" % FILE}
    out = "/tmp/sbx-bench-time-%d" % os.getpid()
    for _ in range(RUNS):
        for name in runs:
            cmd = "/usr/bin/time -o %s -f '%%e %%S %%w %%c' %s" % (out, inner[name])
            subprocess.run(["script", "-qc", cmd, "/dev/null"], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, check=True)
            with open(out) as f:
                elapsed, system, vol, invol = f.read().split()
            runs[name].append((float(elapsed), float(system), int(vol) + int(invol)))
    os.unlink(out)
    med = lambda xs: statistics.median(xs)
    return {n: (med([r[0] for r in v]), med([r[1] for r in v]), med([r[2] for r in v])) for n, v in runs.items()}


STARTUP_RUNS = int(os.environ.get("BENCH_STARTUP_RUNS", "300"))


# The helper's spec for the startup cases that run it alone, and where it reads it.
SPEC_FD = 9
HELPER_SPEC = json.dumps({
    "new_session": False,
    "limits": {"raise_nofile": False, "open_files": None, "cpu_seconds": None,
               "data_bytes": None, "processes": None, "no_core_dumps": False},
}).encode()


def startup():
    """name -> (median ms, p90 ms) from spawn to exit, subjects taking turns. Runs in the
    scratch directory: a workspace without .git, which Landlock alone accepts."""
    os.chdir(os.path.dirname(FILE))
    cwd = os.getcwd()
    bwrap = ["/usr/bin/bwrap", "--die-with-parent", "--new-session", "--unshare-pid",
             "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--unshare-net",
             "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
             "--bind", cwd, cwd, "--chdir", cwd, "--", "/bin/true"]
    shown = subprocess.run([SBX, "explain", "--backend", "bwrap", "--show", "bwrap", "--", "/bin/true"],
                           check=True, capture_output=True, text=True).stdout.split()
    policy_bwrap = shown[:shown.index("--") + 1] + ["/bin/true"]
    # The helper mode with nothing to apply: the exec of sbx-shell that the design puts
    # between the launcher and the program (src/helper/spec.rs, HelperSpec). Its spec
    # comes on an inherited pipe, at SPEC_FD (made fresh for each start, before its clock).
    helper = [SBX, "__sbx_helper", str(SPEC_FD), "/bin/true", "/bin/true"]
    cases = {
        "true": ["/bin/true"],
        "sbx-shell --version": [SBX, "--version"],
        "bwrap … true": bwrap,
        "bwrap with the policy's mounts … true": policy_bwrap,
        "sbx-shell's helper alone … true": helper,
        "bwrap with the policy's mounts … helper … true": policy_bwrap[:-1] + helper,
        "sbx-shell --backend none": [SBX, "--backend", "none", "--", "/bin/true"],
        "sbx-shell --backend landlock": [SBX, "--backend", "landlock", "--", "/bin/true"],
        "sbx-shell --backend bwrap": [SBX, "--backend", "bwrap", "--", "/bin/true"],
    }
    times = {name: [] for name in cases}
    devnull = os.open(os.devnull, os.O_RDWR)
    for _ in range(STARTUP_RUNS):
        for name, argv in cases.items():
            actions = [(os.POSIX_SPAWN_DUP2, devnull, 0),
                       (os.POSIX_SPAWN_DUP2, devnull, 1),
                       (os.POSIX_SPAWN_DUP2, devnull, 2)]
            spec = None
            if "__sbx_helper" in argv:
                spec, w = os.pipe()
                os.write(w, HELPER_SPEC)
                os.close(w)
                actions.append((os.POSIX_SPAWN_DUP2, spec, SPEC_FD))
            start = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
            _, status = os.waitpid(pid, 0)
            if spec is not None:
                os.close(spec)
            times[name].append((time.perf_counter() - start) * 1000)
            if status != 0:
                raise SystemExit("%s failed: status %d" % (name, status))
    q = lambda xs, f: sorted(xs)[int(f * (len(xs) - 1))]
    return {n: (statistics.median(v), q(v, 0.9)) for n, v in times.items()}


def print_startup():
    results = startup()
    print()
    print("Startup, spawn to exit of `true` without a pty (%d alternating rounds):" % STARTUP_RUNS)
    print()
    print("| subject | median ms | p90 ms |")
    print("|---|---|---|")
    for name, (median, p90) in results.items():
        print("| %s | %.2f | %.2f |" % (name, median, p90))
    return results


def proxy_download():
    """name -> (median MB/s, median ms to first byte) for FILE fetched over loopback HTTP."""
    import http.server, threading, functools
    directory = os.path.dirname(FILE)
    handler = functools.partial(QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    url = "http://bench.test:%d/%s" % (port, os.path.basename(FILE))
    curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download} %{time_total} %{time_starttransfer}"]
    allow = ["--net", "allow=bench.test:%d" % port, "--resolve", "bench.test:127.0.0.1"]
    cases = {"curl, no proxy": curl + ["--noproxy", "*", "--resolve", "bench.test:%d:127.0.0.1" % port, url]}
    for backend in ("bwrap", "landlock"):
        sbx = [SBX, "--backend", backend] + allow + ["--"]
        cases["proxy, plain HTTP (%s)" % backend] = sbx + curl + [url]
        cases["proxy, CONNECT tunnel (%s)" % backend] = sbx + curl + ["-p", url]
    results = {name: [] for name in cases}
    os.chdir(directory)
    for _ in range(RUNS):
        for name, argv in cases.items():
            out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.split()
            size, total, first = int(out[0]), float(out[1]), float(out[2])
            if size != os.path.getsize(FILE):
                raise SystemExit("%s: downloaded %d bytes" % (name, size))
            results[name].append((size / 1e6 / total, first * 1000))
    server.shutdown()
    return {n: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
            for n, v in results.items()}


class QuietHandler(__import__("http.server").server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def print_proxy():
    results = proxy_download()
    base = results["curl, no proxy"]
    print()
    print("The allow-list proxy: a %d MB download from a loopback HTTP server by curl "
          "(median of %d rounds):" % (os.path.getsize(FILE) // 1000000, RUNS))
    print()
    print("| path | MB/s | vs no proxy | first byte ms | added ms |")
    print("|---|---|---|---|---|")
    for name, (mbps, first) in results.items():
        print("| %s | %.0f | %.2f× | %.2f | %s |" % (
            name, mbps, mbps / base[0], first,
            "—" if name == "curl, no proxy" else "%+.2f" % (first - base[1])))


def escape_dense_file():
    """A file of TUI-like output beside FILE (half its size): every few bytes an escape."""
    path = FILE + ".escapes"
    size = os.path.getsize(FILE) // 2
    rng = random.Random(1)
    words = ["build", "ok", "warning", "src/main.rs", "compiling", "done", "│", "─", "✓"]
    with open(path, "w") as f:
        written = 0
        while written < size:
            line = ("\x1b[%d;%dH\x1b[38;5;%dm%s\x1b[0m \x1b[1m%s\x1b[22m"
                    "\x1b]8;;https://x/%d\x1b\\link\x1b]8;;\x1b\\\x1b]0;t%d\x07\r\n") % (
                rng.randint(1, 50), rng.randint(1, 100), rng.randint(0, 255),
                rng.choice(words), rng.choice(words), rng.randint(0, 999), rng.randint(0, 9))
            f.write(line)
            written += len(line.encode())
    return path


def print_escapes():
    """Throughput on escape-dense output, the clipboard filter on and off."""
    global FILE
    plain = FILE
    FILE = escape_dense_file()
    try:
        cases = {
            "bare pty": subjects()["bare pty"],
            "sbx-shell (clipboard filter on: none)": subjects()["sbx-shell"],
            "sbx-shell --clipboard read-write (filter off)":
                lambda cmd: [SBX, "--clipboard", "read-write", "--", "sh", "-c", cmd],
            "script -qc": subjects()["script -qc"],
        }
        bulk = bulk_all(cases)
    finally:
        os.unlink(FILE)
        FILE = plain
    print()
    print("Escape-dense output (%s), median of %d alternating rounds:" % (
        "cursor moves, colours, a title and two hyperlinks every 90 bytes", RUNS))
    print()
    print("| subject | throughput MB/s | vs bare |")
    print("|---|---|---|")
    bare = bulk["bare pty"][0]
    for name, (mbps, _) in bulk.items():
        print("| %s | %.1f | %.2f× |" % (name, mbps, mbps / bare))


def main():
    if os.environ.get("BENCH_ONLY") == "escapes":
        print_escapes()
        return
    if os.environ.get("BENCH_ONLY") == "startup":
        s = print_startup()
        startup_verdicts(s)
        return
    if os.environ.get("BENCH_ONLY") == "proxy":
        print_proxy()
        return
    rows = []
    bulk = bulk_all(subjects())
    for name, wrap in subjects().items():
        mbps, rss = bulk[name]
        p50, p99 = echo(name, wrap)
        cpu, switches = idle(name, wrap) if name != "bare pty" else (None, None)
        rows.append((name, mbps, p50, p99, cpu, switches, rss))
        print("measured %s" % name, file=sys.stderr)
    bare = rows[0]
    print("| subject | throughput MB/s | vs bare | echo p50 µs | echo p99 µs | p99 − bare µs "
          "| idle CPU ms / %gs | idle context switches | peak RSS KiB |" % IDLE_SECONDS)
    print("|---|---|---|---|---|---|---|---|---|")
    for name, mbps, p50, p99, cpu, switches, rss in rows:
        print("| %s | %.1f | %.2f× | %.0f | %.0f | %s | %s | %s | %s |" % (
            name, mbps, mbps / bare[1], p50, p99,
            "—" if name == "bare pty" else "%+.0f" % (p99 - bare[3]),
            "—" if cpu is None else "%.0f" % cpu,
            "—" if switches is None else switches,
            "—" if name == "bare pty" else rss))
    size_mb = os.path.getsize(FILE) / 1e6
    print()
    print("Head to head, each inside an outer `script` and timed by /usr/bin/time (median of %d alternating rounds):" % RUNS)
    print()
    print("| subject | MB/s | elapsed s | system s | context switches |")
    print("|---|---|---|---|---|")
    for name, (elapsed, system, switches) in head_to_head().items():
        print("| %s | %.1f | %.2f | %.2f | %d |" % (name, size_mb / elapsed, elapsed, system, switches))
    sbx = next(r for r in rows if r[0] == "sbx-shell")
    verdict = lambda ok: "met" if ok else "**not met**"
    print()
    print("Against the targets, in this run:")
    print("- throughput %.2f× the bare pty (target ≥ 0.95×): %s" % (sbx[1] / bare[1], verdict(sbx[1] / bare[1] >= 0.95)))
    print("- echo p99 %+.0f µs over the bare pty (target ≤ +50 µs): %s" % (sbx[3] - bare[3], verdict(sbx[3] - bare[3] <= 50)))
    print("- idle: %s context switches, %.0f ms CPU in %gs (target: no wakeups): %s" % (sbx[5], sbx[4], IDLE_SECONDS, verdict(sbx[5] == 0)))
    print("- peak RSS %d KiB (target ≤ 4096 KiB): %s" % (sbx[6], verdict(sbx[6] <= 4096)))
    print_escapes()
    startup_verdicts(print_startup())
    print_proxy()


def startup_verdicts(s):
    verdict = lambda ok: "met" if ok else "**not met**"
    over_bwrap = s["sbx-shell --backend bwrap"][0] - s["bwrap … true"][0]
    over_true = s["sbx-shell --backend landlock"][0] - s["true"][0]
    own_exec = s["sbx-shell --version"][0] - s["true"][0]
    mounts = s["bwrap with the policy's mounts … true"][0] - s["bwrap … true"][0]
    helper = s["sbx-shell's helper alone … true"][0] - s["true"][0]
    helper_in_bwrap = (s["bwrap with the policy's mounts … helper … true"][0]
                       - s["bwrap with the policy's mounts … true"][0])
    print()
    print("- startup, bwrap backend: %+.2f ms over `bwrap … true` (target ≤ +1 ms): %s" % (over_bwrap, verdict(over_bwrap <= 1)))
    print("- startup, landlock backend: %+.2f ms over `true`, its bare launcher (target ≤ +1 ms): %s" % (over_true, verdict(over_true <= 1)))
    print("- floors inside those gaps, before any sandbox work: the helper's exec %+.2f ms "
          "(%+.2f ms inside bwrap); the policy's extra mounts %+.2f ms; the sbx-shell binary "
          "starting at all (`--version`) %+.2f ms over `true`" % (helper, helper_in_bwrap, mounts, own_exec))

if __name__ == "__main__":
    main()
