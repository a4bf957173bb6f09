//! Real machines (issue 12): host objects behind symlinked spellings, a binary under /tmp,
//! hosts where bwrap cannot create namespaces, SIGKILLs during start-up, the supervisor's
//! own crashes, and the private /tmp's size limit.

use std::fs;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::sandbox::{assert_lines, tools_present, Lab, User, PYTHON};
use super::support::Shown;

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
