#!/usr/bin/env python3
"""Real work under sbx-shell, beside bare and plain bwrap: the cost of judging every name
the program makes and every open that writes.

Workloads, each started as `sh -c CMD` in a fresh directory of WORK (a journaled file
system, see bench-work.sh), timed from spawn to exit:
  - start:  `true`, the sandbox's start-up and end;
  - tar:    `tar xf` of a tree of 30,300 entries (300 directories of 100 small files);
  - loop:   20,000 files created, written and renamed (Python);
  - compileall: `python3 -m compileall -f -q` of a copy of the standard library;
  - pip:    a venv made and five wheels installed from a local directory (no index);
  - npm:    `npm ci --offline` from a warm cache;
  - clone:  `git clone --no-hardlinks` of a local repository.

Subjects: bare, plain bwrap (the mounts a sandbox needs, nothing judged), sbx-shell on
bwrap, sbx-shell on Landlock alone; with CONTAINERS=1, plain docker (`docker run` of the
image of the host's links sbx-shell made, the host's directories mounted read-only and WORK
read-write, no network: the engine's own cost) and sbx-shell's docker backend. Rounds interleave the subjects (rotating who goes
first); the median of ROUNDS is kept. Prints a Markdown table with each subject's ratio to
bare. Environment: SBX_BIN, WORK, ROUNDS (default 5), ONLY (comma-separated workloads).
"""
import os
import shutil
import statistics
import subprocess
import sys
import time

SBX = os.environ["SBX_BIN"]
WORK = os.environ["WORK"]
ROUNDS = int(os.environ.get("ROUNDS", "5"))
ONLY = [w for w in os.environ.get("ONLY", "").split(",") if w]
ASSETS = os.path.join(WORK, "assets")

LOOP = """
import os
for i in range(20000):
    p = "f%d.tmp" % i
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"x")
    os.close(fd)
    os.rename(p, "f%d" % i)
"""

WORKLOADS = {
    "start": "true",
    "tar": f"tar xf {ASSETS}/tree.tar",
    "loop": f"python3 {ASSETS}/loop.py",
    "compileall": f"cp -r {ASSETS}/stdlib lib && python3 -m compileall -f -q lib >/dev/null",
    "pip": f"python3 -m venv v && v/bin/pip install -q --no-index --find-links {ASSETS}/wheels"
           f" $(cat {ASSETS}/wheels.txt)",
    "npm": f"cp {ASSETS}/npm/package.json {ASSETS}/npm/package-lock.json . &&"
           f" npm ci --offline --no-audit --no-fund --loglevel=error --cache {ASSETS}/npm-cache",
    "clone": f"git clone -q --no-hardlinks {ASSETS}/repo clone",
}


# The assets are read, the npm cache written (as a warm cache is); no private home.
SBX_ARGS = ["--pty", "never", "--quiet", "--no-private-home", "--read", ASSETS,
            "--write", os.path.join(ASSETS, "npm-cache")]


def subjects():
    bwrap = ["bwrap", "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/",
             "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--bind", WORK, WORK]
    subs = {
        "bare": lambda cmd: ["sh", "-c", cmd],
        "plain bwrap": lambda cmd: bwrap + ["sh", "-c", cmd],
        "sbx-shell bwrap": lambda cmd: [SBX, "--backend", "bwrap"] + SBX_ARGS + ["-c", cmd],
        "sbx-shell landlock": lambda cmd: [SBX, "--backend", "landlock"] + SBX_ARGS + ["-c", cmd],
    }
    if os.environ.get("CONTAINERS") == "1":
        docker = plain_docker()
        subs["plain docker"] = lambda cmd: docker + ["sh", "-c", cmd]
        subs["sbx-shell docker"] = lambda cmd: [SBX, "--backend", "docker"] + SBX_ARGS + ["-c", cmd]
    return subs


def plain_docker():
    """`docker run` as sbx-shell's docker backend makes it, without sbx-shell: the image of
    the host's links (made by one sbx-shell run first), the host's directories read-only,
    WORK read-write, no network, no capabilities."""
    subprocess.run([SBX, "--backend", "docker", "--quiet", "--pty", "never", "--", "true"],
                   check=True)
    image = subprocess.run(["docker", "images", "sbx-shell-host", "--format",
                            "{{.Repository}}:{{.Tag}}"], check=True, capture_output=True,
                           text=True).stdout.split()[0]
    argv = ["docker", "run", "--rm", "--log-driver", "none", "--network", "none",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only",
            "--tmpfs", "/tmp", "--user", "%d:%d" % (os.getuid(), os.getgid())]
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if name in ("proc", "sys", "dev", "run", "tmp") or os.path.islink(path):
            continue
        argv += ["--mount", f"type=bind,src={path},dst={path},readonly"]
    argv += ["--mount", f"type=bind,src={WORK},dst={WORK}", "--workdir",
             os.path.join(WORK, "run"), image]
    return argv


def prepare():
    os.makedirs(ASSETS, exist_ok=True)
    tree = os.path.join(ASSETS, "tree")
    if not os.path.exists(os.path.join(ASSETS, "tree.tar")):
        for d in range(300):
            os.makedirs(os.path.join(tree, "d%03d" % d))
            for f in range(100):
                with open(os.path.join(tree, "d%03d" % d, "f%03d.txt" % f), "w") as out:
                    out.write("x" * 100)
        subprocess.run(["tar", "cf", "tree.tar", "tree"], cwd=ASSETS, check=True)
        shutil.rmtree(tree)
    with open(os.path.join(ASSETS, "loop.py"), "w") as out:
        out.write(LOOP)
    if not os.path.exists(os.path.join(ASSETS, "stdlib")):
        shutil.copytree("/usr/lib/python3.11", os.path.join(ASSETS, "stdlib"), symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "site-packages",
                                                      "dist-packages", "test", "tests"))
    if not os.path.exists(os.path.join(ASSETS, "repo")):
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        subprocess.run(["git", "clone", "-q", "--bare", here, os.path.join(ASSETS, "repo")],
                       check=True)


def run(argv, cwd):
    t = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - t
    if done.returncode != 0:
        sys.exit(f"{argv}: exit {done.returncode}: {done.stderr.decode(errors='replace')}")
    return took


def main():
    os.environ["PIP_NO_CACHE_DIR"] = "1"
    prepare()
    names = [w for w in WORKLOADS if not ONLY or w in ONLY]
    subs = subjects()
    times = {(w, s): [] for w in names for s in subs}
    order = list(subs)
    for r in range(ROUNDS):
        for w in names:
            for s in order[r % len(order):] + order[:r % len(order)]:
                cwd = os.path.join(WORK, "run")
                shutil.rmtree(cwd, ignore_errors=True)
                os.makedirs(cwd)
                subprocess.run(["sync"])
                times[(w, s)].append(run(subs[s](WORKLOADS[w]), cwd))
                shutil.rmtree(cwd, ignore_errors=True)
    print("| work | " + " | ".join(subs) + " |")
    print("|---|" + "---|" * len(subs))
    for w in names:
        bare = statistics.median(times[(w, "bare")])
        cells = []
        for s in subs:
            m = statistics.median(times[(w, s)])
            took = f"{m * 1000:.1f} ms" if m < 1 else f"{m:.2f} s"
            cells.append(took if s == "bare" else f"{took} ({m / bare:.2f}×)")
        print(f"| {w} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
