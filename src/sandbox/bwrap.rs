//! The bubblewrap layer (Linux): the argv that runs the helper in private namespaces.
//!
//! Pure: what exists on disk arrives as `PathKind`s and `Identity`s, the host's sockets as
//! paths. Mounts apply in order, later over earlier: bwrap binds the root read-only (or
//! read-write when unrestricted), private `/dev`, `/proc` and `/tmp`, and the writable roots
//! read-write; then, inside, the helper checks those, seals the home directory when it is
//! writable, pins the ancestors of protected and denied paths, binds the protected paths
//! read-only and hides the denied ones and the host's runtime directory and sockets
//! (`mounts`), each through a descriptor opened without following a symlink.
//! bwrap gets `--new-session` and a pid namespace, and the helper inside makes the pty its
//! controlling terminal (job control, resize and ^C then work; see DESIGN.md §4).

use super::plan::PRIVATE_DIRS;
pub use super::plan::{mounts, nested_root, HelperFd, How, Inputs, Mount, NameServer};
use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::Path;

use crate::policy::config::FsMode;
use crate::policy::{Network, ResolvedPath};

/// Where the helper's executable appears inside (in the private /dev, which bwrap makes).
pub const HELPER_PATH: &str = "/dev/.sbx-shell";

/// `bwrap … -- COMMAND…`; with `helper`, COMMAND's first word is replaced by `HELPER_PATH`.
pub fn build_argv(inputs: &Inputs<'_>, command: &[OsString]) -> Vec<OsString> {
    let policy = inputs.policy;
    let mut a = Args(vec![inputs.bwrap.as_os_str().to_owned()]);
    a.flags(crate::host::BWRAP_NAMESPACES);
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
    bind_writable(&mut a, fs);
    if let Some(NameServer {
        resolv_conf: Some((fd, path)),
    }) = inputs.name_server
    {
        // Readable by everyone, as the host's is (bwrap's default is 0600 to the user who
        // runs it: host root's under a root session's own id, where the program is not).
        a.flags(&["--perms", "0644", "--ro-bind-data", &fd.to_string()]);
        a.0.push(path.as_os_str().to_owned());
    }
    add_capabilities(&mut a, inputs);
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

/// The writable roots bwrap binds read-write, and the granted sockets in its private
/// directories.
fn bind_writable(a: &mut Args, fs: &crate::policy::Filesystem) {
    // A writable root inside another is writable through that one's bind; bwrap would
    // create its mount point below a directory the program could have written (in an
    // earlier session), and bubblewrap before 0.12.0 follows a symlink planted there
    // (GHSA-pxhw-h44j-8pfx). The helper binds it on itself instead (`mounts`: `Pin`).
    let roots = fs.writable_roots();
    if fs.mode == FsMode::WorkspaceWrite && !nested_root(real(&fs.workspace), &roots) {
        a.mount("--bind", real(&fs.workspace), real(&fs.workspace));
    }
    for path in fs.writable.iter().filter(|p| !nested_root(real(p), &roots)) {
        a.mount("--bind-try", real(path), real(path));
    }
    // A granted socket in a private directory (an ssh agent's in /tmp) is bound in.
    for path in fs.sockets.iter().map(real) {
        if PRIVATE_DIRS.iter().any(|d| path.starts_with(d)) {
            a.mount("--bind-try", path, path);
        }
    }
}

/// The capabilities the helper needs inside for what it does there, dropped right after.
fn add_capabilities(a: &mut Args, inputs: &Inputs<'_>) {
    // The rest is the helper's, which needs CAP_SYS_ADMIN in the sandbox for it — and for
    // the name server's network namespace, CAP_NET_ADMIN to bring its loopback up and
    // CAP_NET_BIND_SERVICE for port 53 (`helper::confine::private_network_namespace`) —
    // and CAP_SETPCAP to drop them from its bounding set right after: see `mounts`.
    if !mounts(inputs).is_empty() || inputs.name_server.is_some() {
        a.flags(&["--cap-add", "CAP_SYS_ADMIN"]);
    }
    if inputs.name_server.is_some() {
        a.flags(&[
            "--cap-add",
            "CAP_NET_ADMIN",
            "--cap-add",
            "CAP_NET_BIND_SERVICE",
        ]);
    }
    // Root's reads judged by the guard, which switches its file-system ids to look as an
    // ordinary user (`mediator::rootreads`): it keeps these two, the program none.
    if inputs.root_reads {
        a.flags(&["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]);
    }
    if !mounts(inputs).is_empty() || inputs.name_server.is_some() || inputs.root_reads {
        a.flags(&["--cap-add", "CAP_SETPCAP"]);
    }
}

/// Whether the entry `name` of a sealed directory stays writable: not a dotfile or
/// dot-directory (they configure what runs outside) and not one of `readonly`.
pub fn stays_writable(name: &std::ffi::OsStr, readonly: &[String]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    !name.as_bytes().starts_with(b".") && !readonly.iter().any(|r| r.as_bytes() == name.as_bytes())
}

/// `build_argv`'s argv split for `--args FD`: its options, NUL-separated as bwrap reads
/// them, and the rest (the bwrap binary, then `--` and the command). bwrap's process lives
/// as long as the session, and its argv, which every local user can read (`ps`), would
/// name the policy's paths.
pub fn split_options(argv: Vec<OsString>) -> (Vec<u8>, Vec<OsString>) {
    use std::os::unix::ffi::OsStrExt;
    // Every option value is a path (absolute), a number or a name: none is a bare `--`.
    let end = argv
        .iter()
        .skip(1)
        .position(|a| a == "--")
        .map_or(argv.len(), |i| i + 1);
    let mut options = Vec::new();
    for option in &argv[1.min(end)..end] {
        options.extend_from_slice(option.as_bytes());
        options.push(0);
    }
    let rest = argv[..1.min(end)]
        .iter()
        .chain(&argv[end..])
        .cloned()
        .collect();
    (options, rest)
}

/// `rest` (from `split_options`) with bwrap told to read its options from `fd`.
pub fn with_options_from(rest: Vec<OsString>, fd: RawFd) -> Vec<OsString> {
    let mut rest = rest.into_iter();
    let mut argv: Vec<OsString> = rest.next().into_iter().collect();
    argv.extend(["--args".into(), fd.to_string().into()]);
    argv.extend(rest);
    argv
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
    use crate::host::PathKind;
    use crate::policy::test_support::policy_with;
    use crate::policy::Policy;
    use crate::sys::files::Identity;
    use std::path::PathBuf;

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

    /// The hides and twins of the plan, by path.
    fn covered(inputs: &Inputs<'_>) -> Vec<(String, How)> {
        mounts(inputs)
            .into_iter()
            .filter(|m| matches!(m.how, How::Hide { .. } | How::Twin { .. }))
            .map(|m| (m.path.display().to_string(), m.how))
            .collect()
    }

    static NO_SOCKETS: crate::host::sockets::Hidden = crate::host::sockets::Hidden {
        dirs: Vec::new(),
        sockets: Vec::new(),
        granted: Vec::new(),
    };

    /// What `policy` hides of a host with these sockets and the runtime directory
    /// `/run/user/1000`.
    fn host(policy: &Policy, sockets: &[PathBuf]) -> crate::host::sockets::Hidden {
        let found = crate::host::sockets::HostSockets {
            runtime_dirs: vec![PathBuf::from("/run/user/1000")],
            sockets: sockets.to_vec(),
        };
        crate::host::sockets::for_policy(&found, &policy.filesystem)
    }

    /// The inputs of a test: the fake host above, no runtime directory, sockets or helper.
    fn inputs<'a>(policy: &'a Policy) -> Inputs<'a> {
        Inputs {
            policy,
            bwrap: Path::new("/usr/bin/bwrap"),
            cwd: Path::new("/"),
            sockets: &NO_SOCKETS,
            helper: None,
            kind_of: &kind,
            identity_of: &|_| Some(Identity { dev: 1, ino: 1 }),
            followed_identity_of: &|_| None,
            git_dirs: &[],
            names_judged: false,
            name_server: None,
            root_reads: false,
        }
    }

    fn argv(policy: &Policy) -> Vec<String> {
        let sockets = host(policy, &[PathBuf::from("/run/ssh-agent.sock")]);
        let inputs = Inputs {
            cwd: Path::new("/home/u/proj/src"),
            sockets: &sockets,
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
        let sockets = host(policy, sockets);
        let inputs = Inputs {
            sockets: &sockets,
            ..inputs(policy)
        };
        covered(&inputs)
            .into_iter()
            .map(|(path, how)| (path, matches!(how, How::Hide { dir: true })))
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
        assert!(mounts(&inputs).is_empty());
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
            covered(&inputs)
                .into_iter()
                .filter(|(p, _)| p.starts_with("/home/u/.") && !p.starts_with("/home/u/.ssh"))
                .map(|(p, how)| match how {
                    How::Twin { twin, .. } => (p, Some(twin.display().to_string())),
                    _ => (p, None),
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
    fn a_kept_path_reached_through_a_symlink_gets_no_twin() {
        let p = policy_with("/home/u/proj", "{}");
        let on_host = |p: &Path| match p.to_str().unwrap() {
            "/home/u/.bash_history" => PathKind::File,
            other => kind(Path::new(other)),
        };
        // The host's file is a symlink: no identity without following it.
        let id = |p: &Path| {
            (p != Path::new("/home/u/.bash_history")).then_some(Identity { dev: 1, ino: 1 })
        };
        let inputs = Inputs {
            kind_of: &on_host,
            identity_of: &id,
            ..inputs(&p)
        };
        assert!(!covered(&inputs)
            .iter()
            .any(|(path, how)| path == "/home/u/.bash_history" && matches!(how, How::Twin { .. })));
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
    fn credentials_found_on_the_host_are_hidden_unchecked_and_named_ones_checked() {
        // /etc/passwd.lock, root-only while useradd runs, is gone a moment later: that must
        // not end the session as a path "changed while the sandbox started" would.
        let mut p = policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"deny": ["/etc/named"]}}"#,
        );
        for found in ["/etc/shadow", "/etc/passwd.lock"] {
            p.filesystem.denied.push(crate::policy::ResolvedPath {
                path: found.into(),
                real: None,
            });
            p.filesystem.found_denied.push(found.into());
        }
        let on_host = |path: &Path| match path.to_str().unwrap() {
            "/etc/shadow" | "/etc/passwd.lock" | "/etc/named" => PathKind::File,
            other => kind(Path::new(other)),
        };
        let inputs = Inputs {
            kind_of: &on_host,
            ..inputs(&p)
        };
        let id_of = |path: &str| {
            mounts(&inputs)
                .into_iter()
                .find(|m| m.path == Path::new(path))
                .map(|m| m.id)
        };
        assert_eq!(id_of("/etc/shadow"), Some(None));
        assert_eq!(id_of("/etc/passwd.lock"), Some(None));
        assert!(matches!(id_of("/etc/named"), Some(Some(_))));
    }

    #[test]
    fn the_options_go_through_an_fd_and_only_the_command_stays_in_the_argv() {
        let p = policy_with("/home/u/proj", "{}");
        let argv = build_argv(&inputs(&p), &["/x/sbx-shell".into(), "__sbx_helper".into()]);
        let (options, rest) = split_options(argv.clone());
        let rest = with_options_from(rest, 9);
        let strings = |v: &[OsString]| -> Vec<String> {
            v.iter().map(|a| a.to_str().unwrap().to_string()).collect()
        };
        assert_eq!(
            strings(&rest),
            [
                "/usr/bin/bwrap",
                "--args",
                "9",
                "--",
                "/x/sbx-shell",
                "__sbx_helper"
            ]
        );
        let options: Vec<String> = options
            .split(|b| *b == 0)
            .map(|o| String::from_utf8(o.to_vec()).unwrap())
            .collect();
        // Each option NUL-terminated: the last split is empty.
        assert_eq!(options.last().map(String::as_str), Some(""));
        let dashes = argv.iter().position(|a| a == "--").unwrap();
        assert_eq!(options[..options.len() - 1], strings(&argv[1..dashes]));
        assert!(options.iter().any(|o| o == "/home/u/proj"));
    }

    /// The plan as (path, how) strings, in order.
    fn plan(policy: &Policy, kind_of: &dyn Fn(&Path) -> PathKind) -> Vec<(String, String)> {
        let inputs = Inputs {
            kind_of,
            ..inputs(policy)
        };
        mounts(&inputs)
            .into_iter()
            .map(|m| {
                let how = match m.how {
                    How::Writable => "writable".to_string(),
                    How::InnerWritable => "inner-writable".to_string(),
                    How::Seal { readonly } => format!("seal {}", readonly.join(",")),
                    How::SealDots { readonly } => format!("seal-dots {}", readonly.join(",")),
                    How::Pin => "pin".to_string(),
                    How::ReadOnly => "read-only".to_string(),
                    How::Resolves => "resolves".to_string(),
                    How::Hide { .. } => "hide".to_string(),
                    How::Twin { layers: None, .. } => "twin".to_string(),
                    How::Twin {
                        layers: Some(_), ..
                    } => "twin, layered".to_string(),
                    How::Layered { lower, .. } => format!("layered on {}", lower.display()),
                    How::View { copy } => format!("view {}", copy.display()),
                };
                (m.path.display().to_string(), how)
            })
            .collect()
    }

    fn at<'a>(plan: &'a [(String, String)], path: &str) -> Vec<&'a str> {
        plan.iter()
            .filter(|(p, _)| p == path)
            .map(|(_, h)| h.as_str())
            .collect()
    }

    #[test]
    fn a_writable_path_inside_another_is_bound_by_the_helper_not_by_bwrap() {
        let p = policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"write": ["./out", "/srv/data"]}}"#,
        );
        let v = argv(&p);
        // bwrap binds only the outer roots: it never creates a mount point below a
        // directory the program could have written in an earlier session.
        assert!(!v.iter().any(|a| a == "/home/u/proj/out"), "{v:?}");
        assert!(v
            .windows(3)
            .any(|w| w == ["--bind", "/home/u/proj", "/home/u/proj"]));
        assert!(v
            .windows(3)
            .any(|w| w == ["--bind-try", "/srv/data", "/srv/data"]));
        let on_host = |p: &Path| match p.to_str().unwrap() {
            "/home/u/proj" | "/home/u/proj/out" | "/srv/data" => PathKind::Dir,
            other => kind(Path::new(other)),
        };
        let all = plan(&p, &on_host);
        assert_eq!(at(&all, "/home/u/proj/out"), ["inner-writable"], "{all:?}");
        assert_eq!(at(&all, "/srv/data"), ["writable"], "{all:?}");
        assert!(nested_root(
            Path::new("/a/b"),
            &[Path::new("/a"), Path::new("/a/b")]
        ));
        assert!(!nested_root(
            Path::new("/a"),
            &[Path::new("/a"), Path::new("/ab")]
        ));
        assert!(nested_root(Path::new("/x"), &[Path::new("/")]));
    }

    #[test]
    fn ancestors_of_protected_and_denied_paths_in_writable_trees_are_pinned_in_order() {
        let on_host = |p: &Path| match p.to_str().unwrap() {
            "/home/u/proj"
            | "/home/u/proj/.git"
            | "/home/u/proj/a"
            | "/home/u/proj/a/b"
            | "/home/u/.local/state/sbx-shell" => PathKind::Dir,
            "/home/u/proj/a/b/secret.txt" => PathKind::File,
            other => kind(Path::new(other)),
        };
        let p = policy_with(
            "/home/u/proj",
            r#"{"filesystem": {"deny": ["./a/b/secret.txt"]}}"#,
        );
        let all = plan(&p, &on_host);
        assert_eq!(at(&all, "/home/u/proj"), ["writable"], "{all:?}");
        assert_eq!(at(&all, "/home/u/proj/.git"), ["pin"], "{all:?}");
        assert_eq!(at(&all, "/home/u/proj/a"), ["pin"], "{all:?}");
        assert_eq!(at(&all, "/home/u/proj/a/b"), ["pin"], "{all:?}");
        assert_eq!(
            at(&all, "/home/u/proj/.git/config"),
            ["read-only"],
            "{all:?}"
        );
        assert_eq!(at(&all, "/home/u/proj/a/b/secret.txt"), ["hide"], "{all:?}");
        // Outside the writable trees: read-only anyway, so neither pinned nor bound again.
        assert!(at(&all, "/home/u/.config/sbx-shell").is_empty(), "{all:?}");
        assert!(at(&all, "/home/u/.config").is_empty(), "{all:?}");
        // Checks, then pins (parents first), then read-only binds, then hides.
        let order: Vec<&str> = all.iter().map(|(_, h)| h.as_str()).collect();
        let last = |h: &str| order.iter().rposition(|o| *o == h).unwrap();
        let first = |h: &str| order.iter().position(|o| *o == h).unwrap();
        assert!(last("writable") < first("pin"), "{order:?}");
        assert!(last("pin") < first("read-only"), "{order:?}");
        assert!(last("read-only") < first("hide"), "{order:?}");
        let pins: Vec<&String> = all
            .iter()
            .filter(|(_, h)| h == "pin")
            .map(|(p, _)| p)
            .collect();
        let mut sorted = pins.clone();
        sorted.sort();
        assert_eq!(pins, sorted);
    }

    #[test]
    fn a_writable_home_is_sealed_and_sbx_shells_own_directories_stay_read_only() {
        let on_host = |p: &Path| match p.to_str().unwrap() {
            "/home/u" | "/home/u/.local" | "/home/u/.local/state" | "/home/u/.config" => {
                PathKind::Dir
            }
            "/home/u/.local/state/sbx-shell" | "/home/u/.local/state/sbx-shell/home/test" => {
                PathKind::Dir
            }
            other => kind(Path::new(other)),
        };
        let all = plan(&policy_with("/home/u", "{}"), &on_host);
        assert_eq!(at(&all, "/home/u"), ["writable", "seal bin"], "{all:?}");
        assert_eq!(at(&all, "/home/u/.config"), ["pin"], "{all:?}");
        assert_eq!(
            at(&all, "/home/u/.config/sbx-shell"),
            ["read-only"],
            "{all:?}"
        );
        assert_eq!(
            at(&all, "/home/u/.local/state/sbx-shell"),
            ["read-only"],
            "{all:?}"
        );
        // The private home, deeper, stays writable (inside the home: the helper binds it
        // on itself, first).
        assert_eq!(
            at(&all, "/home/u/.local/state/sbx-shell/home/test"),
            ["inner-writable"],
            "{all:?}"
        );
        // A project workspace leaves the home unsealed; unrestricted seals nothing but
        // still protects sbx-shell's own files, pinned up to the root.
        let project = plan(&policy_with("/home/u/proj", "{}"), &on_host);
        assert!(
            !project.iter().any(|(_, h)| h.starts_with("seal")),
            "{project:?}"
        );
        let open = plan(
            &policy_with(
                "/home/u/proj",
                r#"{"filesystem": {"mode": "unrestricted"}}"#,
            ),
            &on_host,
        );
        assert!(!open.iter().any(|(_, h)| h.starts_with("seal")), "{open:?}");
        assert_eq!(
            at(&open, "/home/u/.config/sbx-shell"),
            ["read-only"],
            "{open:?}"
        );
        assert_eq!(at(&open, "/home/u"), ["pin"], "{open:?}");
        assert_eq!(at(&open, "/home/u/.config"), ["pin"], "{open:?}");
    }

    #[test]
    fn a_sealed_directory_keeps_its_ordinary_entries_writable() {
        let ro = ["bin".to_string()];
        for name in ["notes.txt", "Documents", "src", "bin2", "a.b"] {
            assert!(stays_writable(std::ffi::OsStr::new(name), &ro), "{name}");
        }
        for name in [".bashrc", ".config", ".local", "bin", ".", ".."] {
            assert!(!stays_writable(std::ffi::OsStr::new(name), &ro), "{name}");
        }
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
