//! Shared helpers: the binary, an outer pty, a tmux server, scratch directories, and the
//! rule that a missing tool skips loudly — and fails when `SBX_REQUIRE_ALL=1` (CI).

#![allow(dead_code)]

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nix::pty::Winsize;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

/// How long any wait in the suite may take before the test fails (generous: the suite runs
/// on 2 busy cores; nothing here asserts speed).
pub const PATIENCE: Duration = Duration::from_secs(15);

/// The binary under test. The first call also gives the whole test process a private
/// environment (`private_environment`): no test touches the real user's files.
pub fn bin() -> &'static str {
    static PRIVATE: std::sync::Once = std::sync::Once::new();
    PRIVATE.call_once(private_environment);
    env!("CARGO_BIN_EXE_sbx-shell")
}

/// `HOME` and the XDG directories of this test process, and so of every sbx-shell it
/// starts, in a directory of its own (removed at exit): the real session log, config,
/// state and cache are never read or written by the suite.
fn private_environment() {
    use std::os::unix::fs::PermissionsExt;
    let dir = private_dir();
    for (var, sub) in [
        ("HOME", "home"),
        ("XDG_CONFIG_HOME", "home/.config"),
        ("XDG_STATE_HOME", "home/.local/state"),
        ("XDG_CACHE_HOME", "home/.cache"),
        ("XDG_DATA_HOME", "home/.local/share"),
        ("XDG_RUNTIME_DIR", "runtime"),
        ("TMUX_TMPDIR", "tmux"),
    ] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path).unwrap();
        std::env::set_var(var, &path);
    }
    std::fs::set_permissions(dir.join("runtime"), std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// This test process's own directory, `/var/tmp/sbx-env-PID` (removed at exit): its HOME,
/// XDG directories and scratch directories. Not under /tmp, which is private inside the
/// sandbox, nor in the checkout, which may itself be under /tmp.
pub fn private_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| fresh_var_tmp_dir("sbx-env")).clone()
}

/// What the suite made outside its scratch directories, undone when the test process exits
/// (also after failed tests: the harness exits normally).
pub enum Cleanup {
    Dir(PathBuf),
    User(String),
}

/// Undo `what` when the test process exits.
pub fn at_exit(what: Cleanup) {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        extern "C" fn run() {
            let list = std::mem::take(&mut *CLEANUPS.lock().unwrap_or_else(|p| p.into_inner()));
            for what in list.into_iter().rev() {
                match what {
                    Cleanup::Dir(dir) => {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                    Cleanup::User(user) => {
                        let _ = Command::new("userdel").arg(&user).output();
                    }
                }
            }
        }
        // SAFETY: `run` is a plain function that stays valid for the life of the process.
        unsafe { libc::atexit(run) };
    });
    CLEANUPS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(what);
}

static CLEANUPS: Mutex<Vec<Cleanup>> = Mutex::new(Vec::new());

/// `/var/tmp/PREFIX-PID`, fresh and 755, removed at exit; directories of earlier runs whose
/// process is gone (killed before it could clean up) are removed first.
fn fresh_var_tmp_dir(prefix: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir("/var/tmp")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        // PREFIX-PID, or PREFIX-RUN-PID: the process that made it is gone.
        let pid = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .map(|rest| rest.rsplit('-').next().unwrap_or(rest));
        if pid.is_some_and(|pid| pid.parse::<i32>().is_ok_and(|p| !alive(p))) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let dir = PathBuf::from(format!("/var/tmp/{prefix}-{}", run_tag()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    at_exit(Cleanup::Dir(dir.clone()));
    dir
}

/// What this test process names its places with: `RUN-PID`, where `RUN` is the run's own
/// word from `scripts/test.sh` (`SBX_TEST_RUN`), so that its leftover check looks at this
/// run's places only, beside any other work on the machine; `PID` alone without it.
pub fn run_tag() -> String {
    let pid = std::process::id();
    match std::env::var("SBX_TEST_RUN") {
        Ok(run) if !run.is_empty() && run.bytes().all(|b| b.is_ascii_alphanumeric()) => {
            format!("{run}-{pid}")
        }
        _ => pid.to_string(),
    }
}

/// `Command::output`, with what it did shown when the test fails: the command, its status,
/// stdout and stderr go to the test's captured output, which the harness prints only for a
/// failing test. Every assertion on a command's result then comes with its full output.
pub trait Shown {
    fn shown(&mut self) -> std::process::Output;
}

impl Shown for Command {
    fn shown(&mut self) -> std::process::Output {
        let out = self
            .output()
            .unwrap_or_else(|e| panic!("cannot run {self:?}: {e}"));
        println!(
            "--- ran {self:?}\n--- {}\n--- stdout:\n{}\n--- stderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// Run sbx-shell without a terminal (stdin from /dev/null), after `configure` adds what the
/// test needs; return its exit code, stdout and stderr.
pub fn run_captured(args: &[&str], configure: impl FnOnce(&mut Command)) -> (i32, String, String) {
    let mut cmd = Command::new(bin());
    cmd.args(args).stdin(Stdio::null());
    configure(&mut cmd);
    let out = cmd.shown();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A free port of this machine's loopback (free when asked: bound, then let go).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server on a port of this machine's loopback, for as long as the test runs: each
/// connection handed to `serve` on a thread of its own. Returns the port.
pub fn serve_loopback(serve: impl Fn(std::net::TcpStream) + Clone + Send + 'static) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream));
        }
    });
    port
}

/// An sshd on a free loopback port, its config (`config` of the port) written in `dir`;
/// the port and the process. A port found free may be taken by another test's server
/// before this one binds it (then sshd exits, and the other server would answer with its
/// own host key): another port is tried.
pub fn spawn_sshd(dir: &Path, config: impl Fn(u16) -> String) -> (u16, Child) {
    for _ in 0..20 {
        let port = free_port();
        let file = dir.join(format!("sshd_config-{port}"));
        std::fs::write(&file, config(port)).unwrap();
        let mut child = Command::new("/usr/sbin/sshd")
            .args(["-D", "-e", "-f"])
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let listening = wait_until("sshd to listen or exit", || {
            if child.try_wait().ok().flatten().is_some() {
                return Some(false);
            }
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| true)
        });
        // Listening, and still ours: sshd exits when it cannot bind.
        std::thread::sleep(Duration::from_millis(50));
        if listening && child.try_wait().ok().flatten().is_none() {
            return (port, child);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("no free port for sshd after 20 tries");
}

/// True when the test runs as root. Otherwise: fail under SBX_REQUIRE_ALL=1, else say loudly
/// that the calling test is skipped and why (`why`: what needs root), and return false.
pub fn require_root(why: &str) -> bool {
    nix::unistd::geteuid().is_root() || skipped(&format!("{why} needs root"))
}

/// True when `tool` is on PATH. Otherwise: fail under SBX_REQUIRE_ALL=1, else say loudly
/// that the calling test is skipped and why, and return false.
pub fn require(tool: &str, why: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
    found
        || skipped(&format!(
            "`{tool}` is not installed; it is needed to test {why} (scripts/test.sh installs it)"
        ))
}

/// A test that cannot run here: a failure under SBX_REQUIRE_ALL=1 (as in CI), else a loud
/// skip. Returns false.
pub fn skipped(message: &str) -> bool {
    if std::env::var_os("SBX_REQUIRE_ALL").is_some_and(|v| v == "1") {
        panic!("{message} (SBX_REQUIRE_ALL=1: a skip is a failure)");
    }
    eprintln!("SKIPPED: {message}");
    false
}

/// `/var/tmp/PREFIX-PID` for this test run (`fresh_var_tmp_dir`), holding a copy of the
/// binary (`sbx-shell`, mode 755) that other users can run. Outside the checkout (whose
/// permissions may shut other users out) and outside /tmp (private inside the sandbox).
pub fn run_dir(prefix: &str) -> PathBuf {
    let dir = fresh_var_tmp_dir(prefix);
    copy_binary(&dir.join("sbx-shell"));
    dir
}

/// A copy of the binary at `to`, mode 755, written by another process (`install`): a copy
/// written here would leave its write descriptor, for an instant, in every child another
/// test thread forks meanwhile, and running the copy then fails with ETXTBSY.
pub fn copy_binary(to: &Path) {
    let out = Command::new("install")
        .args(["-m", "0755"])
        .arg(bin())
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "install: {out:?}");
}

/// A fresh scratch directory in the test process's private directory, removed on drop.
/// Outside the workspace: a sandboxed child writes to it only when given `--write DIR`.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::SeqCst);
        let dir = private_dir().join(format!("scratch-{name}-{n}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Wait until `name` exists and holds a full line; return its content.
    pub fn wait_for_file(&self, name: &str) -> String {
        let path = self.path(name);
        wait_until(&format!("{} to be written", path.display()), || {
            std::fs::read_to_string(&path)
                .ok()
                .filter(|s| s.ends_with('\n'))
        })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Poll `check` until it returns Some, or fail after PATIENCE naming `what`.
pub fn wait_until<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Is `pid` alive (and not a zombie)?
/// Live processes (pids as this test sees them) whose command line contains `marker`. A
/// sandboxed process's own `$$` is a pid in its namespace; the marker finds it from here.
pub fn pids_with(marker: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me && alive(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
        .collect()
}

/// Wait until a process whose command line holds `marker` runs in the foreground of its
/// terminal: it is not stopped, and its process group is the terminal's foreground group.
/// The state a test needs before it types ^C or ^Z at it, in place of a sleep. (Launchers
/// whose arguments hold the marker too are not on that terminal, and do not count.)
pub fn wait_running(marker: &str) {
    wait_until(&format!("{marker:?} running in the foreground"), || {
        pids_with(marker)
            .iter()
            .any(|p| in_foreground(*p))
            .then_some(())
    });
}

/// Is `pid` running (not stopped) in its terminal's foreground process group?
fn in_foreground(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    // After the command: state ppid pgrp session tty_nr tpgid …
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields.len() > 5 && !matches!(fields[0], "T" | "t") && fields[2] == fields[5]
}

/// Live children of `pid`.
pub fn children_of(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| alive(*p))
        .collect()
}

pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next();
            !matches!(state, Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

/// Held while a pty is opened (its fds are not close-on-exec until we mark them) and while
/// the harness spawns, so that no test's child inherits another test's terminal — which
/// would keep that terminal from ever hanging up.
static SPAWN_LOCK: Mutex<()> = Mutex::new(());

/// Tests that keep both cores busy on purpose (a flipper in a tight loop) hold this
/// exclusively; tests that wait on a program's screen with a deadline hold it shared, so
/// they never run beside the former.
static LOAD: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// For a test that loads the machine: nothing timing-sensitive runs meanwhile.
pub fn loading_the_machine() -> std::sync::RwLockWriteGuard<'static, ()> {
    LOAD.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// For a test with deadlines: not beside one that loads the machine.
pub fn needing_the_machine() -> std::sync::RwLockReadGuard<'static, ()> {
    LOAD.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn open_private_pty(size: &Winsize) -> nix::pty::OpenptyResult {
    let _no_other_spawn = SPAWN_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let pty = nix::pty::openpty(Some(size), None).unwrap();
    for fd in [&pty.master, &pty.slave] {
        nix::fcntl::fcntl(
            fd.as_fd(),
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .unwrap();
    }
    pty
}

/// How a test starts sbx-shell on an outer pty.
pub struct Launch {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub size: Winsize,
    pub cwd: Option<PathBuf>,
    /// Signals sbx-shell starts with ignored, and with blocked.
    pub ignored: Vec<Signal>,
    pub blocked: Vec<Signal>,
    /// Soft RLIMIT_NOFILE at start.
    pub nofile_soft: Option<u64>,
    /// Leave an extra fd (not close-on-exec) open in sbx-shell, as a sloppy parent would.
    pub leak_fd: bool,
}

impl Launch {
    pub fn new<S: AsRef<str>>(args: &[S]) -> Launch {
        Launch {
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            env: vec![],
            size: Winsize {
                ws_row: 24,
                ws_col: 80,
                ws_xpixel: 0,
                ws_ypixel: 0,
            },
            cwd: None,
            ignored: vec![],
            blocked: vec![],
            nofile_soft: None,
            leak_fd: false,
        }
    }
}

/// sbx-shell running on a pty that this test opened, as a terminal emulator would.
pub struct OuterPty {
    master: File,
    /// The test's copy of the slave; closed once sbx-shell has exited, so that the reader
    /// sees EIO after the last byte.
    slave: Option<OwnedFd>,
    pub child: Child,
    output: Arc<(Mutex<Output>, Condvar)>,
    initial_stty: String,
    final_stty: Option<String>,
}

#[derive(Default)]
struct Output {
    bytes: Vec<u8>,
    /// The reader saw EIO: every byte the terminal will ever get is in `bytes`.
    closed: bool,
}

impl OuterPty {
    /// Start `sbx-shell ARGS` as the session leader of a new outer pty.
    pub fn spawn<S: AsRef<str>>(args: &[S]) -> OuterPty {
        OuterPty::launch(Launch::new(args))
    }

    /// Start a program other than sbx-shell on the outer pty (for baselines and harnesses).
    pub fn launch_program(program: &str, launch: Launch) -> OuterPty {
        let pty = open_private_pty(&launch.size);
        let initial_stty = stty_g(pty.slave.as_fd());
        let mut cmd = Command::new(program);
        cmd.args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
            .stdout(Stdio::from(pty.slave.try_clone().unwrap()))
            .stderr(Stdio::from(pty.slave.try_clone().unwrap()));
        if let Some(cwd) = &launch.cwd {
            cmd.current_dir(cwd);
        }
        let leaked = if launch.leak_fd {
            Some(File::open("/dev/null").unwrap())
        } else {
            None
        };
        let leaked_fd = leaked.as_ref().map(|f| f.as_raw_fd());
        let (ignored, blocked, nofile) = (
            launch.ignored.clone(),
            launch.blocked.clone(),
            launch.nofile_soft,
        );
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe
        // functions (setsid, ioctl, sigaction, sigprocmask, setrlimit, fcntl).
        unsafe {
            cmd.pre_exec(move || {
                nix::unistd::setsid()?;
                if libc::ioctl(0, libc::TIOCSCTTY as _, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                for sig in &ignored {
                    libc::signal(*sig as i32, libc::SIG_IGN);
                }
                let mut set = nix::sys::signal::SigSet::empty();
                for sig in &blocked {
                    set.add(*sig);
                }
                nix::sys::signal::sigprocmask(
                    nix::sys::signal::SigmaskHow::SIG_BLOCK,
                    Some(&set),
                    None,
                )?;
                if let Some(soft) = nofile {
                    let (_, hard) =
                        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
                    nix::sys::resource::setrlimit(
                        nix::sys::resource::Resource::RLIMIT_NOFILE,
                        soft,
                        hard,
                    )?;
                }
                if let Some(fd) = leaked_fd {
                    libc::fcntl(fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let child = {
            let _no_other_spawn = SPAWN_LOCK.lock().unwrap_or_else(|e| e.into_inner());
            cmd.spawn().unwrap()
        };
        drop(leaked);
        let master = File::from(pty.master);
        let output = Arc::new((Mutex::new(Output::default()), Condvar::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = Arc::clone(&output);
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            let (lock, cond) = &*sink;
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                let Ok(mut out) = lock.lock() else { return };
                out.bytes.extend_from_slice(&buf[..n]);
                cond.notify_all();
            }
            if let Ok(mut out) = lock.lock() {
                out.closed = true;
            }
            cond.notify_all();
        });
        OuterPty {
            master,
            slave: Some(pty.slave),
            child,
            output,
            initial_stty,
            final_stty: None,
        }
    }

    pub fn launch(launch: Launch) -> OuterPty {
        OuterPty::launch_program(bin(), launch)
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32)
    }

    /// The outer terminal's slave side, as the test holds it.
    pub fn slave_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.slave
            .as_ref()
            .expect("the slave is closed once sbx-shell exited")
            .as_fd()
    }

    pub fn write(&self, bytes: &[u8]) {
        (&self.master).write_all(bytes).unwrap();
    }

    /// Everything the outer terminal has received so far.
    pub fn output(&self) -> Vec<u8> {
        self.output.0.lock().unwrap().bytes.clone()
    }

    pub fn output_text(&self) -> String {
        String::from_utf8_lossy(&self.output()).into_owned()
    }

    /// Wait until the output contains `needle`; return the output up to its end.
    pub fn expect(&self, needle: &str) -> String {
        self.expect_bytes(needle.as_bytes());
        self.output_text()
    }

    pub fn expect_bytes(&self, needle: &[u8]) -> Vec<u8> {
        self.expect_bytes_from(0, needle)
    }

    /// How much output has arrived: a mark for `expect_from`.
    pub fn mark(&self) -> usize {
        self.output.0.lock().unwrap().bytes.len()
    }

    /// Wait until `needle` arrives after the `mark`; return the output up to its end.
    pub fn expect_from(&self, mark: usize, needle: &str) -> String {
        String::from_utf8_lossy(&self.expect_bytes_from(mark, needle.as_bytes())).into_owned()
    }

    fn expect_bytes_from(&self, mark: usize, needle: &[u8]) -> Vec<u8> {
        let (lock, cond) = &*self.output;
        let start = Instant::now();
        let mut searched = mark;
        let mut out = lock.lock().unwrap();
        loop {
            // Only the new part is searched: a flood of output must not starve the reader.
            let bytes = &out.bytes;
            let from = searched
                .saturating_sub(needle.len())
                .max(mark)
                .min(bytes.len());
            if let Some(at) = find(&bytes[from..], needle) {
                return bytes[..from + at + needle.len()].to_vec();
            }
            searched = bytes.len();
            let left = PATIENCE.checked_sub(start.elapsed()).unwrap_or_else(|| {
                panic!(
                    "timed out waiting for {:?}; the outer terminal's last output:\n{}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(2000)..])
                )
            });
            out = cond
                .wait_timeout(out, left.min(Duration::from_millis(200)))
                .unwrap()
                .0;
        }
    }

    /// Wait for sbx-shell to exit, then for every byte it wrote to arrive.
    pub fn wait(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // A hung-up terminal has no termios left to read.
                self.final_stty = try_stty_g(self.slave_fd()).or(Some(String::from("(hung up)")));
                self.slave = None;
                let (lock, cond) = &*self.output;
                let out = lock.lock().unwrap();
                let (out, _) = cond
                    .wait_timeout_while(out, PATIENCE, |o| !o.closed)
                    .unwrap();
                assert!(
                    out.closed,
                    "the outer terminal was never hung up after sbx-shell exited"
                );
                return status;
            }
            if start.elapsed() > PATIENCE {
                let out = self.output();
                panic!(
                    "sbx-shell did not exit; the outer terminal's last output:\n{}",
                    String::from_utf8_lossy(&out[out.len().saturating_sub(2000)..])
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `stty -g` of the outer terminal: its whole termios, as the user's shell would see it.
    pub fn stty_g(&self) -> String {
        match &self.final_stty {
            Some(last) => last.clone(),
            None => stty_g(self.slave_fd()),
        }
    }

    /// `stty -g` of the outer terminal before the program started.
    pub fn initial_stty(&self) -> String {
        self.initial_stty.clone()
    }

    /// Is the outer terminal in raw mode (no canonical input, no echo, no signals)?
    pub fn is_raw(&self) -> bool {
        use nix::sys::termios::LocalFlags;
        let t = nix::sys::termios::tcgetattr(self.slave_fd()).unwrap();
        !t.local_flags
            .intersects(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG)
    }

    pub fn wait_raw(&self) {
        wait_until("the outer terminal to become raw", || {
            self.is_raw().then_some(())
        });
    }

    /// Resize the outer terminal (the kernel sends SIGWINCH to its foreground group).
    pub fn resize(&self, rows: u16, cols: u16) {
        let size = Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize from the valid `size`.
        let rc = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "TIOCSWINSZ on the outer master");
    }

    /// Hang the outer terminal up, as a closing terminal emulator or a dropped line does.
    pub fn hang_up(&self) {
        // SAFETY: TIOCVHANGUP takes no argument.
        let rc = unsafe { libc::ioctl(self.slave_fd().as_raw_fd(), libc::TIOCVHANGUP, 0) };
        assert_eq!(rc, 0, "TIOCVHANGUP: {}", std::io::Error::last_os_error());
    }

    pub fn signal(&self, signal: Signal) {
        nix::sys::signal::kill(self.pid(), signal).unwrap();
    }
}

impl Drop for OuterPty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stty_g(tty: std::os::fd::BorrowedFd<'_>) -> String {
    try_stty_g(tty).expect("stty -g failed on the outer terminal")
}

fn try_stty_g(tty: std::os::fd::BorrowedFd<'_>) -> Option<String> {
    let out = Command::new("stty")
        .arg("-g")
        .stdin(Stdio::from(tty.try_clone_to_owned().unwrap()))
        .shown();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim().to_string())
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A private tmux server (its own socket), killed on drop.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A handle on a server of its own (a socket name no other test uses).
    fn private() -> Tmux {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::SeqCst);
        Tmux {
            socket: format!("sbx-test-{}-{n}", run_tag()),
        }
    }

    /// A detached session of `cols`×`rows` running `command` (a shell command line).
    pub fn start(command: &str, cols: u16, rows: u16) -> Tmux {
        let tmux = Tmux::private();
        // remain-on-exit must be on before the command can exit, so that its status stays
        // readable: start on a placeholder, set the option, then respawn with the command.
        let (cols, rows) = (cols.to_string(), rows.to_string());
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-x",
            &cols,
            "-y",
            &rows,
            "sleep 60",
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "respawn-pane",
            "-k",
            "-t",
            "0",
            command,
        ]);
        tmux
    }

    /// A detached session of `cols`×`rows` started with the configuration file `config` and
    /// no command: its pane runs tmux's `default-command`.
    pub fn start_configured(config: &Path, cols: u16, rows: u16) -> Tmux {
        let tmux = Tmux::private();
        let (cols, rows) = (cols.to_string(), rows.to_string());
        let config = config.to_str().unwrap();
        tmux.run(&["-f", config, "new-session", "-d", "-x", &cols, "-y", &rows]);
        tmux
    }

    pub fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .shown();
        assert!(
            out.status.success(),
            "tmux {:?}: {}",
            args.iter()
                .map(|a| a.as_ref().to_owned())
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn send_keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    /// Type text literally and press Enter.
    pub fn type_line(&self, text: &str) {
        self.run(&["send-keys", "-t", "0", "-l", text]);
        self.send_keys(&["Enter"]);
    }

    pub fn capture(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "0", "-S", "-200"])
    }

    /// Wait until the pane shows `needle`; return the pane.
    pub fn expect(&self, needle: &str) -> String {
        self.expect_within(needle, PATIENCE)
    }

    /// `expect`, waiting up to `patience` (programs that take seconds to start).
    pub fn expect_within(&self, needle: &str, patience: Duration) -> String {
        let start = Instant::now();
        loop {
            let pane = self.capture();
            if pane.contains(needle) {
                return pane;
            }
            assert!(
                start.elapsed() < patience,
                "timed out waiting for {needle:?}; the pane shows:\n{pane}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn display(&self, format: &str) -> String {
        self.run(&["display-message", "-p", "-t", "0", format])
            .trim()
            .to_string()
    }

    /// The pid of the pane's process (sbx-shell when it is the pane command).
    pub fn pane_pid(&self) -> i32 {
        self.display("#{pane_pid}").parse().unwrap()
    }

    /// Wait until the pane's command exited; return its exit status (128+N for signal N).
    /// tmux marks a pane dead when its pty closes, a moment before it reaps the process and
    /// records the status: wait for the status itself. Debian's tmux uses libutempter, whose
    /// own SIGCHLD handler can swallow the server's SIGCHLD when a pane exits very early
    /// (tmux issue 311); as its maintainer suggests, send the server a SIGCHLD then.
    pub fn wait_dead(&self) -> i32 {
        let start = Instant::now();
        let server: i32 = self.display("#{pid}").parse().unwrap();
        loop {
            let state =
                self.display("#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}|#{pane_pid}");
            let fields: Vec<&str> = state.split('|').collect();
            if let Ok(status) = fields[1].parse() {
                return status;
            }
            if let Ok(signal) = fields[2].parse::<i32>() {
                return 128 + signal;
            }
            if fields[0] == "1" && start.elapsed() > Duration::from_millis(200) {
                let _ = nix::sys::signal::kill(Pid::from_raw(server), Signal::SIGCHLD);
            }
            if start.elapsed() > PATIENCE {
                let ps = Command::new("ps")
                    .args(["-o", "pid,ppid,stat,wchan:20,cmd", "-p", fields[3]])
                    .shown();
                panic!(
                    "the pane never reported an exit status (dead|status|signal|pid = {state}); its process:\n{}\npane:\n{}",
                    String::from_utf8_lossy(&ps.stdout),
                    self.capture()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn resize(&self, cols: u16, rows: u16) {
        self.run(&[
            "resize-window",
            "-t",
            "0",
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

/// Shell-quote one word for sh.
/// The helper's spec handed to `cmd` as sbx-shell hands it: on an inherited fd (the one
/// returned, for the helper's argv), never in the argv.
pub fn spec_on_fd(cmd: &mut Command, spec: &str) -> String {
    const FD: i32 = 9;
    let (read, write) = nix::unistd::pipe().unwrap();
    // A spec of a test is far below a pipe's 64 KiB: written whole before the spawn.
    File::from(write).write_all(spec.as_bytes()).unwrap();
    // Leaked: open in the parent until the spawn, which may come later.
    let read = std::os::fd::IntoRawFd::into_raw_fd(read);
    // SAFETY: between fork and exec only dup2(2), async-signal-safe, on an fd that stays
    // open in the parent; dup2 leaves FD inheritable.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(read, FD) == FD {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    FD.to_string()
}

pub fn sh_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The path of sbx-shell, quoted for a tmux or sh command line.
pub fn bin_quoted() -> String {
    sh_quote(bin())
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
