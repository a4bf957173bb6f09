//! Real machines (issue 12): host objects behind symlinked spellings, a binary under /tmp,
//! hosts where bwrap cannot create namespaces, SIGKILLs during start-up, the supervisor's
//! own crashes, and the private /tmp's size limit.

use std::fs;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::sandbox::{assert_lines, tools_present, Lab, User, PYTHON};
use super::support::{spec_on_fd, Shown};

/// Connect to each socket path given as an argument; one line per path.
const CONNECT: &str = r#"
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(p); print("CONNECTED", p)
    except OSError as e:
        print("REFUSED", p, e.errno)
"#;

/// A listening socket at `path` for the test's life, unless the host already has one there
/// (a real Docker host): then that one is used and left alone.
struct HostSocket {
    ours: Option<(PathBuf, UnixListener)>,
}

impl HostSocket {
    fn at(path: &Path) -> HostSocket {
        use std::os::unix::fs::PermissionsExt;
        if path.exists() {
            return HostSocket { ours: None };
        }
        let listener = UnixListener::bind(path).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o666)).unwrap();
        HostSocket {
            ours: Some((path.to_path_buf(), listener)),
        }
    }
}

impl Drop for HostSocket {
    fn drop(&mut self) {
        if let Some((path, _)) = &self.ours {
            let _ = fs::remove_file(path);
        }
    }
}

#[test]
fn host_sockets_behind_symlinked_spellings_are_hidden_and_the_session_starts() {
    if !tools_present() {
        return;
    }
    // /var/run is a link to /run: the socket has two spellings. An agent socket is named
    // through a symlinked directory, as $SSH_AUTH_SOCK.
    assert!(
        fs::read_link("/var/run").is_ok(),
        "/var/run is a symlink here"
    );
    let docker = HostSocket::at(Path::new("/run/docker.sock"));
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("hostsock", user, false);
        let real_dir = lab.dir.join("agent-real");
        fs::create_dir(&real_dir).unwrap();
        std::os::unix::fs::symlink(&real_dir, lab.dir.join("agent-link")).unwrap();
        let agent = HostSocket::at(&real_dir.join("agent.sock"));
        if user == User::Nobody {
            std::os::unix::fs::chown(&real_dir, Some(65534), Some(65534)).unwrap();
        }
        let spelled = lab.dir.join("agent-link/agent.sock");
        let paths = [
            "/run/docker.sock",
            "/var/run/docker.sock",
            spelled.to_str().unwrap(),
        ];
        let run = |backend: &str| {
            let mut args = vec!["--", PYTHON, "-c", CONNECT];
            args.extend(paths);
            lab.command(backend, &args)
                .env("SSH_AUTH_SOCK", &spelled)
                .shown()
        };
        let what = lab.what("bwrap");
        let out = run("bwrap");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{what}: the session did not start");
        for path in paths {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("REFUSED {path} "))),
                "{what}: {path} was reachable:\n{text}"
            );
        }
        // Control: unconfined, both reach the host's listeners (as root; our own sockets
        // are open to every user).
        if docker.ours.is_some() || user == User::Root {
            let out = run("none");
            let text = String::from_utf8_lossy(&out.stdout);
            let expected: Vec<String> = paths.iter().map(|p| format!("CONNECTED {p}")).collect();
            let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
            assert_lines(&text, &expected, &format!("control as {user:?}"));
        }
        drop(agent);
    }
}

/// A copy of the binary at `path` (mode 755, its directories created 755), removed on drop.
struct BinaryCopy(PathBuf);

impl BinaryCopy {
    fn at(path: PathBuf) -> BinaryCopy {
        use std::os::unix::fs::PermissionsExt;
        let dir = path.parent().unwrap();
        fs::create_dir_all(dir).unwrap();
        fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
        super::support::copy_binary(&path);
        BinaryCopy(path)
    }
}

impl Drop for BinaryCopy {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
        if let Some(dir) = self.0.parent() {
            let _ = fs::remove_dir(dir);
        }
    }
}

#[test]
fn the_helper_is_reachable_from_a_binary_under_tmp_or_a_denied_path() {
    if !tools_present() {
        return;
    }
    let tmp = BinaryCopy::at(PathBuf::from(format!(
        "/tmp/sbx-bin-{}/sbx-shell",
        std::process::id()
    )));
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("helperpath", user, false);
        // ~/.ssh is denied by default: hidden inside, yet the binary runs from there.
        let denied = BinaryCopy::at(lab.home.join(".ssh/bin/sbx-shell"));
        if user == User::Nobody {
            for dir in [&lab.home.join(".ssh"), &lab.home.join(".ssh/bin")] {
                std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
            }
        }
        for binary in [&tmp.0, &denied.0] {
            for backend in ["bwrap", "landlock"] {
                let what = format!("{} from {}", lab.what(backend), binary.display());
                let out = lab
                    .command_of(binary, backend, &["-c", "echo REACHED; ls ~/.ssh | wc -l"])
                    .current_dir(&lab.outside)
                    .shown();
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(out.status.success(), "{what}");
                assert_lines(&text, &["REACHED"], &what);
                if backend == "bwrap" {
                    // The directory stays hidden: only the executable itself was bound.
                    assert_lines(&text, &["0"], &what);
                }
            }
        }
    }
}

#[test]
fn the_helper_runs_from_the_running_file_after_an_upgrade_replaced_its_path() {
    if !tools_present() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("upgrade", user, false);
        let config_dir = lab.home.join(".config/sbx-shell");
        fs::create_dir_all(&config_dir).unwrap();
        let owner = |path: &Path| {
            if user == User::Nobody {
                std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
            }
        };
        owner(&lab.home.join(".config"));
        owner(&config_dir);
        for backend in ["bwrap", "landlock"] {
            let what = format!("{} ({})", lab.what(backend), "upgrade");
            let binary = BinaryCopy::at(lab.dir.join(format!("bin-{backend}/sbx-shell")));
            // sbx-shell blocks reading its configuration from a FIFO until we write it: the
            // moment to replace the binary, after it started and before it runs the helper.
            let fifo = config_dir.join("config.json");
            let _ = fs::remove_file(&fifo);
            nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
            owner(&fifo);
            let child = lab
                .command_of(&binary.0, backend, &["-c", "echo UPGRADED-OK"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            fs::remove_file(&binary.0).unwrap();
            fs::write(&binary.0, "#!/bin/sh\necho WRONG-BINARY\n").unwrap();
            fs::write(&fifo, "{}\n").unwrap();
            let out = child.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            println!("{text}\n{}", String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success(), "{what}");
            assert_lines(&text, &["UPGRADED-OK"], &what);
            fs::remove_file(&fifo).unwrap();
        }
    }
}

/// A small xorshift generator: random kill points, reproducible from the printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

#[test]
fn nothing_survives_200_sigkills_at_random_points_of_start_up() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    use std::process::Stdio;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};
    if !tools_present() {
        return;
    }
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    println!("seed {seed}");
    let mut rng = Rng(seed);
    let labs = [
        Lab::new("kill200", User::Root, false),
        Lab::new("kill200", User::Nobody, false),
    ];
    let mut killed = Vec::new();
    for i in 0..200 {
        let lab = &labs[i % 2];
        let backend = ["bwrap", "landlock"][(i / 2) % 2];
        let pty = ["never", "always"][(i / 4) % 2];
        // Up to 60 ms: from before sbx-shell reads its configuration to after the program
        // started (a debug build under bwrap takes about 20).
        let delay = Duration::from_micros(rng.next(60_000));
        let marker = format!("sleep 31337.{i:03}");
        let what = format!(
            "kill {i} after {delay:?}: {} --pty {pty}",
            lab.what(backend)
        );
        let mut child = lab
            .command(
                backend,
                &["--pty", pty, "-c", &format!("{marker} & {marker}")],
            )
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        killed.push(child.id());
        kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
        child.wait().unwrap();
        super::support::wait_until(&format!("{what}: nothing left"), || {
            super::support::pids_with(&marker).is_empty().then_some(())
        });
    }
    // A killed sbx-shell cannot remove its (now empty) session cgroup; the next one does.
    let out = labs[0].command("landlock", &["-c", "true"]).shown();
    assert!(out.status.success());
    assert_eq!(session_cgroups_left(&killed), 0, "stale session cgroups");
    // Control: unconfined, the program outlives a SIGKILL'd sbx-shell.
    let marker = "sleep 31337.999";
    let mut child = labs[0]
        .command("none", &["-c", &format!("{marker}; true")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let supervisor = child.id() as i32;
    super::support::wait_until("the control's program to start", || {
        super::support::pids_with(marker)
            .iter()
            .any(|p| *p != supervisor)
            .then_some(())
    });
    kill(Pid::from_raw(supervisor), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let survivors = super::support::pids_with(marker);
    for pid in &survivors {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    assert!(!survivors.is_empty(), "control: the program survives");
}

#[test]
fn the_private_tmp_and_dev_shm_are_bounded_and_explain_shows_the_size() {
    if !tools_present() {
        return;
    }
    // 12 MiB into an 8 MiB /tmp and /dev/shm: ENOSPC inside, nothing on the host.
    let script = r#"
        head -c 12582912 /dev/zero > /tmp/sbx-tmpfill 2>/dev/null && echo TMP-FULL-WRITE || echo TMP-ENOSPC
        head -c 12582912 /dev/zero > /dev/shm/sbx-tmpfill 2>/dev/null && echo SHM-FULL-WRITE || echo SHM-ENOSPC
        echo w > /tmp/small && echo SMALL-OK
    "#;
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("tmpsize", user, false);
        let what = lab.what("bwrap");
        let out = lab
            .command("bwrap", &["--tmp-mib", "8", "-c", script])
            .shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_lines(&text, &["TMP-ENOSPC", "SHM-ENOSPC"], &what);
        assert!(!Path::new("/tmp/sbx-tmpfill").exists(), "{what}");
        assert!(!Path::new("/dev/shm/sbx-tmpfill").exists(), "{what}");
        // The default (2 GiB) leaves room for it.
        let out = lab.command("bwrap", &["-c", script]).shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_lines(
            &text,
            &["TMP-FULL-WRITE", "SHM-FULL-WRITE", "SMALL-OK"],
            &what,
        );
    }
    let out = std::process::Command::new(super::support::bin())
        .args(["explain", "--tmp-mib", "64"])
        .shown();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("private /tmp and /dev/shm 64 MiB each"),
        "{text}"
    );
}

/// In `pre_exec`: a seccomp filter like a container's default profile — no new namespaces
/// (`unshare`, and `clone` with a namespace flag, fail with EPERM; `clone3`, whose flags a
/// filter cannot read, with ENOSYS so that callers fall back to `clone`).
fn deny_namespaces(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    const CLONE_NEW_ANY: u32 = 0x7E02_0000;
    let ret = |v: u32| libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: v,
    };
    let load = |offset: u32| libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: offset,
    };
    let jeq = |k: u32, jt: u8, jf: u8| libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt,
        jf,
        k,
    };
    let allow = ret(libc::SECCOMP_RET_ALLOW);
    let eperm = ret(libc::SECCOMP_RET_ERRNO | libc::EPERM as u32);
    let enosys = ret(libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
    let filter = vec![
        load(0), // the syscall number
        jeq(libc::SYS_unshare as u32, 5, 0),
        jeq(libc::SYS_clone3 as u32, 5, 0),
        jeq(libc::SYS_clone as u32, 0, 2),
        load(16), // clone's flags (the low half of args[0])
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16,
            jt: 1,
            jf: 0,
            k: CLONE_NEW_ANY,
        },
        allow,
        eperm,
        enosys,
    ];
    // SAFETY: between fork and exec only prctl runs, on a filter built before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr() as *mut libc::sock_filter,
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn where_bwrap_cannot_create_namespaces_auto_doctor_and_require_agree() {
    if !tools_present() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("nons", user, false);
        let what = lab.what("auto");
        let sandboxed = r#"echo "in $SBX_SANDBOX""#;
        // Control: without the filter, auto runs bwrap, silently.
        let out = lab.command("auto", &["-c", sandboxed]).shown();
        assert_lines(&String::from_utf8_lossy(&out.stdout), &["in bwrap"], &what);
        assert!(out.stderr.is_empty(), "{what}: a notice without a cause");
        // Under the filter: auto falls back to Landlock, and says why in one line.
        let mut cmd = lab.command("auto", &["-c", sandboxed]);
        deny_namespaces(&mut cmd);
        let out = cmd.shown();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}");
        assert_lines(
            &String::from_utf8_lossy(&out.stdout),
            &["in landlock"],
            &what,
        );
        assert_eq!(err.lines().count(), 1, "{what}: one line:\n{err}");
        assert!(
            err.contains("bwrap cannot run here")
                && err.contains("seccomp filter on this process")
                && err.contains("--backend landlock"),
            "{what}: {err}"
        );
        // …short, pointing at doctor for what the session goes without.
        assert!(
            err.contains("`sbx-shell doctor` lists what"),
            "{what}: {err}"
        );
        // doctor agrees: bwrap fails with that cause, the default backend is Landlock.
        let mut cmd = std::process::Command::new(lab.bin());
        cmd.arg("doctor").env("HOME", &lab.home);
        if user == User::Nobody {
            use std::os::unix::process::CommandExt;
            cmd.uid(65534).gid(65534);
        }
        deny_namespaces(&mut cmd);
        let out = cmd.shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{what}: doctor says the default can run"
        );
        assert!(
            text.contains("FAIL  bwrap") && text.contains("seccomp filter on this process"),
            "{what}: {text}"
        );
        assert!(
            text.contains("default backend landlock (layers: landlock, seccomp): can run"),
            "{what}: {text}"
        );
        assert!(
            text.contains("without bwrap, these protections are missing here:")
                && text.contains("    - no pid namespace")
                && (text.contains("to enable bwrap: run sbx-shell outside that sandbox")
                    || text.contains("to enable bwrap: start the container with")),
            "{what}: {text}"
        );
        // --require bwrap, and --backend bwrap, refuse with the remedy.
        for (backend, args) in [
            ("auto", vec!["--require", "bwrap,seccomp", "-c", "echo RAN"]),
            ("bwrap", vec!["-c", "echo RAN"]),
        ] {
            let mut cmd = lab.command(backend, &args);
            deny_namespaces(&mut cmd);
            let out = cmd.shown();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what}: {args:?}");
            assert!(out.stdout.is_empty(), "{what}: {args:?} ran");
            assert!(
                err.contains("seccomp filter on this process") && err.contains("Hint: "),
                "{what}: {args:?}: {err}"
            );
        }
    }
}

#[test]
fn the_apparmor_profile_setup_installs_parses_with_apparmor_4() {
    // scripts/test.sh provides an AppArmor 4 parser (this machine's, or Debian 13's).
    let Some(parser) = std::env::var_os("SBX_APPARMOR_PARSER") else {
        super::support::skipped(
            "SBX_APPARMOR_PARSER is not set: an AppArmor 4 apparmor_parser is needed to check the profile `setup` installs (scripts/test.sh provides one)",
        );
        return;
    };
    let dir = super::support::Scratch::new("apparmor");
    let good = sbx_shell::cmd::setup::system::apparmor_profile(Path::new("/usr/bin/bwrap"));
    // The control: the same profile with a rule AppArmor does not know must be refused.
    let bad = good.replace("userns,", "userns_bogus,");
    assert_ne!(good, bad);
    for (text, ok) in [(&good, true), (&bad, false)] {
        let file = dir.path("sbx-shell-bwrap");
        fs::write(&file, text).unwrap();
        let out = std::process::Command::new(&parser)
            .args(["-Q", "-K"])
            .arg(&file)
            .shown();
        assert_eq!(out.status.success(), ok, "{text}");
    }
}

#[test]
fn setup_check_reports_what_is_missing_and_changes_nothing() {
    if !tools_present() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("setup", user, false);
        let what = lab.what("setup");
        let run = |deny: bool, args: &[&str]| {
            let mut cmd = std::process::Command::new(lab.bin());
            cmd.arg("setup")
                .args(args)
                .env_clear()
                .env("HOME", &lab.home)
                .env("PATH", "/usr/bin:/bin")
                .stdin(std::process::Stdio::null());
            if user == User::Nobody {
                use std::os::unix::process::CommandExt;
                cmd.uid(65534).gid(65534);
            }
            if deny {
                deny_namespaces(&mut cmd);
            }
            cmd.shown()
        };
        // Here everything runs: nothing to install.
        let out = run(false, &["--check"]);
        assert!(out.status.success(), "{what}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to install"));
        // Where namespaces are refused: reported with the remedy, exit 1, nothing run.
        for args in [&["--check"][..], &[][..]] {
            let out = run(true, args);
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(1), "{what}: {args:?}");
            assert!(
                text.contains("setup cannot change this: bwrap cannot run")
                    && text.contains("--backend landlock"),
                "{what}: {text}"
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("running:"), "{what}: ran something: {err}");
        }
    }
}

#[test]
fn the_session_lives_in_its_own_cgroup_where_cgroup_v2_is_writable() {
    if !tools_present() || !super::support::require("unshare", "a private cgroup v2 mount") {
        return;
    }
    let lab = Lab::new("cgroup", User::Root, false);
    // This host mounts cgroup v1; a private mount namespace gets a cgroup v2 mount at the
    // usual place, as a systemd host has. sbx-shell runs there as root.
    let sbx = lab.dir.parent().unwrap().join("sbx-shell");
    let script = format!(
        r#"mount -t cgroup2 none /sys/fs/cgroup || exit 90
        {sbx} --backend landlock -c 'grep "^0::" /proc/self/cgroup; setsid sleep 4321.5 & echo started'
        echo "status $?"
        {sbx} --backend landlock --session-processes 50 -c 'echo RAN'
        echo "limited $?""#,
        sbx = sbx.display()
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .current_dir(&lab.ws)
        .env("HOME", &lab.home)
        .shown();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    let cgroup_line = text.lines().find(|l| l.starts_with("0::")).unwrap_or("");
    assert!(cgroup_line.starts_with("0::/sbx-shell-"), "{text}");
    assert_lines(&text, &["started", "status 0"], "the session ran");
    // Its cgroup is gone (the hierarchy is the host's, mounted here at another place).
    let name = cgroup_line.trim_start_matches("0::/");
    assert!(
        session_cgroup_dirs()
            .iter()
            .all(|d| d.file_name().is_none_or(|n| n != name)),
        "{name} was left behind"
    );
    assert!(
        super::support::pids_with("sleep 4321.5").is_empty(),
        "a setsid job survived"
    );
    // pids is bound to cgroup v1 on this host: a session limit is refused, never dropped.
    assert_lines(&text, &["limited 1"], "refused");
    assert!(!text.contains("RAN"), "{text}");
    assert!(
        err.contains("pids.max is not available") && err.contains("Hint: "),
        "{err}"
    );
    // The host as it is (cgroup v2 at /sys/fs/cgroup/unified, without controllers, or none
    // at all): the same refusal, and no cgroup left behind.
    let child = lab
        .command(
            "landlock",
            &["--session-memory-mib", "100", "-c", "echo RAN"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("need a cgroup v2 hierarchy") || err.contains("memory.max is not available"),
        "{err}"
    );
    assert_eq!(
        session_cgroups_left(&[pid]),
        0,
        "session cgroups left behind"
    );
}

/// Session cgroups in this host's cgroup v2 hierarchy, at either of its usual places (the
/// suite's sessions, run by root at its root, make theirs there).
fn session_cgroup_dirs() -> Vec<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .flat_map(|d| fs::read_dir(d).into_iter().flatten().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("sbx-shell-"))
        .map(|e| e.path())
        .collect()
}

/// Those of `pids` (sbx-shells that are gone) left behind.
fn session_cgroups_left(pids: &[u32]) -> usize {
    session_cgroup_dirs()
        .iter()
        .filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str()?.strip_prefix("sbx-shell-")?.parse::<u32>().ok())
                .is_some_and(|pid| pids.contains(&pid))
        })
        .count()
}

#[test]
fn the_helper_skips_a_host_object_that_vanished_and_hides_the_rest() {
    if !tools_present() {
        return;
    }
    // The helper's own step, driven as sbx-shell drives it inside bwrap: one object to hide
    // is gone by the time the sandbox starts (a restarted daemon), one is still there.
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("vanished", user, false);
        let secret = lab.home.join(".netrc");
        let spec = format!(
            r#"{{"new_session":false,"limits":{{"raise_nofile":false,"no_core_dumps":false}},"mounts":[{{"path":"/run/sbx-test-vanished.sock","how":{{"hide":{{"dir":false}}}}}},{{"path":"{}","how":{{"hide":{{"dir":false}}}}}},{{"path":"{}","how":{{"hide":{{"dir":true}}}}}}]}}"#,
            secret.display(),
            lab.home.join(".ssh").display()
        );
        let sbx = lab.dir.parent().unwrap().join("sbx-shell");
        let mut cmd = std::process::Command::new("bwrap");
        let spec = spec_on_fd(&mut cmd, &spec);
        cmd.args(["--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev"])
            .args(["--proc", "/proc", "--cap-add", "CAP_SYS_ADMIN"])
            .args(["--cap-add", "CAP_SETPCAP", "--"])
            .arg(&sbx)
            .args(["__sbx_helper", &spec, "/bin/sh", "sh", "-c"])
            .arg(format!(
                "echo RAN; cat {0}; ls {1}; grep CapEff /proc/self/status; echo x > {0}; touch {1}/new || echo RO",
                secret.display(),
                lab.home.join(".ssh").display(),
            ));
        if user == User::Nobody {
            use std::os::unix::process::CommandExt;
            cmd.uid(65534).gid(65534);
        }
        let out = cmd.shown();
        let text = String::from_utf8_lossy(&out.stdout);
        let what = format!("{user:?}");
        assert!(out.status.success(), "{what}");
        assert_lines(&text, &["RAN", "CapEff:\t0000000000000000", "RO"], &what);
        assert!(!text.contains("CANARY"), "{what}: {text}");
        // Writes to the hidden file went to /dev/null.
        let kept = fs::read_to_string(&secret).unwrap();
        assert!(kept.starts_with("CANARY"), "{what}: {kept}");
    }
}

/// The hides live in the helper's own mount namespace; whatever stays in bwrap's would see
/// the host's tree through `/proc/PID/root`. Checked without Landlock (a kernel before ABI
/// 6 runs bwrap without it, and Landlock's ptrace scoping would refuse the read anyway),
/// with bwrap's flags as sbx-shell passes them: the guard is pid 1, nothing is left in
/// bwrap's namespace. The control, with bwrap's own init as pid 1, reads the secret.
#[test]
fn no_process_of_the_sandbox_sees_the_tree_before_the_hides() {
    if !tools_present() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("procroot", user, false);
        let secret = lab.home.join(".netrc");
        let spec = format!(
            r#"{{"new_session":false,"limits":{{"raise_nofile":false,"no_core_dumps":false}},"drop_privileges":true,"guard":true,"mounts":[{{"path":"{}","how":{{"hide":{{"dir":false}}}}}}]}}"#,
            secret.display()
        );
        let sbx = lab.dir.parent().unwrap().join("sbx-shell");
        let run = |as_pid_1: bool| {
            let mut cmd = std::process::Command::new("bwrap");
            let spec = spec_on_fd(&mut cmd, &spec);
            cmd.args(["--die-with-parent", "--new-session", "--unshare-pid"]);
            if as_pid_1 {
                cmd.arg("--as-pid-1");
            }
            cmd.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
                .args(["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP", "--"])
                .arg(&sbx)
                .args(["__sbx_helper", &spec, "/bin/sh", "sh", "-c"])
                .arg(format!(
                    "cat {0}; for p in /proc/[0-9]*; do cat $p/root{0} 2>/dev/null; done; echo SCANNED",
                    secret.display()
                ));
            if user == User::Nobody {
                use std::os::unix::process::CommandExt;
                cmd.uid(65534).gid(65534);
            }
            let out = cmd.shown();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let what = format!("{user:?}");
        let text = run(true);
        assert_lines(&text, &["SCANNED"], &what);
        assert!(!text.contains("CANARY"), "{what}: {text}");
        let control = run(false);
        assert!(control.contains("CANARY"), "{what}: control: {control}");
    }
    // And sbx-shell passes bwrap exactly that: its helper is pid 1.
    let out = std::process::Command::new(super::support::bin())
        .args(["explain", "--show", "bwrap"])
        .shown();
    let argv = String::from_utf8_lossy(&out.stdout);
    assert!(argv.contains(" --unshare-pid --as-pid-1 "), "{argv}");
}
