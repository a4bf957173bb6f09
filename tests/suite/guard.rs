//! The guard where programs run: signals arriving all the time (a mediated call returns what
//! the bare call returns), special files where the guard looks (nothing the program makes
//! stalls it), and an open that waits for a FIFO's other end (^C and ^Z reach it as they
//! do bare). Both Linux backends, as root and as nobody, each beside a bare control.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::sandbox::{each, tools_present, Lab, User, NOBODY};
use super::support::{bin_quoted, require, run_dir, sh_quote, Shown, Tmux, PATIENCE};

/// Where the test programs are built: readable and runnable by nobody.
fn build_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| run_dir("sbx-guard"))
}

/// `tests/fixtures/guard/NAME.c`, compiled once (`cc -O2`).
fn c_program(name: &str) -> PathBuf {
    let out = build_dir().join(name);
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if !out.exists() {
        let source = format!(
            "{}/tests/fixtures/guard/{name}.c",
            env!("CARGO_MANIFEST_DIR")
        );
        let built = Command::new("cc")
            .args(["-O2", "-Wall", "-o"])
            .arg(&out)
            .arg(&source)
            .shown();
        assert!(built.status.success(), "cc {source}");
    }
    out
}

/// A copy of `program` in the lab's workspace (what every backend lets the program run),
/// owned by the lab's user.
fn install(lab: &Lab, program: &Path) -> String {
    let to = lab.ws.join(program.file_name().unwrap());
    fs::copy(program, &to).unwrap();
    fs::set_permissions(&to, fs::Permissions::from_mode(0o755)).unwrap();
    if lab.user == User::Nobody {
        std::os::unix::fs::chown(&to, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    to.to_str().unwrap().to_string()
}

/// One line of `sigcalls`: the call, and its counts.
#[derive(Debug, PartialEq)]
struct Counts {
    call: String,
    signals: u64,
    eintr: u64,
    failed: u64,
    traces: u64,
}

fn counts(out: &str) -> Vec<Counts> {
    out.lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            let call = words.next().unwrap_or_default().to_string();
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{name}=")))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("no {name} in {line:?}"))
            };
            Counts {
                call,
                signals: field("signals"),
                eintr: field("eintr"),
                failed: field("failed"),
                traces: field("traces"),
            }
        })
        .collect()
}

const CALLS: [&str; 5] = ["create", "mkdir", "rename", "link", "symlink"];

/// Creates, `mkdir`, `rename`, `link` and `symlink` under a 1 kHz and a 50 kHz timer, with and
/// without `SA_RESTART`: none fails where the bare call does not (the guard's act is never
/// followed by a restart of the same call, which would find its own result), a handler with
/// `SA_RESTART` never sees `EINTR`, and a call that returns `EINTR` (a signal before the
/// guard received it) did nothing.
#[test]
fn calls_under_signals_return_what_bare_calls_return() {
    if !tools_present() || !require("cc", "programs that count signals") {
        return;
    }
    let sigcalls = c_program("sigcalls");
    for (period, how) in [
        ("1000", "restart"),
        ("1000", "norestart"),
        ("20", "restart"),
        ("20", "norestart"),
    ] {
        // The control: bare, nothing fails and nothing is interrupted.
        let lab = Lab::new("sigcalls", User::Root, false);
        let program = install(&lab, &sigcalls);
        let (code, out, err) = lab.sh("none", &[], &format!("{program} 2000 {period} {how}"));
        assert_eq!(code, 0, "control: {err}");
        for c in counts(&out) {
            assert!(
                c.signals > 0,
                "control {period} {how}: no signal arrived: {c:?}"
            );
            assert_eq!(
                (c.eintr, c.failed, c.traces),
                (0, 0, 0),
                "control {period} {how}: {c:?}"
            );
        }
        each(|backend, user| {
            let lab = Lab::new("sigcalls", user, false);
            let program = install(&lab, &sigcalls);
            let what = format!("{} at {period} us, {how}", lab.what(backend));
            let (code, out, err) = lab.sh(backend, &[], &format!("{program} 2000 {period} {how}"));
            assert_eq!(code, 0, "{what}: {err}");
            let got = counts(&out);
            assert_eq!(
                got.iter().map(|c| c.call.as_str()).collect::<Vec<_>>(),
                CALLS,
                "{what}: {out}"
            );
            for c in got {
                assert!(c.signals > 0, "{what}: no signal arrived: {c:?}");
                assert_eq!(
                    c.failed, 0,
                    "{what}: a call failed where bare it does not: {c:?}\n{err}"
                );
                assert_eq!(
                    c.traces, 0,
                    "{what}: a call returned EINTR having acted: {c:?}"
                );
                if how == "restart" {
                    assert_eq!(c.eintr, 0, "{what}: EINTR under SA_RESTART: {c:?}");
                }
            }
        });
    }
}

/// A Go program that runs child processes while other goroutines create files, make
/// directories and rename (SIGCHLD and the runtime's own signals land on whichever thread
/// waits), as build tools do: nothing fails, as bare.
#[test]
fn a_go_program_running_children_while_it_makes_files_sees_no_failure() {
    if !tools_present() || !require("go", "a Go program (scripts/test.sh installs golang-go)") {
        return;
    }
    let gowork = build_dir().join("gowork");
    {
        static BUILT: OnceLock<()> = OnceLock::new();
        BUILT.get_or_init(|| {
            let cache = build_dir().join("gocache");
            let built = Command::new("go")
                .args(["build", "-o"])
                .arg(&gowork)
                .arg(format!(
                    "{}/tests/fixtures/guard/gowork/main.go",
                    env!("CARGO_MANIFEST_DIR")
                ))
                .env("GOCACHE", &cache)
                .env("GOPATH", build_dir().join("gopath"))
                .env("GOFLAGS", "-mod=mod")
                .env("CGO_ENABLED", "0")
                .shown();
            assert!(built.status.success(), "go build");
            let _ = fs::remove_dir_all(&cache);
        });
    }
    let run = |lab: &Lab, backend: &str| {
        let program = install(lab, &gowork);
        lab.sh(backend, &[], &format!("{program} 12000"))
    };
    let control = Lab::new("gowork", User::Root, false);
    let (code, out, err) = run(&control, "none");
    assert_eq!(code, 0, "control: {out}{err}");
    each(|backend, user| {
        let lab = Lab::new("gowork", user, false);
        let what = lab.what(backend);
        let (code, out, err) = run(&lab, backend);
        for call in ["create", "mkdir", "rename"] {
            assert!(
                out.lines().any(|l| l == format!("{call} 12000 failed=0")),
                "{what}: {out}{err}"
            );
        }
        assert!(!out.contains("children=0"), "{what}: no child ran: {out}");
        assert_eq!(code, 0, "{what}: {out}{err}");
    });
}

/// A shell whose background jobs end (SIGCHLD) while it makes files with `set -C` (its
/// redirections create with O_EXCL): nothing is refused that bare is not.
#[test]
fn a_shell_taking_sigchld_while_it_makes_files_sees_no_failure() {
    if !tools_present() {
        return;
    }
    let script = "set -C; n=0; for i in $(seq 1500); do (true | true) & \
                  echo x > f$i || n=$((n+1)); done; wait; echo failed=$n; ls | wc -l";
    let control = Lab::new("sigchld", User::Root, false);
    let (code, bare, err) = control.sh("none", &[], script);
    assert_eq!(code, 0, "control: {err}");
    assert!(bare.contains("failed=0"), "control: {bare}");
    each(|backend, user| {
        let lab = Lab::new("sigchld", user, false);
        let (code, out, err) = lab.sh(backend, &[], script);
        let what = lab.what(backend);
        assert_eq!(code, 0, "{what}: {err}");
        assert_eq!(out, bare, "{what}: {err}");
    });
}

/// Run `script` sandboxed; fail if it has not ended within PATIENCE (the guard stalled).
fn within_patience(lab: &Lab, backend: &str, script: &str) -> (i32, String, String) {
    let mut child = lab
        .command(backend, &["-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            return (
                status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
        }
        if start.elapsed() > PATIENCE {
            let stacks = stacks_below(child.id() as i32);
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{}: still running after {PATIENCE:?} — the guard stalled:\n{}\n{}\n{stacks}",
                lab.what(backend),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where each thread of `pid` and its descendants waits (`/proc/TID/wchan` and the kernel
/// stack), for a test's failure message.
fn stacks_below(pid: i32) -> String {
    let mut out = String::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        todo.extend(super::support::children_of(p));
        let cmd = fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
        out += &format!("{p} {}\n", String::from_utf8_lossy(&cmd).replace('\0', " "));
        for task in fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let at = |f: &str| fs::read_to_string(task.path().join(f)).unwrap_or_default();
            out += &format!(
                "  {} {} {}\n",
                at("comm").trim(),
                at("wchan"),
                at("stack").replace('\n', " | ")
            );
        }
    }
    out
}

/// A FIFO, a socket and a device node, wherever the guard looks to tell a git directory —
/// a config, `HEAD`, `commondir` in a directory that holds `objects` and `refs`, a `.git`
/// file (which sbx-shell reads at the start and the end of the session too) — and renamed
/// over a repository's config: the names that would complete a repository are judged
/// without opening them, the session goes on, and a name made afterwards is made. (The
/// sockets and device nodes are made before the session, as the program has no right to
/// make a device.)
#[test]
fn special_files_where_the_guard_looks_never_stall_it() {
    if !tools_present() {
        return;
    }
    for kind in ["fifo", "socket", "device"] {
        each(|backend, user| {
            let lab = Lab::new("special", user, true);
            for place in ["c", "h", "d", "p"] {
                fs::create_dir_all(lab.ws.join(place).join("objects")).unwrap();
                fs::create_dir_all(lab.ws.join(place).join("refs")).unwrap();
            }
            fs::create_dir_all(lab.ws.join("sub")).unwrap();
            for at in ["c/config", "h/HEAD", "d/commondir", "sub/.git", "x"] {
                make_special(kind, &lab.ws.join(at));
            }
            if user == User::Nobody {
                let out = Command::new("chown")
                    .args(["-R", "-h", "65534:65534"])
                    .arg(&lab.ws)
                    .shown();
                assert!(out.status.success());
            }
            let script = "echo 'ref: refs/heads/main' > c/HEAD 2>/dev/null; echo c-done; \
                 mkdir h/hooks 2>/dev/null; echo '[core]' > h/config 2>/dev/null; echo h-done; \
                 echo 'ref: refs/heads/main' > d/HEAD 2>/dev/null; echo d-done; \
                 echo ../c > p/commondir 2>/dev/null; echo 'ref: x' > p/HEAD 2>/dev/null; echo p-done; \
                 mv x .git/config 2>/dev/null; echo config-done; \
                 echo x > sub/.gitmodules 2>/dev/null; echo sub-done; \
                 mkdir after && echo made > after/f && echo AFTER";
            let (code, out, err) = within_patience(&lab, backend, script);
            let what = format!("{kind} {}", lab.what(backend));
            assert_eq!(code, 0, "{what}: {err}");
            for step in [
                "c-done",
                "h-done",
                "d-done",
                "p-done",
                "config-done",
                "sub-done",
                "AFTER",
            ] {
                assert!(
                    out.lines().any(|l| l == step),
                    "{what}: no {step}: {out}{err}"
                );
            }
            assert_eq!(
                fs::read_to_string(lab.ws.join(".git/config")).unwrap(),
                "[core]\n",
                "{what}: the config was replaced"
            );
        });
    }
}

/// A FIFO, a listening unix socket or a device node (/dev/null's numbers) at `path`.
fn make_special(kind: &str, path: &Path) {
    let path_str = path.to_str().unwrap();
    let out = match kind {
        "fifo" => Command::new("mkfifo").arg(path).shown(),
        "socket" => Command::new("python3")
            .args([
                "-c",
                "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])",
                path_str,
            ])
            .shown(),
        _ => Command::new("mknod")
            .args([path_str, "c", "1", "3"])
            .shown(),
    };
    assert!(out.status.success(), "{kind} at {path_str}");
}

/// An open that waits for a FIFO's reader, in an interactive bash inside sbx-shell: ^C
/// interrupts it, ^Z stops the command that waits and `fg` resumes it, and it completes
/// once a reader comes — as bare.
#[test]
fn a_waiting_fifo_open_takes_ctrl_c_and_ctrl_z_as_bare() {
    if !tools_present() || !require("tmux", "a shell in a tmux pane") {
        return;
    }
    for backend in ["none", "bwrap", "landlock"] {
        let lab = Lab::new("fifo", User::Root, false);
        let fifo = lab.ws.join("p");
        make_special("fifo", &fifo);
        let command = format!(
            "cd {} && {} --backend {backend} -- bash --norc --noprofile -i",
            sh_quote(lab.ws.to_str().unwrap()),
            bin_quoted()
        );
        let tmux = Tmux::start(&command, 100, 30);
        tmux.type_line("PS1='P''> '; echo READY-$((1+1))");
        tmux.expect("READY-2");
        tmux.type_line("echo hi > p; echo NOT-INTERRUPTED-$((1+1))");
        std::thread::sleep(Duration::from_millis(300));
        tmux.send_keys(&["C-c"]);
        tmux.expect("^C\nP>");
        tmux.type_line("sh -c 'echo hi > p; echo WROTE-$((1+1))'");
        std::thread::sleep(Duration::from_millis(300));
        tmux.send_keys(&["C-z"]);
        tmux.expect("Stopped");
        tmux.type_line("fg");
        std::thread::sleep(Duration::from_millis(300));
        // The reader, from outside: it waits for the writer inside.
        let (tx, rx) = std::sync::mpsc::channel();
        let reading = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(fs::read_to_string(&reading));
        });
        let read = rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|_| panic!("{backend}: nothing wrote to the FIFO after fg"));
        assert_eq!(read.unwrap(), "hi\n", "{backend}");
        let pane = tmux.expect("WROTE-2");
        assert!(!pane.contains("NOT-INTERRUPTED-2"), "{backend}: {pane}");
    }
}

/// A program whose file may be run but not read (mode 711), run by an ordinary user: the
/// guard may not read its memory, so cannot tell what its calls name. Every name it makes
/// is refused, and the session says why and what fixes it — never a session in which
/// every name fails without a word. Bare, the same program makes its directory.
#[test]
fn a_program_the_guard_cannot_read_is_named_with_the_fix() {
    if !tools_present() {
        return;
    }
    // In the workspace (which every backend lets the program run from), root's, mode 711.
    let unreadable = |lab: &Lab| {
        let program = lab.ws.join("mkdir-711");
        fs::copy("/bin/mkdir", &program).unwrap();
        std::os::unix::fs::chown(&program, Some(0), Some(0)).unwrap();
        fs::set_permissions(&program, fs::Permissions::from_mode(0o711)).unwrap();
        program.to_str().unwrap().to_string()
    };
    let control = Lab::new("unreadable", User::Nobody, false);
    let program = unreadable(&control);
    let (code, _, err) = control.sh("none", &[], &format!("{program} made && echo MADE"));
    assert_eq!(code, 0, "control: {err}");
    assert!(control.ws.join("made").is_dir());
    for backend in ["bwrap", "landlock"] {
        let lab = Lab::new("unreadable", User::Nobody, false);
        let program = unreadable(&lab);
        let (code, _, err) = lab.sh(backend, &[], &format!("{program} made"));
        let what = lab.what(backend);
        assert_ne!(code, 0, "{what}: {err}");
        assert!(!lab.ws.join("made").exists(), "{what}");
        assert!(
            err.contains("the guard cannot read what mkdir-711's calls name")
                && err.contains("Hint: ")
                && err.contains("chmod a+r"),
            "{what}: {err}"
        );
    }
}

/// A program that swaps what a descriptor is (a TCP or a unix socket, `dup2`) and what an
/// address says (a TCP address or a host socket's path) while another of its threads
/// connects that descriptor to that address: a guard that judged a connect and then let the
/// kernel do it could be shown a TCP socket and connect the unix one to the host's socket.
/// With Landlock alone (which judges no unix connect itself) and a network the program may
/// use, it never reaches the host's socket; bare, the same program reaches it.
#[test]
fn a_connect_raced_against_its_check_never_reaches_a_host_socket() {
    if !tools_present() || !require("cc", "the racing program") {
        return;
    }
    let racer = {
        let out = build_dir().join("race_connect");
        let source = format!(
            "{}/tests/fixtures/guard/race_connect.c",
            env!("CARGO_MANIFEST_DIR")
        );
        if !out.exists() {
            let built = Command::new("cc")
                .args(["-O2", "-pthread", "-o"])
                .arg(&out)
                .arg(&source)
                .shown();
            assert!(built.status.success());
        }
        out
    };
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("race", user, false);
        let program = install(&lab, &racer);
        let socket = lab.outside.join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        fs::set_permissions(&socket, fs::Permissions::from_mode(0o777)).unwrap();
        listener.set_nonblocking(true).unwrap();
        let script = format!("{program} {} 8", socket.display());
        let (code, out, err) = lab.sh("none", &["--net", "full"], &script);
        assert_eq!(
            code, 0,
            "control: the host's socket was not reached: {out}{err}"
        );
        assert!(out.contains("ESCAPED"), "control: {out}");
        let (code, out, err) = lab.sh("landlock", &["--net", "full"], &script);
        let what = lab.what("landlock");
        assert!(out.contains("HELD"), "{what}: {out}{err}");
        assert_eq!(code, 1, "{what}: {out}{err}");
        drop(listener);
    }
}
