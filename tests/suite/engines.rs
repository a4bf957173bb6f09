//! The container backends, `--backend docker` and `--backend podman`, against the real
//! engines scripts/test.sh starts (its own dockerd, its own Podman storage). Each check
//! sits beside its control: the same probe run bare (`--backend none`) shows what the
//! container takes away — the host's network, its processes, root's files, capabilities.
//!
//! Podman takes about 20 s per container on this VM (its own wait, with or without
//! sbx-shell: `podman run --rm IMAGE true` alone), so it runs one probe and one kill test
//! at three moments.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::support::{
    bin, free_port, require, require_root, run_dir, skipped, Launch, OuterPty, Shown,
};

const NOBODY: u32 = 65534;

/// The probe: what it may do, one line each; ends 3, after a pause in which the test
/// looks at the host's command lines.
const PROBE: &str = r#"
id -u
echo made > made-by-program
grep -E '^(CapEff|NoNewPrivs)' /proc/self/status
echo "SANDBOX=$SBX_SANDBOX"
echo "VALUE=$SBX_ENGINES_VALUE"
python3 -c "
import socket, sys
try:
    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)
    print('NET-REACHED')
except OSError as e:
    print('NET-REFUSED', e)
" "$PORT"
echo "PIDS=$(ls /proc | grep -c '^[0-9]')"
cat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ
touch "$TMPDIR/probe" && echo TMP-OK
sleep "$PAUSE"
exit 3
"#;

/// The variables an engine's client needs (`engine_env`).
type EngineEnv = Vec<(String, String)>;

/// How a test reaches an engine: the variables its client needs, from scripts/test.sh.
fn engine_env(engine: &str, dir: &Path) -> Option<Vec<(String, String)>> {
    let docker = std::env::var("SBX_TEST_DOCKER_HOST").ok();
    let podman = std::env::var("SBX_TEST_PODMAN_ROOT").ok();
    let (Some(docker), Some(podman)) = (docker, podman) else {
        skipped(
            "the container backends need the Docker engine and the Podman storage that \
             scripts/test.sh prepares (SBX_TEST_DOCKER_HOST, SBX_TEST_PODMAN_ROOT)",
        );
        return None;
    };
    Some(match engine {
        "docker" => vec![("DOCKER_HOST".into(), docker)],
        _ => {
            // The tests' own storage, and the limits this VM lets Podman set (it withholds
            // CAP_SYS_RESOURCE even from root: see containers.rs).
            let storage = dir.join("storage.conf");
            std::fs::write(
                &storage,
                format!("[storage]\ndriver = \"overlay\"\ngraphroot = \"{podman}\"\nrunroot = \"{podman}-run\"\n"),
            )
            .unwrap();
            let conf = dir.join("containers.conf");
            std::fs::write(
                &conf,
                "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=4096:4096\"]\n",
            )
            .unwrap();
            vec![
                (
                    "CONTAINERS_STORAGE_CONF".into(),
                    storage.display().to_string(),
                ),
                ("CONTAINERS_CONF".into(), conf.display().to_string()),
            ]
        }
    })
}

fn ready(what: &str) -> bool {
    require_root(&format!("{what} (the tests' engines run as root)"))
        && require(
            "docker",
            "a Docker engine (scripts/test.sh installs docker.io)",
        )
        && require("podman", "Podman (scripts/test.sh installs podman)")
}

/// A workspace of `uid`'s, with a home of its own in it.
fn workspace(name: &str, uid: u32) -> PathBuf {
    let dir = run_dir(name);
    for sub in ["ws", "home"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
        std::os::unix::fs::chown(dir.join(sub), Some(uid), Some(uid)).unwrap();
    }
    std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    dir
}

/// Run the probe with `backend` as `uid`; while it pauses, the host's command lines and
/// the engine's record of the container are read. Returns the exit code, what it printed,
/// and whether the value showed on any command line or in the container's record.
fn probe(
    backend: &str,
    uid: u32,
    env: &[(String, String)],
    dir: &Path,
) -> (i32, String, String, bool) {
    let value = format!("v{}x{}", std::process::id(), uid);
    let port_listener = std::net::TcpListener::bind(("127.0.0.1", free_port())).unwrap();
    let port = port_listener.local_addr().unwrap().port();
    let mut cmd = Command::new(dir.join("sbx-shell"));
    cmd.args([
        "--backend",
        backend,
        "--allow-env",
        "SBX_ENGINES_VALUE",
        "--",
    ])
    .args(["sh", "-c", PROBE])
    .env("SBX_ENGINES_VALUE", &value)
    // A variable the engine's client reads: it reaches the client, never a command line.
    .env("DOCKER_SBX_TEST_TOKEN", &value)
    .env("PORT", port.to_string())
    .env("PAUSE", "4")
    .envs(env.iter().map(|(k, v)| (k, v)))
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    as_user_in(&mut cmd, dir, uid);
    let child = cmd.spawn().unwrap();
    // Podman starts slowly here: look while the probe pauses, once it has printed.
    let made = dir.join("ws/made-by-program");
    let start = Instant::now();
    while !made.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let mut seen = on_a_command_line(&value);
    if backend == "docker" {
        let out = Command::new("docker")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["ps", "-q", "--filter", "label=sbx-shell.supervisor"])
            .output()
            .unwrap();
        for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let inspect = Command::new("docker")
                .envs(env.iter().map(|(k, v)| (k, v)))
                .args(["inspect", id])
                .output()
                .unwrap();
            seen |= String::from_utf8_lossy(&inspect.stdout).contains(&value);
        }
    }
    let out = child.wait_with_output().unwrap();
    drop(port_listener);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        seen,
    )
}

/// `cmd` run as `uid` in the workspace `dir` holds, with its home, the system's tools and
/// nothing of the test's own state directories (the tester's `PATH` may lead into a home
/// `uid`'s program may not read: root's under `/root`, 0700, seen as an ordinary user's
/// there).
fn as_user_in(cmd: &mut Command, dir: &Path, uid: u32) {
    cmd.current_dir(dir.join("ws"))
        .env("HOME", dir.join("home"))
        .env("PATH", "/usr/local/bin:/usr/bin:/bin");
    for var in [
        "XDG_CONFIG_HOME",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_RUNTIME_DIR",
    ] {
        cmd.env_remove(var);
    }
    if uid != 0 {
        std::os::unix::process::CommandExt::uid(cmd, uid);
        std::os::unix::process::CommandExt::gid(cmd, uid);
    }
}

/// Whether `value` is in any process's command line now.
fn on_a_command_line(value: &str) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(value))
        })
}

fn line_value(out: &str, key: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[test]
fn docker_runs_the_program_in_a_container_as_root_and_as_an_ordinary_user() {
    if !ready("the docker backend") {
        return;
    }
    for uid in [0, NOBODY] {
        let dir = workspace("sbx-engines", uid);
        let Some(env) = engine_env("docker", &dir) else {
            return;
        };
        let env = match uid {
            0 => env,
            // The engine's socket an ordinary user may reach (as a `docker` group would).
            _ => match std::env::var("SBX_TEST_DOCKER_OPEN_HOST") {
                Ok(open) => vec![("DOCKER_HOST".into(), open)],
                Err(_) => {
                    skipped("scripts/test.sh's dockerd has no socket for ordinary users (SBX_TEST_DOCKER_OPEN_HOST)");
                    return;
                }
            },
        };
        let (code, bare, err, _) = probe("none", uid, &env, &dir);
        assert_eq!(code, 3, "control as {uid}: {bare}{err}");
        assert!(bare.contains("NET-REACHED"), "control: {bare}");
        let host_pids: u32 = line_value(&bare, "PIDS=").parse().unwrap();
        assert!(host_pids > 20, "control: {bare}");
        assert_eq!(bare.contains("SHADOW-READ"), uid == 0, "control: {bare}");
        let _ = std::fs::remove_file(dir.join("ws/made-by-program"));

        let (code, out, err, seen) = probe("docker", uid, &env, &dir);
        let what = format!("docker as {uid}");
        assert_eq!(code, 3, "{what}: {out}{err}");
        assert_eq!(
            out.lines().next(),
            Some(uid.to_string().as_str()),
            "{what}: {out}"
        );
        let made = std::fs::metadata(dir.join("ws/made-by-program")).unwrap();
        assert_eq!(
            std::os::unix::fs::MetadataExt::uid(&made),
            uid,
            "{what}: the workspace's new file is the user's"
        );
        assert_eq!(
            line_value(&out, "CapEff:"),
            "0000000000000000",
            "{what}: {out}"
        );
        assert_eq!(line_value(&out, "NoNewPrivs:"), "1", "{what}: {out}");
        assert_eq!(line_value(&out, "SANDBOX="), "docker", "{what}: {out}");
        assert!(
            line_value(&out, "VALUE=").starts_with('v'),
            "{what}: the variable reaches the program: {out}"
        );
        assert!(
            !seen,
            "{what}: the variable's value is on a command line or in the container's record"
        );
        assert!(out.contains("NET-REFUSED"), "{what}: no network: {out}");
        let pids: u32 = line_value(&out, "PIDS=").parse().unwrap();
        assert!(pids < 10, "{what}: only the container's processes: {out}");
        assert!(!out.contains("SHADOW-READ"), "{what}: {out}");
        assert!(
            out.contains("TMP-OK"),
            "{what}: the session's TMPDIR is writable: {out}"
        );
        if uid == 0 {
            assert!(
                err.contains("/etc/shadow"),
                "{what}: the refusal is named: {err}"
            );
        }
    }
}

/// What the network test's program tries, one line each: the listed origin through the
/// proxy, another host, the host's loopback directly, a name of its own, a machine
/// elsewhere, a server of its own on its loopback.
const NETWORK_PROBE: &str = r#"
import socket, sys, urllib.request
port = int(sys.argv[1])
def get(url, proxy=True):
    handlers = [] if proxy else [urllib.request.ProxyHandler({})]
    try:
        return urllib.request.build_opener(*handlers).open(url, timeout=5).read().decode().strip()
    except Exception as e:
        return "ERR %s" % getattr(e, "code", e)
print("LISTED", get("http://origin.test:%d/" % port))
print("OTHER", get("http://other.test:%d/" % port))
print("DIRECT", get("http://127.0.0.1:%d/" % port, proxy=False))
try:
    socket.getaddrinfo("lookup.example.org", 443)
    print("LOOKUP resolved")
except OSError as e:
    print("LOOKUP", e)
try:
    socket.create_connection(("192.0.2.7", 80), timeout=3)
    print("ELSEWHERE reached")
except OSError as e:
    print("ELSEWHERE", e)
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen()
socket.create_connection(("127.0.0.1", server.getsockname()[1]), timeout=3)
print("OWN-SERVER ok")
"#;

/// An HTTP origin on the host's loopback answering `ORIGIN-OK` to every request.
fn origin() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 9\r\n\r\nORIGIN-OK");
        }
    });
    port
}

/// The allow-list in a container, as under bwrap: the listed origin through sbx-shell's
/// proxy, reached inside without the host's network; every other way out refused and
/// named at the end — another host, a name looked up, a machine elsewhere — while the
/// program's own loopback is its own. As root and as an ordinary user, beside the bare
/// control that reaches the host's loopback directly.
#[test]
fn a_network_allow_list_works_inside_the_container_as_under_bwrap() {
    if !ready("the docker backend with a network allow-list") {
        return;
    }
    let port = origin();
    for uid in [0, NOBODY] {
        let dir = workspace("sbx-engines-net", uid);
        let Some(mut env) = engine_env("docker", &dir) else {
            return;
        };
        if uid != 0 {
            let Ok(open) = std::env::var("SBX_TEST_DOCKER_OPEN_HOST") else {
                skipped("scripts/test.sh's dockerd has no socket for ordinary users (SBX_TEST_DOCKER_OPEN_HOST)");
                return;
            };
            env = vec![("DOCKER_HOST".into(), open)];
        }
        let run = |options: &[String]| {
            // The workspace's copy: the checkout may be closed to other users.
            let mut cmd = Command::new(dir.join("sbx-shell"));
            cmd.args(options)
                .args(["--", "python3", "-c", NETWORK_PROBE, &port.to_string()])
                .envs(env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null());
            as_user_in(&mut cmd, &dir, uid);
            let out = cmd.shown();
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            (out.status.code(), text(&out.stdout), text(&out.stderr))
        };
        let (code, bare, err) = run(&["--backend".into(), "none".into()]);
        assert_eq!(code, Some(0), "control as {uid}: {bare}{err}");
        assert_eq!(line_value(&bare, "DIRECT"), "ORIGIN-OK", "control: {bare}");

        let listed = [
            "--backend".to_string(),
            "docker".into(),
            "--net".into(),
            format!("allow=origin.test:{port}"),
            "--resolve".into(),
            "origin.test:127.0.0.1".into(),
        ];
        let (code, out, err) = run(&listed);
        let what = format!("docker as {uid}");
        assert_eq!(code, Some(0), "{what}: {out}{err}");
        assert_eq!(
            line_value(&out, "LISTED"),
            "ORIGIN-OK",
            "{what}: {out}{err}"
        );
        assert_eq!(line_value(&out, "OTHER"), "ERR 403", "{what}: {out}");
        assert!(
            line_value(&out, "DIRECT").starts_with("ERR"),
            "{what}: {out}"
        );
        assert!(!out.contains("LOOKUP resolved"), "{what}: {out}");
        assert!(!out.contains("ELSEWHERE reached"), "{what}: {out}");
        assert!(out.contains("OWN-SERVER ok"), "{what}: {out}");
        for named in [
            "names looked up: 1 (lookup.example.org) → --net allow=lookup.example.org".to_string(),
            "192.0.2.7:80".into(),
            format!("other.test:{port}"),
        ] {
            assert!(
                err.contains(&named),
                "{what}: {named} is named at the end: {err}"
            );
        }
    }
}

/// Root's workspace `sbx-engines-NAME`, the docker engine's variables and the image
/// scripts/test.sh builds; `None` (after a skip, a failure under SBX_REQUIRE_ALL) where
/// there are none.
fn docker_and_image(what: &str, name: &str) -> Option<(PathBuf, EngineEnv, String)> {
    if !ready(what) {
        return None;
    }
    let dir = workspace(&format!("sbx-engines-{name}"), 0);
    let (Some(env), Ok(image)) = (engine_env("docker", &dir), std::env::var("SBX_TEST_IMAGE"))
    else {
        skipped("the image scripts/test.sh builds (SBX_TEST_IMAGE)");
        return None;
    };
    Some((dir, env, image))
}

/// With `--image`, the image's own files (not the host's: its dockerd is not there), the
/// workspace mounted at its path; beside the host's files, where dockerd is.
#[test]
fn an_image_runs_with_the_workspace_mounted() {
    let Some((dir, env, image)) = docker_and_image("the docker backend with an image", "image")
    else {
        return;
    };
    let script = "test -e /usr/sbin/dockerd && echo HOST-FILES; echo made > from-image; echo DONE";
    let run = |extra: &[&str]| {
        let out = Command::new(bin())
            .args(["--backend", "docker"])
            .args(extra)
            .args(["--", "sh", "-c", script])
            .current_dir(dir.join("ws"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .shown();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let host = run(&[]);
    assert!(
        host.contains("HOST-FILES") && host.contains("DONE"),
        "{host}"
    );
    let _ = std::fs::remove_file(dir.join("ws/from-image"));
    let inside = run(&["--image", &image]);
    assert!(
        !inside.contains("HOST-FILES") && inside.contains("DONE"),
        "{inside}"
    );
    assert!(
        dir.join("ws/from-image").exists(),
        "the workspace is mounted in the image"
    );

    // The profile's container section: the client by its path, the image's files
    // read-only on request, a run option that keeps the isolation.
    let client = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("docker"))
        .find(|f| f.is_file())
        .unwrap();
    let root_line = r#"awk '$5=="/"{print "ROOT " substr($6,1,2)}' /proc/$$/mountinfo; hostname"#;
    for read_only in [true, false] {
        let profile = dir.join("container.json");
        let section = serde_json::json!({
            "backend": "docker",
            "container": {
                "image": image,
                "engine": client,
                "read_only_root": read_only,
                "run_args": ["--hostname=sbx-box"],
            },
        });
        std::fs::write(&profile, section.to_string()).unwrap();
        let out = Command::new(bin())
            .arg("--profile")
            .arg(&profile)
            .args(["--", "sh", "-c", root_line])
            .current_dir(dir.join("ws"))
            .env("PATH", "/usr/bin:/bin")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .shown();
        let text = String::from_utf8_lossy(&out.stdout);
        let want = if read_only { "ROOT ro" } else { "ROOT rw" };
        assert!(
            text.contains(want) && text.contains("sbx-box"),
            "read_only_root {read_only}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A credential from an image's container: Python's urllib there trusts the session's
/// authority through the variables (the image's own bundle is its own), the real value
/// reaches the named host in the header, the placeholder goes to another allowed host,
/// and the real value is in no process's environment inside.
#[test]
fn a_credential_reaches_its_host_from_an_image() {
    use super::credentials::{test_authority, Origin, REAL, REAL_HEAD, REAL_TAIL};
    let Some((dir, env, image)) = docker_and_image("credentials in a container", "credential")
    else {
        return;
    };
    let (ca_pem, tls) = test_authority();
    let api = Origin::start(Some(tls));
    let ca_file = dir.join("origins-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let script = format!(
        r#"for host in api other; do python3 -c 'import os, urllib.request as u; print(u.urlopen(u.Request("https://'$host'.cred.test:{port}/from-image", headers={{"Authorization": "token " + os.environ["GH_TOKEN"]}}), timeout=20).read().decode().strip())'; done
        real="{REAL_HEAD}""{REAL_TAIL}"; seen=$(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n'); echo "REAL-IN-PROCESSES $(printf '%s\n' "$seen" | grep -cF "$real")""#,
        port = api.port
    );
    let credential = format!("GH_TOKEN@api.cred.test:{}", api.port);
    let allow = format!("--net=allow=other.cred.test:{}", api.port);
    let out = Command::new(bin())
        .args([
            "--backend",
            "docker",
            "--image",
            &image,
            "--credential",
            &credential,
            &allow,
        ])
        .args([
            "--resolve",
            "api.cred.test:127.0.0.1",
            "--resolve",
            "other.cred.test:127.0.0.1",
        ])
        .args(["--", "sh", "-c", &script])
        .current_dir(dir.join("ws"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("GH_TOKEN", REAL)
        .env("SSL_CERT_FILE", &ca_file)
        .stdin(Stdio::null())
        .shown();
    let text = String::from_utf8_lossy(&out.stdout);
    let what = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("ORIGIN-OK").count(), 2, "{what}");
    assert!(text.contains("REAL-IN-PROCESSES 0"), "{what}");
    let seen = api.seen();
    let to = |host: &str| {
        seen.iter()
            .find(|s| s.host.starts_with(host))
            .map(|s| s.head.clone())
    };
    assert!(
        to("api.cred.test").is_some_and(|h| h.contains(&format!("token {REAL}\r\n"))),
        "{what}\n{seen:?}"
    );
    assert!(
        to("other.cred.test").is_some_and(|h| !h.contains(REAL) && h.contains("token ghp_")),
        "{what}\n{seen:?}"
    );
}

/// What the container user's script prints and leaves: who it is, a file it makes, a
/// change of that file's owner, root's secrets, its capabilities, a hook it writes.
const AS_USER: &str = r#"
id -u
echo made > "$MADE"
chown 1234 "$MADE" && echo CHOWN-DONE
cat /etc/shadow >/dev/null 2>&1 && echo SHADOW-READ
grep '^CapEff' /proc/self/status
echo x > .git/hooks/pre-commit 2>/dev/null && echo HOOK-WRITTEN
true
"#;

/// A profile of the docker backend with `image` and the container's `user`, in `dir`.
fn user_profile(dir: &Path, image: &str, user: &str) -> PathBuf {
    let profile = dir.join(format!("user-{user}.json"));
    let section = serde_json::json!({
        "backend": "docker",
        "container": {"image": image, "user": user},
    });
    std::fs::write(&profile, section.to_string()).unwrap();
    profile
}

/// `"container": {"user": …}`: the program is that user inside, in a user namespace of its
/// own where that user stands for the one who ran sbx-shell — beside plain `docker run
/// --user 0`, where root is root: its file root's, its chown done, root's secrets read.
#[test]
fn the_container_user_is_who_the_program_is_and_what_it_makes_stays_yours() {
    let Some((_, root_env, image)) = docker_and_image("the container user", "user-root") else {
        return;
    };
    let Ok(open) = std::env::var("SBX_TEST_DOCKER_OPEN_HOST") else {
        skipped("scripts/test.sh's dockerd has no socket for ordinary users (SBX_TEST_DOCKER_OPEN_HOST)");
        return;
    };
    let dir = workspace("sbx-engines-user", NOBODY);
    let ws = dir.join("ws");
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(git.success());
    let _ = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&ws)
        .status();
    let owner =
        |name: &str| std::os::unix::fs::MetadataExt::uid(&ws.join(name).metadata().unwrap());

    // The control: plain docker's root is the host's root.
    let mount = format!("type=bind,src={},dst={}", ws.display(), ws.display());
    let control = Command::new("docker")
        .envs(root_env.iter().map(|(k, v)| (k, v)))
        .args([
            "run",
            "--rm",
            "--network",
            "none",
            "--user",
            "0",
            "--mount",
            &mount,
        ])
        .args([
            "--workdir",
            &ws.display().to_string(),
            "--env",
            "MADE=by-docker",
        ])
        .args([image.as_str(), "sh", "-c", AS_USER])
        .shown();
    let said = String::from_utf8_lossy(&control.stdout);
    assert!(
        said.starts_with("0\n") && said.contains("CHOWN-DONE") && said.contains("SHADOW-READ"),
        "control: {said}"
    );
    assert_eq!(owner("by-docker"), 1234, "control: root's chown is done");
    std::fs::remove_file(ws.join("by-docker")).unwrap();
    std::fs::remove_file(ws.join(".git/hooks/pre-commit")).unwrap();

    // nobody's sbx-shell (the workspace's copy: the checkout may be closed to nobody), the
    // program root inside.
    let profile = user_profile(&dir, &image, "root");
    let mut cmd = Command::new(dir.join("sbx-shell"));
    cmd.arg("--profile")
        .arg(&profile)
        .args(["--", "sh", "-c", AS_USER])
        .env("MADE", "by-sbx")
        .env("DOCKER_HOST", &open)
        .stdin(Stdio::null());
    as_user_in(&mut cmd, &dir, NOBODY);
    let out = cmd.shown();
    let (said, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{said}{err}");
    assert!(said.starts_with("0\n"), "root inside: {said}");
    assert_eq!(
        owner("by-sbx"),
        NOBODY,
        "what it makes is the invoking user's"
    );
    for never in ["CHOWN-DONE", "SHADOW-READ", "HOOK-WRITTEN"] {
        assert!(!said.contains(never), "{never}: {said}{err}");
    }
    assert_eq!(line_value(&said, "CapEff:"), "0000000000000000", "{said}");
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert!(
        err.contains("pre-commit"),
        "the hook's refusal is named: {err}"
    );

    // root's sbx-shell, the program the image's `daemon` (a name from its /etc/passwd).
    let dir = workspace("sbx-engines-user-daemon", 0);
    let run = |user: &str| {
        Command::new(bin())
            .arg("--profile")
            .arg(user_profile(&dir, &image, user))
            .args(["--", "sh", "-c", "id -u; id -g; echo made > by-daemon"])
            .current_dir(dir.join("ws"))
            .envs(root_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .shown()
    };
    let out = run("daemon");
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said, "1\n1\n", "{}", String::from_utf8_lossy(&out.stderr));
    let made = dir.join("ws/by-daemon").metadata().unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&made), 0, "root's file");

    // A name the image lacks: nothing runs, the fix named.
    let out = run("nosuch");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("no such user in the container's /etc/passwd") && err.contains("Hint:"),
        "{err}"
    );
}

#[test]
fn podman_runs_the_program_in_a_container() {
    if !ready("the podman backend") {
        return;
    }
    let dir = workspace("sbx-engines-podman", 0);
    let Some(env) = engine_env("podman", &dir) else {
        return;
    };
    let (code, out, err, seen) = probe("podman", 0, &env, &dir);
    assert_eq!(code, 3, "podman: {out}{err}");
    assert_eq!(line_value(&out, "CapEff:"), "0000000000000000", "{out}");
    assert_eq!(line_value(&out, "NoNewPrivs:"), "1", "{out}");
    assert_eq!(line_value(&out, "SANDBOX="), "podman", "{out}");
    assert!(out.contains("NET-REFUSED"), "{out}");
    assert!(!out.contains("SHADOW-READ"), "{out}");
    assert!(!seen, "podman: the variable's value is on a command line");
    assert!(dir.join("ws/made-by-program").exists());

    // The container's user: Podman's own seccomp profile lets the helper make the user
    // namespace; what the program makes stays root's.
    let profile = dir.join("user.json");
    let section = serde_json::json!({"backend": "podman", "container": {"user": "1000:1000"}});
    std::fs::write(&profile, section.to_string()).unwrap();
    let out = Command::new(bin())
        .arg("--profile")
        .arg(&profile)
        .args(["--", "sh", "-c", "id -u; echo made > by-user"])
        .current_dir(dir.join("ws"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .shown();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said, "1000\n", "{}", String::from_utf8_lossy(&out.stderr));
    let made = dir.join("ws/by-user").metadata().unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&made), 0, "root's file");
}

/// Descriptors sbx-shell inherits above stderr (a parent that leaks them: IDEs, some
/// terminals) reach no backend's program — and more of them than one handover carries
/// still start a container.
#[test]
fn inherited_descriptors_stay_with_sbx_shell_in_every_backend() {
    if !ready("inherited descriptors under docker") {
        return;
    }
    let dir = workspace("sbx-engines-fds", 0);
    let Some(env) = engine_env("docker", &dir) else {
        return;
    };
    // 51 descriptors open at 10–60, then the command; the program lists its own.
    let opened = |argv: &[&str]| {
        Command::new("bash")
            .arg("-c")
            .arg(r#"for i in $(seq 10 60); do eval "exec $i</etc/hostname"; done; exec "$@""#)
            .arg("opened")
            .args(argv)
            .current_dir(dir.join("ws"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .shown()
    };
    let list = "ls /proc/self/fd | tr '\\n' ' '";
    let bare = opened(&["sh", "-c", list]);
    let said = String::from_utf8_lossy(&bare.stdout);
    assert!(
        said.contains(" 10 ") && said.contains(" 60 "),
        "control: {said}"
    );
    let exe = bin();
    for backend in ["bwrap", "landlock", "docker"] {
        let out = opened(&[exe, "-q", "--backend", backend, "--", "sh", "-c", list]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            (out.status.code(), said.as_ref()),
            (Some(0), "0 1 2 3 "),
            "{backend}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_containers_terminal_is_sbx_shells_own() {
    if !ready("the docker backend's terminal") {
        return;
    }
    let dir = workspace("sbx-engines-pty", 0);
    let Some(env) = engine_env("docker", &dir) else {
        return;
    };
    let mut launch = Launch::new(&[
        "--backend",
        "docker",
        "--",
        "sh",
        "-c",
        // `exec`: a ^C that reaches dash while it forks `sleep` is lost — bare too (20
        // of 40 runs on a bare pty, ^C sent as SLEEPING arrives); exec'd, either dash or
        // sleep takes it.
        "stty size; tty; echo READY; read x; stty size; echo SLEEPING; exec sleep 30",
    ]);
    launch.env = env;
    launch.cwd = Some(dir.join("ws"));
    launch.size.ws_row = 33;
    launch.size.ws_col = 111;
    let mut pty = OuterPty::launch(launch);
    let first = pty.expect("READY");
    assert!(
        first.contains("33 111"),
        "the size before the first byte: {first}"
    );
    assert!(
        first.contains("/dev/console"),
        "its terminal has a name: {first}"
    );
    pty.resize(40, 120);
    std::thread::sleep(Duration::from_millis(300));
    let mark = pty.mark();
    pty.write(b"\n");
    let after = pty.expect_from(mark, "SLEEPING");
    assert!(after.contains("40 120"), "the size after a resize: {after}");
    pty.write(b"\x03");
    let status = pty.wait();
    assert_eq!(
        status.code(),
        Some(130),
        "^C ends it as it would bare: {}",
        pty.output_text()
    );
    assert_eq!(pty.stty_g(), pty.initial_stty(), "the terminal restored");
}

/// The containers the engine holds now, in any state, of the sbx-shell processes `pids`
/// (each labels its containers with its pid; other tests' run meanwhile).
fn containers_left(env: &[(String, String)], pids: &[u32]) -> usize {
    containers_of("docker", env, pids)
}

/// The containers `engine` holds (any state) labelled with one of `pids` as supervisor.
fn containers_of(engine: &str, env: &[(String, String)], pids: &[u32]) -> usize {
    pids.iter()
        .map(|pid| {
            let out = Command::new(engine)
                .envs(env.iter().map(|(k, v)| (k, v)))
                .args(["ps", "-aq", "--filter"])
                .arg(format!("label=sbx-shell.supervisor={pid}"))
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .count()
        })
        .sum()
}

/// Waits up to 30 s for the engine to hold none of the containers of `pids`.
fn none_left(env: &[(String, String)], pids: &[u32]) -> bool {
    none_of("docker", env, pids, Duration::from_secs(30))
}

/// Whether `engine` holds none of `pids`' containers within `wait`.
fn none_of(engine: &str, env: &[(String, String)], pids: &[u32], wait: Duration) -> bool {
    let start = Instant::now();
    while containers_of(engine, env, pids) > 0 && start.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(250));
    }
    containers_of(engine, env, pids) == 0
}

#[test]
fn pipes_pass_binary_data_limits_are_the_engines_and_a_hang_up_ends_the_container() {
    if !ready("the docker backend's pipes and hang-up") {
        return;
    }
    let dir = workspace("sbx-engines-pipes", 0);
    let Some(env) = engine_env("docker", &dir) else {
        return;
    };
    let data: Vec<u8> = (0..300_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut child = Command::new(bin())
        .args(["--backend", "docker", "--", "sh", "-c", "cat; echo ERR >&2"])
        .current_dir(dir.join("ws"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = data.clone();
    let writer = std::thread::spawn(move || {
        std::io::Write::write_all(&mut stdin, &feed).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout == data,
        "stdout differs ({} bytes of {})",
        out.stdout.len(),
        data.len()
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERR"));

    // The session's limits are the engine's, read where cgroup v1 or v2 keeps them.
    let limits = Command::new(bin())
        .args([
            "--backend",
            "docker",
            "--session-processes",
            "64",
            "--session-memory-mib",
            "256",
        ])
        .args(["--", "sh", "-c"])
        .arg(
            "cat /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max \
              /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max 2>/dev/null",
        )
        .current_dir(dir.join("ws"))
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .shown();
    let limits = String::from_utf8_lossy(&limits.stdout).into_owned();
    assert_eq!(
        limits.split_whitespace().collect::<Vec<_>>(),
        ["64", "268435456"],
        "{limits}"
    );

    let mut launch = Launch::new(&["--backend", "docker", "--", "sh", "-c", "echo UP; sleep 60"]);
    launch.env = env.clone();
    launch.cwd = Some(dir.join("ws"));
    let mut pty = OuterPty::launch(launch);
    pty.expect("UP");
    let pid = pty.pid().as_raw() as u32;
    assert_eq!(
        containers_left(&env, &[pid]),
        1,
        "the session's container runs"
    );
    pty.hang_up();
    let status = pty.wait();
    assert_eq!(
        status.code(),
        Some(129),
        "a hang-up ends it as SIGHUP: {}",
        pty.output_text()
    );
    assert!(
        none_left(&env, &[pid]),
        "the container is gone after the hang-up"
    );
}

/// The engine resolves each mount's source itself, after sbx-shell looked: a workspace
/// switched for a symlink in that moment (here by an engine client that does it just
/// before it runs) would be another tree, writable, in the container. The helper finds
/// another directory at the workspace's path and ends the session before the program
/// runs; beside plain docker, which follows the same symlink and writes through it.
#[test]
fn a_workspace_switched_for_a_symlink_before_the_engine_mounts_it_is_refused() {
    let Some((dir, env, image)) = docker_and_image("the docker backend's mount check", "swap")
    else {
        return;
    };
    let (ws, target) = (dir.join("ws"), dir.join("target"));
    std::fs::create_dir_all(&target).unwrap();
    let swap = || {
        std::fs::rename(&ws, dir.join("ws.orig")).unwrap();
        std::os::unix::fs::symlink(&target, &ws).unwrap();
    };
    let restore = || {
        let _ = std::fs::remove_file(&ws);
        let _ = std::fs::rename(dir.join("ws.orig"), &ws);
        let _ = std::fs::remove_file(target.join("planted"));
    };
    // Control: plain docker, given the path after the switch, writes into the target.
    swap();
    let plain = Command::new("docker")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["run", "--rm", "--mount"])
        .arg(format!("type=bind,src={0},dst={0}", ws.display()))
        .args(["--workdir", &ws.display().to_string(), &image])
        .args(["sh", "-c", "echo planted > planted"])
        .shown();
    assert!(plain.status.success(), "{plain:?}");
    assert!(
        target.join("planted").exists(),
        "plain docker follows the symlink"
    );
    restore();

    let client = dir.join("engine");
    std::fs::write(
        &client,
        "#!/bin/sh
if [ \"$1\" = run ] && [ ! -L \"$DOCKER_SBX_WS\" ]; then
  mv \"$DOCKER_SBX_WS\" \"$DOCKER_SBX_WS.orig\" && ln -s \"$DOCKER_SBX_TARGET\" \"$DOCKER_SBX_WS\"
fi
exec docker \"$@\"
",
    )
    .unwrap();
    std::fs::set_permissions(&client, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let profile = dir.join("swap.json");
    let section = serde_json::json!({"backend": "docker", "container": {"engine": client}});
    std::fs::write(&profile, section.to_string()).unwrap();
    let out = Command::new(bin())
        .arg("--profile")
        .arg(&profile)
        .args(["--", "sh", "-c", "echo planted > planted; echo RAN"])
        .current_dir(&ws)
        .env("DOCKER_SBX_WS", &ws)
        .env("DOCKER_SBX_TARGET", &target)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .shown();
    let (stdout, err) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let switched = std::fs::symlink_metadata(&ws).is_ok_and(|m| m.is_symlink());
    restore();
    assert!(switched, "the client switched the workspace: {err}");
    assert!(!out.status.success(), "{stdout}{err}");
    assert!(!stdout.contains("RAN"), "the program ran: {stdout}{err}");
    assert!(
        !target.join("planted").exists(),
        "written through the symlink: {err}"
    );
    assert!(
        err.contains("changed while the sandbox started") && err.contains("Hint:"),
        "{err}"
    );
}

/// sbx-shell killed, or told to end, at moments spread over the container's start: no
/// container is left behind, whatever its state.
#[test]
fn no_container_survives_sbx_shell() {
    // Spread over the start (the image asked for, the client, create, start, handover)
    // and the run; KILL and TERM in turn.
    let delays = [30, 90, 150, 220, 300, 380, 470, 600, 900, 1500];
    let moments: Vec<(u64, &str)> = delays
        .iter()
        .enumerate()
        .map(|(i, ms)| (*ms, if i % 2 == 0 { "KILL" } else { "TERM" }))
        .collect();
    none_survive("docker", &moments, Duration::from_secs(30));
}

/// The same for Podman, at three moments of its start (about 20 s here: a kill lands in
/// the client's create, in the container's start, and once the program runs).
#[test]
fn no_podman_container_survives_sbx_shell() {
    let moments = [(1500, "KILL"), (6000, "TERM"), (12000, "KILL")];
    none_survive("podman", &moments, Duration::from_secs(90));
}

/// sbx-shell with `engine`'s backend, sent each signal after each delay (ms): a TERM ends
/// it as 143, and within `wait` the engine holds none of their containers.
fn none_survive(engine: &str, moments: &[(u64, &str)], wait: Duration) {
    if !ready(&format!("the {engine} backend's cleanup")) {
        return;
    }
    let dir = workspace(&format!("sbx-engines-kill-{engine}"), 0);
    let Some(env) = engine_env(engine, &dir) else {
        return;
    };
    let mut pids = Vec::new();
    for &(ms, signal) in moments {
        let mut child = Command::new(bin())
            .args(["--backend", engine, "--pty", "never", "--", "sleep", "120"])
            .current_dir(dir.join("ws"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        pids.push(child.id());
        std::thread::sleep(Duration::from_millis(ms));
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status();
        let status = child.wait().unwrap();
        if signal == "TERM" {
            // 143, or killed by it when it came before sbx-shell took its signals (a debug
            // build under load, at the first moments: as on every backend).
            use std::os::unix::process::ExitStatusExt;
            assert!(
                status.code() == Some(143) || status.signal() == Some(libc::SIGTERM),
                "{engine}: TERM after {ms} ms: {status:?}"
            );
        }
    }
    assert!(
        none_of(engine, &env, &pids, wait),
        "{engine}: containers left behind"
    );
}

#[test]
fn what_cannot_run_is_named_with_its_fix() {
    if !ready("the container backends' errors") {
        return;
    }
    let dir = workspace("sbx-engines-errors", 0);
    let Some(env) = engine_env("docker", &dir) else {
        return;
    };
    let run = |args: &[&str], env: &[(String, String)]| {
        let out = Command::new(bin())
            .args(args)
            .current_dir(dir.join("ws"))
            .env_remove("DOCKER_HOST")
            .env_remove("DOCKER_CONTEXT")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .shown();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let profile = |name: &str, section: serde_json::Value| {
        let path = dir.join(name);
        let config = serde_json::json!({"backend": "docker", "container": section});
        std::fs::write(&path, config.to_string()).unwrap();
        path.display().to_string()
    };
    let privileged = profile(
        "privileged.json",
        serde_json::json!({"run_args": ["--privileged"]}),
    );
    let no_engine = profile(
        "no-engine.json",
        serde_json::json!({"engine": "/nonexistent/docker"}),
    );
    // A context of the client's own, chosen in its config: an engine on another machine.
    let config = dir.join("docker-config");
    for step in [
        &[
            "context",
            "create",
            "far",
            "--docker",
            "host=ssh://me@far.test",
        ][..],
        &["context", "use", "far"],
    ] {
        let done = Command::new("docker")
            .arg("--config")
            .arg(&config)
            .args(step)
            .output()
            .unwrap();
        assert!(done.status.success(), "{step:?}: {done:?}");
    }
    let far_context = vec![("DOCKER_CONFIG".into(), config.display().to_string())];
    let far_host = vec![("DOCKER_HOST".into(), "tcp://192.0.2.1:2375".into())];
    type Case<'a> = (Vec<&'a str>, Vec<(String, String)>, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec!["--backend", "docker", "--", "/bin/true"],
            far_context,
            "ssh://me@far.test is not on this machine",
        ),
        (
            vec!["--backend", "docker", "--", "/bin/true"],
            far_host,
            "use an engine on this machine",
        ),
        (
            vec!["--profile", &privileged, "--", "/bin/true"],
            env.clone(),
            "--cpus",
        ),
        (
            vec!["--profile", &no_engine, "--", "/bin/true"],
            env.clone(),
            "name the engine's client by its path",
        ),
        (
            vec![
                "--backend",
                "docker",
                "--image",
                "sbx-no-such-image:1",
                "--",
                "/bin/true",
            ],
            env.clone(),
            "docker pull sbx-no-such-image:1",
        ),
        (
            vec!["--backend", "docker", "--", "/bin/true"],
            vec![(
                "DOCKER_HOST".into(),
                "unix:///nonexistent/docker.sock".into(),
            )],
            "start the engine",
        ),
        (
            vec!["--backend", "docker", "--", "/bin/true"],
            vec![("PATH".into(), "/nonexistent".into())],
            "apt install docker.io",
        ),
        (
            vec![
                "--backend",
                "landlock",
                "--image",
                "debian",
                "--",
                "/bin/true",
            ],
            env.clone(),
            "--backend docker",
        ),
    ];
    for (args, env, fix) in cases {
        let (code, err) = run(&args, &env);
        assert!(code.is_some_and(|c| c != 0), "{args:?}: {err}");
        assert!(
            err.contains("Hint:") && err.contains(fix),
            "{args:?}: {err}"
        );
    }
}
