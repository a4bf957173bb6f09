//! Enforcement against the real kernel: each Linux backend (bwrap with Landlock and seccomp
//! inside; Landlock and seccomp alone), run as root and as an unprivileged user (nobody),
//! with a fake `$HOME` full of canary secrets and a workspace, attacked from inside.
//!
//! Every attack has a control: the same script under `--backend none` must succeed, so a
//! test that passes proves the sandbox stopped it, not that the attack was broken.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::{TcpListener, UdpSocket};
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::support::Shown;
use super::support::{pids_with, require, require_root, wait_until, Launch, OuterPty};

const BACKENDS: [&str; 2] = ["bwrap", "landlock"];
pub(super) const PYTHON: &str = "/usr/bin/python3";
pub(super) const CANARY: &str = "CANARY-7f3a9c";
pub(super) const NOBODY: u32 = 65534;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum User {
    Root,
    Nobody,
}

const USERS: [User; 2] = [User::Root, User::Nobody];

/// The tools every test here needs; a missing one fails under SBX_REQUIRE_ALL=1.
pub(super) fn tools_present() -> bool {
    // Running as another user needs root; CI runs the suite as root.
    require_root("the sandbox suite (it drops to nobody itself)")
        && require("bwrap", "the bwrap backend")
        && require("python3", "attacks written in python")
        && require("script", "a nested pty")
        && Path::new(PYTHON).is_file()
}

/// Where the labs live: outside the checkout (nobody must reach it, whatever the checkout's
/// permissions) and outside /tmp (private inside the sandbox). Holds a copy of the binary.
fn lab_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| super::support::run_dir("sbx-lab"))
}

/// A fake home full of canaries, a workspace, and a directory outside both.
#[derive(Clone)]
pub(super) struct Lab {
    pub(super) dir: PathBuf,
    pub(super) home: PathBuf,
    pub(super) ws: PathBuf,
    pub(super) outside: PathBuf,
    pub(super) user: User,
}

impl Lab {
    pub(super) fn new(name: &str, user: User, git: bool) -> Lab {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::SeqCst);
        let dir = lab_root().join(format!("{name}-{user:?}-{n}"));
        let (home, ws, outside) = (dir.join("home"), dir.join("ws"), dir.join("outside"));
        for d in [&home, &ws, &outside, &home.join(".ssh"), &home.join(".aws")] {
            fs::create_dir_all(d).unwrap();
        }
        for secret in [".ssh/id_ed25519", ".aws/credentials", ".netrc"] {
            fs::write(home.join(secret), format!("{CANARY} {secret}\n")).unwrap();
        }
        fs::write(home.join(".bashrc"), "# rc\n").unwrap();
        fs::write(ws.join("README"), "hello\n").unwrap();
        if git {
            fs::create_dir_all(ws.join(".git/hooks")).unwrap();
            fs::write(ws.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
            fs::write(ws.join(".git/config"), "[core]\n").unwrap();
            fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        }
        if user == User::Nobody {
            chown_tree(&dir, NOBODY);
        }
        Lab {
            dir,
            home,
            ws,
            outside,
            user,
        }
    }

    /// The copy of sbx-shell that every user may run (the checkout's may lie where only
    /// its owner may enter: a clone in root's home).
    pub(super) fn bin(&self) -> PathBuf {
        lab_root().join("sbx-shell")
    }

    /// `sbx-shell --backend BACKEND ARGS…` in the workspace, as the lab's user, without a
    /// terminal, with a small clean environment.
    pub(super) fn command(&self, backend: &str, args: &[&str]) -> Command {
        self.command_of(&self.bin(), backend, args)
    }

    /// `command`, with the sbx-shell binary at `binary`.
    pub(super) fn command_of(&self, binary: &Path, backend: &str, args: &[&str]) -> Command {
        self.command_through(&[binary.as_os_str()], backend, args)
    }

    /// `command`, started through `before` (a program and its arguments that end with
    /// sbx-shell's path: `setarch --uname-2.6 …/sbx-shell`).
    pub(super) fn command_through(
        &self,
        before: &[&std::ffi::OsStr],
        backend: &str,
        args: &[&str],
    ) -> Command {
        let mut cmd = Command::new(before[0]);
        cmd.args(&before[1..])
            .arg("--backend")
            .arg(backend)
            .args(args)
            .current_dir(&self.ws)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .env("SHELL", "/bin/sh")
            .env("LAB_OUT", &self.outside)
            .stdin(Stdio::null());
        if self.user == User::Nobody {
            cmd.uid(NOBODY).gid(NOBODY);
        }
        cmd
    }

    /// Run `sh -c SCRIPT` sandboxed; (exit code, stdout, stderr).
    pub(super) fn sh(&self, backend: &str, args: &[&str], script: &str) -> (i32, String, String) {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-c", script]);
        let out = self.command(backend, &all).shown();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    pub(super) fn what(&self, backend: &str) -> String {
        format!("{backend} as {:?} in {}", self.user, self.dir.display())
    }
}

pub(super) fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// Every (backend, user) pair.
pub(super) fn each(mut test: impl FnMut(&str, User)) {
    for backend in BACKENDS {
        for user in USERS {
            test(backend, user);
        }
    }
}

pub(super) fn assert_lines(out: &str, expected: &[&str], what: &str) {
    for line in expected {
        assert!(
            out.lines().any(|l| l == *line),
            "{what}: missing {line:?} in:\n{out}"
        );
    }
}

#[test]
fn writes_stay_inside_the_workspace_and_writable_roots() {
    if !tools_present() {
        return;
    }
    let script = r#"
        echo w > "$PWD/inside" && echo INSIDE-OK
        echo w > "$LAB_OUT/x" 2>/dev/null || echo OUTSIDE-DENIED
        echo w > "$HOME/x" 2>/dev/null || echo HOME-DENIED
        echo w > /etc/sbx-lab-canary 2>/dev/null || echo ETC-DENIED
        echo w > /var/tmp/sbx-lab-canary 2>/dev/null || echo VARTMP-DENIED
        mkdir "$PWD/sub" && echo w > "$PWD/sub/f" && mv "$PWD/sub/f" "$PWD/g" && echo RENAME-OK
    "#;
    let expected = [
        "INSIDE-OK",
        "OUTSIDE-DENIED",
        "HOME-DENIED",
        "ETC-DENIED",
        "VARTMP-DENIED",
        "RENAME-OK",
    ];
    each(|backend, user| {
        let lab = Lab::new("writes", user, false);
        let what = lab.what(backend);
        let (code, out, err) = lab.sh(backend, &[], script);
        assert_eq!(code, 0, "{what}: {err}");
        assert_lines(&out, &expected, &what);
        assert!(lab.ws.join("inside").exists() && lab.ws.join("g").exists());
        assert!(!lab.outside.join("x").exists(), "{what}");
        assert!(!lab.home.join("x").exists(), "{what}");
        assert!(!Path::new("/etc/sbx-lab-canary").exists(), "{what}");
        assert!(!Path::new("/var/tmp/sbx-lab-canary").exists(), "{what}");
        // A declared writable root is writable; read-only mode leaves the workspace alone.
        let out_dir = lab.outside.to_str().unwrap();
        let (_, out, err) = lab.sh(
            backend,
            &["--write", out_dir],
            r#"echo w > "$LAB_OUT/x" && echo ROOT-OK"#,
        );
        assert_lines(&out, &["ROOT-OK"], &format!("{what}: {err}"));
        let (_, out, _) = lab.sh(
            backend,
            &["--profile", "read-only"],
            r#"echo w > "$PWD/ro" 2>/dev/null || echo RO-DENIED; cat "$PWD/README""#,
        );
        assert_lines(&out, &["RO-DENIED", "hello"], &what);
        assert!(!lab.ws.join("ro").exists(), "{what}");
    });
    // Control: unconfined, the same writes land.
    let lab = Lab::new("writes-control", User::Nobody, false);
    let (_, out, _) = lab.sh("none", &[], r#"echo w > "$LAB_OUT/x" && echo OUTSIDE-OK"#);
    assert_lines(&out, &["OUTSIDE-OK"], "control");
}

#[test]
fn canary_secrets_stay_unreadable_by_every_path() {
    if !tools_present() {
        return;
    }
    let script = format!(
        r#"
        cat "$HOME/.ssh/id_ed25519" "$HOME/.aws/credentials" "$HOME/.netrc"
        ln -s "$HOME/.ssh/id_ed25519" "$PWD/sym"; cat "$PWD/sym"
        ln "$HOME/.ssh/id_ed25519" "$PWD/hard"; cat "$PWD/hard"
        mv "$HOME/.aws/credentials" "$PWD/moved"; cat "$PWD/moved"
        mv "$HOME/.ssh" "$PWD/ssh"; cat "$PWD/ssh/id_ed25519"
        cp -r "$HOME/.aws" "$PWD/copy"; cat "$PWD/copy/credentials"
        cat "/proc/self/root$HOME/.ssh/id_ed25519" "/proc/$$/root$HOME/.netrc"
        cat "/proc/self/cwd/../home/.netrc"
        {PYTHON} -c 'import os; d = os.open(os.environ["HOME"], os.O_RDONLY); print(os.read(os.open(".netrc", os.O_RDONLY, dir_fd=d), 99))'
        echo DONE
        "#
    );
    each(|backend, user| {
        let lab = Lab::new("canary", user, false);
        let what = lab.what(backend);
        let (_, out, err) = lab.sh(backend, &[], &script);
        assert_lines(&out, &["DONE"], &format!("{what}: {err}"));
        assert!(!out.contains(CANARY), "{what}: a canary leaked:\n{out}");
        assert!(!err.contains(CANARY), "{what}: a canary leaked:\n{err}");
        for secret in [".ssh/id_ed25519", ".aws/credentials", ".netrc"] {
            let kept = fs::read_to_string(lab.home.join(secret)).unwrap_or_default();
            assert!(kept.starts_with(CANARY), "{what}: {secret} was moved");
        }
    });
    let lab = Lab::new("canary-control", User::Nobody, false);
    let (_, out, _) = lab.sh("none", &[], &script);
    assert!(
        out.contains(CANARY),
        "control: the canaries are readable: {out}"
    );
}

#[test]
fn tools_installed_in_the_home_directory_run_and_its_secrets_stay_unreadable() {
    if !tools_present() {
        return;
    }
    // Where claude, codex and most developer tools live: Landlock alone reads the home
    // directory around its denied paths (issue 16), bwrap reads it with them hidden.
    let script = r#"
        PATH="$HOME/.local/bin:$HOME/.cargo/bin:$PATH"
        hometool; cargotool
        cat "$HOME/.ssh/id_ed25519" 2>/dev/null || echo SECRET-DENIED
        cat "$HOME/.netrc" 2>/dev/null || echo NETRC-DENIED
        ls "$HOME" >/dev/null && echo HOME-LISTED
    "#;
    let setup = |lab: &Lab| {
        for (dir, name) in [(".local/bin", "hometool"), (".cargo/bin", "cargotool")] {
            let bin = lab.home.join(dir);
            fs::create_dir_all(&bin).unwrap();
            let tool = bin.join(name);
            fs::write(&tool, format!("#!/bin/sh\necho {name}-RAN\n")).unwrap();
            fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
            if lab.user == User::Nobody {
                chown_tree(&lab.home.join(dir.split('/').next().unwrap()), NOBODY);
            }
        }
    };
    each(|backend, user| {
        let lab = Lab::new("hometools", user, false);
        setup(&lab);
        let what = lab.what(backend);
        let (_, out, err) = lab.sh(backend, &[], script);
        assert_lines(
            &out,
            &[
                "hometool-RAN",
                "cargotool-RAN",
                "SECRET-DENIED",
                "NETRC-DENIED",
                "HOME-LISTED",
            ],
            &format!("{what}: {err}"),
        );
        assert!(!out.contains(CANARY), "{what}: {out}");
    });
    let lab = Lab::new("hometools-control", User::Nobody, false);
    setup(&lab);
    let (_, out, _) = lab.sh("none", &[], script);
    assert_lines(&out, &["hometool-RAN", "cargotool-RAN"], "control");
    assert!(out.contains(CANARY), "control: {out}");
}

#[test]
fn git_hooks_config_and_rc_files_are_neither_writable_nor_renamable() {
    if !tools_present() {
        return;
    }
    let script = r#"
        echo evil >> "$PWD/.git/hooks/pre-commit" 2>/dev/null || echo HOOK-WRITE-DENIED
        echo evil > "$PWD/.git/hooks/post-checkout" 2>/dev/null || echo HOOK-CREATE-DENIED
        mv "$PWD/.git/hooks" "$PWD/.git/hooks.old" 2>/dev/null || echo HOOKS-RENAME-DENIED
        echo evil >> "$PWD/.git/config" 2>/dev/null || echo CONFIG-WRITE-DENIED
        mv "$PWD/.git/config" "$PWD/.git/config.old" 2>/dev/null || echo CONFIG-RENAME-DENIED
        printf '[core]\n\tpager = x\n' > "$PWD/.git/config.new" && mv "$PWD/.git/config.new" "$PWD/.git/config" 2>/dev/null || echo CONFIG-REPLACE-DENIED
        echo evil >> "$HOME/.bashrc" 2>/dev/null || echo RC-WRITE-DENIED
        mv "$HOME/.bashrc" "$HOME/.bashrc.old" 2>/dev/null || echo RC-RENAME-DENIED
        echo x > "$PWD/.git/index.lock" 2>/dev/null && echo GIT-DIR-WRITABLE
        true
    "#;
    let denied = [
        "HOOK-WRITE-DENIED",
        "HOOK-CREATE-DENIED",
        "HOOKS-RENAME-DENIED",
        "CONFIG-WRITE-DENIED",
        "CONFIG-RENAME-DENIED",
        "CONFIG-REPLACE-DENIED",
        "RC-WRITE-DENIED",
        "RC-RENAME-DENIED",
    ];
    each(|backend, user| {
        let lab = Lab::new("protected", user, true);
        let what = lab.what(backend);
        // Landlock alone inside a writable tree: its guard refuses the writes
        // (tests/suite/fallback.rs); here, a repository opened read-only.
        let args: &[&str] = if backend == "landlock" {
            &["--profile", "read-only"]
        } else {
            &[]
        };
        let (code, out, err) = lab.sh(backend, args, script);
        assert_eq!(code, 0, "{what}: {err}");
        assert_lines(&out, &denied, &what);
        // Under bwrap the rest of .git stays writable, so git itself works.
        assert_eq!(
            out.lines().any(|l| l == "GIT-DIR-WRITABLE"),
            backend == "bwrap",
            "{what}: {out}"
        );
        assert_eq!(
            fs::read_to_string(lab.ws.join(".git/hooks/pre-commit")).unwrap(),
            "#!/bin/sh\n"
        );
        assert_eq!(
            fs::read_to_string(lab.ws.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            fs::read_to_string(lab.home.join(".bashrc")).unwrap(),
            "# rc\n"
        );
        assert!(!lab.ws.join(".git/hooks/post-checkout").exists(), "{what}");
    });
    let lab = Lab::new("protected-control", User::Nobody, true);
    let (_, out, _) = lab.sh("none", &[], script);
    assert!(!out.contains("HOOK-WRITE-DENIED"), "control: {out}");
}

/// A TCP and a UDP listener on loopback, started outside the sandbox.
struct Listeners {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Listeners {
    fn start() -> Listeners {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        Listeners { tcp, udp }
    }

    fn ports(&self) -> (String, String) {
        (
            self.tcp.local_addr().unwrap().port().to_string(),
            self.udp.local_addr().unwrap().port().to_string(),
        )
    }

    /// What reached the listeners: (TCP bytes, UDP datagram).
    fn received(&self) -> (String, String) {
        let mut tcp = String::new();
        if let Ok((mut stream, _)) = self.tcp.accept() {
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let _ = stream.read_to_string(&mut tcp);
        }
        let mut buf = [0u8; 64];
        let udp = match self.udp.recv(&mut buf) {
            Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
            Err(_) => String::new(),
        };
        (tcp, udp)
    }
}

const NET_PROBE: &str = r#"
import socket, sys
tcp, udp = int(sys.argv[1]), int(sys.argv[2])
try:
    s = socket.create_connection(("127.0.0.1", tcp), timeout=3)
    s.sendall(b"TCP-HELLO"); s.close(); print("TCP-CONNECTED")
except OSError as e:
    print("TCP-FAILED", e.errno)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"UDP-HELLO", ("127.0.0.1", udp)); print("UDP-SENT")
except OSError as e:
    print("UDP-FAILED", e.errno)
try:
    socket.getaddrinfo("sbx-lab-canary.example.com", 443); print("RESOLVED")
except OSError:
    print("RESOLVE-FAILED")
for family in (socket.AF_INET6, socket.AF_PACKET, socket.AF_VSOCK):
    try:
        socket.socket(family, socket.SOCK_DGRAM); print("SOCKET", family)
    except OSError:
        pass
print("NET-DONE")
"#;

#[test]
fn network_none_blocks_tcp_udp_and_dns_and_full_works() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        let lab = Lab::new("net", user, false);
        let what = lab.what(backend);
        let listeners = Listeners::start();
        let (tcp, udp) = listeners.ports();
        let probe = ["--", PYTHON, "-c", NET_PROBE, &tcp, &udp];
        let out = lab.command(backend, &probe).shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_lines(&text, &["RESOLVE-FAILED", "NET-DONE"], &what);
        // Under bwrap a datagram (and an AF_INET6 socket) reaches the namespace's own
        // loopback only: the listeners on the host see nothing. Alone none can be made.
        let (udp, inet6) = match backend {
            "bwrap" => ("UDP-SENT", true),
            _ => ("UDP-FAILED", false),
        };
        assert!(
            text.contains("TCP-FAILED") && text.contains(udp),
            "{what}: {text}"
        );
        let sockets: Vec<&str> = text.lines().filter(|l| l.starts_with("SOCKET ")).collect();
        let expected: &[&str] = if inet6 { &["SOCKET 10"] } else { &[] };
        assert_eq!(sockets, expected, "{what}: {text}");
        assert_eq!(
            listeners.received(),
            (String::new(), String::new()),
            "{what}"
        );

        let mut full = vec!["--net", "full"];
        full.extend(probe);
        let out = lab.command(backend, &full).shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_lines(&text, &["TCP-CONNECTED", "UDP-SENT", "NET-DONE"], &what);
        assert_eq!(
            listeners.received(),
            ("TCP-HELLO".to_string(), "UDP-HELLO".to_string()),
            "{what}"
        );
    });
}

/// Nested ptys as the policy says, and python's multiprocessing, whose locks live in
/// POSIX shared memory (`/dev/shm`): bwrap gives a private one, Landlock alone a directory
/// of the session's (`fallback::shared_memory_is_the_sessions_own`), unless the policy
/// makes the host's writable (`--write /dev/shm`).
#[test]
fn nested_ptys_follow_the_policy_and_multiprocessing_works() {
    if !tools_present() {
        return;
    }
    let script = format!(
        r#"
        {PYTHON} -c 'import pty; pty.openpty(); print("PTY-OK")' 2>/dev/null || echo PTY-DENIED
        script -qc 'echo SCRIPT-OK' /dev/null 2>/dev/null | tr -d '\r' | grep -q SCRIPT-OK && echo SCRIPT-RAN
        {PYTHON} -c 'import multiprocessing as m; print("POOL", m.Pool(2).map(abs, [-1, -2]))' 2>/dev/null || echo POOL-DENIED
        "#
    );
    each(|backend, user| {
        let lab = Lab::new("pty", user, false);
        let what = lab.what(backend);
        let pool = "POOL [1, 2]";
        let (_, out, err) = lab.sh(backend, &[], &script);
        assert_lines(
            &out,
            &["PTY-OK", "SCRIPT-RAN", pool],
            &format!("{what}: {err}"),
        );
        let (_, out, err) = lab.sh(backend, &["--no-nested-pty"], &script);
        assert_lines(&out, &["PTY-DENIED", pool], &format!("{what}: {err}"));
        assert!(!out.contains("SCRIPT-RAN"), "{what}: {out}");
        let (_, out, err) = lab.sh(backend, &["--write", "/dev/shm"], &script);
        assert_lines(&out, &["POOL [1, 2]"], &format!("{what}: {err}"));
    });
}

/// What the inside reports for its attempts on other processes: ptrace (its own
/// supervisor, and a process outside), signals, another process's memory, another
/// process's pipe (opened for writing, which the guard does for the program under Landlock
/// alone); and its fds.
const PROCESS_PROBE: &str = r#"
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
victim = int(os.environ["LAB_VICTIM"])
def ancestors():
    pid, seen = os.getppid(), []
    while pid > 1:
        seen.append(pid)
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return seen
# Unconfined (the control) an attach would succeed and stop our own supervisor.
for pid in ([] if os.environ.get("LAB_CONTROL") else ancestors()) + [victim]:
    r = libc.ptrace(16, pid, None, None)
    print("PTRACE", "attached" if r == 0 else "denied")
for sig in (0, signal.SIGTERM):
    try:
        os.kill(victim, sig); print("KILL", sig, "delivered")
    except OSError:
        print("KILL", int(sig), "denied")
try:
    open(f"/proc/{victim}/environ", "rb").read(); print("ENVIRON read")
except OSError:
    print("ENVIRON denied")
# Its stdout, a pipe to a process outside: opening it again through its link.
try:
    with open(f"/proc/{victim}/fd/1", "wb") as f:
        f.write(b"INJECTED\n")
    print("PIPE written")
except OSError:
    print("PIPE denied")
"#;

#[test]
fn other_processes_cannot_be_traced_or_signalled() {
    if !tools_present() {
        return;
    }
    each(|backend, user| {
        let lab = Lab::new("procs", user, false);
        let what = lab.what(backend);
        let mut victim = Command::new("/bin/sleep");
        victim.arg("300.77").stdout(Stdio::piped());
        if user == User::Nobody {
            victim.uid(NOBODY).gid(NOBODY);
        }
        let mut victim = victim.spawn().unwrap();
        let mut cmd = lab.command(backend, &["--", PYTHON, "-c", PROCESS_PROBE]);
        cmd.env("LAB_VICTIM", victim.id().to_string());
        let out = cmd.shown();
        let text = String::from_utf8_lossy(&out.stdout);
        let _ = victim.kill();
        let piped = read_all(victim.stdout.take());
        let _ = victim.wait();
        assert!(text.contains("PTRACE"), "{what}: {text}");
        assert!(!text.contains("attached"), "{what}: {text}");
        assert!(!text.contains("delivered"), "{what}: {text}");
        assert_lines(&text, &["ENVIRON denied", "PIPE denied"], &what);
        assert_eq!(piped, "", "{what}: written into another process's pipe");
        // The program's own fds: 0, 1, 2 only (sh lists its own /proc/$$/fd).
        // (Listed straight to stdout: a pipeline would open fds of the shell's own.)
        let (_, out, _) = lab.sh(backend, &[], "ls -1 /proc/$$/fd");
        assert_eq!(out, "0\n1\n2\n", "{what}: no supervisor fd in the child");
    });
    // Control: unconfined, the victim can be signalled.
    let lab = Lab::new("procs-control", User::Root, false);
    let mut victim = Command::new("/bin/sleep")
        .arg("300.78")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cmd = lab.command("none", &["--", PYTHON, "-c", PROCESS_PROBE]);
    cmd.env("LAB_VICTIM", victim.id().to_string())
        .env("LAB_CONTROL", "1");
    let text = String::from_utf8_lossy(&cmd.shown().stdout).into_owned();
    let _ = victim.kill();
    let piped = read_all(victim.stdout.take());
    let _ = victim.wait();
    assert!(text.contains("KILL 0 delivered"), "control: {text}");
    assert_lines(&text, &["PIPE written"], "control");
    assert_eq!(piped, "INJECTED\n", "control");
}

/// What a pipe holds once its writer is gone.
fn read_all(pipe: Option<std::process::ChildStdout>) -> String {
    let mut text = String::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_string(&mut text);
    }
    text
}

/// Start a session whose program leaves background jobs of every kind behind, wait for
/// them, SIGKILL sbx-shell, and return the markers to look for.
fn start_leaving_orphans(lab: &Lab, backend: &str, tag: &str) -> (Child, Vec<String>) {
    let markers: Vec<String> = (0..4).map(|i| format!("sleep 9{i}0.{tag}")).collect();
    let script = format!(
        "{m0} & nohup {m1} >/dev/null 2>&1 & sh -c 'setsid {m2} &'; (sh -c '{m3} &' &); echo READY; wait",
        m0 = markers[0],
        m1 = markers[1],
        m2 = markers[2],
        m3 = markers[3],
    );
    let mut child = lab
        .command(backend, &["-c", &script])
        .stdout(Stdio::piped())
        // Not the test's stderr: a survivor holding it would keep `cargo test | tee` open.
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    for marker in &markers {
        wait_until(&format!("{marker} to start"), || {
            (!pids_with(marker).is_empty()).then_some(())
        });
    }
    (child, markers)
}

#[test]
fn nothing_survives_a_sigkill_of_sbx_shell() {
    if !tools_present() {
        return;
    }
    let mut n = 0;
    each(|backend, user| {
        n += 1;
        let lab = Lab::new("sigkill", user, false);
        let what = lab.what(backend);
        let (mut child, markers) = start_leaving_orphans(&lab, backend, &format!("{n}1"));
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        let _ = child.wait();
        wait_until(&format!("{what}: every orphan to die"), || {
            markers
                .iter()
                .all(|m| pids_with(m).is_empty())
                .then_some(())
        });
    });
    // Control: unconfined, a SIGKILL'd supervisor can clean up nothing. As nobody, who
    // gets no session cgroup: as root, the next sbx-shell that starts (another test's)
    // would rightly end the orphans in the stale cgroup of the killed one, racing the check.
    let lab = Lab::new("sigkill-control", User::Nobody, false);
    let (mut child, markers) = start_leaving_orphans(&lab, "none", "99");
    let supervisor = child.id() as i32;
    kill(Pid::from_raw(supervisor), Signal::SIGKILL).unwrap();
    let _ = child.wait();
    // The supervisor is gone and reaped: the orphans are alive, with new parents.
    let survivors: Vec<i32> = markers.iter().flat_map(|m| pids_with(m)).collect();
    assert!(
        markers.iter().all(|m| !pids_with(m).is_empty()),
        "control: orphans survive without a sandbox"
    );
    assert!(
        survivors
            .iter()
            .all(|pid| parent_of(*pid) != Some(supervisor)),
        "control: the orphans were re-parented"
    );
    wait_until("the control's orphans to be killed", || {
        let left: Vec<i32> = markers.iter().flat_map(|m| pids_with(m)).collect();
        for pid in &left {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        left.is_empty().then_some(())
    });
}

/// TIOCSTI from inside types into no terminal: not its own, not another one of the user's
/// (root, with dev.tty.legacy_tiocsti=1, where the kernel itself would allow both).
#[test]
fn tiocsti_from_inside_never_types_into_a_terminal() {
    if !tools_present() {
        return;
    }
    let sysctl = Path::new("/proc/sys/dev/tty/legacy_tiocsti");
    let previous = fs::read_to_string(sysctl).ok();
    if previous.is_some() {
        fs::write(sysctl, "1").unwrap();
    }
    let probe = r#"
import fcntl, termios, os
res = []
for name in ["/dev/tty", os.environ["LAB_OTHER_TTY"]]:
    try:
        fd = os.open(name, os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        res.append(f"open-failed:{e.errno}"); continue
    try:
        for ch in b"INJ" b"ECTED":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
        res.append("injected")
    except OSError as e:
        res.append(f"ioctl-failed:{e.errno}")
print("RESULT", *res)
"#;
    let lab = Lab::new("tiocsti", User::Root, false);
    for backend in ["bwrap", "landlock", "none"] {
        // Another terminal of the user's, which the test watches.
        let other = nix::pty::openpty(None, None).unwrap();
        nix::fcntl::fcntl(
            other.slave.as_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        let other_name = nix::unistd::ttyname(&other.slave).unwrap();
        // Non-canonical, so that injected bytes are readable without a newline.
        let mut termios = nix::sys::termios::tcgetattr(&other.slave).unwrap();
        nix::sys::termios::cfmakeraw(&mut termios);
        nix::sys::termios::tcsetattr(&other.slave, nix::sys::termios::SetArg::TCSANOW, &termios)
            .unwrap();
        let mut launch = Launch::new(&["--backend", backend, "--", PYTHON, "-c", probe]);
        launch.cwd = Some(lab.ws.clone());
        launch.env = vec![
            ("HOME".into(), lab.home.display().to_string()),
            ("LAB_OTHER_TTY".into(), other_name.display().to_string()),
        ];
        let mut outer = OuterPty::launch(launch);
        let result = outer.expect("RESULT");
        outer.wait();
        let mut typed = [0u8; 64];
        let typed = match nix::unistd::read(&other.slave, &mut typed) {
            Ok(n) => String::from_utf8_lossy(&typed[..n]).into_owned(),
            Err(_) => String::new(),
        };
        let out = outer.output_text();
        if backend == "none" {
            assert!(
                out.contains("injected") && typed.contains("INJECTED"),
                "control: TIOCSTI works unconfined: {out} / {typed:?}"
            );
        } else {
            assert!(result.contains("RESULT"), "{backend}: {out}");
            assert!(!out.contains("injected"), "{backend}: {out}");
            assert_eq!(typed, "", "{backend}: typed into another terminal");
        }
    }
    if let Some(previous) = previous {
        fs::write(sysctl, previous).unwrap();
    }
}

/// The policy's limits hold inside `backend` for `user`, and `explain` names the layers
/// that run.
fn limits_and_the_timeout_are_applied(backend: &str, user: User) {
    if !tools_present() {
        return;
    }
    let lab = Lab::new(&format!("limits-{backend}"), user, false);
    let what = lab.what(backend);
    // A sleep of this test's own: the other backends' and users' run meanwhile.
    let sleep = format!("sleep 30.{}{}", backend.len(), u8::from(user == User::Root));
    let (code, _, err) = lab.sh(backend, &["--timeout", "1"], &sleep);
    assert_eq!(code, 124, "{what}: {err}");
    assert!(err.contains("reached its timeout of 1s"), "{what}: {err}");
    assert!(pids_with(&sleep).is_empty(), "{what}");
    let (code, _, _) = lab.sh(backend, &["--cpu-seconds", "1"], "while :; do :; done");
    assert_eq!(code, 128 + libc::SIGXCPU, "{what}: killed by SIGXCPU");
    let grow = format!("{PYTHON} -c 'b = bytearray(300 << 20)' 2>&1 | tail -1");
    let (_, out, _) = lab.sh(backend, &["--memory-mib", "100"], &grow);
    assert_eq!(out.trim(), "MemoryError", "{what}");
    let (_, out, _) = lab.sh(backend, &[], &grow);
    assert_eq!(out.trim(), "", "{what}: control without the limit");
    let (_, out, _) = lab.sh(backend, &["--cpu-seconds", "7"], "ulimit -t; ulimit -c");
    assert_eq!(out, "7\n0\n", "{what}");
    if user == User::Nobody {
        // The kernel counts all of the user's processes (the launcher's included).
        let (_, out, err) = lab.sh(
            backend,
            &["--processes", "8"],
            "ulimit -p; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.5 & done; wait",
        );
        assert!(out.starts_with("8\n"), "{what}: {out} {err}");
        assert!(
            err.contains("fork"),
            "{what}: forks beyond the limit fail: {err}"
        );
    }
    let (_, out, _) = lab.sh(backend, &[], "true");
    assert_eq!(out, "", "{what}");
    let explained = Command::new(lab_root().join("sbx-shell"))
        .args(["explain", "--backend", backend])
        .current_dir(&lab.ws)
        .env("HOME", &lab.home)
        .shown();
    let text = String::from_utf8_lossy(&explained.stdout);
    let layers = if backend == "bwrap" {
        "runs with     bwrap (layers: bwrap, landlock, seccomp)"
    } else {
        "runs with     landlock (layers: landlock, seccomp)"
    };
    assert!(text.contains(layers), "{what}: {text}");
}

#[test]
fn limits_and_the_timeout_are_applied_under_bwrap_as_root() {
    limits_and_the_timeout_are_applied("bwrap", User::Root);
}

#[test]
fn limits_and_the_timeout_are_applied_under_bwrap_as_nobody() {
    limits_and_the_timeout_are_applied("bwrap", User::Nobody);
}

#[test]
fn limits_and_the_timeout_are_applied_under_landlock_as_root() {
    limits_and_the_timeout_are_applied("landlock", User::Root);
}

#[test]
fn limits_and_the_timeout_are_applied_under_landlock_as_nobody() {
    limits_and_the_timeout_are_applied("landlock", User::Nobody);
}

/// A processes limit cannot hold for root (the kernel exempts uid 0): refused, with a hint.
#[test]
fn a_processes_limit_is_refused_for_root() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("limits-root", User::Root, false);
    let (code, _, err) = lab.sh("bwrap", &["--processes", "2"], "true");
    assert_eq!(code, 1);
    assert!(
        err.contains("exempts uid 0") && err.contains("Hint: "),
        "{err}"
    );
}

/// The parent of `pid`, as /proc says.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// sbx-shell inside sbx-shell: the inner one cannot attach its guard (a process has one
/// seccomp listener in all), so it refuses — with the verdict `doctor` gives inside — and
/// the outer session, and the shell that ran it, go on. Control: inside `--backend none`
/// the inner one runs its program.
#[test]
fn a_nested_run_refuses_as_doctor_says_and_the_outer_session_goes_on() {
    if !tools_present() {
        return;
    }
    let script = "sbx-shell --pty never -- sh -c 'echo INNER-RAN'; echo inner=$?; \
                  d=$(sbx-shell doctor); echo doctor=$?; \
                  echo \"$d\" | grep -q 'already has a seccomp listener' && echo DOCTOR-SAYS-SO; \
                  echo OUTER-GOES-ON";
    let path = format!("{}:/usr/bin:/bin", lab_root().display());
    for user in USERS {
        let lab = Lab::new("nested", user, true);
        let run = |backend: &str| {
            let out = lab
                .command(backend, &["-c", script])
                .env("PATH", &path)
                .shown();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            (out.status.code(), stdout, stderr)
        };
        let (code, stdout, stderr) = run("none");
        assert!(
            code == Some(0) && stdout.contains("INNER-RAN") && stdout.contains("inner=0"),
            "control as {user:?}: {stdout}{stderr}"
        );
        for backend in BACKENDS {
            let what = lab.what(backend);
            let (code, stdout, stderr) = run(backend);
            assert_eq!(code, Some(0), "{what}: {stdout}{stderr}");
            assert!(!stdout.contains("INNER-RAN"), "{what}: {stdout}");
            for line in ["inner=1", "doctor=1", "DOCTOR-SAYS-SO", "OUTER-GOES-ON"] {
                assert!(stdout.contains(line), "{what}: {line} in {stdout}{stderr}");
            }
            assert!(
                stderr.contains("already has a seccomp listener")
                    && stderr.contains("already runs inside an sbx-shell session"),
                "{what}: {stderr}"
            );
        }
    }
}
