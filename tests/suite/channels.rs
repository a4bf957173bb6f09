//! Host channels (issue 15): the host's unix sockets, the environment, root's credentials,
//! the terminal's clipboard and what other users see in `ps` — each attacked from inside,
//! beside an unconfined control that shows the same attack works without sbx-shell.

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::sandbox::{assert_lines, tools_present, Lab, User, NOBODY, PYTHON};
use super::support::{bin_quoted, find, sh_quote, Launch, OuterPty, Shown, Tmux};

const CANARY: &str = "CANARY-15c0ffee";

/// A unix socket server of the host: answers `PONG PATH` on every path it listens on.
const SERVER: &str = r#"
import os, select, socket, sys
socks = {}
for p in sys.argv[1:]:
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX)
    s.bind(p)
    os.chmod(p, 0o777)
    s.listen(16)
    socks[s] = p
print("LISTENING", flush=True)
while True:
    for s in select.select(list(socks), [], [])[0]:
        c, _ = s.accept()
        c.sendall(("PONG " + socks[s] + "\n").encode())
        c.close()
"#;

/// Tries each path: `REACHED PATH` or `REFUSED PATH`.
const CLIENT: &str = r#"
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(3)
    try:
        s.connect(p)
        print("REACHED", p, s.recv(200).decode().strip())
    except Exception as e:
        print("REFUSED", p, type(e).__name__)
"#;

/// Socket servers started by the host, stopped (and their files removed) on drop.
struct Servers {
    children: Vec<Child>,
    paths: Vec<PathBuf>,
    made_dirs: Vec<PathBuf>,
}

impl Servers {
    /// One server in this network namespace for `paths`, and one in a network namespace
    /// of its own for `elsewhere` (not in this namespace's list of sockets).
    fn start(paths: &[PathBuf], elsewhere: &[PathBuf]) -> Servers {
        let mut children = Vec::new();
        for (list, own_netns) in [(paths, false), (elsewhere, true)] {
            if list.is_empty() {
                continue;
            }
            let mut cmd = if own_netns {
                let mut c = Command::new("unshare");
                c.args(["--net", PYTHON]);
                c
            } else {
                Command::new(PYTHON)
            };
            let mut child = cmd
                .arg("-c")
                .arg(SERVER)
                .args(list)
                .stdout(Stdio::piped())
                .stdin(Stdio::null())
                .spawn()
                .unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.as_mut().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line.trim(), "LISTENING");
            children.push(child);
        }
        Servers {
            children,
            paths: paths.iter().chain(elsewhere).cloned().collect(),
            made_dirs: Vec::new(),
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for path in &self.paths {
            let _ = fs::remove_file(path);
        }
        for dir in &self.made_dirs {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// `/run/user/UID` for the lab's user, made (0700, theirs) when missing as logind would;
/// and whether it was made here.
fn runtime_dir(user: User) -> (PathBuf, bool) {
    let uid = if user == User::Nobody { NOBODY } else { 0 };
    let dir = PathBuf::from(format!("/run/user/{uid}"));
    if dir.exists() {
        return (dir, false);
    }
    fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    (dir, true)
}

fn tag(lab: &Lab) -> String {
    lab.dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// Run the client on `paths` through sbx-shell (`backend`, `args`), `xdg` as
/// `$XDG_RUNTIME_DIR` (or unset).
fn connect(lab: &Lab, backend: &str, args: &[&str], xdg: Option<&Path>, paths: &[&str]) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--", PYTHON, "-c", CLIENT]);
    all.extend(paths);
    let mut cmd = lab.command(backend, &all);
    if let Some(dir) = xdg {
        cmd.env("XDG_RUNTIME_DIR", dir);
    }
    let out = cmd.shown();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn reached(out: &str, path: &str) -> bool {
    out.lines()
        .any(|l| l.starts_with(&format!("REACHED {path} PONG")))
}

#[test]
fn no_host_socket_is_reachable_unless_granted() {
    if !tools_present() {
        return;
    }
    // bwrap only: Landlock alone cannot mediate pathname sockets on this kernel (issue 16).
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("sockets", user, false);
        let t = tag(&lab);
        let (runtime, made) = runtime_dir(user);
        let run = PathBuf::from(format!("/run/sbx-t15-{t}.sock"));
        let home = lab.home.join("agent.sock");
        let var_run = PathBuf::from(format!("/var/run/sbx-t15-{t}-v.sock"));
        let in_runtime = runtime.join(format!("sbx-t15-{t}.sock"));
        let other_netns = PathBuf::from(format!("/run/sbx-t15-{t}-ns.sock"));
        let mut servers = Servers::start(
            &[
                run.clone(),
                home.clone(),
                var_run.clone(),
                in_runtime.clone(),
            ],
            std::slice::from_ref(&other_netns),
        );
        if made {
            servers.made_dirs.push(runtime.clone());
        }
        // Connected to by these names: /var/run's through the link, and its /run spelling.
        let var_run_as_run = format!("/run/sbx-t15-{t}-v.sock");
        let names: Vec<String> = [&run, &home, &var_run, &in_runtime, &other_netns]
            .iter()
            .map(|p| p.display().to_string())
            .chain([var_run_as_run])
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let what = lab.what("bwrap");
        // Control: unconfined, every one answers.
        let control = connect(&lab, "none", &[], Some(&runtime), &names);
        for name in &names {
            assert!(
                reached(&control, name),
                "{what}: control: {name}:\n{control}"
            );
        }
        for xdg in [Some(runtime.as_path()), None] {
            let out = connect(&lab, "bwrap", &[], xdg, &names);
            for name in &names {
                assert!(
                    out.lines()
                        .any(|l| l.starts_with(&format!("REFUSED {name} "))),
                    "{what}, XDG_RUNTIME_DIR {xdg:?}: {name} answered:\n{out}"
                );
            }
        }
        // A granted one answers; the rest stay hidden.
        let granted = run.display().to_string();
        let out = connect(&lab, "bwrap", &["--allow-socket", &granted], None, &names);
        assert!(
            reached(&out, &granted),
            "{what}: the granted socket:\n{out}"
        );
        for name in names.iter().filter(|n| **n != granted) {
            assert!(!reached(&out, name), "{what}: {name} answered:\n{out}");
        }
        // A grant in the runtime directory opens that socket only.
        let granted = in_runtime.display().to_string();
        let out = connect(
            &lab,
            "bwrap",
            &["--allow-socket", &granted],
            Some(&runtime),
            &names,
        );
        assert!(
            reached(&out, &granted),
            "{what}: the granted socket:\n{out}"
        );
        assert!(!reached(&out, names[0]), "{what}:\n{out}");
    }
}

#[test]
fn socket_variables_and_credentials_by_value_are_dropped_unless_granted() {
    if !tools_present() {
        return;
    }
    let script = "env | sort; echo ENV-DONE";
    for user in [User::Root, User::Nobody] {
        let lab = Lab::new("variables", user, false);
        let t = tag(&lab);
        let agent = PathBuf::from(format!("/run/sbx-t15-{t}-agent.sock"));
        let ctl = lab.home.join("app-ctl.sock");
        let _servers = Servers::start(&[agent.clone(), ctl.clone()], &[]);
        let env = [
            ("SSH_AUTH_SOCK", agent.display().to_string()),
            ("SSH_AGENT_PID", "4242".into()),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/run/user/4242/bus".into(),
            ),
            ("DISPLAY", ":0".into()),
            ("WAYLAND_DISPLAY", "wayland-0".into()),
            ("APP_CONTROL", ctl.display().to_string()),
            (
                "DATABASE_URL",
                "postgres://app:hunter2@db.internal/app".into(),
            ),
            ("NOTES", "ghp_0123456789abcdefghijABCDEFGHIJ012345".into()),
            (
                "GH_PAT",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop".into(),
            ),
            (
                "OPENAI_KEY",
                "sk-proj-abcdefghijklmnopqrstuvwxyz0123".into(),
            ),
            ("INNOCENT", "AKIAIOSFODNN7EXAMPLE".into()),
            ("KEEP_ME", "plain value".into()),
            ("REPO", "https://github.com/org/repo.git".into()),
        ];
        let gone = &env[..11];
        let run = |backend: &str, args: &[&str]| {
            let mut all: Vec<&str> = args.to_vec();
            all.extend(["-c", script]);
            let mut cmd = lab.command(backend, &all);
            cmd.envs(env.iter().map(|(k, v)| (k, v)));
            let out = cmd.shown();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let has = |out: &str, name: &str| out.lines().any(|l| l.starts_with(&format!("{name}=")));
        // Control: without sbx-shell every variable reaches the program.
        let mut control = Command::new("sh");
        control
            .args(["-c", script])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)));
        let control = String::from_utf8_lossy(&control.shown().stdout).into_owned();
        for (name, _) in &env {
            assert!(has(&control, name), "control: {name}:\n{control}");
        }
        for backend in ["bwrap", "landlock"] {
            let what = lab.what(backend);
            let out = run(backend, &[]);
            assert_lines(&out, &["ENV-DONE"], &what);
            for (name, _) in gone {
                assert!(!has(&out, name), "{what}: {name} passed:\n{out}");
            }
            assert!(has(&out, "KEEP_ME") && has(&out, "REPO"), "{what}:\n{out}");
            // Granted: the socket by path, the values by name. Landlock alone refuses a
            // socket grant (it connects only to the program's own sockets), with a hint.
            let agent_path = agent.display().to_string();
            let socket: &[&str] = &["--allow-socket", &agent_path];
            let values: &[&str] = &["--allow-env", "DATABASE_URL", "--allow-env", "NOTES"];
            let granted: &[&str] = if backend == "landlock" {
                let mut all = [socket, values].concat();
                all.extend(["-c", "echo RAN"]);
                let refused = lab.command(backend, &all).shown();
                let err = String::from_utf8_lossy(&refused.stderr);
                assert!(!refused.status.success(), "{what}: {err}");
                assert!(
                    err.contains("cannot grant the host socket") && err.contains("Hint: "),
                    "{what}: {err}"
                );
                assert!(!String::from_utf8_lossy(&refused.stdout).contains("RAN"));
                &["DATABASE_URL", "NOTES"]
            } else {
                &["SSH_AUTH_SOCK", "SSH_AGENT_PID", "DATABASE_URL", "NOTES"]
            };
            let args = if backend == "landlock" {
                values.to_vec()
            } else {
                [socket, values].concat()
            };
            let out = run(backend, &args);
            for name in granted {
                assert!(has(&out, name), "{what}: granted {name} missing:\n{out}");
            }
            for name in ["APP_CONTROL", "DISPLAY", "GH_PAT", "INNOCENT"] {
                assert!(!has(&out, name), "{what}: {name} passed:\n{out}");
            }
        }
    }
}

/// A root-only file in /etc, removed on drop.
struct EtcSecret(PathBuf);

impl Drop for EtcSecret {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[test]
fn root_cannot_read_root_only_credentials_unless_the_policy_allows_it() {
    if !tools_present() {
        return;
    }
    let secret = EtcSecret(PathBuf::from(format!(
        "/etc/sbx-t15-secret-{}",
        std::process::id()
    )));
    fs::write(&secret.0, format!("{CANARY}\n")).unwrap();
    fs::set_permissions(&secret.0, fs::Permissions::from_mode(0o600)).unwrap();
    let shadow_line = fs::read_to_string("/etc/shadow")
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    let host_keys: Vec<PathBuf> = fs::read_dir("/etc/ssh")
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    name.starts_with("ssh_host_") && name.ends_with("_key")
                })
                .collect()
        })
        .unwrap_or_default();
    let mut script = format!(
        "cat /etc/shadow /etc/gshadow {} 2>&1; head -1 /etc/passwd; echo DONE\n",
        secret.0.display()
    );
    for key in &host_keys {
        script += &format!("cat {} 2>&1 | head -1\n", key.display());
    }
    let lab = Lab::new("rootsecrets", User::Root, false);
    // Control: unconfined root reads them all.
    let (_, control, _) = lab.sh("none", &[], &script);
    assert!(
        control.contains(CANARY) && control.contains(&shadow_line),
        "control:\n{control}"
    );
    for key in &host_keys {
        let first = fs::read_to_string(key).unwrap();
        assert!(
            control.contains(first.lines().next().unwrap()),
            "control: {}",
            key.display()
        );
    }
    for backend in ["bwrap", "landlock"] {
        let what = lab.what(backend);
        let (_, out, err) = lab.sh(backend, &[], &script);
        assert_lines(&out, &["DONE"], &format!("{what}: {err}"));
        assert!(
            out.contains("root:x:0:0"),
            "{what}: /etc/passwd unreadable:\n{out}"
        );
        assert!(
            !out.contains(CANARY),
            "{what}: a root-only file was read:\n{out}"
        );
        assert!(
            !out.contains(&shadow_line),
            "{what}: /etc/shadow was read:\n{out}"
        );
        assert!(
            !out.contains("PRIVATE KEY"),
            "{what}: a host key was read:\n{out}"
        );
    }
    // The policy allows one back: the user's configuration takes it out of the denied set.
    let config = lab.home.join(".config/sbx-shell");
    fs::create_dir_all(&config).unwrap();
    fs::write(
        config.join("config.json"),
        format!(
            r#"{{"filesystem": {{"allow_denied": ["{}"]}}}}"#,
            secret.0.display()
        ),
    )
    .unwrap();
    for backend in ["bwrap", "landlock"] {
        let what = lab.what(backend);
        let (_, out, err) = lab.sh(backend, &[], &script);
        assert!(
            out.contains(CANARY),
            "{what}: allowed, still unreadable:\n{out}\n{err}"
        );
        assert!(
            !out.contains(&shadow_line),
            "{what}: /etc/shadow was read:\n{out}"
        );
    }
}

/// Root-only files planted across the host for one test, removed on drop.
struct Planted(Vec<PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for path in &self.0 {
            let _ = fs::remove_dir_all(path);
            let _ = fs::remove_file(path);
        }
    }
}

/// Root's secrets are found by rule wherever they are, not in a list of places: files and
/// directories only uid 0 may read under /opt, /usr/local and /srv (deep), beside readable
/// ones; a root-only directory holding the workspace is walked into, not denied; a file
/// made after the walk's record is found at the next start; the policy allows one back.
/// The control, unconfined, reads them all.
#[test]
fn root_only_files_are_denied_wherever_they_are() {
    if !tools_present() {
        return;
    }
    let tag = format!("sbx-t30-{}", std::process::id());
    let (opt, srv) = (
        PathBuf::from(format!("/opt/{tag}")),
        PathBuf::from(format!("/srv/{tag}")),
    );
    let local_key = PathBuf::from(format!("/usr/local/etc/{tag}.key"));
    let _planted = Planted(vec![opt.clone(), srv.clone(), local_key.clone()]);
    let plant = |path: &Path, text: &str, mode: u32| {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, format!("{text}\n")).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    };
    plant(&opt.join("app/key"), "SECRET-OPT", 0o600);
    plant(&opt.join("app/public"), "PUBLIC-OPT", 0o644);
    plant(&local_key, "SECRET-LOCAL", 0o640);
    plant(&srv.join("a/b/c/token"), "SECRET-DEEP", 0o600);
    plant(&srv.join("private/readable"), "SECRET-IN-DIR", 0o644);
    fs::set_permissions(srv.join("private"), fs::Permissions::from_mode(0o700)).unwrap();
    plant(&srv.join("locked/ws/README"), "WS-FILE", 0o644);
    plant(&srv.join("locked/other/key"), "SECRET-SIBLING", 0o644);
    fs::set_permissions(srv.join("locked/other"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(srv.join("locked"), fs::Permissions::from_mode(0o700)).unwrap();
    let files = [
        opt.join("app/key"),
        opt.join("app/public"),
        local_key.clone(),
        srv.join("a/b/c/token"),
        srv.join("private/readable"),
        srv.join("locked/other/key"),
        opt.join("app/late.key"),
    ];
    let script = files
        .iter()
        .map(|f| format!("cat {} 2>/dev/null\n", f.display()))
        .collect::<String>()
        + "cat README && echo x > written && echo WS-WRITTEN\n";
    let secrets = [
        "SECRET-OPT",
        "SECRET-LOCAL",
        "SECRET-DEEP",
        "SECRET-IN-DIR",
        "SECRET-SIBLING",
        "SECRET-LATE",
    ];
    let lab = Lab::new("root-only-anywhere", User::Root, false);
    let run = |backend: &str, args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-c", script.as_str()]);
        let out = lab
            .command(backend, &all)
            .current_dir(srv.join("locked/ws"))
            .shown();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Control: unconfined root reads every one.
    plant(&opt.join("app/late.key"), "SECRET-LATE", 0o600);
    let (control, _) = run("none", &[]);
    for line in secrets
        .iter()
        .chain(&["PUBLIC-OPT", "WS-FILE", "WS-WRITTEN"])
    {
        assert_lines(&control, &[line], "control");
    }
    fs::remove_file(opt.join("app/late.key")).unwrap();
    for backend in ["bwrap", "landlock"] {
        let (out, err) = run(backend, &[]);
        let what = format!("{backend}:\n{out}\n{err}");
        assert_lines(&out, &["PUBLIC-OPT", "WS-FILE", "WS-WRITTEN"], &what);
        for secret in secrets {
            assert!(!out.contains(secret), "{what}: {secret} was read");
        }
        // Made after the last walk, in a directory the record knows: found at the next start.
        plant(&opt.join("app/late.key"), "SECRET-LATE", 0o600);
        let (out, err) = run(backend, &[]);
        let what = format!("{backend}, later:\n{out}\n{err}");
        assert_lines(&out, &["PUBLIC-OPT", "WS-FILE"], &what);
        assert!(!out.contains("SECRET-LATE"), "{what}: made later, read");
        fs::remove_file(opt.join("app/late.key")).unwrap();
    }
    // The policy allows one back (and a grant to read it does too).
    let token = srv.join("a/b/c/token").display().to_string();
    let config = lab.home.join(".config/sbx-shell");
    fs::create_dir_all(&config).unwrap();
    fs::write(
        config.join("config.json"),
        format!(r#"{{"filesystem": {{"allow_denied": ["{token}"]}}}}"#),
    )
    .unwrap();
    for backend in ["bwrap", "landlock"] {
        let (out, err) = run(backend, &[]);
        let what = format!("{backend}, allowed:\n{out}\n{err}");
        assert_lines(&out, &["SECRET-DEEP"], &what);
        assert!(!out.contains("SECRET-OPT"), "{what}");
    }
    fs::remove_file(config.join("config.json")).unwrap();
    let key = opt.join("app/key").display().to_string();
    let (out, err) = run("bwrap", &["--read", &key]);
    assert_lines(&out, &["SECRET-OPT"], &format!("granted:\n{out}\n{err}"));
}

/// A program that sets the clipboard, asks for it, then reports what its input brought.
const CLIPBOARD_PROGRAM: &str = r#"
import os, select, sys, tty
tty.setraw(0)
os.write(1, b"A\x1b]52;c;c2V0Ynk=\x07B\x1b]52;c;?\x1b\\C READY\r\n")
data = b""
while select.select([0], [], [], 1.5)[0]:
    data += os.read(0, 1000)
os.write(1, b"GOT " + data.hex().encode() + b" END\r\n")
"#;

const SET: &[u8] = b"\x1b]52;c;c2V0Ynk=\x07";
const ASK: &[u8] = b"\x1b]52;c;?\x1b\\";
/// What a terminal answers to `ASK`: the host's clipboard, on the program's input.
const ANSWER: &[u8] = b"\x1b]52;c;aG9zdCBjbGlwYm9hcmQ=\x07typed";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// (what reached the terminal, what reached the program, the session's journal while it
/// ran) for one run on an outer pty.
fn clipboard_run(mut outer: OuterPty, journaled: bool) -> (Vec<u8>, String, String) {
    outer.expect("READY");
    // Recorded as it happened: in the session's journal while the program still runs
    // (waiting for its input); two seconds at most.
    let journal = std::path::PathBuf::from(std::env::var_os("XDG_STATE_HOME").unwrap())
        .join(format!("sbx-shell/refusals/{}.jsonl", outer.pid()));
    let mut seen = String::new();
    for _ in 0..(if journaled { 40 } else { 0 }) {
        seen = std::fs::read_to_string(&journal).unwrap_or_default();
        if seen.contains("\"kind\":\"clipboard\"") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    outer.write(ANSWER);
    let text = outer.expect("END");
    outer.wait();
    let got = text
        .split("GOT ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("")
        .to_string();
    (outer.output(), got, seen)
}

#[test]
fn the_terminal_clipboard_follows_the_policy() {
    if !tools_present() {
        return;
    }
    // Outside any repository: Landlock alone refuses a writable one (issue 16).
    let lab = Lab::new("clipboard", User::Root, false);
    let launch = |args: &[&str]| {
        let mut launch = Launch::new(args);
        launch.cwd = Some(lab.ws.clone());
        launch
    };
    // Control: the same program on a terminal without sbx-shell.
    let control = OuterPty::launch_program(PYTHON, launch(&["-c", CLIPBOARD_PROGRAM]));
    let (shown, got, _) = clipboard_run(control, false);
    assert!(
        find(&shown, SET).is_some() && find(&shown, ASK).is_some(),
        "control"
    );
    assert!(got.contains(&hex(ANSWER)), "control: {got}");
    let cases: [(&str, &[&str], bool, bool); 4] = [
        ("bwrap", &[], false, false),
        ("landlock", &[], false, false),
        ("bwrap", &["--clipboard", "write"], true, false),
        ("bwrap", &["--clipboard", "read-write"], true, true),
    ];
    for (backend, flags, sets, asks) in cases {
        let mut args = vec!["--backend", backend];
        args.extend(flags);
        args.extend(["--", PYTHON, "-c", CLIPBOARD_PROGRAM]);
        let (shown, got, journal) = clipboard_run(OuterPty::launch(launch(&args)), !asks);
        let what = format!("{backend} {flags:?}");
        assert_eq!(find(&shown, SET).is_some(), sets, "{what}: the set request");
        assert_eq!(
            find(&shown, ASK).is_some(),
            asks,
            "{what}: the report request"
        );
        // The answer reaches the program only when reading is allowed; typing always does.
        assert_eq!(
            got.contains(&hex(&ANSWER[..ANSWER.len() - 5])),
            asks,
            "{what}: {got}"
        );
        assert!(got.ends_with(&hex(b"typed")), "{what}: {got}");
        // Everything else of the output went through, in order.
        let text = String::from_utf8_lossy(&shown);
        assert!(
            text.contains('A') && text.contains("C READY"),
            "{what}: {text}"
        );
        if !asks {
            assert!(
                journal.contains("\"kind\":\"clipboard\""),
                "{what}: not in the journal while it ran: {journal}"
            );
            assert!(
                text.contains("  clipboard requests: ")
                    && text.contains(if sets {
                        "→ --clipboard read-write"
                    } else {
                        "→ --clipboard write"
                    }),
                "{what}: no end line:\n{text}"
            );
        }
    }
}

/// Waits for Enter, then asks the terminal to set the clipboard four times, spelling
/// the number as tmux reads it: `52`, `052`, `0052`, and `52` after a NUL, which tmux's
/// parser passes over ("first set" … "fourth set").
const SET_ON_ENTER: &str = r#"
import os, sys
print("READY", flush=True)
sys.stdin.readline()
os.write(1, b"\x1b]52;c;Zmlyc3Qgc2V0\x07")
os.write(1, b"\x1b]052;c;c2Vjb25kIHNldA==\x07")
os.write(1, b"\x1b]0052;c;dGhpcmQgc2V0\x07")
os.write(1, b"\x1b]\x0052;c;Zm91cnRoIHNldA==\x07")
print("SENT", flush=True)
os.system("sleep 30")
"#;

/// What `SET_ON_ENTER` asks tmux to keep, one buffer per spelling.
const SETS: [&str; 4] = ["first set", "second set", "third set", "fourth set"];

/// tmux as the terminal (with `set-clipboard on`, a pane's OSC 52 sets a tmux buffer): the
/// buffers after `command` ran `SET_ON_ENTER`.
fn tmux_buffers(command: &str) -> String {
    let tmux = Tmux::start(command, 100, 30);
    tmux.expect("READY");
    tmux.run(&["set-option", "-g", "set-clipboard", "on"]);
    tmux.type_line("");
    tmux.expect("SENT");
    let buffers = tmux.run(&["list-buffers", "-F", "#{buffer_sample}"]);
    let _ = tmux.run(&["kill-server"]);
    buffers
}

#[test]
fn a_terminal_multiplexer_gets_no_clipboard_request_unless_allowed() {
    if !tools_present() || !super::support::require("tmux", "tmux as the terminal") {
        return;
    }
    let lab = Lab::new("clipboard-tmux", User::Root, false);
    let program = lab.ws.join("set.py");
    fs::write(&program, SET_ON_ENTER).unwrap();
    let run = |sbx: &str| {
        format!(
            "cd {} && {sbx} {PYTHON} {}",
            sh_quote(lab.ws.to_str().unwrap()),
            sh_quote(program.to_str().unwrap())
        )
    };
    // Control: straight in the pane, each spelling sets a tmux buffer.
    let control = tmux_buffers(&run(""));
    for set in SETS {
        assert!(control.contains(set), "control: {set} in {control:?}");
    }
    for backend in ["bwrap", "landlock"] {
        let sbx = format!("{} --backend {backend} --", bin_quoted());
        let closed = tmux_buffers(&run(&sbx));
        for set in SETS {
            assert!(!closed.contains(set), "{backend}: {set} in {closed:?}");
        }
    }
    let sbx = format!("{} --backend bwrap --clipboard write --", bin_quoted());
    let open = tmux_buffers(&run(&sbx));
    for set in SETS {
        assert!(open.contains(set), "--clipboard write: {set} in {open:?}");
    }
}

/// Every command line on this host that contains `needle`.
fn command_lines_with(needle: &str) -> Vec<String> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(needle))
        .collect()
}

#[test]
fn no_policy_text_is_in_any_command_line() {
    if !tools_present() {
        return;
    }
    for backend in ["bwrap", "landlock"] {
        let lab = Lab::new("cmdline", User::Nobody, false);
        let marker = lab.outside.join(format!("granted-{}", tag(&lab)));
        fs::create_dir_all(&marker).unwrap();
        super::sandbox::chown_tree(&marker, NOBODY);
        let marker = marker.display().to_string();
        // The grant comes from the configuration: the command line the user typed names
        // nothing of the policy, and nothing sbx-shell starts may add it.
        let config = lab.home.join(".config/sbx-shell");
        fs::create_dir_all(&config).unwrap();
        fs::write(
            config.join("config.json"),
            format!(r#"{{"filesystem": {{"write": ["{marker}"], "deny": ["{marker}-denied"]}}}}"#),
        )
        .unwrap();
        super::sandbox::chown_tree(&lab.home.join(".config"), NOBODY);
        let mut session = lab
            .command(backend, &["--", "sleep", "30"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Running: the program's own command line is there (nothing of the policy).
        super::support::wait_until("the session's sleep", || {
            command_lines_with("__sbx_helper")
                .iter()
                .any(|c| c.ends_with("sleep sleep 30 "))
                .then_some(())
        });
        let leaked: Vec<String> = ["\"mounts\"", "\"landlock\"", "\"seccomp\"", marker.as_str()]
            .iter()
            .flat_map(|n| command_lines_with(n))
            .collect();
        let _ = session.kill();
        let _ = session.wait();
        assert!(
            leaked.is_empty(),
            "{backend}: policy text in ps: {leaked:?}"
        );
    }
    // Control: the same scan finds a path in a command line.
    let mut visible = Command::new("sh")
        .args(["-c", "sleep 30; :", "/var/tmp/sbx-t15-visible-marker"])
        .spawn()
        .unwrap();
    super::support::wait_until("the control's command line", || {
        (!command_lines_with("sbx-t15-visible-marker").is_empty()).then_some(())
    });
    let _ = visible.kill();
    let _ = visible.wait();
}

#[test]
fn the_files_sbx_shell_writes_are_private_even_where_an_older_version_left_them_open() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("private-files", User::Nobody, false);
    let state = lab.home.join(".local/state/sbx-shell");
    fs::create_dir_all(&state).unwrap();
    fs::write(state.join("network.log"), "old line\n").unwrap();
    fs::write(state.join("sessions.jsonl"), "").unwrap();
    super::sandbox::chown_tree(&lab.home.join(".local"), NOBODY);
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let set = |p: &Path, m: u32| fs::set_permissions(p, fs::Permissions::from_mode(m)).unwrap();
    set(&state, 0o755);
    set(&state.join("network.log"), 0o644);
    set(&state.join("sessions.jsonl"), 0o644);
    // A refused connection writes the network log.
    let (_, out, err) = lab.sh(
        "bwrap",
        &["--net", "allow=allowed.test"],
        r#"curl -s -o /dev/null -w "CODE %{http_code}\n" -x "$HTTP_PROXY" http://other.test/"#,
    );
    assert_lines(&out, &["CODE 403"], &err);
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&state.join("network.log")), 0o600);
    assert_eq!(mode(&state.join("sessions.jsonl")), 0o600);
    assert!(fs::read_to_string(state.join("network.log"))
        .unwrap()
        .contains("other.test"));
    let config = lab.home.join(".config/sbx-shell");
    assert_eq!(mode(&config), 0o700);
}
