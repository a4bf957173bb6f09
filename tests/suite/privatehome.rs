//! The sandbox-private home: history and caches kept between sessions in sbx-shell's state
//! directory, never in the host's files; `sbx-shell home` lists and empties it; what the
//! program leaves there (symlinks) leads nowhere.

use std::fs;

use super::sandbox::{assert_lines, tools_present, Lab, User};
use super::support::{bin, Launch, OuterPty, Shown};

const HOST_LINE: &str = "HOST-HISTORY-LINE";

/// An interactive bash in the sandbox, on a terminal, in the lab's home and workspace.
fn bash(lab: &Lab, backend: &str) -> OuterPty {
    let mut launch = Launch::new(&[
        "--backend",
        backend,
        "--",
        "bash",
        "--norc",
        "--noprofile",
        "-i",
    ]);
    launch.env = vec![
        ("HOME".into(), lab.home.display().to_string()),
        ("PATH".into(), "/usr/bin:/bin".into()),
        ("SHELL".into(), "/bin/bash".into()),
        ("PS1".into(), "P> ".into()),
        ("TERM".into(), "xterm".into()),
        (
            "XDG_STATE_HOME".into(),
            lab.home.join(".local/state").display().to_string(),
        ),
    ];
    launch.cwd = Some(lab.ws.clone());
    let pty = OuterPty::launch(launch);
    pty.expect("P> ");
    pty
}

#[test]
fn history_typed_in_one_session_is_there_in_the_next_and_the_hosts_is_untouched() {
    if !tools_present() {
        return;
    }
    for backend in ["bwrap", "landlock"] {
        let lab = Lab::new("history", User::Root, false);
        let host_history = lab.home.join(".bash_history");
        fs::write(&host_history, format!("echo {HOST_LINE}\n")).unwrap();
        let what = lab.what(backend);

        let mut first = bash(&lab, backend);
        first.write(b"echo SESSION-ONE-MARK\r");
        first.expect("SESSION-ONE-MARK\r\n");
        first.write(b"exit\r");
        assert!(first.wait().success(), "{what}");

        let mut second = bash(&lab, backend);
        let mark = second.mark();
        second.write(b"history; echo HISTORY-$((1+1))-END\r");
        let shown = second.expect_from(mark, "HISTORY-2-END\r\n");
        assert!(shown.contains("echo SESSION-ONE-MARK"), "{what}: {shown}");
        assert!(
            !shown.contains(HOST_LINE),
            "{what}: the host's history was read: {shown}"
        );
        second.write(b"exit\r");
        assert!(second.wait().success(), "{what}");

        // The host's file is as it was; the session's history lives in the private home.
        assert_eq!(
            fs::read_to_string(&host_history).unwrap(),
            format!("echo {HOST_LINE}\n"),
            "{what}"
        );
        let twin = lab
            .home
            .join(".local/state/sbx-shell/home/shell/.bash_history");
        let kept = fs::read_to_string(&twin).unwrap();
        assert!(kept.contains("echo SESSION-ONE-MARK"), "{what}: {kept}");
    }
}

/// Python's REPL history, kept as bash's is, in a Python older than 3.13 (Debian's 3.11),
/// which ignores `PYTHON_HISTORY`: a line typed in one session is in the next session's
/// history, the host's is neither read nor written. Beside the same REPL run bare, whose
/// history is the host's file.
#[test]
fn python_history_is_kept_between_sessions_before_python_3_13() {
    if !tools_present() {
        return;
    }
    // The REPL on a terminal of `script`'s, the lines typed ahead on it; what it printed.
    let python = |lab: &Lab, sandboxed: Option<&str>, typed: &str| -> String {
        let python = format!("{} -q", super::sandbox::PYTHON);
        let command = match sandboxed {
            Some(backend) => format!("{} --backend {backend} -- {python}", bin()),
            None => python,
        };
        let mut child = std::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .current_dir(&lab.ws)
            .env_clear()
            .env("HOME", &lab.home)
            .env("PATH", "/usr/bin:/bin")
            .env("TERM", "xterm")
            .env("XDG_STATE_HOME", lab.home.join(".local/state"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(typed.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        drop(stdin);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let host_line = "print('HOST-PYTHON-LINE')";
    let show = "import readline; print('HIST', [readline.get_history_item(i + 1) for i in range(readline.get_current_history_length())], 'END')\nexit()\n";
    for backend in [None, Some("bwrap"), Some("landlock")] {
        let lab = Lab::new("pyhistory", User::Root, false);
        let host_history = lab.home.join(".python_history");
        fs::write(&host_history, format!("{host_line}\n")).unwrap();
        let what = format!("{backend:?}");
        python(&lab, backend, "answer = 6 * 7\nexit()\n");
        let shown = python(&lab, backend, show);
        let shown = shown
            .lines()
            .find(|l| l.starts_with("HIST ["))
            .unwrap_or("");
        assert!(shown.contains("answer = 6 * 7"), "{what}: {shown}");
        let host_now = fs::read_to_string(&host_history).unwrap();
        match backend {
            // Bare, the history is the host's file.
            None => {
                assert!(shown.contains(host_line), "{what}: {shown}");
                assert!(host_now.contains("answer = 6 * 7"), "{what}");
            }
            Some(_) => {
                assert!(
                    !shown.contains(host_line),
                    "{what}: the host's was read: {shown}"
                );
                assert_eq!(
                    host_now,
                    format!("{host_line}\n"),
                    "{what}: the host's was written"
                );
                let twin = lab
                    .home
                    .join(".local/state/sbx-shell/home/shell/.python_history");
                let kept = fs::read_to_string(&twin).unwrap_or_default();
                assert!(kept.contains("answer = 6 * 7"), "{what}: {kept}");
            }
        }
    }
}

/// npm's cache the host warmed is found offline in every backend — under bwrap layered
/// beneath the private one, with Landlock alone the lockfile's tarballs linked into it at
/// the start — and never written: `npm ci --offline` installs as it does bare (the
/// control: the bare `npm ci` that warms it). The registry is a local one the test serves
/// (a package `tiny`), reached bare only.
#[test]
fn npm_finds_the_cache_the_host_warmed_offline() {
    if !tools_present() || !super::support::require("npm", "npm's cache") {
        return;
    }
    let lab = Lab::new("npmcache", User::Root, false);
    let registry = lab.dir.join("registry");
    let package = lab.dir.join("tiny");
    fs::create_dir_all(registry.join("tiny/-")).unwrap();
    fs::create_dir_all(&package).unwrap();
    fs::write(
        package.join("package.json"),
        r#"{"name":"tiny","version":"1.0.0","main":"index.js"}"#,
    )
    .unwrap();
    fs::write(package.join("index.js"), "module.exports = 42\n").unwrap();
    let out = std::process::Command::new("npm")
        .args(["pack", "-s", "--pack-destination"])
        .arg(registry.join("tiny/-"))
        .current_dir(&package)
        .env("HOME", &lab.home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let tarball = fs::read(registry.join("tiny/-/tiny-1.0.0.tgz")).unwrap();
    let port = super::support::free_port();
    let integrity = {
        use base64ct::Encoding;
        use sha2::Digest;
        format!(
            "sha512-{}",
            base64ct::Base64::encode_string(&sha2::Sha512::digest(&tarball))
        )
    };
    fs::write(
        registry.join("tiny/index.json"),
        format!(
            r#"{{"name":"tiny","dist-tags":{{"latest":"1.0.0"}},"versions":{{"1.0.0":{{"name":"tiny","version":"1.0.0","dist":{{"tarball":"http://127.0.0.1:{port}/tiny/-/tiny-1.0.0.tgz","integrity":"{integrity}"}}}}}}}}"#
        ),
    )
    .unwrap();
    let server = format!(
        r#"import http.server, os, sys
os.chdir(sys.argv[2])
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path.rstrip("/") == "/tiny": self.path = "/tiny/index.json"
        return super().do_GET()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", {port}), H).serve_forever()"#
    );
    let mut served = std::process::Command::new(super::sandbox::PYTHON)
        .args(["-c", &server, "x"])
        .arg(&registry)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    fs::write(
        lab.ws.join("package.json"),
        r#"{"name":"p","version":"1.0.0","private":true,"dependencies":{"tiny":"^1.0.0"}}"#,
    )
    .unwrap();
    // The host's cache, warmed bare (install, then ci: what ci asks for).
    let warm = format!(
        "for i in $(seq 50); do curl -sf -o /dev/null {url}tiny && break; sleep 0.1; done
        npm install -s --no-audit --no-fund --registry {url} && rm -rf node_modules &&
        npm ci -s --no-audit --no-fund --registry {url} && rm -rf node_modules && echo WARM"
    );
    let bare = std::process::Command::new("sh")
        .args(["-c", &warm])
        .current_dir(&lab.ws)
        .env("HOME", &lab.home)
        .output()
        .unwrap();
    let _ = served.kill();
    let _ = served.wait();
    assert_lines(&String::from_utf8_lossy(&bare.stdout), &["WARM"], "bare");
    let cache = lab.home.join(".npm/_cacache");
    let listing = || {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("find . -type f ! -path './tmp/*' -exec sha256sum {} + | sort")
            .current_dir(&cache)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let before = listing();
    let offline = format!(
        "npm ci --offline --no-audit --no-fund --registry {url} >/dev/null 2>&1; node -e 'console.log(\"TINY\", require(\"tiny\"))'; rm -rf node_modules"
    );
    for backend in ["bwrap", "landlock"] {
        let (_, out, err) = lab.sh(backend, &[], &offline);
        assert_lines(&out, &["TINY 42"], &format!("{backend}: {err}"));
        assert_eq!(listing(), before, "{backend}: the host's cache changed");
    }
    // With Landlock alone the tarball is a link to the host's, made from the lockfile.
    let links = std::process::Command::new("find")
        .args([lab.home.join(".local/state/sbx-shell/home").as_os_str()])
        .args(["-path", "*/.npm/_cacache/content-v2/*", "-type", "l"])
        .output()
        .unwrap();
    assert!(!links.stdout.is_empty(), "no tarball linked: {links:?}");
}

/// Caches: writable inside, kept, and the host's never written — through `XDG_CACHE_HOME`
/// and the tools' variables, in every backend.
#[test]
fn caches_are_written_to_the_private_home_not_the_hosts() {
    if !tools_present() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        for backend in ["bwrap", "landlock"] {
            let lab = Lab::new("caches", user, false);
            let what = lab.what(backend);
            let host_cache = lab.home.join(".cache");
            fs::create_dir_all(host_cache.join("pip")).unwrap();
            fs::write(host_cache.join("pip/host-wheel"), "host").unwrap();
            if user == User::Nobody {
                super::sandbox::chown_tree(&lab.home, super::sandbox::NOBODY);
            }
            let script = r#"
                for d in "$XDG_CACHE_HOME" "$npm_config_cache" "$PIP_CACHE_DIR" "$GOMODCACHE"; do
                    mkdir -p "$d" && echo kept > "$d/made" || echo "NOT WRITABLE $d"
                done
                ls "$PIP_CACHE_DIR" | tr '\n' ' '; echo
                (echo x > ~/.cache/pip/planted) 2>/dev/null && echo HOST-CACHE-WRITTEN || echo HOST-CACHE-READ-ONLY
                echo DONE"#;
            let out = lab.command(backend, &["-c", script]).shown();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!text.contains("NOT WRITABLE"), "{what}: {text}");
            assert_lines(&text, &["HOST-CACHE-READ-ONLY", "DONE"], &what);
            // A second session sees what the first made.
            let out = lab
                .command(
                    backend,
                    &["-c", "cat \"$PIP_CACHE_DIR/made\" \"$GOMODCACHE/made\""],
                )
                .shown();
            assert_lines(
                &String::from_utf8_lossy(&out.stdout),
                &["kept", "kept"],
                &what,
            );
            assert_eq!(
                fs::read_dir(host_cache.join("pip")).unwrap().count(),
                1,
                "{what}: the host's cache was written"
            );
        }
    }
}

/// The program can leave symlinks in its private home. Neither sbx-shell (which creates
/// the twins, outside the sandbox) nor the next session's mounts follow them: nothing is
/// made or written where they point, and the host's history stays hidden. The control
/// shows that a plain write through the planted link does reach the victim.
#[test]
fn symlinks_left_in_the_private_home_lead_nowhere() {
    if !tools_present() {
        return;
    }
    for backend in ["bwrap", "landlock"] {
        let lab = Lab::new("homelinks", User::Root, false);
        let what = lab.what(backend);
        fs::write(lab.home.join(".bash_history"), format!("{HOST_LINE}\n")).unwrap();
        fs::create_dir_all(lab.home.join(".cache")).unwrap();
        let victim_dir = lab.outside.join("victim-dir");
        fs::create_dir_all(&victim_dir).unwrap();
        let plant = format!(
            "cd ~/.local/state/sbx-shell/home/shell && rm -rf .bash_history .cache .lesshst go && ln -s {out}/victim .bash_history && ln -s {out}/victim-dir .cache && ln -s {out}/victim-less .lesshst && ln -s {out}/victim-dir go && echo PLANTED",
            out = lab.outside.display()
        );
        let out = lab.command(backend, &["-c", &plant]).shown();
        assert_lines(&String::from_utf8_lossy(&out.stdout), &["PLANTED"], &what);

        let out = lab
            .command(
                backend,
                &[
                    "-c",
                    "cat ~/.bash_history 2>&1; ls ~/.cache 2>&1; echo NEXT-DONE",
                ],
            )
            .shown();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains(HOST_LINE), "{what}: {text}");
        assert!(text.contains("NEXT-DONE"), "{what}: {text}");
        assert!(!lab.outside.join("victim").exists(), "{what}");
        assert!(!lab.outside.join("victim-less").exists(), "{what}");
        assert_eq!(fs::read_dir(&victim_dir).unwrap().count(), 0, "{what}");

        // Control: unconfined, a write through the planted link lands on the victim.
        let link = lab
            .home
            .join(".local/state/sbx-shell/home/shell/.bash_history");
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&link)
            .unwrap();
        assert!(lab.outside.join("victim").exists(), "{what}: control");
    }
}

#[test]
fn home_lists_and_clears_the_private_homes() {
    if !tools_present() {
        return;
    }
    let lab = Lab::new("homecmd", User::Root, false);
    let out = lab
        .command("bwrap", &["-c", "echo x > \"$XDG_CACHE_HOME/f\""])
        .shown();
    assert!(out.status.success());
    let home_cmd = |args: &[&str]| {
        std::process::Command::new(bin())
            .arg("home")
            .args(args)
            .env_clear()
            .env("HOME", &lab.home)
            .shown()
    };
    let listed = String::from_utf8_lossy(&home_cmd(&[]).stdout).into_owned();
    assert!(listed.starts_with("shell "), "{listed}");
    let refused = home_cmd(&["--clear", "claude"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("Hint: "));
    assert!(home_cmd(&["--clear", "shell"]).status.success());
    assert!(!lab.home.join(".local/state/sbx-shell/home/shell").exists());
    assert!(String::from_utf8_lossy(&home_cmd(&[]).stdout).contains("no private homes yet"));
}

/// vim keeps its viminfo in the private home (`VIMINIT` sets `viminfofile`), so quitting
/// is quiet; the control without a private home shows the error every quit printed.
#[test]
fn vim_quits_without_a_viminfo_error() {
    if !tools_present() || !super::support::require("vim", "vim's viminfo") {
        return;
    }
    let lab = Lab::new("vim", User::Root, false);
    // A user who has used vim has a viminfo: vim rewrites it through a temporary file
    // beside it, in the home.
    fs::write(lab.home.join(".viminfo"), "# host viminfo\n").unwrap();
    let run = |extra: &[&str], control: bool| -> String {
        let mut args = vec!["--backend", "bwrap"];
        args.extend_from_slice(extra);
        args.extend(["--", "vim", "-N", "notes.txt"]);
        let mut launch = Launch::new(&args);
        launch.env = vec![
            ("HOME".into(), lab.home.display().to_string()),
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("TERM".into(), "xterm".into()),
            (
                "XDG_STATE_HOME".into(),
                lab.home.join(".local/state").display().to_string(),
            ),
        ];
        launch.cwd = Some(lab.ws.clone());
        let mut pty = OuterPty::launch(launch);
        pty.expect("notes.txt");
        pty.write(b"ihello\x1b:wq\r");
        if control {
            // The bug: an error and a "Press ENTER" wait on every quit.
            pty.expect("E138");
            pty.write(b"\r");
        }
        let status = pty.wait();
        assert!(status.success());
        pty.output_text()
    };
    let quiet = run(&[], false);
    assert!(
        !quiet.contains("E138") && !quiet.contains("E886"),
        "{quiet}"
    );
    assert_eq!(
        fs::read_to_string(lab.ws.join("notes.txt")).unwrap(),
        "hello\n"
    );
    let viminfo = lab.home.join(".local/state/sbx-shell/home/shell/.viminfo");
    assert!(fs::read_to_string(viminfo).unwrap().contains("wq"));
    // Control: with the home read-only and no private home, vim cannot write viminfo.
    let control = run(&["--no-private-home"], true);
    assert!(control.contains("E138"), "control: {control}");
    assert_eq!(
        fs::read_to_string(lab.home.join(".viminfo")).unwrap(),
        "# host viminfo\n"
    );
}

/// The real user's cargo home (the suite's own HOME is private).
fn real_cargo_home() -> std::path::PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(Into::into)
        .unwrap_or_else(|| {
            let me = nix::unistd::User::from_uid(nix::unistd::getuid())
                .unwrap()
                .unwrap();
            me.dir.join(".cargo")
        })
}

/// Under bwrap the host's cargo cache shows through beneath the private one: a build
/// whose dependency the host downloaded builds with no network, and writes only the
/// private copy (the registry's unpacked sources). Control: bare, the same build writes
/// the host's cache.
#[test]
fn a_cargo_build_finds_the_hosts_cache_and_writes_only_its_own() {
    if !tools_present() {
        return;
    }
    let cache = real_cargo_home().join("registry/cache");
    let Some((registry, crate_file)) = fs::read_dir(&cache)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|r| fs::read_dir(r.path()).into_iter().flatten().flatten())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("cfg-if-")
        })
        .map(|p| (p.parent().unwrap().file_name().unwrap().to_owned(), p))
    else {
        panic!(
            "no cfg-if crate in {} (building sbx-shell downloads it)",
            cache.display()
        );
    };
    let version = crate_file
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("cfg-if-")
        .to_string();
    let cargo = std::path::Path::new(env!("CARGO"));
    let rustc = cargo.with_file_name("rustc");
    let path = format!("{}:/usr/bin:/bin", cargo.parent().unwrap().display());
    let run = |lab: &Lab, backend: &str| {
        // The lab's home plays the host's: a copy of this machine's index and the crate.
        let host = lab.home.join(".cargo/registry");
        fs::create_dir_all(host.join("cache").join(&registry)).unwrap();
        fs::copy(
            &crate_file,
            host.join("cache")
                .join(&registry)
                .join(crate_file.file_name().unwrap()),
        )
        .unwrap();
        let copied = std::process::Command::new("cp")
            .arg("-r")
            .arg(real_cargo_home().join("registry/index"))
            .arg(&host)
            .status()
            .unwrap();
        assert!(copied.success());
        let project = lab.ws.join("c");
        fs::create_dir_all(project.join("src")).unwrap();
        fs::write(
            project.join("Cargo.toml"),
            format!("[package]\nname = \"c\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ncfg-if = \"={version}\"\n"),
        )
        .unwrap();
        fs::write(project.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        let locked = std::process::Command::new(cargo)
            .args(["generate-lockfile", "--offline"])
            .current_dir(&project)
            .env("HOME", &lab.home)
            .env_remove("CARGO_HOME")
            .env("RUSTC", &rustc)
            .shown();
        assert!(
            locked.status.success(),
            "{}",
            String::from_utf8_lossy(&locked.stderr)
        );
        // The toolchain, granted: for root it lies in root's home, a root-only directory
        // that a session with another `$HOME` cannot read.
        let toolchain = cargo
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .display()
            .to_string();
        let out = lab
            .command(
                backend,
                &[
                    "--read",
                    &toolchain,
                    "-c",
                    "cd c && cargo build 2>&1 && echo BUILT",
                ],
            )
            .env("PATH", &path)
            .env("RUSTC", &rustc)
            .shown();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let lab = Lab::new("cargo-cache", User::Root, false);
    let text = run(&lab, "bwrap");
    assert!(text.contains("BUILT"), "bwrap: {text}");
    let host = lab.home.join(".cargo/registry");
    assert!(
        !host.join("src").exists(),
        "bwrap: the host's cache was written"
    );
    assert_eq!(
        fs::read_dir(host.join("cache").join(&registry))
            .unwrap()
            .count(),
        1
    );
    let control = Lab::new("cargo-cache-control", User::Root, false);
    let text = run(&control, "none");
    assert!(text.contains("BUILT"), "control: {text}");
    assert!(control.home.join(".cargo/registry/src").exists(), "control");
}
