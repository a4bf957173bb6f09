//! sbx-shell as the login shell of a real OpenSSH server: the test starts sshd on a loopback
//! port with its own host key and configuration (Debian's: sftp through the login shell),
//! for a test user whose passwd shell is sbx-shell, and drives it with the OpenSSH clients.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::support::Shown;
use super::support::{require, require_root, run_dir, Launch, OuterPty};

const USER: &str = "sbx-ssh-test";

/// Root, sshd and the clients; a missing one fails under SBX_REQUIRE_ALL=1.
fn tools_present() -> bool {
    require_root("the ssh suite (it creates a user and starts sshd)")
        && require("ssh", "the OpenSSH client")
        && require("scp", "scp")
        && require("sftp", "sftp")
        && require("rsync", "rsync over ssh")
        && require("ssh-keygen", "keys for the test sshd")
        && (Path::new("/usr/sbin/sshd").is_file() || require("sshd", "the OpenSSH server"))
}

/// One test at a time: they share the account, and one of them breaks its config.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The user, its home (the sandbox's workspace when sshd starts the shell there), a place
/// outside it, the keys, and sbx-shell installed where the user can run it.
struct Site {
    dir: PathBuf,
    home: PathBuf,
    outside: PathBuf,
    client_key: PathBuf,
    uid: u32,
}

fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let dir = run_dir("sbx-ssh");
        let (home, outside) = (dir.join("home"), dir.join("outside"));
        fs::create_dir_all(home.join(".ssh")).unwrap();
        // Copies land in here (and one at the top of the home).
        fs::create_dir_all(home.join("files")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::set_permissions(&outside, Permissions::from_mode(0o777)).unwrap();
        let shell = dir.join("sbx-shell");
        // The account: created once per machine, pointed at this run's home and binary.
        let exists = Command::new("id").arg(USER).shown().status.success();
        let (verb, extra): (&str, &[&str]) = if exists {
            ("usermod", &[])
        } else {
            ("useradd", &["-U"])
        };
        let status = Command::new(verb)
            .args(extra)
            .args([
                "-d",
                home.to_str().unwrap(),
                "-s",
                shell.to_str().unwrap(),
                "-p",
                "*",
                USER,
            ])
            .status()
            .unwrap();
        assert!(status.success(), "{verb} {USER}");
        if !exists {
            super::support::at_exit(super::support::Cleanup::User(USER.into()));
        }
        let uid: u32 = String::from_utf8(Command::new("id").args(["-u", USER]).shown().stdout)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        for key in ["host_key", "client_key"] {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key))
                .status()
                .unwrap();
            assert!(status.success());
        }
        fs::copy(
            dir.join("client_key.pub"),
            home.join(".ssh/authorized_keys"),
        )
        .unwrap();
        chown_tree(&home, uid);
        fs::set_permissions(&home, Permissions::from_mode(0o755)).unwrap();
        if !Path::new("/run/sshd").exists() {
            fs::create_dir_all("/run/sshd").unwrap();
            super::support::at_exit(super::support::Cleanup::Dir("/run/sshd".into()));
        }
        Site {
            client_key: dir.join("client_key"),
            dir,
            home,
            outside,
            uid,
        }
    })
}

fn chown_tree(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() {
        for entry in fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// A running sshd on a free loopback port, killed on drop.
struct Sshd {
    child: Child,
    port: u16,
}

impl Sshd {
    fn start() -> Sshd {
        let site = site();
        let (port, child) = super::support::spawn_sshd(&site.dir, |port| {
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile none\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
                 StrictModes no\nAllowUsers {USER}\nPrintMotd no\nPrintLastLog no\n\
                 Subsystem sftp /usr/lib/openssh/sftp-server\n",
                site.dir.join("host_key").display()
            )
        });
        Sshd { child, port }
    }

    /// Options every client here takes.
    fn client_options(&self) -> Vec<String> {
        let site = site();
        [
            "-i",
            site.client_key.to_str().unwrap(),
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "LogLevel=ERROR",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn ssh(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new("ssh");
        cmd.args(self.client_options())
            .args(["-p", &self.port.to_string()])
            .args(extra)
            .arg(format!("{USER}@127.0.0.1"))
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, remote: &str) -> Output {
        self.ssh(&[]).arg(remote).shown()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Write the test user's sbx-shell config file (as the user's); returns its path.
fn write_user_config(text: &str) -> PathBuf {
    let site = site();
    let dir = site.home.join(".config/sbx-shell");
    fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.json");
    fs::write(&config, text).unwrap();
    chown_tree(&site.home.join(".config"), site.uid);
    config
}

/// `sftp -b BATCH` to the test user on the server's port, with the client options `opts`.
fn sftp_batch(opts: &[String], port: &str, batch: &Path) -> Output {
    Command::new("sftp")
        .args(opts)
        .args(["-P", port, "-b"])
        .arg(batch)
        .arg(format!("{USER}@127.0.0.1"))
        .shown()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_remote_command_runs_sandboxed_with_its_exit_status() {
    if !tools_present() {
        return;
    }
    let _serial = serial();
    let site = site();
    let sshd = Sshd::start();
    let outside = site.outside.join("from-ssh");
    let script = format!(
        "echo SHELL-$SBX_SHELL-$SBX_SANDBOX; echo w > files/in-home && echo HOME-WRITE-OK; \
         (echo 'echo PLANTED' > .bash_login) 2>/dev/null || echo DOTFILE-DENIED; \
         (echo w > new-at-top) 2>/dev/null && rm new-at-top && echo TOP-WRITE-OK; \
         (echo w > {o}) 2>/dev/null || echo OUTSIDE-DENIED; \
         cat ~/.ssh/authorized_keys >/dev/null 2>&1 || echo SSH-DIR-DENIED; exit 7",
        o = outside.display()
    );
    let out = sshd.run(&script);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(7), "{stdout}\n{stderr}");
    assert!(!site.home.join(".bash_login").exists(), "{stdout}");
    for line in [
        "HOME-WRITE-OK",
        "DOTFILE-DENIED",
        "TOP-WRITE-OK",
        "OUTSIDE-DENIED",
        "SSH-DIR-DENIED",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "{line} missing:\n{stdout}\n{stderr}"
        );
    }
    assert!(
        stdout.contains("SHELL-1-") && !stdout.contains("SHELL-1-none"),
        "{stdout}"
    );
    // The passwd entry names sbx-shell and no "shell" is configured: /bin/sh, said once.
    assert_eq!(
        stderr.matches("no real shell is known").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("Fix: sbx-shell login-shell --shell"),
        "{stderr}"
    );
    assert!(site.home.join("files/in-home").exists());
    assert!(!outside.exists());
    // Control: the same login with the user's config asking for no sandbox writes there, so
    // the sandbox is what stopped it above.
    let config = write_user_config("{\"backend\": \"none\"}\n");
    let out = sshd.run(&format!(
        "echo w > {} && echo OUTSIDE-WRITTEN",
        outside.display()
    ));
    fs::remove_file(config).unwrap();
    assert!(
        text(&out.stdout).contains("OUTSIDE-WRITTEN"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("runs without any sandbox"));
    fs::remove_file(&outside).unwrap();
}

#[test]
fn an_interactive_login_gets_the_terminal_size_and_resizes() {
    if !tools_present() {
        return;
    }
    let _serial = serial();
    let sshd = Sshd::start();
    let mut args: Vec<String> = sshd.client_options();
    args.extend([
        "-t".into(),
        "-p".into(),
        sshd.port.to_string(),
        format!("{USER}@127.0.0.1"),
    ]);
    let mut launch = Launch::new(&args);
    launch.size.ws_row = 30;
    launch.size.ws_col = 100;
    let mut pty = OuterPty::launch_program("ssh", launch);
    pty.write(b"echo LOGIN-$SBX_SHELL-$SBX_SANDBOX $(stty size)\n");
    let seen = pty.expect("30 100");
    assert!(
        seen.contains("LOGIN-1-") && !seen.contains("LOGIN-1-none"),
        "{seen}"
    );
    let mark = pty.mark();
    pty.resize(40, 120);
    // The new size travels ssh → sshd → sbx-shell → the inner pty: wait for it in there.
    pty.write(b"until [ \"$(stty size)\" = '40 120' ]; do sleep 0.01; done; echo SIZE-$(stty size | tr ' ' x)\n");
    pty.expect_from(mark, "SIZE-40x120");
    pty.write(b"exit 3\n");
    assert_eq!(pty.wait().code(), Some(3));
}

#[test]
fn scp_sftp_and_rsync_copy_byte_exact_both_ways() {
    if !tools_present() {
        return;
    }
    let _serial = serial();
    let site = site();
    let sshd = Sshd::start();
    let local = site.dir.join(format!("local-{}", sshd.port));
    fs::create_dir_all(&local).unwrap();
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let source = local.join("data.bin");
    fs::write(&source, &data).unwrap();
    let port = sshd.port.to_string();
    let remote = |name: &str| format!("{USER}@127.0.0.1:{name}");
    let check = |what: &str, out: Output| {
        assert!(
            out.status.success(),
            "{what}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    };
    let opts = sshd.client_options();

    // scp (SFTP protocol by default in OpenSSH 9) and legacy scp (-O: scp on the remote),
    // into a directory of the home and to its top (`scp f host:`).
    for (name, legacy) in [
        ("files/scp.bin", false),
        ("files/scp-legacy.bin", true),
        ("scp-top.bin", false),
    ] {
        let mut up = Command::new("scp");
        up.args(&opts).args(["-P", &port]);
        if legacy {
            up.arg("-O");
        }
        check(name, up.arg(&source).arg(remote(name)).shown());
        assert_eq!(fs::read(site.home.join(name)).unwrap(), data, "{name} up");
        let back = local.join(format!("back-{}", name.replace('/', "-")));
        let mut down = Command::new("scp");
        down.args(&opts).args(["-P", &port]);
        if legacy {
            down.arg("-O");
        }
        check(name, down.arg(remote(name)).arg(&back).shown());
        assert_eq!(fs::read(&back).unwrap(), data, "{name} down");
    }

    // sftp in batch mode.
    let batch = local.join("batch");
    let back = local.join("back-sftp.bin");
    fs::write(
        &batch,
        format!(
            "put {} files/sftp.bin\nget files/sftp.bin {}\n",
            source.display(),
            back.display()
        ),
    )
    .unwrap();
    let out = sftp_batch(&opts, &port, &batch);
    check("sftp", out);
    assert_eq!(
        fs::read(site.home.join("files/sftp.bin")).unwrap(),
        data,
        "sftp put"
    );
    assert_eq!(fs::read(&back).unwrap(), data, "sftp get");

    // rsync over ssh.
    let rsh = format!("ssh {} -p {port}", opts.join(" "));
    check(
        "rsync up",
        Command::new("rsync")
            .args(["-e", &rsh])
            .arg(&source)
            .arg(remote("files/rsync.bin"))
            .shown(),
    );
    assert_eq!(
        fs::read(site.home.join("files/rsync.bin")).unwrap(),
        data,
        "rsync up"
    );
    let back = local.join("back-rsync.bin");
    check(
        "rsync down",
        Command::new("rsync")
            .args(["-e", &rsh])
            .arg(remote("files/rsync.bin"))
            .arg(&back)
            .shown(),
    );
    assert_eq!(fs::read(&back).unwrap(), data, "rsync down");

    // Outside the workspace the copy is refused by the sandbox.
    let denied = site.outside.join("scp-denied.bin");
    let out = Command::new("scp")
        .args(&opts)
        .args(["-P", &port])
        .arg(&source)
        .arg(remote(denied.to_str().unwrap()))
        .shown();
    assert!(!out.status.success(), "scp outside the workspace succeeded");
    assert!(!denied.exists());
    // Into /tmp, the session's own (it ends with the session): each copy fails, never a
    // success whose file vanishes — scp over SFTP, legacy scp and sftp's put.
    let tmp = format!("/tmp/sbx-ssh-copy-{}.bin", sshd.port);
    for legacy in [false, true] {
        let mut up = Command::new("scp");
        up.args(&opts).args(["-P", &port]);
        if legacy {
            up.arg("-O");
        }
        let out = up.arg(&source).arg(remote(&tmp)).shown();
        assert!(
            !out.status.success(),
            "scp (legacy: {legacy}) into /tmp succeeded"
        );
    }
    let batch = local.join("batch-tmp");
    fs::write(&batch, format!("put {} {tmp}\n", source.display())).unwrap();
    let out = sftp_batch(&opts, &port, &batch);
    assert!(!out.status.success(), "sftp put into /tmp succeeded");
    // (The directory itself is open to everyone: the control in the remote-command test
    // shows the same user writing there without a sandbox.)
    // A remote command other than a copy keeps its private /tmp.
    let out = sshd.run("echo x > /tmp/own && cat /tmp/own");
    assert_eq!(text(&out.stdout), "x\n", "{}", text(&out.stderr));
}

#[test]
fn a_broken_config_is_a_clear_error_not_a_silent_login() {
    if !tools_present() {
        return;
    }
    let _serial = serial();
    let sshd = Sshd::start();
    let config = write_user_config("{\"network\": \"sometimes\"}\n");
    let out = sshd.run("echo SHOULD-NOT-RUN");
    fs::remove_file(&config).unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stdout.contains("SHOULD-NOT-RUN"), "{stdout}");
    assert!(
        stderr.contains(config.to_str().unwrap()) && stderr.contains("Hint:"),
        "{stderr}"
    );
    assert!(
        stderr.contains("logins through it too") && stderr.contains("chsh -s"),
        "{stderr}"
    );
    // Fixed, the same login works again.
    let out = sshd.run("echo BACK");
    assert_eq!(text(&out.stdout).trim(), "BACK", "{}", text(&out.stderr));
}

/// Puts the machine back as the other tests here expect it, however the test ends: the
/// account's passwd shell is sbx-shell, no config, `/etc/shells` as it was.
struct Restore {
    etc_shells: String,
}

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = fs::write("/etc/shells", &self.etc_shells);
        let _ = fs::remove_file(site().home.join(".config/sbx-shell/config.json"));
        let _ = Command::new("usermod")
            .args(["-s", site().dir.join("sbx-shell").to_str().unwrap(), USER])
            .status();
    }
}

/// `sbx-shell login-shell`, run by root for the account, records its real shell, lists
/// sbx-shell in /etc/shells and runs chsh; `su -` and ssh then log in through sbx-shell to
/// that real shell, with no fallback note.
#[test]
fn the_login_shell_command_gives_the_account_its_real_shell_through_su_and_ssh() {
    if !tools_present() || !require("su", "logins through su") {
        return;
    }
    let _serial = serial();
    let site = site();
    let _restore = Restore {
        etc_shells: fs::read_to_string("/etc/shells").unwrap_or_default(),
    };
    let binary = site.dir.join("sbx-shell");
    let status = Command::new("usermod")
        .args(["-s", "/bin/bash", USER])
        .status()
        .unwrap();
    assert!(status.success());
    let _ = fs::remove_file(site.home.join(".config/sbx-shell/config.json"));

    let setup = Command::new(&binary)
        .args(["login-shell", "--user", USER, "--yes"])
        .stdin(Stdio::null())
        .shown();
    let said = text(&setup.stdout);
    assert!(setup.status.success(), "{said}{}", text(&setup.stderr));
    assert!(said.contains("which runs /bin/bash"), "{said}");
    let passwd = text(&Command::new("getent").args(["passwd", USER]).shown().stdout);
    assert!(
        passwd
            .trim_end()
            .ends_with(&format!(":{}", binary.display())),
        "{passwd}"
    );
    let config = site.home.join(".config/sbx-shell/config.json");
    assert!(fs::read_to_string(&config)
        .unwrap()
        .contains("\"shell\": \"/bin/bash\""));
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&fs::metadata(&config).unwrap()),
        site.uid
    );
    assert!(fs::read_to_string("/etc/shells")
        .unwrap()
        .lines()
        .any(|l| Path::new(l.trim()) == binary));

    let probe = "echo SHELL=$SHELL SBX=$SBX_SHELL; readlink /proc/$$/exe; true";
    let su = Command::new("su")
        .args(["-", USER, "-c", probe])
        .stdin(Stdio::null())
        .shown();
    let sshd = Sshd::start();
    let ssh = sshd.run(probe);
    for (how, out) in [("su -", &su), ("ssh", &ssh)] {
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{how}: {stdout}{stderr}");
        assert!(
            stdout.lines().any(|l| l == "SHELL=/bin/bash SBX=1"),
            "{how}: {stdout}{stderr}"
        );
        assert!(
            stdout.lines().any(|l| l.ends_with("/bash")),
            "{how}: {stdout}"
        );
        assert!(
            !stderr.contains("no real shell is known"),
            "{how}: {stderr}"
        );
    }

    // Run again: nothing left to do.
    let again = Command::new(&binary)
        .args(["login-shell", "--user", USER, "--yes"])
        .shown();
    assert!(
        text(&again.stdout).contains("nothing to change"),
        "{}",
        text(&again.stdout)
    );
}
