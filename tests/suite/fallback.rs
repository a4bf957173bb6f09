//! Landlock alone, the backend `auto` falls back to where bubblewrap cannot run, held to
//! what the bwrap backend gives: each attack on both backends, as root and as
//! nobody, beside an unconfined control (`--backend none`) that shows it works without
//! sbx-shell.

use std::fs;
use std::path::Path;

use super::sandbox::{assert_lines, each, tools_present, Lab, User};
use super::support::Shown;

/// The host's /tmp and /dev/shm: a file there is not readable, nothing written lands there;
/// the program's temporary directory is its session's own and gone afterwards.
#[test]
fn the_temporary_area_is_the_sessions_own() {
    if !tools_present() {
        return;
    }
    let canary = Path::new("/tmp/sbx-fallback-canary");
    fs::write(canary, "HOST-TMP-CANARY\n").unwrap();
    let script = r#"
        echo "TMPDIR=$TMPDIR"
        echo x > "${TMPDIR:-/tmp}/own" && echo OWN-TMP-OK
        cat /tmp/sbx-fallback-canary 2>/dev/null || echo HOST-TMP-UNREADABLE
        echo x > "/tmp/sbx-fallback-$LAB_TAG" 2>/dev/null
        echo x > "/dev/shm/sbx-fallback-$LAB_TAG" 2>/dev/null
        ls /dev/shm >/dev/null 2>&1 && [ -e /dev/shm/sbx-fallback-host ] && echo HOST-SHM-SEEN
        true
    "#;
    let shm_canary = Path::new("/dev/shm/sbx-fallback-host");
    fs::write(shm_canary, "x").unwrap();
    let leaks = |tag: &str| {
        [
            format!("/tmp/sbx-fallback-{tag}"),
            format!("/dev/shm/sbx-fallback-{tag}"),
        ]
    };
    each(|backend, user| {
        let lab = Lab::new("tmp", user, false);
        let what = lab.what(backend);
        let tag = format!("{backend}-{user:?}");
        let mut cmd = lab.command(backend, &["-c", script]);
        let out = cmd.env("LAB_TAG", &tag).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_lines(&text, &["OWN-TMP-OK", "HOST-TMP-UNREADABLE"], &what);
        assert!(!text.contains("HOST-SHM-SEEN"), "{what}: {text}");
        for leak in leaks(&tag) {
            assert!(
                !Path::new(&leak).exists(),
                "{what}: {leak} reached the host"
            );
        }
        let temp = text
            .lines()
            .find_map(|l| l.strip_prefix("TMPDIR="))
            .unwrap_or_default();
        if backend == "landlock" {
            assert!(temp.starts_with("/tmp/sbx-shell-"), "{what}: {temp:?}");
            assert!(!Path::new(temp).exists(), "{what}: {temp} left behind");
        }
    });
    // Control: unconfined, the host's /tmp and /dev/shm are read and written.
    let lab = Lab::new("tmp-control", User::Root, false);
    let out = lab
        .command("none", &["-c", script])
        .env("LAB_TAG", "control")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("HOST-TMP-CANARY"), "control: {text}");
    assert!(text.contains("HOST-SHM-SEEN"), "control: {text}");
    for leak in leaks("control") {
        assert!(Path::new(&leak).exists(), "control: {leak}");
        fs::remove_file(leak).unwrap();
    }
    fs::remove_file(canary).unwrap();
    fs::remove_file(shm_canary).unwrap();
}

/// A session's entries (here its temporary directory in `/tmp`, Landlock alone) are a live
/// session's while their lock is held, whatever pid namespace looks: a session started in
/// another pid namespace, sharing `/tmp`, leaves a live one's directory alone, though that
/// namespace does not see its pid (the control: `/proc/PID` is not there from inside); a
/// session killed with SIGKILL leaves its directory, which the next one removes.
#[test]
fn a_sessions_entries_are_its_own_while_it_lives_in_every_pid_namespace() {
    if !tools_present() || !super::support::require("unshare", "a session in another pid namespace")
    {
        return;
    }
    use std::io::BufRead;
    let lab = Lab::new("entries", User::Root, false);
    let go = lab.outside.join("go");
    let script = format!(
        "echo \"$TMPDIR\"; while [ ! -e {go} ]; do sleep 0.05; done; test -d \"$TMPDIR\" && echo KEPT",
        go = go.display()
    );
    // Ended however the test ends.
    struct Ends(std::process::Child);
    impl Drop for Ends {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut outer = Ends(
        lab.command("landlock", &["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(outer.0.stdout.take().unwrap()).lines();
    let temp = std::path::PathBuf::from(lines.next().unwrap().unwrap());
    assert!(
        temp.to_string_lossy().starts_with("/tmp/sbx-shell-") && temp.is_dir(),
        "{temp:?}"
    );
    let in_namespace = ["unshare", "--pid", "--fork", "--mount-proc"];
    // Control: from another pid namespace the outer session's pid is not there.
    let seen = std::process::Command::new(in_namespace[0])
        .args(&in_namespace[1..])
        .args([
            "sh",
            "-c",
            &format!("test -e /proc/{} && echo SEEN || echo UNSEEN", outer.0.id()),
        ])
        .shown();
    assert_eq!(String::from_utf8_lossy(&seen.stdout).trim(), "UNSEEN");
    let bin = lab.bin();
    let before: Vec<&std::ffi::OsStr> = in_namespace
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([bin.as_os_str()])
        .collect();
    let inner = lab
        .command_through(&before, "landlock", &["-c", "echo \"INNER $TMPDIR\""])
        .shown();
    let said = String::from_utf8_lossy(&inner.stdout);
    assert!(said.starts_with("INNER /tmp/sbx-shell-"), "{said}");
    fs::write(&go, "").unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(outer.0.wait().unwrap().success());
    assert_eq!(rest, ["KEPT"], "the live session's directory was removed");
    assert!(!temp.exists(), "removed at its end");
    // A session killed: what it left is there until the next session looks.
    fs::remove_file(&go).unwrap();
    let mut killed = Ends(
        lab.command("landlock", &["-c", &script])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(killed.0.stdout.take().unwrap()).lines();
    let left = std::path::PathBuf::from(lines.next().unwrap().unwrap());
    drop(killed);
    let lock = left.with_file_name(format!(
        "{}.lock",
        left.file_name().unwrap().to_string_lossy()
    ));
    assert!(left.is_dir() && lock.is_file(), "{left:?}");
    let next = lab.command("landlock", &["-c", "true"]).shown();
    assert!(next.status.success());
    assert!(!left.exists() && !lock.exists(), "{left:?} not swept");
}

/// What the inside reports for metadata changes: on host files (the home's key directory
/// and rc file, a file in /etc as root; by path and through a descriptor opened for
/// reading) and on a file of the workspace, which must keep working.
const METADATA_PROBE: &str = r#"
import os, sys
home, ws = os.environ["HOME"], os.getcwd()
def attempt(what, fn):
    try:
        fn(); print(what, "changed")
    except OSError as e:
        print(what, "refused")
host = [home + "/.ssh", home + "/.bashrc"] + sys.argv[1:]
for path in host:
    attempt("CHMOD " + path, lambda: os.chmod(path, 0o777))
    attempt("UTIME " + path, lambda: os.utime(path, (1, 1)))
    attempt("XATTR " + path, lambda: os.setxattr(path, "user.sbx", b"1"))
    attempt("CHOWN " + path, lambda: os.chown(path, os.getuid(), os.getgid()))
fd = os.open(home + "/.bashrc", os.O_RDONLY)
attempt("FCHMOD", lambda: os.fchmod(fd, 0o666))
attempt("FUTIME", lambda: os.utime(fd, (2, 2)))
open("own.sh", "w").close()
os.chmod("own.sh", 0o755); os.utime("own.sh", (3, 3)); os.setxattr("own.sh", "user.sbx", b"1")
print("WORKSPACE", oct(os.stat("own.sh").st_mode & 0o777), os.stat("own.sh").st_mtime)
"#;

/// The mode, times and attribute that must not change on the host.
fn snapshot(path: &Path) -> (u32, i64, bool) {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(path).unwrap();
    let xattr = std::process::Command::new(super::sandbox::PYTHON)
        .args(["-c", "import os,sys; os.getxattr(sys.argv[1], 'user.sbx')"])
        .arg(path)
        .output()
        .unwrap()
        .status
        .success();
    (meta.mode(), meta.mtime(), xattr)
}

/// chmod, utime, xattrs and chown of files outside the writable trees are refused (by
/// path and through a descriptor); inside the workspace they work.
#[test]
fn metadata_of_host_files_cannot_change() {
    if !tools_present() {
        return;
    }
    let etc = Path::new("/etc/sbx-fallback-root-only");
    each(|backend, user| {
        let lab = Lab::new("meta", user, false);
        let what = lab.what(backend);
        let mut host = vec![lab.home.join(".ssh"), lab.home.join(".bashrc")];
        let mut args = vec!["--", super::sandbox::PYTHON, "-c", METADATA_PROBE];
        if user == User::Root {
            fs::write(etc, "root only\n").unwrap();
            fs::set_permissions(etc, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
            host.push(etc.to_path_buf());
            args.push(etc.to_str().unwrap());
        }
        let before: Vec<_> = host.iter().map(|p| snapshot(p)).collect();
        let out = lab.command(backend, &args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("WORKSPACE 0o755 3.0"), "{what}: {text}{err}");
        assert!(!text.contains("changed"), "{what}: {text}");
        assert!(text.matches("refused").count() >= 10, "{what}: {text}");
        let after: Vec<_> = host.iter().map(|p| snapshot(p)).collect();
        assert_eq!(before, after, "{what}: host files changed");
    });
    let _ = fs::remove_file(etc);
    // Control: unconfined, the same calls change the host's files.
    let lab = Lab::new("meta-control", User::Root, false);
    let out = lab
        .command(
            "none",
            &["--", super::sandbox::PYTHON, "-c", METADATA_PROBE],
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("refused"), "control: {text}");
    assert_eq!(snapshot(&lab.home.join(".ssh")).0 & 0o777, 0o777, "control");
}

/// Another terminal of the user (a pty the test opens, with input waiting): the program
/// can neither open it by name nor read what is typed there, with nested ptys or without;
/// a pty of its own still works.
#[test]
fn another_terminal_cannot_be_opened() {
    use std::io::Write;
    if !tools_present() {
        return;
    }
    let probe = r#"
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    print("OPENED", os.read(fd, 100))
except OSError as e:
    print("REFUSED", e.errno)
"#;
    let other = nix::pty::openpty(None, None).unwrap();
    let name = nix::unistd::ttyname(&other.slave).unwrap();
    let typed = || {
        // Keystrokes waiting on the other terminal, as if typed there.
        let mut master = fs::File::from(other.master.try_clone().unwrap());
        master.write_all(b"secret typed\n").unwrap();
    };
    let name = name.to_str().unwrap();
    each(|backend, user| {
        let lab = Lab::new("pts", user, false);
        let what = lab.what(backend);
        let owner = (user == User::Nobody).then_some(super::sandbox::NOBODY);
        std::os::unix::fs::chown(name, owner, None).unwrap();
        for extra in [&[][..], &["--no-nested-pty"][..]] {
            typed();
            let mut args = extra.to_vec();
            args.extend(["--", super::sandbox::PYTHON, "-c", probe, name]);
            let out = lab.command(backend, &args).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("REFUSED"), "{what} {extra:?}: {text}");
            assert!(!text.contains("secret"), "{what} {extra:?}: {text}");
        }
    });
    std::os::unix::fs::chown(name, Some(0), None).unwrap();
    // Control: unconfined, what is typed there is read.
    let lab = Lab::new("pts-control", User::Root, false);
    let out = lab
        .command("none", &["--", super::sandbox::PYTHON, "-c", probe, name])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("OPENED"), "control: {text}");
}

/// What the inside reports for its attempts on a process outside (its priority, limits,
/// CPUs, I/O class), and on one of its own children, which must keep working.
const PROCESS_PROBE: &str = r#"
import os, resource, subprocess, sys
victim = int(sys.argv[1])
def attempt(what, fn):
    try:
        fn(); print(what, "changed")
    except (OSError, subprocess.CalledProcessError):
        print(what, "refused")
for pid, who in ((victim, "HOST"), (subprocess.Popen(["sleep", "5"]).pid, "OWN")):
    attempt(who + " NICE", lambda: os.setpriority(os.PRIO_PROCESS, pid, 7))
    attempt(who + " PRLIMIT", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64)))
    attempt(who + " AFFINITY", lambda: os.sched_setaffinity(pid, {0}))
    attempt(who + " IONICE", lambda: subprocess.run(["ionice", "-c", "3", "-p", str(pid)], check=True, stderr=subprocess.DEVNULL))
attempt("USER NICE", lambda: os.setpriority(os.PRIO_USER, 0, 7))
attempt("SELF NICE", lambda: os.setpriority(os.PRIO_PROCESS, 0, 10))
"#;

/// Scheduling, limits and I/O priority of a process outside the session cannot change;
/// those of the session's own processes can.
#[test]
fn other_processes_cannot_be_reniced_or_limited() {
    if !tools_present() {
        return;
    }
    let nice_of = |pid: u32| -> String {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        fields[16].to_string()
    };
    each(|backend, user| {
        let lab = Lab::new("renice", user, false);
        let what = lab.what(backend);
        let mut victim = std::process::Command::new("/bin/sleep");
        victim.arg("300.79");
        if user == User::Nobody {
            use std::os::unix::process::CommandExt;
            victim
                .uid(super::sandbox::NOBODY)
                .gid(super::sandbox::NOBODY);
        }
        let mut victim = victim.spawn().unwrap();
        let id = victim.id().to_string();
        let before = nice_of(victim.id());
        let out = lab
            .command(
                backend,
                &["--", super::sandbox::PYTHON, "-c", PROCESS_PROBE, &id],
            )
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let after = nice_of(victim.id());
        let _ = victim.kill();
        let _ = victim.wait();
        assert!(!text.contains("HOST NICE changed"), "{what}: {text}");
        for line in ["HOST PRLIMIT", "HOST AFFINITY", "HOST IONICE"] {
            assert!(text.contains(&format!("{line} refused")), "{what}: {text}");
        }
        // Every process of the user: inside bwrap's pid namespace only the sandbox's own
        // (the host process's value is checked below); alone, refused.
        if backend == "landlock" {
            assert!(text.contains("USER NICE refused"), "{what}: {text}");
        }
        for line in ["OWN NICE", "OWN PRLIMIT", "OWN AFFINITY", "SELF NICE"] {
            assert!(text.contains(&format!("{line} changed")), "{what}: {text}");
        }
        assert_eq!(before, after, "{what}: the host process's nice value");
    });
    // Control: unconfined, the process outside is reniced.
    let lab = Lab::new("renice-control", User::Root, false);
    let mut victim = std::process::Command::new("/bin/sleep")
        .arg("300.80")
        .spawn()
        .unwrap();
    let out = lab
        .command(
            "none",
            &[
                "--",
                super::sandbox::PYTHON,
                "-c",
                PROCESS_PROBE,
                &victim.id().to_string(),
            ],
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let after = nice_of(victim.id());
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(text.contains("HOST NICE changed"), "control: {text}");
    assert_eq!(after, "7", "control");
}

/// What the inside reports for each host socket: connecting to stream listeners (a tmux
/// server, an agent, a bus), sending to a datagram one (a log), by path and abstract.
const SOCKET_PROBE: &str = r#"
import socket, sys
for path in sys.argv[1:]:
    address = "\0" + path[1:] if path.startswith("@") else path
    kind = socket.SOCK_DGRAM if path.endswith(".dgram") else socket.SOCK_STREAM
    try:
        s = socket.socket(socket.AF_UNIX, kind)
        if kind == socket.SOCK_DGRAM:
            s.sendto(b"x", address)
        else:
            s.connect(address)
        print("REACHED", path)
    except OSError as e:
        print("REFUSED", path, e.errno)
# A datagram pair can still name a host socket with sendto: refused alone.
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"x", sys.argv[-1]); print("REACHED pair")
except OSError as e:
    print("REFUSED pair", e.errno)
# What programs use among themselves keeps working: a connected stream pair.
a, b = socket.socketpair()
a.send(b"ok"); print("PAIR", b.recv(2).decode())
"#;

/// Host sockets bound in /tmp, /run and the abstract namespace (as tmux, an ssh or gpg
/// agent, D-Bus and syslog bind theirs) are unreachable; a stream socketpair works.
#[test]
fn host_sockets_are_unreachable() {
    use std::os::unix::net::{UnixDatagram, UnixListener};
    if !tools_present() {
        return;
    }
    let tag = std::process::id();
    let paths = [
        format!("/tmp/sbx-fallback-{tag}.tmux"),
        format!("/run/sbx-fallback-{tag}.agent"),
        format!("/tmp/sbx-fallback-{tag}.dgram"),
    ];
    let abstract_name = format!("@sbx-fallback-{tag}");
    let mut listeners = Vec::new();
    for path in &paths[..2] {
        listeners.push(UnixListener::bind(path).unwrap());
    }
    let dgram = UnixDatagram::bind(&paths[2]).unwrap();
    dgram.set_nonblocking(true).unwrap();
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name[1..]).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    for path in &paths {
        fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    }
    let mut args: Vec<&str> = vec!["--", super::sandbox::PYTHON, "-c", SOCKET_PROBE];
    args.push(&abstract_name);
    args.extend(paths.iter().map(String::as_str));
    each(|backend, user| {
        let lab = Lab::new("sock", user, false);
        let what = lab.what(backend);
        let out = lab.command(backend, &args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("REACHED"), "{what}: {text}");
        assert_eq!(text.matches("REFUSED").count(), 5, "{what}: {text}");
        assert!(text.contains("PAIR ok"), "{what}: {text}");
        let mut buf = [0u8; 8];
        assert!(
            dgram.recv(&mut buf).is_err(),
            "{what}: the log got a datagram"
        );
    });
    // Control: unconfined, every one is reached.
    let lab = Lab::new("sock-control", User::Root, false);
    let out = lab.command("none", &args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("REACHED").count(), 5, "control: {text}");
    drop((listeners, abstract_listener));
    for path in &paths {
        let _ = fs::remove_file(path);
    }
}

/// Landlock alone in a git repository: the session commits, while every write to
/// `.git/config` and its hooks is refused — by the helper's guard, which judges every
/// writing open, name and rename (the command-running key in `git config`'s rename, a
/// second name of the file) — as under bwrap. Nothing is named at the end. Unconfined
/// (the control), the host's git afterwards runs the planted config, hook and alias.
#[test]
fn a_repository_works_and_its_protected_paths_are_refused() {
    use super::protections::{evil_script, fsmonitor, host_git, repo_lab};
    if !tools_present() || !super::support::require("git", "a real repository") {
        return;
    }
    for user in [User::Root, User::Nobody] {
        for backend in ["bwrap", "landlock", "none"] {
            let lab = repo_lab("restore", user);
            let what = format!("{} {backend}", lab.what(backend));
            let config = lab.ws.join(".git/config");
            let original = fs::read(&config).unwrap();
            let hook = lab.ws.join(".git/hooks/post-checkout");
            let script = format!(
                "{evil}\
                 git -c user.name=t -c user.email=t@t commit -q --allow-empty -m inside && echo COMMIT-OK; \
                 printf '{planted}' >> .git/config 2>/dev/null && echo CONFIG-WRITTEN; \
                 git config core.fsmonitor {ws}/evil-fsmonitor.sh 2>/dev/null && echo GIT-CONFIG-SET; \
                 printf '#!/bin/sh\\ntouch {out}/hook\\n' > .git/hooks/post-checkout 2>/dev/null && echo HOOK-WRITTEN; \
                 chmod +x .git/hooks/post-checkout 2>/dev/null; \
                 {python} -c 'import os; os.open(\".git/config\", os.O_RDWR)' 2>/dev/null && echo CONFIG-OPENED-RW; \
                 ln .git/config second 2>/dev/null && {{ chmod u+w second; printf '[alias]\n\tst = !touch {out}/alias\n' >> second; }} 2>/dev/null && echo SECOND-NAME-WRITTEN; \
                 for i in $(seq 30); do \
                   if grep -qE 'fsmonitor|alias' .git/config || test -e .git/hooks/post-checkout; then sleep 0.1; else break; fi; \
                 done; \
                 grep -qE 'fsmonitor|alias' .git/config || echo CONFIG-CLEAN; \
                 test -e .git/hooks/post-checkout || echo NO-HOOK; \
                 git -c user.name=t -c user.email=t@t commit -q --allow-empty -m again && echo COMMIT-AGAIN-OK",
                evil = evil_script(&lab, "fsmonitor"),
                planted = fsmonitor(&lab, "fsmonitor"),
                out = lab.outside.display(),
                python = super::sandbox::PYTHON,
                ws = lab.ws.display(),
            );
            let mode = |p: &Path| {
                use std::os::unix::fs::MetadataExt;
                fs::metadata(p).unwrap().mode()
            };
            let original_mode = mode(&config);
            let (code, out, err) = lab.sh(backend, &[], &script);
            assert_eq!(code, 0, "{what}: {err}");
            assert_lines(&out, &["COMMIT-OK", "COMMIT-AGAIN-OK"], &what);
            // The host's git afterwards: status reads the config, checkout runs the hook.
            host_git(&lab, &lab.ws, &["status", "--short"]);
            host_git(&lab, &lab.ws, &["checkout", "-q", "-b", "after"]);
            host_git(&lab, &lab.ws, &["st"]);
            let fired: Vec<&str> = ["fsmonitor", "hook", "alias"]
                .into_iter()
                .filter(|m| lab.outside.join(m).exists())
                .collect();
            let log = host_git(&lab, &lab.ws, &["log", "--format=%s"]);
            let log = String::from_utf8_lossy(&log.stdout).into_owned();
            assert!(
                log.contains("inside") && log.contains("again"),
                "{what}: {log}"
            );
            let session_log =
                fs::read_to_string(lab.home.join(".local/state/sbx-shell/sessions.jsonl"))
                    .unwrap_or_default();
            match backend {
                "none" => {
                    assert_lines(
                        &out,
                        &[
                            "CONFIG-WRITTEN",
                            "GIT-CONFIG-SET",
                            "HOOK-WRITTEN",
                            "CONFIG-OPENED-RW",
                            "SECOND-NAME-WRITTEN",
                        ],
                        &what,
                    );
                    assert_eq!(
                        fired,
                        ["fsmonitor", "hook", "alias"],
                        "{what}: control: {out}"
                    );
                    continue;
                }
                "bwrap" => {
                    assert!(
                        !out.contains("-WRITTEN") && !out.contains("GIT-CONFIG-SET"),
                        "{what}: not refused: {out}"
                    );
                }
                _ => {
                    // Refused as under bwrap, by the guard alone: nothing named at the end.
                    assert_lines(&out, &["CONFIG-CLEAN", "NO-HOOK"], &what);
                    assert!(
                        !out.contains("-WRITTEN")
                            && !out.contains("GIT-CONFIG-SET")
                            && !out.contains("CONFIG-OPENED-RW"),
                        "{what}: not refused: {out}"
                    );
                    // (Named among the refusals, not among what was planted.)
                    let planted = session_log
                        .lines()
                        .last()
                        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                        .map(|v| v["planted"].to_string())
                        .unwrap_or_default();
                    assert!(
                        !planted.contains(config.to_str().unwrap()),
                        "{what}: {session_log}"
                    );
                }
            }
            assert!(fired.is_empty(), "{what}: the host's git ran {fired:?}");
            assert_eq!(fs::read(&config).unwrap(), original, "{what}");
            assert_eq!(mode(&config), original_mode, "{what}: its mode afterwards");
            assert!(!hook.exists(), "{what}");
        }
    }
}

/// Reads alone are what bwrap shows: a file outside the home, the workspace and the PATH
/// prefixes (an app under /srv, data under /var/tmp) is read on both backends, while the
/// home's secrets stay unreadable and the host's /tmp and /dev/shm can be neither read
/// nor listed. Control: `--backend none` reads the secret too.
#[test]
fn reads_alone_are_what_bwrap_shows() {
    if !tools_present() {
        return;
    }
    let script = r#"
        cat "$LAB_OUT/app/run.py" && echo OUTSIDE-READ
        ls "$LAB_OUT/app" >/dev/null && echo OUTSIDE-LISTED
        cat "$HOME/.ssh/id_ed25519" 2>/dev/null || echo SECRET-UNREADABLE
        ls /tmp >/dev/null 2>&1 || echo HOST-TMP-UNLISTED
        true
    "#;
    each(|backend, user| {
        let lab = Lab::new("reads", user, false);
        let what = lab.what(backend);
        fs::create_dir_all(lab.outside.join("app")).unwrap();
        fs::write(lab.outside.join("app/run.py"), "print('app')\n").unwrap();
        if user == User::Nobody {
            super::sandbox::chown_tree(&lab.outside.join("app"), super::sandbox::NOBODY);
            super::sandbox::chown_tree(&lab.outside.join("app/run.py"), super::sandbox::NOBODY);
        }
        let out = lab.command(backend, &["-c", script]).shown();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut want = vec![
            "print('app')",
            "OUTSIDE-READ",
            "OUTSIDE-LISTED",
            "SECRET-UNREADABLE",
        ];
        if backend == "landlock" {
            want.push("HOST-TMP-UNLISTED");
        }
        assert_lines(&text, &want, &what);
    });
    let lab = Lab::new("reads-control", User::Root, false);
    let out = lab.command("none", &["-c", script]).shown();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CANARY"), "control: {text}");
}

/// A program's own unix sockets work on both backends as bare: a server and a client in
/// its temporary directory and in the workspace (by a relative path too), and tmux, whose
/// server's socket is its own; the host's stay out of reach (`host_sockets_are_unreachable`).
#[test]
fn a_programs_own_unix_sockets_work() {
    if !tools_present() || !super::support::require("tmux", "tmux inside the sandbox") {
        return;
    }
    let script = r#"
        python3 - <<'PY'
import os, socket
for where in (os.environ.get("TMPDIR", "/tmp"), os.getcwd()):
    p = os.path.join(where, "own-%d.sock" % os.getpid())
    srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(1)
    c = socket.socket(socket.AF_UNIX); c.connect(os.path.relpath(p)); a, _ = srv.accept()
    c.sendall(b"ok"); print("OWN", a.recv(2).decode()); os.unlink(p)
PY
        tmux -f /dev/null new-session -d -s inner 'sleep 30' && tmux ls >/dev/null && tmux kill-server && echo TMUX-OK
    "#;
    // A host socket reached through a symlink planted in the workspace (outside /tmp,
    // so that bwrap's private /tmp does not hide it by itself).
    let host = std::os::unix::net::UnixListener::bind(
        super::support::private_dir().join(format!("host-{}.sock", std::process::id())),
    )
    .unwrap();
    let host_path = host
        .local_addr()
        .unwrap()
        .as_pathname()
        .unwrap()
        .to_path_buf();
    fs::set_permissions(
        &host_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let through_link = format!(
        "{script}\n python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"planted.sock\"); print(\"HOST-REACHED\")' 2>/dev/null || echo HOST-REFUSED"
    );
    let modes = ["none", "bwrap", "landlock"];
    for user in [User::Root, User::Nobody] {
        for mode in modes {
            let lab = Lab::new("own-sock", user, false);
            std::os::unix::fs::symlink(&host_path, lab.ws.join("planted.sock")).unwrap();
            let what = lab.what(mode);
            let out = lab.command(mode, &["-c", &through_link]).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let what = format!("{what}: {}", String::from_utf8_lossy(&out.stderr));
            assert_lines(&text, &["OWN ok", "TMUX-OK"], &what);
            assert_eq!(text.matches("OWN ok").count(), 2, "{what}: {text}");
            // Control: unconfined, the planted link reaches the host's socket.
            let reached = if mode == "none" {
                "HOST-REACHED"
            } else {
                "HOST-REFUSED"
            };
            assert_lines(&text, &[reached], &what);
        }
    }
    drop(host);
    let _ = fs::remove_file(host_path);
}

/// POSIX shared memory and semaphores (python's multiprocessing and `shared_memory`) work
/// on every backend, in a `/dev/shm` of the session's own: a segment of the host's can be
/// neither opened (by its name, read or write, nor through another spelling of the path or
/// a relative name from `/dev/shm`) nor removed, and nothing the program made is left on
/// the host. Unconfined (the control) the host's segment is read and removed.
#[test]
fn shared_memory_is_the_sessions_own() {
    if !tools_present() {
        return;
    }
    let script = r#"
        python3 - <<'PY'
import multiprocessing as mp, os
from multiprocessing import shared_memory
with mp.Pool(2) as p:
    print("POOL", p.map(abs, [-1, -2]))
lock = mp.Lock(); lock.acquire(); lock.release(); print("LOCK-OK")
s = shared_memory.SharedMemory(name="sbx-own-" + os.environ["LAB_TAG"], create=True, size=16)
s.buf[0] = 7
t = shared_memory.SharedMemory(name=s.name)
print("SHM", t.buf[0]); t.close(); s.close(); s.unlink()
host = os.environ["LAB_HOST_SEG"]
def attempt(what, fn):
    try:
        fn(); print(what, "REACHED")
    except (OSError, ValueError):
        print(what, "refused")
def attach():
    m = shared_memory.SharedMemory(name=host); seen = bytes(m.buf[:12]); m.close()
    if seen != b"HOST-SEGMENT": raise OSError("not the host's")
def read(path, flags=os.O_RDONLY):
    fd = os.open(path, flags); n = os.read(fd, 32); os.close(fd)
    if b"HOST-SEGMENT" not in n: raise OSError("not the host's")
attempt("READ", lambda: read("/dev/shm/" + host))
attempt("RDWR", lambda: read("/dev/shm/" + host, os.O_RDWR))
attempt("SPELLED", lambda: read("/dev//shm/" + host, os.O_RDWR))
attempt("DOTDOT", lambda: read("/dev/shm/../shm/" + host))
os.chdir("/dev/shm") if os.path.isdir("/dev/shm") else None
attempt("RELATIVE", lambda: read(host, os.O_RDWR))
attempt("SHM_OPEN", attach)
attempt("UNLINK", lambda: os.unlink("/dev/shm/" + host))
PY
    "#;
    let host_seg = format!("sbx-host-seg-{}", std::process::id());
    let host_path = Path::new("/dev/shm").join(&host_seg);
    // Removed however the test ends.
    struct Removed<'a>(&'a Path);
    impl Drop for Removed<'_> {
        fn drop(&mut self) {
            let _ = fs::remove_file(self.0);
        }
    }
    let _removed = Removed(&host_path);
    let refused = [
        "READ refused",
        "RDWR refused",
        "SPELLED refused",
        "DOTDOT refused",
        "RELATIVE refused",
        "SHM_OPEN refused",
        "UNLINK refused",
    ];
    let works = ["POOL [1, 2]", "LOCK-OK", "SHM 7"];
    let own_left = |tag: &str| {
        Path::new("/dev/shm")
            .join(format!("sbx-own-{tag}"))
            .exists()
    };
    each(|backend, user| {
        fs::write(&host_path, "HOST-SEGMENT").unwrap();
        fs::set_permissions(
            &host_path,
            std::os::unix::fs::PermissionsExt::from_mode(0o666),
        )
        .unwrap();
        let lab = Lab::new("shm", user, false);
        let what = lab.what(backend);
        let tag = format!("{backend}-{user:?}");
        let out = lab
            .command(backend, &["-c", script])
            .env("LAB_TAG", &tag)
            .env("LAB_HOST_SEG", &host_seg)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let what = format!("{what}: {}", String::from_utf8_lossy(&out.stderr));
        assert_lines(&text, &works, &what);
        assert_lines(&text, &refused, &what);
        assert!(host_path.exists(), "{what}: the host's segment was removed");
        assert!(
            !own_left(&tag),
            "{what}: the program's segment is on the host"
        );
    });
    // Control: unconfined, the host's segment is read and removed.
    fs::write(&host_path, "HOST-SEGMENT").unwrap();
    let lab = Lab::new("shm-control", User::Root, false);
    let out = lab
        .command("none", &["-c", script])
        .env("LAB_TAG", "control")
        .env("LAB_HOST_SEG", &host_seg)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_lines(&text, &works, "control");
    for line in refused {
        let reached = line.replace("refused", "REACHED");
        assert_lines(&text, &[reached.as_str()], "control");
    }
    assert!(!host_path.exists(), "control: the segment stayed");
}

/// The programs people run, under Landlock alone as under bwrap and bare (the control):
/// vim edits a file from a real terminal, python, node and a cargo build (no
/// dependencies, offline) run and write in the workspace, with the same results.
#[test]
fn everyday_programs_work_alone_as_bare() {
    use super::support::{require, Launch, OuterPty};
    if !tools_present() || !require("vim", "vim from a terminal") || !require("node", "node") {
        return;
    }
    let cargo = std::path::Path::new(env!("CARGO"));
    let path = format!("{}:/usr/bin:/bin", cargo.parent().unwrap().display());
    // The toolchain, granted: for root it lies in root's home, a root-only directory that
    // a session with another `$HOME` cannot read.
    let toolchain = cargo
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .display()
        .to_string();
    let script = r#"
        python3 -c 'import json, sys; json.dump({"py": sum(range(10))}, open("py.json", "w")); print("PYTHON-OK")'
        node -e 'require("fs").writeFileSync("node.txt", "ok"); console.log("NODE-OK", process.version.length > 0)'
        cd cg && cargo build --offline -q 2>&1 | tail -3 && ./target/debug/cg
    "#;
    let mut results = Vec::new();
    for backend in ["none", "bwrap", "landlock"] {
        let lab = Lab::new("everyday", User::Root, false);
        fs::create_dir_all(lab.ws.join("cg/src")).unwrap();
        fs::write(
            lab.ws.join("cg/Cargo.toml"),
            "[package]\nname = \"cg\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .unwrap();
        fs::write(
            lab.ws.join("cg/src/main.rs"),
            "fn main() { println!(\"CARGO-OK\"); }\n",
        )
        .unwrap();
        let out = lab
            .command(backend, &["--read", &toolchain, "-c", script])
            .env("PATH", &path)
            .shown();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let what = format!(
            "{backend}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_lines(&text, &["PYTHON-OK", "NODE-OK true", "CARGO-OK"], &what);
        assert_eq!(
            fs::read_to_string(lab.ws.join("node.txt")).unwrap(),
            "ok",
            "{what}"
        );
        // vim, from a real terminal: edit, write, quit.
        let args = [
            "--backend",
            backend,
            "--",
            "vim",
            "-N",
            "-u",
            "NONE",
            "notes.txt",
        ];
        let mut launch = Launch::new(&args);
        launch.env = vec![
            ("HOME".into(), lab.home.display().to_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("TERM".into(), "xterm".into()),
        ];
        launch.cwd = Some(lab.ws.clone());
        let mut pty = OuterPty::launch(launch);
        pty.expect("notes.txt");
        pty.write(b"ihello from vim\x1b:wq\r");
        assert!(pty.wait().success(), "{backend}: vim");
        let notes = fs::read_to_string(lab.ws.join("notes.txt")).unwrap();
        results.push((
            text.lines()
                .filter(|l| l.ends_with("-OK") || l.contains("-OK "))
                .map(str::to_string)
                .collect::<Vec<_>>(),
            fs::read_to_string(lab.ws.join("py.json")).unwrap(),
            notes,
        ));
    }
    // The same everywhere as bare.
    assert_eq!(results[1], results[0], "bwrap against bare");
    assert_eq!(results[2], results[0], "landlock against bare");
    assert_eq!(results[0].2, "hello from vim\n");
}

/// What a session started in the home does there, on both backends, as root and as
/// nobody: the home's secrets unreadable and its dot entries unchanged, as under bwrap,
/// while ordinary work at its top goes on as bare — files and directories made, read,
/// moved and removed (Landlock alone: the home is carved around what it leaves out, and
/// names made at its top come from the session's pool, gone afterwards). Control: bare,
/// every secret is read and every change is made.
#[test]
fn a_session_in_the_home_works_there_and_keeps_its_secrets() {
    if !tools_present() {
        return;
    }
    let script = r#"
        cat .aws/credentials 2>/dev/null || echo SECRET-UNREADABLE
        cat .netrc 2>/dev/null || echo NETRC-UNREADABLE
        cat .bashrc >/dev/null && echo RC-READABLE
        ls >/dev/null && echo LISTED
        echo made > notes.txt && [ "$(cat notes.txt)" = made ] && echo FILE-OK
        mkdir proj2 && echo inside > proj2/f && ls proj2 | grep -qx f && cat proj2/f >/dev/null && echo DIR-OK
        mkdir -p deep/a/b && echo x > deep/a/b/c && cat deep/a/b/c >/dev/null && echo DEEP-OK
        python3 -c "open('py.txt', 'w').write('p'); print(open('py.txt').read())" | grep -qx p && echo PY-OK
        mv notes.txt notes2.txt && cat notes2.txt >/dev/null && echo MV-OK
        rm notes2.txt py.txt && rm -r proj2 deep && [ ! -e deep ] && echo RM-OK
        ln -s .aws/credentials lnk 2>/dev/null; cat lnk 2>/dev/null || echo LINK-UNREADABLE; rm -f lnk
        ln .netrc netrc2 2>/dev/null || echo LINK-SECRET-REFUSED
        rm .aws/credentials 2>/dev/null || echo REMOVE-SECRET-REFUSED
        mv .aws aws2 2>/dev/null || echo MOVE-SECRET-REFUSED
        touch .newdot 2>/dev/null || echo DOT-REFUSED
        echo x >> .bashrc 2>/dev/null || echo RC-REFUSED
        echo DONE
    "#;
    let worked = [
        "RC-READABLE",
        "LISTED",
        "FILE-OK",
        "DIR-OK",
        "DEEP-OK",
        "PY-OK",
        "MV-OK",
        "RM-OK",
        "DONE",
    ];
    let refused = [
        "SECRET-UNREADABLE",
        "NETRC-UNREADABLE",
        "LINK-UNREADABLE",
        "LINK-SECRET-REFUSED",
        "REMOVE-SECRET-REFUSED",
        "MOVE-SECRET-REFUSED",
        "DOT-REFUSED",
        "RC-REFUSED",
    ];
    let in_home = |lab: &Lab, backend: &str| {
        let mut cmd = lab.command(backend, &["-c", script]);
        let out = cmd.current_dir(&lab.home).shown();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), text, err)
    };
    each(|backend, user| {
        let lab = Lab::new("home", user, false);
        let what = lab.what(backend);
        let (code, text, err) = in_home(&lab, backend);
        assert_eq!(code, Some(0), "{what}: {text}\n{err}");
        assert_lines(&text, &worked, &what);
        assert_lines(&text, &refused, &what);
        assert!(!text.contains(super::sandbox::CANARY), "{what}: {text}");
        for secret in [".aws/credentials", ".netrc"] {
            let kept = fs::read_to_string(lab.home.join(secret)).unwrap_or_default();
            assert!(kept.contains(super::sandbox::CANARY), "{what}: {secret}");
        }
        for never in ["netrc2", "aws2", ".newdot", "notes.txt", "proj2"] {
            assert!(!lab.home.join(never).exists(), "{what}: {never}");
        }
        assert_eq!(
            fs::read_to_string(lab.home.join(".bashrc")).unwrap(),
            "# rc\n"
        );
        let pools = lab.home.join(".local/state/sbx-shell/pool");
        let left: Vec<_> = fs::read_dir(&pools)
            .map(|d| d.flatten().collect())
            .unwrap_or_default();
        assert!(
            left.is_empty(),
            "{what}: left in {}: {left:?}",
            pools.display()
        );
    });
    // Control: bare, every secret is read and every change made.
    let lab = Lab::new("home-control", User::Nobody, false);
    let (code, text, err) = in_home(&lab, "none");
    assert_eq!(code, Some(0), "control: {err}");
    assert_lines(&text, &worked, "control");
    for line in refused {
        assert!(
            !text.lines().any(|l| l == line),
            "control: {line} in\n{text}"
        );
    }
    assert!(text.contains(super::sandbox::CANARY), "control: {text}");
    for made in ["netrc2", "aws2", ".newdot"] {
        assert!(lab.home.join(made).exists(), "control: {made}");
    }
}

/// A server the program starts, with no network: it binds and is reached from inside, as
/// bare — under Landlock alone on the host's loopback only (the guard binds it there; an
/// any-address bind becomes loopback's, another address is refused) — while a service
/// of the host's on loopback stays out of reach. Control: bare, the host's service is
/// reached.
#[test]
fn the_programs_own_server_binds_and_is_reached_and_the_hosts_is_not() {
    if !tools_present() {
        return;
    }
    let host_service = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let host_port = host_service.local_addr().unwrap().port();
    let script = format!(
        r#"
import http.server, socket, threading, urllib.request
class Q(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
for host in ("127.0.0.1", "0.0.0.0"):
    s = http.server.ThreadingHTTPServer((host, 0), Q)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    code = urllib.request.urlopen("http://127.0.0.1:%d/" % s.server_address[1], timeout=10).status
    print("SERVED", host, code)
    s.shutdown()
try:
    socket.create_connection(("127.0.0.1", {host_port}), timeout=5)
    print("HOST-SERVICE-REACHED")
except OSError:
    print("HOST-SERVICE-REFUSED")
try:
    socket.socket().bind(("192.0.2.1", 8123))
except OSError as e:
    print("ELSEWHERE", e.errno)
"#
    );
    let served = ["SERVED 127.0.0.1 200", "SERVED 0.0.0.0 200"];
    each(|backend, user| {
        let lab = Lab::new("server", user, false);
        let what = lab.what(backend);
        let (code, out, err) = lab.sh(backend, &[], &format!("python3 -c '{script}'"));
        assert_eq!(code, 0, "{what}: {out}{err}");
        assert_lines(&out, &served, &what);
        assert_lines(&out, &["HOST-SERVICE-REFUSED"], &what);
        if backend == "landlock" {
            // Another address: refused, and the summary says why.
            assert_lines(&out, &["ELSEWHERE 13"], &what);
            assert!(
                err.contains("a TCP server on 192.0.2.1:8123"),
                "{what}: {err}"
            );
        }
    });
    let lab = Lab::new("server-control", User::Nobody, false);
    let (_, out, err) = lab.sh("none", &[], &format!("python3 -c '{script}'"));
    assert_lines(&out, &served, "control");
    assert_lines(&out, &["HOST-SERVICE-REACHED"], &format!("control: {err}"));
    drop(host_service);
}
