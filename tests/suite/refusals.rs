//! What the sandbox refused, explained: the end-of-session summary names each kind with
//! its option (and the option given, the action succeeds), the session log keeps every
//! one, the program reads its own through `SBX_REFUSALS`, `sbx-shell log --follow` shows
//! them live from another terminal, and `sbx-shell why` names each rule's source.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::sandbox::{assert_lines, tools_present, Lab, User};
use super::support::{require, OuterPty, Shown};

/// Writes outside, into a protected place and into a hidden one, and what the program
/// reads of its own refusals (then tries to write to them).
const ACTIONS: &str = r#"
touch "$LAB_OUT/made" && echo MADE-OUTSIDE
echo x > .git/hooks/post-checkout && echo MADE-HOOK
touch ~/.ssh/new && echo MADE-HIDDEN || wait=1
test -n "$GH_TOKEN" && echo HAS-TOKEN
echo "JOURNAL $SBX_REFUSALS"
# The refusals arrive within milliseconds: wait for the last one (two seconds at most).
for i in $(seq 40); do test -z "$wait" && break; grep -q '/.ssh/new"' "$SBX_REFUSALS" && break; sleep 0.05; done
cat "$SBX_REFUSALS"
echo tampered >> "$SBX_REFUSALS" || echo JOURNAL-READ-ONLY
"#;

fn run(lab: &Lab, backend: &str, args: &[&str]) -> (String, String) {
    let mut all = args.to_vec();
    all.extend(["--", "/bin/sh", "-c", ACTIONS]);
    let mut cmd = lab.command(backend, &all);
    cmd.env("GH_TOKEN", "ghp_not_a_real_token_for_tests");
    let out = cmd.shown();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// sbx-shell with the lab's home, for a subcommand (no `--backend` before it).
fn subcommand(lab: &Lab, args: &[&str]) -> Command {
    let mut cmd = Command::new(super::support::bin());
    cmd.args(args)
        .current_dir(&lab.ws)
        .env_clear()
        .env("HOME", &lab.home)
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null());
    cmd
}

fn summary_line<'a>(err: &'a str, title: &str) -> &'a str {
    err.lines()
        .find(|l| l.starts_with(&format!("  {title}: ")))
        .unwrap_or("")
}

fn each_refusal_is_summed_up(backend: &str, user: User) {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals", user, true);
    let out = lab.outside.display().to_string();
    // Control: the same actions bare succeed (the refusals below are the sandbox's).
    std::fs::create_dir_all(lab.outside.join("bare")).unwrap();
    let bare = Command::new("/bin/sh")
        .args(["-c", ACTIONS])
        .current_dir(&lab.ws)
        .env("HOME", &lab.home)
        .env("LAB_OUT", lab.outside.join("bare"))
        .env("GH_TOKEN", "x")
        .output()
        .unwrap();
    let bare = String::from_utf8_lossy(&bare.stdout).into_owned();
    for line in ["MADE-OUTSIDE", "MADE-HOOK", "MADE-HIDDEN", "HAS-TOKEN"] {
        assert!(bare.contains(line), "control: {bare}");
    }
    std::fs::remove_file(lab.ws.join(".git/hooks/post-checkout")).unwrap();
    std::fs::remove_file(lab.home.join(".ssh/new")).unwrap();
    std::fs::remove_dir_all(lab.outside.join("bare")).unwrap();

    let (text, err) = run(&lab, backend, &[]);
    let what = format!("{}\nstdout:\n{text}\nstderr:\n{err}", lab.what(backend));
    for line in ["MADE-OUTSIDE", "MADE-HOOK", "MADE-HIDDEN", "HAS-TOKEN"] {
        assert!(!text.contains(line), "{what}");
    }
    assert!(
        err.contains("sbx-shell: the sandbox refused 4 requests"),
        "{what}"
    );
    assert_eq!(
        summary_line(&err, "writes outside the writable places"),
        format!("  writes outside the writable places: 1 ({out}/made) → --write {out}"),
        "{what}"
    );
    // The hook, and the program's own journal, which it tried to write.
    let protected = summary_line(&err, "protected places written");
    assert!(
        protected.starts_with("  protected places written: 2 (~/.local/state/sbx-shell/refusals/")
            && protected.contains(&format!(
                ".jsonl, {}/.git/hooks/post-checkout) → none: ",
                lab.ws.display()
            )),
        "{what}"
    );
    assert_eq!(
        summary_line(&err, "hidden paths"),
        r#"  hidden paths: 1 (~/.ssh/new) → "filesystem": {"allow_denied": ["~/.ssh"]} in a config file"#,
        "{what}"
    );
    // A variable kept from the program is not something it asked for: in the journal and
    // the session log, not in the summary.
    assert_eq!(summary_line(&err, "variables kept out"), "", "{what}");
    // The program read its own refusals, as they happened, and could not change them.
    let journal = text
        .lines()
        .find_map(|l| l.strip_prefix("JOURNAL "))
        .unwrap_or_default();
    assert!(journal.ends_with(".jsonl"), "{what}");
    let kinds: Vec<String> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["variable", "write", "protected", "hidden"],
        "{what}"
    );
    assert!(text.contains("JOURNAL-READ-ONLY"), "{what}");
    assert!(
        !std::path::Path::new(journal).exists(),
        "{what}: left behind"
    );
    // The session log keeps every one, by kind.
    let (log, shown) = log_of(&lab);
    let refusals = &log["refusals"];
    for (kind, count) in [
        ("write", 1),
        ("protected", 2),
        ("hidden", 1),
        ("variable", 1),
    ] {
        assert_eq!(refusals[kind]["count"], count, "{what}: {kind} in {log}");
    }
    assert!(
        shown.contains("  variables kept out: 1 (GH_TOKEN) → --allow-env GH_TOKEN"),
        "{what}: {shown}"
    );

    // Each option given: the action succeeds and is no longer named.
    std::fs::create_dir_all(lab.home.join(".config/sbx-shell")).unwrap();
    std::fs::write(
        lab.home.join(".config/sbx-shell/config.json"),
        "{\"filesystem\": {\"allow_denied\": [\"~/.ssh\"]}}\n",
    )
    .unwrap();
    if user == User::Nobody {
        super::sandbox::chown_tree(&lab.home.join(".config"), super::sandbox::NOBODY);
    }
    // Lifting the denial leaves ~/.ssh read-only like the rest of ~: now a write, with its own option.
    let (_, err) = run(&lab, backend, &["--write", &out, "--allow-env", "GH_TOKEN"]);
    assert_eq!(
        summary_line(&err, "writes outside the writable places"),
        "  writes outside the writable places: 1 (~/.ssh/new) → --write ~/.ssh",
        "{}: {err}",
        lab.what(backend)
    );
    let ssh = lab.home.join(".ssh").display().to_string();
    let (text, err) = run(
        &lab,
        backend,
        &["--write", &out, "--allow-env", "GH_TOKEN", "--write", &ssh],
    );
    let what = format!("{}\nstdout:\n{text}\nstderr:\n{err}", lab.what(backend));
    for line in ["MADE-OUTSIDE", "MADE-HIDDEN", "HAS-TOKEN"] {
        assert!(text.contains(line), "{what}");
    }
    assert!(
        err.contains("sbx-shell: the sandbox refused 2 requests"),
        "{what}"
    );
    assert!(!err.contains("writes outside"), "{what}");
}

/// The last record of the lab's session log, and the text `sbx-shell log -n 1` shows.
fn log_of(lab: &Lab) -> (serde_json::Value, String) {
    let path = lab.home.join(".local/state/sbx-shell/sessions.jsonl");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let last = text.lines().last().unwrap_or("{}");
    let record = serde_json::from_str(last).unwrap_or_default();
    let shown = subcommand(lab, &["log", "-n", "1"]).shown();
    (record, String::from_utf8_lossy(&shown.stdout).into_owned())
}

#[test]
fn each_refusal_is_summed_up_with_its_option_bwrap_root() {
    each_refusal_is_summed_up("bwrap", User::Root);
}

#[test]
fn each_refusal_is_summed_up_with_its_option_bwrap_nobody() {
    each_refusal_is_summed_up("bwrap", User::Nobody);
}

#[test]
fn each_refusal_is_summed_up_with_its_option_landlock_root() {
    each_refusal_is_summed_up("landlock", User::Root);
}

#[test]
fn each_refusal_is_summed_up_with_its_option_landlock_nobody() {
    each_refusal_is_summed_up("landlock", User::Nobody);
}

/// A name the program chose is shown on the user's own terminal, outside the sandbox:
/// its control characters arrive escaped, in the summary and in `log`.
#[test]
fn a_refused_name_cannot_drive_the_users_terminal() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals-escape", User::Root, false);
    let script =
        r#"name="/etc/$(printf '\033]0;OWNED\007')x"; printf '%s' "$name" > name; touch "$name""#;
    let out = lab
        .command("bwrap", &["--", "/bin/sh", "-c", script])
        .shown();
    // Control: the name the program made really holds the escape sequence.
    let name = std::fs::read(lab.ws.join("name")).unwrap();
    assert!(name.contains(&0x1b) && name.contains(&0x07), "{name:?}");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let summary = err
        .lines()
        .find(|l| l.starts_with("  writes outside"))
        .unwrap_or_default();
    assert!(summary.contains(r"/etc/\u{1b}]0;OWNED\u{7}x"), "{err}");
    let (_, shown) = log_of(&lab);
    assert!(shown.contains(r"\u{1b}]0;OWNED"), "{shown}");
    assert!(!summary.contains('\u{1b}'), "{err:?}");
    assert!(!shown.contains('\u{1b}'), "{shown:?}");
}

#[test]
fn log_lists_every_refusal_of_a_session() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals-log", User::Root, false);
    let script =
        "for i in 1 2 3; do touch /etc/sbx-refused-$i; done; touch /etc/sbx-refused-1; true";
    lab.command("bwrap", &["--", "/bin/sh", "-c", script])
        .shown();
    let (record, shown) = log_of(&lab);
    assert_eq!(record["refusals"]["write"]["count"], 4, "{record}");
    assert!(
        shown.contains(
            "  writes outside the writable places: 4 (/etc/sbx-refused-1 ×2, /etc/sbx-refused-2, /etc/sbx-refused-3) → --write /etc"
        ),
        "{shown}"
    );
}

/// Landlock alone, where the guard answers connects: a host socket not granted is named
/// with its option (bwrap's: Landlock alone grants none), and with it, it connects.
#[test]
fn a_host_socket_refused_is_named_and_its_option_connects() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals-socket", User::Root, false);
    let path = lab.outside.join("service.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            drop(stream);
        }
    });
    let script = format!(
        "import socket; s = socket.socket(socket.AF_UNIX); s.connect({:?}); print('CONNECTED')",
        path.display().to_string()
    );
    let connect = |backend: &str, extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["--", "/usr/bin/python3", "-c", &script]);
        let out = lab.command(backend, &args).shown();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Control: bare, it connects.
    let bare = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&bare.stdout).contains("CONNECTED"));
    let (text, err) = connect("landlock", &[]);
    let shown = path.display().to_string();
    assert!(!text.contains("CONNECTED"), "{text}{err}");
    assert_eq!(
        summary_line(&err, "host sockets"),
        format!("  host sockets: 1 ({shown}) → --backend bwrap --allow-socket {shown}"),
        "{err}"
    );
    let (text, err) = connect("bwrap", &["--allow-socket", &shown]);
    assert!(text.contains("CONNECTED"), "{text}{err}");
    assert!(!err.contains("host sockets"), "{err}");
}

/// `sbx-shell log --follow`, in another process on another terminal's behalf, shows a
/// refusal of a running session within a second.
#[test]
fn the_live_view_shows_a_refusal_within_a_second() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals-live", User::Root, false);
    let mut follow = subcommand(&lab, &["log", "--follow"]);
    follow.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut follower = follow.spawn().unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel::<(Instant, String)>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send((Instant::now(), line));
        }
    });
    let mut launch = super::support::Launch::new(&[
        "--backend",
        "bwrap",
        "--",
        "/bin/sh",
        "-c",
        "read go; touch /etc/sbx-live-refused; echo TOUCHED; read done",
    ]);
    launch.cwd = Some(lab.ws.clone());
    // (The suite's own XDG_STATE_HOME replaced by the lab's, where the follower looks.)
    let state = lab.home.join(".local/state").display().to_string();
    launch
        .env
        .push(("HOME".into(), lab.home.display().to_string()));
    launch.env.push(("XDG_STATE_HOME".into(), state));
    let mut pty = OuterPty::launch(launch);
    std::thread::sleep(Duration::from_millis(500));
    pty.write(b"\r");
    pty.expect("TOUCHED");
    let touched = Instant::now();
    let (at, line) = loop {
        let (at, line) = seen
            .recv_timeout(Duration::from_secs(5))
            .expect("the live view showed nothing within 5 s");
        if line.contains("sbx-live-refused") {
            break (at, line);
        }
    };
    pty.write(b"\r");
    pty.wait();
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(
        line.contains("write: /etc/sbx-live-refused (outside the writable places) → --write /etc"),
        "{line}"
    );
    let late = at.saturating_duration_since(touched);
    assert!(
        late < Duration::from_secs(1),
        "shown {late:?} after the refusal"
    );
}

/// Sessions shorter than the live view's look (a command that fails at once) are shown
/// too, each refusal once: from the session log's record when their journal came and went
/// between two looks. Six sessions, three per backend, one after the other.
#[test]
fn the_live_view_shows_sessions_shorter_than_a_look() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals-short", User::Root, false);
    let mut follow = subcommand(&lab, &["log", "--follow"]);
    follow.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut follower = follow.spawn().unwrap();
    // Started once it says so.
    let mut said = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(follower.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert!(said.contains("following"), "{said}");
    let stdout = follower.stdout.take().unwrap();
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    let names: Vec<String> = (0..6).map(|n| format!("/etc/sbx-short-{n}")).collect();
    for (n, name) in names.iter().enumerate() {
        let backend = if n % 2 == 0 { "bwrap" } else { "landlock" };
        let out = lab
            .command(backend, &["-c", &format!("touch {name}")])
            .shown();
        assert!(!out.status.success(), "{backend}: {out:?}");
    }
    let mut shown: Vec<String> = Vec::new();
    while let Ok(line) = seen.recv_timeout(Duration::from_secs(3)) {
        shown.push(line);
        if names
            .iter()
            .all(|n| shown.iter().any(|l| l.contains(n.as_str())))
        {
            break;
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    let all = shown.join("\n");
    for name in &names {
        let times = shown.iter().filter(|l| l.contains(name.as_str())).count();
        assert_eq!(times, 1, "{name} shown {times} times:\n{all}");
    }
    assert!(all.contains("→ --write /etc"), "{all}");
}

/// `rm -rf` of a repository made outside: under bwrap its git directory is held in place
/// (its hooks read-only, the directories leading to them mount points), so the removal
/// fails — and says so at the end, with why; under Landlock alone, where the guard refuses
/// only what would plant code, it is removed as bare.
#[test]
fn removing_a_clone_made_outside_is_explained_where_it_fails() {
    if !tools_present() || !require("git", "a repository to remove") {
        return;
    }
    let lab = Lab::new("refusals-rmclone", User::Root, false);
    let make = |name: &str| {
        let dir = lab.ws.join(name);
        for args in [
            &["init", "-q"][..],
            &["commit", "-q", "--allow-empty", "-m", "x"],
        ] {
            let out = Command::new("git")
                .args(args)
                .current_dir(if args[0] == "init" { &lab.ws } else { &dir })
                .args(if args[0] == "init" {
                    vec![name]
                } else {
                    vec![]
                })
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        }
        dir
    };
    // Control: bare, it goes.
    let bare = make("bare");
    let out = Command::new("rm").arg("-rf").arg(&bare).output().unwrap();
    assert!(out.status.success() && !bare.exists(), "{out:?}");
    for backend in ["bwrap", "landlock"] {
        let clone = make(&format!("clone-{backend}"));
        let script = format!("rm -rf {} 2>/dev/null; echo RM=$?", clone.display());
        let (_, out, err) = lab.sh(backend, &[], &script);
        let what = format!("{backend}:\n{out}\n{err}");
        if backend == "landlock" {
            assert_lines(&out, &["RM=0"], &what);
            assert!(!clone.exists(), "{what}");
            continue;
        }
        assert_lines(&out, &["RM=1"], &what);
        let line = summary_line(&err, "protected places written");
        assert!(
            line.contains(&clone.join(".git").display().to_string())
                && line.contains("only you change it, outside the sandbox"),
            "{what}"
        );
    }
}

/// `why` names the rule, where it comes from (the defaults, a profile's line, a config
/// file's line, the flags) and the option that changes it; exit 1 when refused.
#[test]
fn why_names_each_rule_and_its_source() {
    let lab = Lab::new("refusals-why", User::Root, false);
    std::fs::create_dir_all(lab.home.join(".config/sbx-shell")).unwrap();
    std::fs::write(
        lab.home.join(".config/sbx-shell/config.json"),
        "{\n  \"filesystem\": {\n    \"write\": [\"~/notes\"],\n    \"deny\": [\"~/private\"]\n  }\n}\n",
    )
    .unwrap();
    std::fs::create_dir_all(lab.home.join("notes")).unwrap();
    let config = lab.home.join(".config/sbx-shell/config.json");
    let why = |args: &[&str]| {
        let mut all = vec!["why"];
        all.extend(args);
        let out = subcommand(&lab, &all).shown();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let json = |args: &[&str]| {
        let mut all = args.to_vec();
        all.push("--json");
        let (code, text) = why(&all);
        (
            code,
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
        )
    };
    // A default.
    let (code, a) = json(&["~/.ssh/id_ed25519"]);
    assert_eq!(
        (code, &a["read"], &a["write"]),
        (Some(1), &false.into(), &false.into()),
        "{a}"
    );
    assert_eq!(a["source"]["origin"], "built-in defaults", "{a}");
    assert_eq!(
        a["fix"],
        r#""filesystem": {"allow_denied": ["~/.ssh"]} in a config file"#
    );
    // The user's config file, and its line.
    let (code, a) = json(&["~/notes/todo"]);
    assert_eq!((code, &a["write"]), (Some(0), &true.into()), "{a}");
    assert_eq!(a["source"]["origin"], config.display().to_string(), "{a}");
    assert_eq!(a["source"]["line"], 3, "{a}");
    let (code, a) = json(&["~/private/x"]);
    assert_eq!((code, &a["source"]["line"]), (Some(1), &4.into()), "{a}");
    // A shipped profile, and its line.
    let (code, a) = json(&["--profile", "claude", "api.anthropic.com"]);
    assert_eq!(code, Some(0), "{a}");
    assert_eq!(a["source"]["origin"], "profile claude", "{a}");
    let profile = include_str!("../../profiles/claude.json");
    let line = profile
        .lines()
        .position(|l| l.contains("\"api.anthropic.com\""))
        .unwrap()
        + 1;
    assert_eq!(a["source"]["line"], line, "{a}");
    // A flag.
    let (code, a) = json(&["--net", "allow=*.example.org", "api.example.org"]);
    assert_eq!(code, Some(0), "{a}");
    assert_eq!(
        (&a["source"]["origin"], &a["source"]["entry"]),
        (&"command line".into(), &"*.example.org".into())
    );
    let (code, a) = json(&["example.org"]);
    assert_eq!(
        (code, &a["fix"]),
        (Some(1), &"--net allow=example.org".into())
    );
    // A variable, and a socket.
    let (code, a) = json(&["GH_TOKEN"]);
    assert_eq!(
        (code, &a["fix"]),
        (Some(1), &"--allow-env GH_TOKEN".into()),
        "{a}"
    );
    let (code, a) = json(&["--as", "socket", "/run/some.sock"]);
    assert_eq!(
        (code, &a["fix"]),
        (Some(1), &"--allow-socket /run/some.sock".into()),
        "{a}"
    );
    let (code, a) = json(&[
        "--allow-socket",
        "/run/some.sock",
        "--as",
        "socket",
        "/run/some.sock",
    ]);
    assert_eq!((code, &a["allowed"]), (Some(0), &true.into()), "{a}");
    // In words.
    let (_, text) = why(&["/etc/hosts"]);
    assert!(
        text.starts_with("/etc/hosts (path): readable, not writable\n")
            && text.contains("  to change it: --write /etc\n"),
        "{text}"
    );
}

/// The kernel's audit switched on (`AUDIT_SET`) for as long as this lives, then put back
/// as it was: root only, and only around one run (it is system-wide).
struct AuditOn(bool);

const AUDIT_SET: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)
s.bind((0, 0))
if sys.argv[1] == "get":
    s.send(struct.pack("=IHHII", 16, 1000, 1, 1, 0))
    while True:
        d = s.recv(8192)
        if struct.unpack("=H", d[4:6])[0] == 1000:
            print(struct.unpack("=I", d[20:24])[0]); break
else:
    body = struct.pack("=II", 1, int(sys.argv[1]))
    s.send(struct.pack("=IHHII", 16 + len(body), 1001, 1 | 4, 1, 0) + body)
    err = struct.unpack("=i", s.recv(8192)[16:20])[0]
    sys.exit(1 if err else 0)
"#;

fn audit(arg: &str) -> String {
    let out = Command::new("/usr/bin/python3")
        .args(["-c", AUDIT_SET, arg])
        .output()
        .unwrap();
    assert!(out.status.success(), "audit {arg}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl AuditOn {
    fn new() -> AuditOn {
        let was = audit("get") != "0";
        audit("1");
        AuditOn(was)
    }
}

impl Drop for AuditOn {
    fn drop(&mut self) {
        audit(if self.0 { "1" } else { "0" });
    }
}

/// Landlock alone: root's program has every open done by the guard (`rootreads`), so the
/// reads its rules refuse are named by the guard, whether the kernel's audit is on or off.
/// What Landlock refuses by itself (running a file in a denied path) is named from the
/// audit where it is on and sbx-shell may read it (root); where it is off, `--verbose`
/// says so.
#[test]
fn reads_refused_are_named_by_the_guard_and_landlocks_own_from_the_audit() {
    if !tools_present() || !super::support::require_root("the kernel's audit is root's") {
        return;
    }
    let lab = Lab::new("refusals-audit", User::Root, false);
    std::fs::write(lab.outside.join("other"), "x\n").unwrap();
    let key = lab.home.join(".ssh/id_ed25519");
    let script = format!(
        "cat ~/.ssh/id_ed25519; cat {}/other; true",
        lab.outside.display()
    );
    // Control: bare, both are read.
    let bare = Command::new("/bin/sh")
        .args(["-c", &script])
        .env("HOME", &lab.home)
        .output()
        .unwrap();
    let bare = String::from_utf8_lossy(&bare.stdout).into_owned();
    assert!(
        bare.contains(super::sandbox::CANARY) && bare.contains("x\n"),
        "{bare}"
    );
    let hidden = r#"  hidden paths: 1 (~/.ssh/id_ed25519) → "filesystem": {"allow_denied": ["~/.ssh"]} in a config file"#;
    let out = lab
        .command("landlock", &["--", "/bin/sh", "-c", &script])
        .shown();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!text.contains(super::sandbox::CANARY), "{text}");
    assert_eq!(summary_line(&err, "hidden paths"), hidden, "{err}");
    // What the policy lets it read is read, and not named.
    assert!(text.contains("x\n"), "{text}");
    assert_eq!(
        summary_line(&err, "reads outside the readable places"),
        "",
        "{err}"
    );
    // Running the denied file: Landlock's own refusal (execute), named from the audit.
    let mode = std::fs::metadata(&key).unwrap().permissions();
    let mut runnable = mode.clone();
    std::os::unix::fs::PermissionsExt::set_mode(&mut runnable, 0o700);
    std::fs::set_permissions(&key, runnable).unwrap();
    let run = "~/.ssh/id_ed25519; true";
    let bare = Command::new("/bin/sh")
        .args(["-c", run])
        .env("HOME", &lab.home)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&bare.stderr).contains("Permission denied"),
        "control: {bare:?}"
    );
    let out = {
        let _on = AuditOn::new();
        lab.command("landlock", &["--", "/bin/sh", "-c", run])
            .shown()
    };
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("Permission denied"), "{err}");
    assert_eq!(summary_line(&err, "hidden paths"), hidden, "{err}");
    // The audit off (as this machine has it): said with --verbose, nothing named.
    let out = lab
        .command("landlock", &["-v", "--", "/bin/sh", "-c", run])
        .shown();
    std::fs::set_permissions(&key, mode).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if audit("get") == "0" {
        assert!(
            err.contains("Landlock's refusals (reads) are not listed: the kernel's audit is off"),
            "{err}"
        );
        assert_eq!(summary_line(&err, "hidden paths"), "", "{err}");
    }
}

/// A refused write whose directory would, granted, open the home or a directory programs
/// run from (on `PATH`) gets no `--write` suggestion but why; one deeper inside gets its
/// own directory. Both backends, beside the same writes bare.
#[test]
fn no_write_suggested_opens_the_home_or_a_path_directory() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("refusals-narrow", User::Root, false);
    for dir in [".cargo/bin", ".cargo/notes"] {
        std::fs::create_dir_all(lab.home.join(dir)).unwrap();
    }
    let path = format!("{}/.cargo/bin:/usr/bin:/bin", lab.home.display());
    let script = "touch ~/.cargo/.package-cache ~/.top-file ~/.cargo/notes/x; true";
    let bare = Command::new("/bin/sh")
        .args(["-c", script])
        .env("HOME", &lab.home)
        .status()
        .unwrap();
    assert!(
        bare.success() && lab.home.join(".top-file").exists(),
        "bare"
    );
    for name in [".cargo/.package-cache", ".top-file", ".cargo/notes/x"] {
        std::fs::remove_file(lab.home.join(name)).unwrap();
    }
    for backend in ["bwrap", "landlock"] {
        let out = lab
            .command(backend, &["-c", script])
            .env("PATH", &path)
            .shown();
        let err = String::from_utf8_lossy(&out.stderr);
        let what = format!("{}: {err}", lab.what(backend));
        let line = summary_line(&err, "writes outside the writable places");
        assert!(
            line.contains("3 (") && line.contains("--write ~/.cargo/notes"),
            "{what}"
        );
        for why in [
            "none suggested: --write ~/.cargo would open ~/.cargo/bin, which programs run from (PATH)",
            "none suggested: --write ~ would open the whole home",
        ] {
            assert!(line.contains(why), "{why}: {what}");
        }
    }
}

/// Nothing sbx-shell says while the program runs lands on the program's screen: a git
/// config the guard refuses (as opencode's first prompt in a repository writes) shows only
/// the program's own error, as a full-screen program would draw it; the summary after it
/// names the keys and the option that allows each. On both backends, beside bare, where
/// the config is written.
#[test]
fn a_refusal_while_the_program_runs_draws_nothing_on_its_screen() {
    if !tools_present() {
        return;
    }
    let script = "echo SCREEN-START; git init -q r && git -C r config core.fsmonitor /bin/true; \
                  git -C r config --get core.fsmonitor; echo SCREEN-END";
    for backend in ["bwrap", "landlock", "none"] {
        let lab = Lab::new("screen", User::Root, false);
        let mut launch =
            super::support::Launch::new(&["--backend", backend, "--", "/bin/sh", "-c", script]);
        launch.cwd = Some(lab.ws.clone());
        launch
            .env
            .push(("HOME".into(), lab.home.display().to_string()));
        let mut pty = OuterPty::launch(launch);
        pty.expect("SCREEN-END");
        pty.wait();
        let text = pty.output_text();
        let (before, after) = text.split_at(text.find("SCREEN-END").unwrap());
        let screen = &before[before.find("SCREEN-START").unwrap()..];
        assert!(
            !screen.contains("sbx-shell"),
            "{backend}: drawn on the screen:\n{screen}"
        );
        if backend == "none" {
            assert!(screen.contains("/bin/true"), "control: {screen}");
            continue;
        }
        assert!(!screen.contains("/bin/true"), "{backend}: {screen}");
        assert!(
            after.contains("(core.fsmonitor)")
                && after.contains("--allow-git-config core.fsmonitor"),
            "{backend}: the summary:\n{after}"
        );
    }
}
