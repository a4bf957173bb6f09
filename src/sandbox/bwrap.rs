//! The bubblewrap layer (Linux): the argv that runs the helper in private namespaces.
//!
//! Pure: what exists on disk arrives as `PathKind`s, the host's sockets as paths. Mounts
//! apply in order, later over earlier: the root read-only (or read-write when unrestricted),
//! private `/dev`, `/proc` and `/tmp`, the writable roots bound read-write, then protected
//! paths bound read-only over them. Then, inside, the helper hides the denied paths and the
//! host's runtime directory and sockets (`hides`: last, so a secret inside a protected
//! directory stays hidden; by the helper, which skips what vanished meanwhile).
//! bwrap gets `--new-session` and a pid namespace, and the helper inside makes the pty its
//! controlling terminal (job control, resize and ^C then work; see DESIGN.md §4).

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::FsMode;
use crate::host::PathKind;
use crate::policy::{Network, Policy, ResolvedPath};

/// The namespaces and the base mounts of every bwrap sandbox (doctor's probe runs them too).
///
/// `--as-pid-1`: the helper (then its guard) is the pid namespace's init, not a bwrap
/// process. The helper hides paths in a mount namespace of its own; a bwrap init left in
/// bwrap's would show the unhidden tree through `/proc/1/root` wherever Landlock (whose
/// ptrace scoping refuses that) is not there to stop it.
pub const NAMESPACES: &[&str] = &[
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--as-pid-1",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
];

#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub policy: &'a Policy,
    /// The bwrap binary (from a fixed system path).
    pub bwrap: &'a Path,
    /// Where the program starts.
    pub cwd: &'a Path,
    /// `$XDG_RUNTIME_DIR`: agents' sockets (D-Bus, gpg-agent, ssh-agent, pipewire) live there.
    pub runtime_dir: Option<&'a Path>,
    /// Other host sockets to mask ($SSH_AUTH_SOCK, docker.sock …), when they exist.
    pub host_sockets: &'a [PathBuf],
    /// The sbx-shell executable as an inherited fd, put at `HELPER_PATH` and run from
    /// there: its own path may be hidden inside (under /tmp, a denied path).
    pub helper: Option<HelperFd>,
    pub kind_of: &'a dyn Fn(&Path) -> PathKind,
}

/// Where the helper's executable appears inside (in the private /dev, which bwrap makes).
pub const HELPER_PATH: &str = "/dev/.sbx-shell";

/// An inherited fd of the sbx-shell executable that runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperFd {
    /// Bound read-only (bwrap binds the path the fd's link names).
    Bind(RawFd),
    /// Copied (readable fd): the file's path was deleted, by an upgrade in flight, so there
    /// is no path to bind.
    Copy(RawFd),
}

/// `bwrap … -- COMMAND…`; with `helper`, COMMAND's first word is replaced by `HELPER_PATH`.
pub fn build_argv(inputs: &Inputs<'_>, command: &[OsString]) -> Vec<OsString> {
    let policy = inputs.policy;
    let mut a = Args(vec![inputs.bwrap.as_os_str().to_owned()]);
    a.flags(NAMESPACES);
    // An allow-list too: the proxy's listening socket is made inside this namespace by the
    // helper and handed out to sbx-shell (`netproxy`).
    if policy.network != Network::Full {
        a.flags(&["--unshare-net"]);
    }
    let fs = &policy.filesystem;
    let root = if fs.mode == FsMode::Unrestricted {
        "--bind"
    } else {
        "--ro-bind"
    };
    a.mount(root, Path::new("/"), Path::new("/"));
    // The private /tmp and /dev/shm are bounded (tmpfs would take half the RAM each).
    let size = policy
        .limits
        .tmp_mib
        .saturating_mul(1024 * 1024)
        .to_string();
    a.flags(&["--dev", "/dev", "--proc", "/proc"]);
    a.flags(&[
        "--size", &size, "--tmpfs", "/tmp", "--size", &size, "--tmpfs", "/dev/shm",
    ]);
    match inputs.helper {
        Some(HelperFd::Bind(fd)) => a.flags(&["--ro-bind-fd", &fd.to_string(), HELPER_PATH]),
        Some(HelperFd::Copy(fd)) => {
            a.flags(&["--perms", "0555", "--file", &fd.to_string(), HELPER_PATH]);
        }
        None => {}
    }
    if fs.mode == FsMode::WorkspaceWrite {
        a.mount("--bind", real(&fs.workspace), real(&fs.workspace));
    }
    for path in &fs.writable {
        a.mount("--bind-try", real(path), real(path));
    }
    // -try: one that vanished since it was looked at has nothing left to protect.
    for path in fs
        .protected
        .iter()
        .filter(|p| (inputs.kind_of)(real(p)) != PathKind::Missing)
    {
        a.mount("--ro-bind-try", real(path), real(path));
    }
    // What must be hidden is hidden by the helper, which needs CAP_SYS_ADMIN in the
    // sandbox for that, and CAP_SETPCAP to drop both from its bounding set right after:
    // see `hides`.
    if !hides(inputs).is_empty() {
        a.flags(&["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]);
    }
    a.0.extend(["--chdir".into(), inputs.cwd.into(), "--".into()]);
    match (inputs.helper, command.split_first()) {
        (Some(_), Some((_, rest))) => {
            a.0.push(HELPER_PATH.into());
            a.0.extend(rest.iter().cloned());
        }
        _ => a.0.extend(command.iter().cloned()),
    }
    a.0
}

/// A path the helper covers inside the sandbox, after bwrap's mounts: hidden (a directory
/// becomes an empty read-only tmpfs, anything else `/dev/null`, read-only), or, with `twin`,
/// replaced by its twin in the private home (`privatehome`), bound read-write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hide {
    pub path: PathBuf,
    pub dir: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub twin: Option<PathBuf>,
}

/// Directories the sandbox gets fresh (private `/dev`, `/proc`, `/tmp`): nothing of the
/// host's shows there, so nothing there needs hiding.
const PRIVATE_DIRS: &[&str] = &["/dev", "/proc", "/tmp"];

/// What to cover, in order: the denied paths and the private home's kept paths (parents
/// first; a kept path that is also denied gets its twin, not a hide), then the host's
/// runtime directory and sockets (unless granted), each by its real path (the policy's
/// paths already are; `host::Place` resolves the rest), each once, skipping what does not
/// exist and what a private or an already covered directory covers.
///
/// A kept path that is mounted (`privatehome::Entry::mount`) gets its twin only where
/// the host has it, as the same kind (file or directory) and not as a symlink; one with a grant inside it stays the host's (the grant
/// says the program should see it); the tools' variables cover the rest
/// (`privatehome::variables`).
///
/// The helper does it, not bwrap: bwrap ends the session when a mount's destination
/// vanished since it was looked at (a container engine restarting, an agent exiting) or
/// lies in a read-only tmpfs it made; the helper skips a path that no longer exists, and
/// binds a twin only after checking, on open file descriptors, that neither it nor the
/// path is a symlink.
pub fn hides(inputs: &Inputs<'_>) -> Vec<Hide> {
    let fs = &inputs.policy.filesystem;
    let grants = || fs.writable.iter().chain(&fs.readable).map(real);
    let granted = |p: &Path| grants().any(|g| p.starts_with(g));
    let twins: Vec<(&Path, &Path)> = inputs
        .policy
        .private_home
        .iter()
        .flat_map(|h| &h.kept)
        .filter(|k| k.mount)
        .filter(|k| {
            let want = match k.kind {
                crate::privatehome::Kind::Dir => PathKind::Dir,
                crate::privatehome::Kind::File => PathKind::File,
            };
            (inputs.kind_of)(&k.path) == want
                && !grants().any(|g| g != k.path && g.starts_with(&k.path))
        })
        .map(|k| (k.path.as_path(), k.twin.as_path()))
        .collect();
    let mut home: Vec<(&Path, Option<&Path>)> = fs
        .denied
        .iter()
        .map(real)
        .filter(|d| !twins.iter().any(|(p, _)| p == d))
        .map(|d| (d, None))
        .chain(twins.iter().map(|(p, t)| (*p, Some(*t))))
        .collect();
    home.sort();
    let host_objects = inputs
        .runtime_dir
        .into_iter()
        .chain(inputs.host_sockets.iter().map(PathBuf::as_path))
        .filter(|p| !granted(p))
        .map(|p| (p, None));
    let mut covered: Vec<&Path> = PRIVATE_DIRS.iter().map(Path::new).collect();
    let mut out: Vec<Hide> = Vec::new();
    for (path, twin) in home.into_iter().chain(host_objects) {
        let kind = (inputs.kind_of)(path);
        if kind == PathKind::Missing
            || covered.iter().any(|d| path.starts_with(d))
            || out.iter().any(|h| h.path == path)
        {
            continue;
        }
        out.push(Hide {
            path: path.to_path_buf(),
            dir: kind == PathKind::Dir,
            twin: twin.map(Path::to_path_buf),
        });
        if kind == PathKind::Dir {
            covered.push(path);
        }
    }
    out
}

/// The spelling the kernel sees.
fn real(path: &ResolvedPath) -> &Path {
    path.real.as_deref().unwrap_or(&path.path)
}

struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn mount(&mut self, how: &str, source: &Path, dest: &Path) {
        self.0.extend([how.into(), source.into(), dest.into()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;

    fn kind(path: &Path) -> PathKind {
        match path.to_str().unwrap() {
            "/home/u/.ssh"
            | "/home/u/proj/.git/hooks"
            | "/run/user/1000"
            | "/home/u/.config/sbx-shell" => PathKind::Dir,
            "/home/u/.netrc"
            | "/home/u/.ssh/id_ed25519"
            | "/home/u/proj/.git/config"
            | "/run/ssh-agent.sock"
            | "/run/user/1000/gnupg/S.gpg-agent"
            | "/tmp/ssh-XXXX/agent.1" => PathKind::File,
            _ => PathKind::Missing,
        }
    }

    /// The inputs of a test: the fake host above, no runtime directory, sockets or helper.
    fn inputs<'a>(policy: &'a Policy) -> Inputs<'a> {
        Inputs {
            policy,
            bwrap: Path::new("/usr/bin/bwrap"),
            cwd: Path::new("/"),
            runtime_dir: None,
            host_sockets: &[],
            helper: None,
            kind_of: &kind,
        }
    }

    fn argv(policy: &Policy) -> Vec<String> {
        let sockets = [PathBuf::from("/run/ssh-agent.sock")];
        let inputs = Inputs {
            cwd: Path::new("/home/u/proj/src"),
            runtime_dir: Some(Path::new("/run/user/1000")),
            host_sockets: &sockets,
            ..inputs(policy)
        };
        build_argv(&inputs, &["/x/sbx-shell".into(), "__sbx_helper".into()])
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn the_default_policy_builds_this_exact_argv() {
        let expected = [
            "/usr/bin/bwrap",
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--as-pid-1",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--size",
            "2147483648",
            "--tmpfs",
            "/tmp",
            "--size",
            "2147483648",
            "--tmpfs",
            "/dev/shm",
            "--bind",
            "/home/u/proj",
            "/home/u/proj",
            "--bind-try",
            "/home/u/.local/state/sbx-shell/home/test",
            "/home/u/.local/state/sbx-shell/home/test",
            "--ro-bind-try",
            "/home/u/.config/sbx-shell",
            "/home/u/.config/sbx-shell",
            "--ro-bind-try",
            "/home/u/proj/.git/config",
            "/home/u/proj/.git/config",
            "--ro-bind-try",
            "/home/u/proj/.git/hooks",
            "/home/u/proj/.git/hooks",
            "--cap-add",
            "CAP_SYS_ADMIN",
            "--cap-add",
            "CAP_SETPCAP",
            "--chdir",
            "/home/u/proj/src",
            "--",
            "/x/sbx-shell",
            "__sbx_helper",
        ];
        assert_eq!(argv(&policy_with("/home/u/proj", "{}")), expected);
    }

    #[test]
    fn modes_and_network_change_exactly_their_parts() {
        let full = argv(&policy_with("/home/u/proj", r#"{"network": "full"}"#));
        assert!(!full.contains(&"--unshare-net".to_string()));
        let ro = argv(&policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"mode": "read-only", "write": ["/out"]}}"#,
        ));
        assert!(!ro.windows(2).any(|w| w == ["--bind", "/home/u/proj"]));
        assert!(ro.windows(3).any(|w| w == ["--bind-try", "/out", "/out"]));
        let open = argv(&policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"mode": "unrestricted"}}"#,
        ));
        assert!(
            open.windows(3).any(|w| w == ["--bind", "/", "/"]),
            "{open:?}"
        );
        assert!(
            !open.windows(3).any(|w| w == ["--ro-bind", "/", "/"]),
            "{open:?}"
        );
    }

    /// What the helper hides for `policy`, with these host sockets and runtime directory.
    fn hidden(policy: &Policy, sockets: &[PathBuf]) -> Vec<(String, bool)> {
        let inputs = Inputs {
            runtime_dir: Some(Path::new("/run/user/1000")),
            host_sockets: sockets,
            ..inputs(policy)
        };
        hides(&inputs)
            .into_iter()
            .map(|h| (h.path.display().to_string(), h.dir))
            .collect()
    }

    #[test]
    fn the_helper_hides_denied_paths_then_the_runtime_directory_and_sockets_unless_granted() {
        let sockets = [PathBuf::from("/run/ssh-agent.sock")];
        let all = hidden(&policy_with("/home/u/proj", "{}"), &sockets);
        let expected = [
            ("/home/u/.netrc", false),
            ("/home/u/.ssh", true),
            ("/run/user/1000", true),
            ("/run/ssh-agent.sock", false),
        ];
        for (path, dir) in expected {
            assert!(all.contains(&(path.to_string(), dir)), "{path}: {all:?}");
        }
        let granted = hidden(
            &policy_with(
                "/home/u/proj",
                r#"{"filesystem": {"write": ["/run/user/1000"]}}"#,
            ),
            &sockets,
        );
        assert!(!granted.iter().any(|(p, _)| p == "/run/user/1000"));
        // No hide, no capability kept for it.
        let p = policy_with("/home/u/proj", "{}");
        let inputs = Inputs {
            kind_of: &|_: &Path| PathKind::Missing,
            ..inputs(&p)
        };
        assert!(hides(&inputs).is_empty());
        assert!(!build_argv(&inputs, &[]).iter().any(|a| a == "--cap-add"));
    }

    #[test]
    fn the_private_homes_twins_replace_history_hides_and_cover_what_no_variable_reaches() {
        let state = "/home/u/.local/state/sbx-shell/home/test";
        let on_host = |p: &Path| match p.to_str().unwrap() {
            "/home/u/.bash_history" => PathKind::File,
            "/home/u/.cache" | "/home/u/.cargo/registry" | "/home/u/.cargo/git" => PathKind::Dir,
            // A directory where a file is kept: not bound.
            "/home/u/.lesshst" => PathKind::Dir,
            other => kind(Path::new(other)),
        };
        let covers = |policy: &Policy| -> Vec<(String, Option<String>)> {
            let inputs = Inputs {
                kind_of: &on_host,
                ..inputs(policy)
            };
            hides(&inputs)
                .into_iter()
                .filter(|h| h.path.starts_with("/home/u/.") && !h.path.starts_with("/home/u/.ssh"))
                .map(|h| {
                    (
                        h.path.display().to_string(),
                        h.twin.map(|t| t.display().to_string()),
                    )
                })
                .collect()
        };
        let all = covers(&policy_with("/home/u/proj", "{}"));
        let twin = |rel: &str| Some(format!("{state}/{rel}"));
        assert!(
            all.contains(&("/home/u/.bash_history".into(), twin(".bash_history"))),
            "{all:?}"
        );
        assert!(
            all.contains(&("/home/u/.cargo/registry".into(), twin(".cargo/registry"))),
            "{all:?}"
        );
        // A cache with a variable is left to it; the denied directory-for-a-file is hidden.
        assert!(!all.iter().any(|(p, _)| p == "/home/u/.cache"), "{all:?}");
        assert!(all.contains(&("/home/u/.lesshst".into(), None)), "{all:?}");
        // A grant inside keeps the host's; no private home, no twins.
        let granted = covers(&policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"write": ["~/.cargo/registry/cache"]}}"#,
        ));
        assert!(
            !granted.iter().any(|(p, _)| p == "/home/u/.cargo/registry"),
            "{granted:?}"
        );
        let off = covers(&policy_with("/home/u/proj", r#"{"private_home": false}"#));
        assert!(off.iter().all(|(_, t)| t.is_none()), "{off:?}");
        assert!(
            off.contains(&("/home/u/.bash_history".into(), None)),
            "{off:?}"
        );
    }

    #[test]
    fn paths_inside_private_or_hidden_directories_are_not_hidden_again() {
        // A mount point cannot be made inside a read-only tmpfs made to hide a directory
        // (the runtime directory, a denied directory), and /tmp is private anyway.
        let p = policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"deny": ["~/.ssh/id_ed25519", "/tmp/ssh-XXXX/agent.1"]}}"#,
        );
        let sockets = [
            PathBuf::from("/run/user/1000/gnupg/S.gpg-agent"),
            PathBuf::from("/tmp/ssh-XXXX/agent.1"),
            PathBuf::from("/run/ssh-agent.sock"),
            PathBuf::from("/run/ssh-agent.sock"),
            PathBuf::from("/run/gone.sock"),
        ];
        let all = hidden(&p, &sockets);
        for inside in [
            "/home/u/.ssh/id_ed25519",
            "/run/user/1000/gnupg/S.gpg-agent",
            "/tmp/ssh-XXXX/agent.1",
            "/run/gone.sock",
        ] {
            assert!(!all.iter().any(|(p, _)| p == inside), "{inside}: {all:?}");
        }
        assert_eq!(
            all.iter()
                .filter(|(p, _)| p == "/run/ssh-agent.sock")
                .count(),
            1,
            "{all:?}"
        );
    }

    #[test]
    fn the_helper_runs_from_its_fd_bound_or_copied_into_the_private_dev() {
        let p = policy_with("/home/u/proj", "{}");
        let run = |helper| {
            let inputs = Inputs {
                helper: Some(helper),
                ..inputs(&p)
            };
            build_argv(&inputs, &["/proc/self/exe".into(), "__sbx_helper".into()])
                .into_iter()
                .map(|a| a.into_string().unwrap())
                .collect::<Vec<_>>()
        };
        let bound = run(HelperFd::Bind(5));
        assert!(bound
            .windows(3)
            .any(|w| w == ["--ro-bind-fd", "5", HELPER_PATH]));
        assert!(bound.ends_with(&["--".into(), HELPER_PATH.into(), "__sbx_helper".into()]));
        let dev = bound.iter().position(|a| a == "--dev").unwrap();
        assert!(dev < bound.iter().position(|a| a == "--ro-bind-fd").unwrap());
        let copied = run(HelperFd::Copy(6));
        assert!(copied
            .windows(5)
            .any(|w| w == ["--perms", "0555", "--file", "6", HELPER_PATH]));
    }

    #[test]
    fn an_allow_list_gets_a_private_network_namespace() {
        let p = policy_with(
            "/home/u/proj",
            r#"{"network": {"allow": ["a.example.com"]}}"#,
        );
        let inputs = inputs(&p);
        assert!(build_argv(&inputs, &[])
            .iter()
            .any(|a| a == "--unshare-net"));
    }
}
