//! sbx-shell inside containers as they come: a real Docker engine that scripts/test.sh
//! starts for the tests (its own data and sockets, no bridge, no iptables) with its default
//! seccomp profile and capabilities, and Podman with a storage of the tests' own; the image
//! is built from Debian's packages (mmdebstrap) and imported, so no registry is needed.
//! Where bwrap cannot run, `auto` takes Landlock alone, whose guard answers every name the
//! program makes: each kind of call works as bare (the control: `--backend none`), as root
//! and as an ordinary user (uid 1000), and so does a session started in the home, whose
//! secret only the control reads.
//!
//! Podman runs here with lowered limits (`--ulimit`): this VM withholds CAP_SYS_RESOURCE
//! even from root, so Podman's default — raising the open files to 1,048,576 — fails before
//! any container starts ("error setting rlimit type 7: operation not permitted").

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::support::{require, require_root, run_dir, skipped, Shown};

const LINES: [&str; 9] = [
    "HOME-OK",
    "SERVER-OK",
    "FILES-OK",
    "TAR-OK",
    "FD-META-OK",
    "PTY-OK",
    "UNIX-OK",
    "TCP-OK",
    "UDP-OK",
];

/// A container engine the tests may use, and how to call it.
struct Engine {
    name: &'static str,
    base: Vec<String>,
    run: Vec<String>,
}

fn engines() -> Option<(Vec<Engine>, String)> {
    let (Ok(docker), Ok(podman), Ok(image)) = (
        std::env::var("SBX_TEST_DOCKER_HOST"),
        std::env::var("SBX_TEST_PODMAN_ROOT"),
        std::env::var("SBX_TEST_IMAGE"),
    ) else {
        skipped(
            "the container tests need the Docker engine, the Podman storage and the image that \
             scripts/test.sh prepares (SBX_TEST_DOCKER_HOST, SBX_TEST_PODMAN_ROOT, SBX_TEST_IMAGE)",
        );
        return None;
    };
    let podman_run = format!("{podman}-run");
    Some((
        vec![
            Engine {
                name: "docker",
                base: vec!["docker".into(), "-H".into(), docker],
                run: vec![],
            },
            Engine {
                name: "podman",
                base: vec![
                    "podman".into(),
                    "--root".into(),
                    podman,
                    "--runroot".into(),
                    podman_run,
                ],
                run: [
                    "--ulimit",
                    "nofile=1024:1024",
                    "--ulimit",
                    "nproc=4096:4096",
                ]
                .map(String::from)
                .to_vec(),
            },
        ],
        image,
    ))
}

/// The shared directory mounted at /work: the binary and the script, and a directory per
/// run.
fn work() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = run_dir("sbx-containers");
        let script = format!(
            "{}/tests/fixtures/guard/inside.sh",
            env!("CARGO_MANIFEST_DIR")
        );
        fs::copy(script, dir.join("inside.sh")).unwrap();
        dir
    })
}

/// Run inside.sh in a container of `engine`, as `user` (None: root), with `backend`.
fn inside(engine: &Engine, image: &str, user: Option<u32>, backend: &str) -> (i32, String, String) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let sub = format!("{}-{}-{backend}-{n}", engine.name, user.unwrap_or(0));
    let dir = work().join(&sub);
    fs::create_dir_all(&dir).unwrap();
    if let Some(uid) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    }
    let mount = format!("{}:/work", work().display());
    let binary = format!(
        "{}:/usr/local/bin/sbx-shell:ro",
        work().join("sbx-shell").display()
    );
    let mut cmd = Command::new(&engine.base[0]);
    cmd.args(&engine.base[1..])
        .arg("run")
        .arg("--rm")
        .args(&engine.run);
    if let Some(uid) = user {
        cmd.args(["--user", &format!("{uid}:{uid}"), "-e", "HOME=/tmp"]);
    }
    cmd.args(["-v", &binary, "-v", &mount, image, "sh", "/work/inside.sh"])
        .arg(format!("/work/{sub}"))
        .arg(backend);
    let out = cmd.shown();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn landlock_alone_works_in_docker_and_podman_as_they_come() {
    if !require_root("containers (the engines run as root)")
        || !require(
            "docker",
            "a Docker engine (scripts/test.sh installs docker.io)",
        )
        || !require("podman", "Podman (scripts/test.sh installs podman)")
    {
        return;
    }
    let Some((engines, image)) = engines() else {
        return;
    };
    for engine in &engines {
        for user in [None, Some(1000)] {
            let (code, bare, err) = inside(engine, &image, user, "none");
            let what = format!("{} as {user:?}", engine.name);
            assert_eq!(code, 0, "{what}, control: {err}");
            for line in LINES.iter().chain(&["SECRET-READ"]) {
                assert!(
                    bare.lines().any(|l| l == *line),
                    "{what}, control: no {line}: {bare}{err}"
                );
            }
            for backend in ["landlock", "auto"] {
                let (code, out, err) = inside(engine, &image, user, backend);
                assert_eq!(code, 0, "{what}, {backend}: {err}");
                for line in LINES {
                    assert!(
                        out.lines().any(|l| l == line),
                        "{what}, {backend}: no {line}:\n{out}{err}"
                    );
                }
                assert!(
                    !err.contains("Operation not permitted"),
                    "{what}, {backend}: {err}"
                );
                assert!(!out.contains("SECRET-READ"), "{what}, {backend}: {out}");
            }
        }
    }
}
