//! ssh and git over ssh inside the sandbox, against real OpenSSH servers and a real
//! `ssh-agent` holding two keys: the filtered agent lists one key, signs a login only for
//! the allowed host (by the host key the client binds the session to), signs git commits
//! only when allowed, refuses adding, removing and locking keys; git clones, fetches and
//! pushes through the proxy; known_hosts and config are readable, private keys are not.
//! Each action has a bare control with the real agent, which shows it works there.
//!
//! The sandboxed ssh is given `-o UserKnownHostsFile=$HOME/.ssh/known_hosts`: ssh finds
//! `~` in the passwd entry, not in `$HOME`, and the test's home is a lab's.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::sandbox::{assert_lines, chown_tree, tools_present, Lab, User, NOBODY};
use super::support::{require, sh_quote, wait_until, Shown, Tmux};

fn ssh_tools() -> bool {
    tools_present()
        && require("ssh", "the OpenSSH client")
        && require("ssh-agent", "a real ssh agent")
        && require("ssh-keygen", "keys and git signatures")
        && require("git", "git over ssh")
        && (Path::new("/usr/sbin/sshd").is_file() || require("sshd", "the OpenSSH server"))
}

/// The backends the filtered agent is tried under: the Linux ones, and Docker's
/// container when scripts/test.sh started its engine (else a skip, a failure under
/// SBX_REQUIRE_ALL).
fn backends() -> Vec<&'static str> {
    let mut all = vec!["bwrap", "landlock"];
    if std::env::var_os("SBX_TEST_DOCKER_HOST").is_some() {
        all.push("docker");
    } else {
        super::support::skipped(
            "the docker backend's ssh needs the engine scripts/test.sh starts (SBX_TEST_DOCKER_HOST)",
        );
    }
    all
}

/// The engine's socket for `user` (`engines.rs`: root's, and the one ordinary users may use).
fn docker_host(user: User) -> String {
    let var = match user {
        User::Root => "SBX_TEST_DOCKER_HOST",
        _ => "SBX_TEST_DOCKER_OPEN_HOST",
    };
    std::env::var(var).unwrap_or_default()
}

fn keygen(path: &Path, comment: &str) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

fn public(path: &Path) -> String {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    fs::read_to_string(PathBuf::from(p))
        .unwrap()
        .trim()
        .to_string()
}

/// A process killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two sshd (git.test, the allowed host, and other.test, with a host key of its own) that
/// let root in with either of the user's two keys, a bare repository with one commit, the
/// lab's known_hosts, and the user's own ssh-agent holding both keys.
struct World {
    lab: Lab,
    keys: PathBuf,
    git_port: u16,
    other_port: u16,
    agent: PathBuf,
    repo: PathBuf,
    _servers: Vec<Running>,
    _agent: Running,
}

/// An sshd with `host_key` on a free loopback port (`support::spawn_sshd`), and that port.
fn start_sshd(keys: &Path, host_key: &str, authorized: &Path) -> (u16, Running) {
    let (port, child) = super::support::spawn_sshd(keys, |port| {
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile none\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nAuthorizedKeysFile {}\nPermitRootLogin prohibit-password\nAllowUsers root\n",
            keys.join(host_key).display(),
            authorized.display()
        )
    });
    (port, Running(child))
}

impl World {
    fn new(user: User) -> World {
        let lab = Lab::new("sshagent", user, false);
        let keys = lab.dir.join("keys");
        fs::create_dir_all(&keys).unwrap();
        for name in ["one", "two", "host-git", "host-other"] {
            keygen(&keys.join(name), name);
        }
        // A third key the program tries to add (readable inside: in the workspace).
        keygen(&lab.ws.join("extra"), "extra");
        let authorized = keys.join("authorized_keys");
        fs::write(
            &authorized,
            format!(
                "{}\n{}\n",
                public(&keys.join("one")),
                public(&keys.join("two"))
            ),
        )
        .unwrap();
        if !Path::new("/run/sshd").exists() {
            fs::create_dir_all("/run/sshd").unwrap();
            super::support::at_exit(super::support::Cleanup::Dir("/run/sshd".into()));
        }
        let mut servers = Vec::new();
        let mut known = String::new();
        let mut ports = Vec::new();
        for (host_key, name) in [("host-git", "git.test"), ("host-other", "other.test")] {
            let (port, server) = start_sshd(&keys, host_key, &authorized);
            servers.push(server);
            ports.push(port);
            known.push_str(&format!(
                "[{name}]:{port} {}\n",
                public(&keys.join(host_key)).rsplit_once(' ').unwrap().0
            ));
        }
        let (git_port, other_port) = (ports[0], ports[1]);
        fs::write(lab.home.join(".ssh/known_hosts"), &known).unwrap();
        let repo = lab.dir.join("repo.git");
        let git = |args: &[&str], dir: &Path| {
            let out = Command::new("git").args(args).current_dir(dir).shown();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(
            &["init", "-q", "--bare", "-b", "main", repo.to_str().unwrap()],
            &lab.dir,
        );
        let seed = lab.dir.join("seed");
        git(
            &["init", "-q", "-b", "main", seed.to_str().unwrap()],
            &lab.dir,
        );
        git(
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@x",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "first",
            ],
            &seed,
        );
        git(&["push", "-q", repo.to_str().unwrap(), "main"], &seed);
        if user == User::Nobody {
            chown_tree(&lab.dir, NOBODY);
        }
        let agent = lab.dir.join("agent.sock");
        let mut cmd = Command::new("ssh-agent");
        cmd.args(["-D", "-a"])
            .arg(&agent)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if user == User::Nobody {
            cmd.uid(NOBODY).gid(NOBODY);
        }
        let agent_process = Running(cmd.spawn().unwrap());
        wait_until("ssh-agent to listen", || agent.exists().then_some(()));
        let world = World {
            lab,
            keys,
            git_port,
            other_port,
            agent,
            repo,
            _servers: servers,
            _agent: agent_process,
        };
        world.add_keys();
        world
    }

    /// The user's agent holds both keys (again).
    fn add_keys(&self) {
        let mut cmd = Command::new("ssh-add");
        cmd.arg("-q")
            .arg(self.keys.join("one"))
            .arg(self.keys.join("two"));
        let added = self.as_user(&mut cmd).shown();
        assert!(added.status.success(), "ssh-add: {added:?}");
    }

    fn as_user<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("SSH_AUTH_SOCK", &self.agent)
            .env("HOME", &self.lab.home);
        if self.lab.user == User::Nobody {
            cmd.uid(NOBODY).gid(NOBODY);
        }
        cmd
    }

    fn key_pub(&self, name: &str) -> String {
        self.keys.join(format!("{name}.pub")).display().to_string()
    }

    fn net(&self) -> Vec<String> {
        vec![
            "--net".into(),
            format!(
                "allow=git.test:{},other.test:{}",
                self.git_port, self.other_port
            ),
            "--resolve".into(),
            "git.test:127.0.0.1".into(),
            "--resolve".into(),
            "other.test:127.0.0.1".into(),
        ]
    }

    /// `sh -c SCRIPT` sandboxed with `args` and the network to both servers.
    fn sandboxed(&self, backend: &str, args: &[&str], script: &str) -> (i32, String, String) {
        self.sandboxed_by(None, backend, args, script)
    }

    /// `sandboxed`, by the sbx-shell binary at `binary` when given.
    fn sandboxed_by(
        &self,
        binary: Option<&Path>,
        backend: &str,
        args: &[&str],
        script: &str,
    ) -> (i32, String, String) {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend(self.net());
        all.extend(["-c".into(), script.into()]);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut cmd = match binary {
            Some(binary) => self.lab.command_of(binary, backend, &all),
            None => self.lab.command(backend, &all),
        };
        if backend == "docker" {
            cmd.env("DOCKER_HOST", docker_host(self.lab.user));
        }
        cmd.env("SSH_AUTH_SOCK", &self.agent)
            .env("GIT_PORT", self.git_port.to_string())
            .env("OTHER_PORT", self.other_port.to_string())
            .env("REPO", &self.repo)
            .env("KEYS", &self.keys);
        let out = cmd.shown();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `sh -c SCRIPT` bare, with the real agent: the control. `ssh` reaches both servers
    /// directly (no proxy out here).
    fn bare(&self, script: &str) -> (i32, String, String) {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", script])
            .current_dir(&self.lab.ws)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("GIT_PORT", self.git_port.to_string())
            .env("OTHER_PORT", self.other_port.to_string())
            .env("REPO", &self.repo)
            .env("KEYS", &self.keys)
            .env(
                "GIT_SSH_COMMAND",
                "ssh -o HostName=127.0.0.1 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
            )
            .stdin(Stdio::null());
        self.as_user(&mut cmd);
        let out = cmd.shown();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `sbx-shell log -n 1` as the lab's user: the last session with every refusal.
    fn last_log(&self) -> String {
        let mut cmd = Command::new(self.lab.bin());
        cmd.env_clear().args(["log", "-n", "1"]);
        let out = self.as_user(&mut cmd).shown();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn listed_outside(&self) -> usize {
        let out = self.as_user(Command::new("ssh-add").arg("-l")).shown();
        String::from_utf8_lossy(&out.stdout).lines().count()
    }
}

/// ssh as the sandbox runs it (inside), or with the real host reached directly (bare).
const SSH_INSIDE: &str = "ssh -o BatchMode=yes -o UserKnownHostsFile=$HOME/.ssh/known_hosts";
const SSH_BARE: &str = "ssh -o BatchMode=yes -o HostName=127.0.0.1 -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null";

/// What the program tries with the agent; `$SSH` is how it runs ssh.
const ACTIONS: &str = r#"
echo "KEYS $(ssh-add -l | grep -c ED25519)"
$SSH -p "$GIT_PORT" root@git.test echo LOGIN-OK
$SSH -p "$OTHER_PORT" root@other.test echo OTHER-OK || echo OTHER-REFUSED
ssh-add -q extra 2>/dev/null && echo ADD-OK || echo ADD-REFUSED
printf '#!/bin/sh\necho pw\n' > askpass && chmod +x askpass
SSH_ASKPASS=./askpass SSH_ASKPASS_REQUIRE=force ssh-add -x >/dev/null 2>&1 && echo LOCK-OK || echo LOCK-REFUSED
SSH_ASKPASS=./askpass SSH_ASKPASS_REQUIRE=force ssh-add -X >/dev/null 2>&1
ssh-add -D >/dev/null 2>&1 && echo REMOVE-OK || echo REMOVE-REFUSED
"#;

#[test]
fn the_filtered_agent_passes_one_key_for_its_host_and_changes_nothing() {
    if !ssh_tools() {
        return;
    }
    for user in [User::Root, User::Nobody] {
        let world = World::new(user);
        // Control: the real agent lists both keys, logs in anywhere, adds, locks, removes.
        let (_, out, err) = world.bare(&format!("SSH='{SSH_BARE}'\n{ACTIONS}"));
        assert_lines(
            &out,
            &[
                "KEYS 2",
                "LOGIN-OK",
                "OTHER-OK",
                "ADD-OK",
                "LOCK-OK",
                "REMOVE-OK",
            ],
            &format!("bare as {user:?}: {err}"),
        );
        for backend in backends() {
            world.add_keys();
            let allowed = format!("{}@git.test:{}", world.key_pub("one"), world.git_port);
            let (_, out, err) = world.sandboxed(
                backend,
                &["--ssh-key", &allowed],
                &format!("SSH=\"{SSH_INSIDE}\"\n{ACTIONS}"),
            );
            let what = format!("{backend} as {user:?}: {err}");
            assert_lines(
                &out,
                &[
                    "KEYS 1",
                    "LOGIN-OK",
                    "OTHER-REFUSED",
                    "ADD-REFUSED",
                    "LOCK-REFUSED",
                    "REMOVE-REFUSED",
                ],
                &what,
            );
            // Every refusal named (the summary shows the first three, the log all), with
            // the option that allows the host.
            assert!(err.contains("ssh agent requests: "), "{what}");
            let line = world.last_log();
            for subject in [
                format!("for [other.test]:{}", world.other_port),
                "remove every key".into(),
                "lock the agent".into(),
            ] {
                assert!(line.contains(&subject), "{subject}: {line}\n{what}");
            }
            assert!(
                line.contains(&format!("@other.test:{}", world.other_port)),
                "{what}"
            );
            assert_eq!(
                world.listed_outside(),
                2,
                "the real agent keeps both keys: {what}"
            );
        }
    }
}

/// Signing arbitrary data, with the key not named (its public half is no secret), and a
/// session bound to the allowed host with a signature the
/// host never made: the real agent signs both; the filtered one neither.
const FORGE: &str = r#"
import base64, os, socket, struct
def string(b): return struct.pack(">I", len(b)) + b
def ask(s, body):
    s.sendall(string(body))
    n = struct.unpack(">I", s.recv(4))[0]
    d = b""
    while len(d) < n: d += s.recv(n - len(d))
    return d
s = socket.socket(socket.AF_UNIX); s.connect(os.environ["SSH_AUTH_SOCK"])
a = ask(s, b"\x0b")
l = struct.unpack(">I", a[5:9])[0]; key = a[9:9 + l]
r = ask(s, b"\x0d" + string(key) + string(b"an arbitrary challenge") + struct.pack(">I", 0))
print("ARBITRARY", "SIGNED" if r[0] == 14 else "REFUSED")
two = base64.b64decode(os.environ["KEY_TWO"])
login = lambda sid, k: string(sid) + b"\x32" + string(b"root") + string(b"ssh-connection") + string(b"publickey") + b"\x01" + string(b"ssh-ed25519") + string(k)
r = ask(s, b"\x0d" + string(two) + string(login(b"S", two)) + struct.pack(">I", 0))
print("OTHER-KEY", "SIGNED" if r[0] == 14 else "REFUSED")
host = base64.b64decode(os.environ["HOST_KEY"])
sid = os.urandom(32)
fake = string(b"ssh-ed25519") + string(b"\0" * 64)
r = ask(s, b"\x1b" + string(b"session-bind@openssh.com") + string(host) + string(sid) + string(fake) + b"\0")
r = ask(s, b"\x0d" + string(key) + string(login(sid, key)) + struct.pack(">I", 0))
print("FORGED-LOGIN", "SIGNED" if r[0] == 14 else "REFUSED")
"#;

#[test]
fn forged_bindings_and_arbitrary_data_get_no_signature() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    let host_key = public(&world.keys.join("host-git"));
    let host_key = host_key.split(' ').nth(1).unwrap();
    let two = public(&world.keys.join("two"));
    let two = two.split(' ').nth(1).unwrap();
    let script = format!(
        "HOST_KEY={host_key} KEY_TWO={two} /usr/bin/python3 -c {}",
        sh_quote(FORGE)
    );
    let (_, out, err) = world.bare(&script);
    assert_lines(
        &out,
        &[
            "ARBITRARY SIGNED",
            "OTHER-KEY SIGNED",
            "FORGED-LOGIN SIGNED",
        ],
        &format!("bare: {err}"),
    );
    for backend in backends() {
        let allowed = format!("{}@git.test:{}", world.key_pub("one"), world.git_port);
        let (_, out, err) = world.sandboxed(backend, &["--ssh-key", &allowed], &script);
        assert_lines(
            &out,
            &[
                "ARBITRARY REFUSED",
                "OTHER-KEY REFUSED",
                "FORGED-LOGIN REFUSED",
            ],
            &format!("{backend}: {err}"),
        );
        // Each named (the summary shows three, the log every one).
        assert!(err.contains("ssh agent requests: 4 ("), "{backend}: {err}");
        let log = world.last_log();
        for subject in [
            "signature of other data",
            "session-bind for",
            "for a login not bound",
        ] {
            assert!(log.contains(subject), "{backend}: {subject}: {log}");
        }
        // The user's own agent, by its path: out of reach.
        let (_, out, _) = world.sandboxed(
            backend,
            &["--ssh-key", &allowed],
            &format!("SSH_AUTH_SOCK={} ssh-add -l >/dev/null 2>&1 && echo REAL-AGENT || echo REAL-HIDDEN", world.agent.display()),
        );
        assert_lines(&out, &["REAL-HIDDEN"], backend);
    }
    let (_, out, _) = world.bare("ssh-add -l >/dev/null && echo REAL-AGENT");
    assert_lines(&out, &["REAL-AGENT"], "bare");
}

/// git over ssh: clone, commit, push, fetch; a signed commit refused, then allowed.
const GIT: &str = r#"
D=clone-$(date +%s%N)
git clone -q "ssh://root@git.test:$GIT_PORT$REPO" "$D" && echo CLONED
cd "$D" || exit 1
git -c user.name=t -c user.email=t@x commit -q --allow-empty -m pushed && git push -q origin main && echo PUSHED
git fetch -q && echo FETCHED
git -c gpg.format=ssh -c user.signingkey="key::$(cat "$KEYS/one.pub")" -c user.name=t -c user.email=t@x commit -q -S --allow-empty -m signed 2>/dev/null && git cat-file -p HEAD | grep -q '^gpgsig -----BEGIN SSH SIGNATURE' && echo SIGNED || echo SIGN-REFUSED
echo data | ssh-keygen -Y sign -n file -f "$KEYS/one.pub" >/dev/null 2>&1 && echo FILE-SIGNED || echo FILE-REFUSED
"#;

#[test]
fn git_clones_pushes_fetches_and_signs_only_when_allowed() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    let (_, out, err) = world.bare(&format!("export GIT_PORT REPO KEYS\n{GIT}"));
    assert_lines(
        &out,
        &["CLONED", "PUSHED", "FETCHED", "SIGNED", "FILE-SIGNED"],
        &format!("bare: {err}"),
    );
    for backend in backends() {
        let allowed = format!("{}@git.test:{}", world.key_pub("one"), world.git_port);
        // git runs `ssh` from PATH: the wrapper, through the proxy.
        let inside = format!(
            "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.sshCommand GIT_CONFIG_VALUE_0=\"ssh -o UserKnownHostsFile=$HOME/.ssh/known_hosts\"\n{GIT}"
        );
        let (_, out, err) = world.sandboxed(backend, &["--ssh-key", &allowed], &inside);
        let what = format!("{backend}: {err}");
        assert_lines(
            &out,
            &[
                "CLONED",
                "PUSHED",
                "FETCHED",
                "SIGN-REFUSED",
                "FILE-REFUSED",
            ],
            &what,
        );
        assert!(err.contains("--ssh-sign-commits"), "{what}");
        let (_, out, err) = world.sandboxed(
            backend,
            &["--ssh-key", &allowed, "--ssh-sign-commits"],
            &inside,
        );
        assert_lines(
            &out,
            &["CLONED", "PUSHED", "SIGNED", "FILE-REFUSED"],
            &format!("{backend}: {err}"),
        );
    }
    let log = Command::new("git")
        .args(["log", "--format=%s", "main"])
        .current_dir(&world.repo)
        .shown();
    let subjects = String::from_utf8_lossy(&log.stdout)
        .matches("pushed")
        .count();
    assert_eq!(
        subjects,
        1 + 2 * backends().len(),
        "every push landed: bare, and two per backend"
    );
}

#[test]
fn private_keys_stay_hidden_wherever_config_names_them() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    let home = &world.lab.home;
    fs::create_dir_all(home.join("keys")).unwrap();
    fs::write(home.join("keys/id_work"), "CANARY-KEY work\n").unwrap();
    // A pointer file a session could write (the workspace), included by the user's
    // config: it names the private key as an included file and as a known_hosts file.
    fs::write(
        world.lab.ws.join("ssh.conf"),
        "Include ~/.ssh/id_ed25519\nUserKnownHostsFile ~/.ssh/id_ed25519\n",
    )
    .unwrap();
    fs::write(
        home.join(".ssh/config"),
        format!(
            "Include {}\nHost *\n  IdentityFile ~/keys/id_work\n  IdentityFile ~/.ssh/id_ed25519\n",
            world.lab.ws.join("ssh.conf").display()
        ),
    )
    .unwrap();
    let script = r#"
cat ~/.ssh/config >/dev/null 2>&1 && echo CONFIG-READ || echo CONFIG-HIDDEN
grep -q git.test ~/.ssh/known_hosts 2>/dev/null && echo KNOWN-READ || echo KNOWN-HIDDEN
cat ~/.ssh/id_ed25519 2>/dev/null | grep -q CANARY && echo KEY-READ || echo KEY-HIDDEN
cat ~/keys/id_work 2>/dev/null | grep -q CANARY && echo WORK-KEY-READ || echo WORK-KEY-HIDDEN
echo x >> ~/.ssh/known_hosts 2>/dev/null && echo KNOWN-WRITTEN || echo KNOWN-READ-ONLY
"#;
    let (_, out, _) = world.bare(script);
    assert_lines(
        &out,
        &["CONFIG-READ", "KNOWN-READ", "KEY-READ", "WORK-KEY-READ"],
        "bare",
    );
    // Undo the control's append.
    let known = fs::read_to_string(home.join(".ssh/known_hosts")).unwrap();
    fs::write(home.join(".ssh/known_hosts"), known.trim_end_matches("x\n")).unwrap();
    let allowed = format!("{}@git.test:{}", world.key_pub("one"), world.git_port);
    for backend in backends() {
        let (_, out, err) = world.sandboxed(backend, &["--ssh-key", &allowed], script);
        assert_lines(
            &out,
            &[
                "CONFIG-READ",
                "KNOWN-READ",
                "KEY-HIDDEN",
                "WORK-KEY-HIDDEN",
                "KNOWN-READ-ONLY",
            ],
            &format!("{backend}: {err}"),
        );
        // Without ssh: ~/.ssh hidden whole, and config's key still denied.
        let (_, out, err) = world.sandboxed(backend, &[], script);
        assert_lines(
            &out,
            &[
                "CONFIG-HIDDEN",
                "KNOWN-HIDDEN",
                "KEY-HIDDEN",
                "WORK-KEY-HIDDEN",
            ],
            &format!("{backend} without ssh: {err}"),
        );
    }
}

#[test]
fn each_signature_waits_for_a_yes_on_the_terminal() {
    if !ssh_tools() || !require("tmux", "the confirmation on a terminal") {
        return;
    }
    let world = World::new(User::Root);
    let allowed = format!("{}@git.test:{}", world.key_pub("one"), world.git_port);
    for backend in ["bwrap", "landlock"] {
        let command = format!(
            "cd {ws} && env -i PATH=/usr/bin:/bin HOME={home} SSH_AUTH_SOCK={agent} TERM=xterm {bin} --backend {backend} --ssh-key {allowed} --ssh-confirm {net} -c 'for i in 1 2; do ssh -o BatchMode=yes -o UserKnownHostsFile=$HOME/.ssh/known_hosts -p {port} root@git.test echo LOGIN-$i-OK || echo LOGIN-$i-REFUSED; done; sleep 30'",
            ws = sh_quote(world.lab.ws.to_str().unwrap()),
            home = sh_quote(world.lab.home.to_str().unwrap()),
            agent = sh_quote(world.agent.to_str().unwrap()),
            bin = super::support::bin_quoted(),
            net = world.net().iter().map(|a| sh_quote(a)).collect::<Vec<_>>().join(" "),
            port = world.git_port,
        );
        let tmux = Tmux::start(&command, 120, 30);
        tmux.expect("allow the program to log in to [git.test]");
        tmux.send_keys(&["y"]);
        tmux.expect("LOGIN-1-OK");
        let screen = wait_until("the second question", || {
            let screen = tmux.capture();
            (screen.matches("allow the program").count() == 2).then_some(screen)
        });
        assert_eq!(screen.matches("allow the program").count(), 2, "{screen}");
        tmux.send_keys(&["n"]);
        let screen = tmux.expect("LOGIN-2-REFUSED");
        assert!(!screen.contains("LOGIN-2-OK"), "{backend}: {screen}");
    }
}

#[test]
fn bad_ssh_settings_stop_before_the_program_runs() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    let key = world.key_pub("one");
    let no_agent = world
        .lab
        .command("bwrap", &["--ssh-key", &key, "-c", "echo RAN"])
        .shown();
    let err = String::from_utf8_lossy(&no_agent.stderr);
    assert_ne!(no_agent.status.code(), Some(0));
    assert!(
        err.contains("SSH_AUTH_SOCK is not set") && err.contains("Hint:"),
        "{err}"
    );
    assert!(!String::from_utf8_lossy(&no_agent.stdout).contains("RAN"));
    for (spec, says) in [
        ("SHA256:short", "not a SHA256 fingerprint"),
        (&*format!("{key}@bad host"), "is not a host name"),
        ("/nonexistent/key.pub", "No such file"),
    ] {
        let out = world
            .lab
            .command("bwrap", &["--ssh-key", spec, "-c", "echo RAN"])
            .env("SSH_AUTH_SOCK", &world.agent)
            .shown();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{spec}");
        assert!(err.contains(says) && err.contains("Hint:"), "{spec}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    }
}

/// A host named without its port (`KEY@git.test`) where known_hosts lists it on another
/// port only: the note at the start names that port and the option with it, and the
/// option, as printed, logs in.
#[test]
fn a_host_known_on_another_port_is_named_with_that_port() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    world.add_keys();
    let key = world.key_pub("one");
    let login =
        format!("{SSH_INSIDE} -p \"$GIT_PORT\" root@git.test echo LOGIN-OK || echo LOGIN-REFUSED");
    let portless = format!("{key}@git.test");
    let (_, out, err) = world.sandboxed("bwrap", &["--ssh-key", &portless], &login);
    let port = world.git_port;
    assert!(err.contains(&format!("lists it on port {port}")), "{err}");
    assert_lines(&out, &["LOGIN-REFUSED"], &err);
    let fix = err
        .lines()
        .find_map(|l| {
            l.split_once("Fix: name the port, ")
                .map(|(_, fix)| fix.to_string())
        })
        .unwrap_or_default();
    assert_eq!(fix, format!("--ssh-key {key}@git.test:{port}"), "{err}");
    let args: Vec<&str> = fix.split(' ').collect();
    let (_, out, err) = world.sandboxed("bwrap", &args, &login);
    assert_lines(&out, &["LOGIN-OK"], &err);
    assert!(!err.contains("known_hosts lists no key"), "{err}");
}

/// A checkout or binary under /tmp: the host's /tmp is not the sandbox's (bwrap's is
/// private, Landlock alone leaves it out), yet ssh's ProxyCommand runs sbx-shell inside.
#[test]
fn a_binary_under_tmp_still_takes_ssh_through_the_proxy() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    let dir = PathBuf::from(format!("/tmp/sbx-ssh-bin-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    super::support::at_exit(super::support::Cleanup::Dir(dir.clone()));
    let binary = dir.join("sbx-shell");
    super::support::copy_binary(&binary);
    let allowed = format!("{}@git.test:{}", world.key_pub("one"), world.git_port);
    for backend in ["bwrap", "landlock"] {
        let (_, out, err) = world.sandboxed_by(
            Some(&binary),
            backend,
            &["--ssh-key", &allowed],
            &format!("{SSH_INSIDE} -p \"$GIT_PORT\" root@git.test echo LOGIN-OK"),
        );
        assert_lines(&out, &["LOGIN-OK"], &format!("{backend}: {err}"));
    }
}

/// `"ssh"` in the user's config file does what the flags do, and `explain` shows it.
#[test]
fn the_ssh_section_of_a_config_file_works_and_explain_shows_it() {
    if !ssh_tools() {
        return;
    }
    let world = World::new(User::Root);
    let config = world.lab.home.join(".config/sbx-shell");
    fs::create_dir_all(&config).unwrap();
    fs::write(
        config.join("config.json"),
        format!(
            r#"{{"ssh": {{"keys": ["{}"], "hosts": ["git.test:{}"], "sign_commits": true}}}}"#,
            world.key_pub("one"),
            world.git_port
        ),
    )
    .unwrap();
    let explain = |args: &[&str]| {
        let mut cmd = Command::new(super::support::bin());
        cmd.env_clear()
            .env("HOME", &world.lab.home)
            .current_dir(&world.lab.ws)
            .arg("explain")
            .args(args);
        String::from_utf8_lossy(&cmd.shown().stdout).into_owned()
    };
    let text = explain(&[]);
    for line in [
        "ssh           a filtered agent of sbx-shell's (SSH_AUTH_SOCK inside); your agent stays out of reach".to_string(),
        format!("  key         {} → logins to git.test:{}", world.key_pub("one"), world.git_port),
        "  signs       ssh logins (bound to the host's key in known_hosts) and git commits and tags".into(),
        format!("  revealed    {}", world.lab.home.join(".ssh/known_hosts").display()),
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} in:\n{text}");
    }
    let json: serde_json::Value = serde_json::from_str(&explain(&["--json"])).unwrap();
    assert_eq!(json["policy"]["ssh"]["sign_commits"], true, "{json}");
    for backend in ["bwrap", "landlock"] {
        let (_, out, err) = world.sandboxed(
            backend,
            &[],
            &format!(
                "echo \"KEYS $(ssh-add -l | grep -c ED25519)\"\n{SSH_INSIDE} -p \"$GIT_PORT\" root@git.test echo LOGIN-OK"
            ),
        );
        assert_lines(&out, &["KEYS 1", "LOGIN-OK"], &format!("{backend}: {err}"));
    }
}
