//! The Landlock layer (Linux): the ruleset the helper applies just before exec, as data.
//!
//! Landlock grants; it cannot take back inside what it granted. So the ruleset is built for
//! one of two situations:
//! - `Layering::UnderBwrap`: bwrap already hides denied paths and re-binds protected ones
//!   read-only; Landlock opens reads and limits writes to the writable roots — a second wall.
//! - `Layering::Alone`: reads are what bwrap shows — the whole filesystem but the denied
//!   paths and the host's own `/tmp` and `/dev` (`HOST_PRIVATE`: the session gets its
//!   temporary directory and the harmless devices by rules of their own). A denied path
//!   inside a readable tree is left out by allowing around it: the tree's rule is replaced by rules on each of its
//!   entries but the denied one, recursively down to it (`carve::around`; `/etc` without
//!   `/etc/shadow` for root). A writable tree is carved the same way where the guard makes
//!   every name (`carve`); before Linux 5.14 a denied path inside one is refused.
//!   (Landlock rights are inherited down a tree and a rename needs only rights on the parent,
//!   so nothing short of a mount keeps `.git/config` in a writable repository unwritable.) A
//!   protected path that does not exist yet is not enforced by either backend: bwrap can only
//!   re-bind what exists.
//!
//! TCP bind and connect are handled (so denied) with network none; abstract unix sockets and
//! signals are scoped to the sandbox. Applying it (the `landlock` crate, checking the
//! returned status) is the helper's job.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::policy::config::FsMode;
use crate::policy::{Filesystem, Network, Policy, ResolvedPath};

/// What Landlock alone leaves unreadable besides the denied paths, where bwrap puts the
/// sandbox's own: the host's temporary files (other sessions', other users') and its
/// devices (the user's other terminals, disks).
pub const HOST_PRIVATE: &[&str] = &["/tmp", "/dev"];

/// Devices every program may read and write.
pub const DEVICES_RW: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The Landlock ABI whose rights every ruleset here uses, in full: 6 scopes abstract unix
/// sockets and signals (5 added device ioctls, 4 TCP ports, 3 truncate). The one place the
/// number is written; a kernel with less is refused, never given weaker rules.
pub const MIN_ABI: u32 = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layering {
    UnderBwrap,
    Alone,
}

/// The rights one rule grants beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// execute, read_file, read_dir
    Read,
    /// read_dir only: a directory allowed around a denied entry (`carve::around`) can be listed;
    /// Landlock passes the right down, so a denied directory's names can be too (never its
    /// files' contents).
    List,
    /// read and write files that exist (no creating, removing or renaming)
    ReadWriteFiles,
    /// every filesystem right: create, remove, rename (refer), truncate
    ReadWrite,
    /// read, write and device ioctls (terminals)
    Terminal,
}

impl Access {
    /// The name used in `explain` (as in its JSON).
    pub fn label(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::List => "list",
            Access::ReadWriteFiles => "read-write-files",
            Access::ReadWrite => "read-write",
            Access::Terminal => "terminal",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRule {
    pub path: PathBuf,
    pub access: Access,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ruleset {
    pub layering: Layering,
    /// Every filesystem right is handled: what no rule grants is denied.
    pub rules: Vec<PathRule>,
    /// TCP bind and connect handled: denied, except connecting to `connect_port`.
    pub deny_tcp: bool,
    /// With a network allow-list: the loopback port of the proxy, the one TCP destination
    /// (any address on that port: Landlock cannot tell addresses apart).
    #[serde(default)]
    pub connect_port: Option<u16>,
    /// Abstract unix sockets and signals scoped to the sandbox.
    pub scoped: bool,
    /// The Landlock ABI these rules need in full (a lower one is refused, not weakened).
    pub min_abi: u32,
    /// Where sbx-shell reads the audit (`session::audit`): the kernel is asked to log the
    /// program's refusals after its exec too (ABI 7), and the helper, once restricted,
    /// opens this file (the session's journal) for writing, which Landlock refuses — the
    /// domain's first record, by which sbx-shell tells its session's records.
    #[serde(default)]
    pub audit_marker: Option<PathBuf>,
    /// Alone: the directories inside writable trees left without a rule of their own
    /// around what the program may not change there (`carve`).
    #[serde(default)]
    pub carved: Vec<super::carve::Carved>,
    /// Their pools (`carve::Pool`), made once the ruleset is built (`session::pool`).
    #[serde(default)]
    pub pools: Vec<super::carve::Pool>,
}

/// What the bwrap backend gives that Landlock alone does not, on any machine: listed by
/// `doctor` (the start line of a fallback points there).
pub const WITHOUT_BWRAP: &[&str] = &[
    "a denied path inside the workspace is left out of its rules, not hidden: its name \
        shows; a name made at the top of a directory holding one, beyond the session's pool of \
        16 files and 8 directories, or moved there, cannot be read by name until the next \
        session (before Linux 5.14 such a policy is refused)",
    "no private /tmp: a private TMPDIR instead, the host's closed (a program that writes a fixed /tmp/name fails)",
    "POSIX shared memory and semaphores live in a directory of the session's, made by \
        sbx-shell's guard for each name in /dev/shm; a segment opened read-only by name, or a \
        listing of /dev/shm, is refused",
    "`ls /` is refused (listing it would list the host's /tmp and /dev/shm)",
    "no overlay of the host's package caches: they start empty (cargo cannot unpack a dependency)",
    "unix sockets by path reach only the program's own (in its writable trees); none can be granted; datagram and abstract ones are refused",
    "no network namespace: the program's TCP servers listen on the host's loopback (the guard binds them there), reachable from the host as bare",
    "no pid namespace: your other processes and their command lines are visible",
    "no ipc namespace: the host's System V IPC objects are reachable within their permissions",
    "a nested pty cannot be opened by its name in /dev/pts",
];

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LandlockError {
    #[error(
        "Landlock alone cannot deny {denied} inside the writable {inside}\nHint: use the bwrap \
        backend, which hides it (install bubblewrap; `sbx-shell doctor` checks it), or choose a \
        workspace that does not contain it"
    )]
    DeniedInsideWritable { denied: PathBuf, inside: PathBuf },
    #[error(
        "Landlock alone cannot protect {protected} inside the writable {inside}\nHint: use the \
        bwrap backend, which mounts it read-only (install bubblewrap; `sbx-shell doctor` checks \
        it), or run read-only: --profile read-only"
    )]
    ProtectedInsideWritable { protected: PathBuf, inside: PathBuf },
    #[error(
        "Landlock alone cannot grant the host socket {socket}: it connects only to the program's \
        own unix sockets, in its writable trees (Landlock has no socket right before ABI \
        9)\nHint: use the bwrap backend (`sbx-shell setup` enables it where it cannot run), or \
        leave out the grant (filesystem.sockets, --allow-socket)"
    )]
    SocketGrant { socket: PathBuf },
    #[error("internal error: a network allow-list without the proxy's port")]
    NoProxy,
}

/// What the session adds to the policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionParts<'a> {
    /// Where the sandbox reaches the allow-list proxy (needed for an allow-list).
    pub proxy_port: Option<u16>,
    /// Alone, in workspace-write: the session's private temporary directory
    /// (`session::temp`), writable where bwrap would give a private `/tmp`.
    pub temp_dir: Option<&'a Path>,
    /// Alone: the session's own directory standing for `/dev/shm` (`mediator::shm_name`).
    pub shm_dir: Option<&'a Path>,
    /// Alone: the directories the program's tools run from (`tool_prefixes`).
    pub tools: &'a [PathBuf],
    /// Whether the helper's guard makes every name the program makes
    /// (`sandbox::names_judged`): alone, a writable tree can then be carved (`carve`).
    pub names_judged: bool,
    /// Alone inside a container: the network namespace is the session's own
    /// (`Backend::network_of_its_own`), so TCP there is the program's, as under bwrap.
    pub network_of_its_own: bool,
}

/// The ruleset for `policy`; `exists` tells which protected paths exist on the host, and
/// `children` what a directory holds (its entries but symlinks).
///
/// Alone, the host's `/tmp` and `/dev/shm` are neither writable nor readable (bwrap gives
/// private ones): the session's temporary directory stands for `/tmp`, and its shared
/// memory directory for `/dev/shm` (`shm_open`, `sem_open`: the guard makes the names
/// there). Of `/dev`, only the harmless devices, the
/// session's own terminal and, with nested ptys, `/dev/ptmx`: `/dev/pts` gets no rule, so
/// no other terminal of the user can be opened; the peer of a pty the program creates is
/// opened by sbx-shell (`mediated`: `TIOCGPTPEER`, which glibc's `openpty` and `forkpty`
/// use) — opening it by its name fails.
pub fn build_ruleset(
    policy: &Policy,
    layering: Layering,
    exists: &dyn Fn(&Path) -> bool,
    children: &dyn Fn(&Path) -> Vec<PathBuf>,
    session: SessionParts<'_>,
) -> Result<Ruleset, LandlockError> {
    // The proxy's port: an allow-list's, and under bwrap with no network (it refuses all
    // and names what was asked). Alone with no network there is none.
    let connect_port = match (&policy.network, session.proxy_port) {
        (Network::Allow(_), None) => return Err(LandlockError::NoProxy),
        (Network::Full, _) => None,
        (_, port) => port,
    };
    let fs = &policy.filesystem;
    let writable = writable_roots(fs, layering, session.temp_dir);
    let prefixes = tool_prefixes(session.tools);
    let readable = readable_roots(fs, layering, &prefixes);
    let carving = layering == Layering::Alone && session.names_judged;
    if layering == Layering::Alone {
        check_alone(fs, &writable, carving, exists)?;
    }
    let mut rules = read_rules(fs, layering, readable, children);
    let (writable, carved) = super::carve::writable(fs, &writable, carving, children);
    let mut add = |path: &Path, access| {
        rules.push(PathRule {
            path: path.to_path_buf(),
            access,
        })
    };
    for path in &writable {
        add(path, Access::ReadWrite);
    }
    // POSIX shared memory and semaphores (python multiprocessing, browsers): bwrap's
    // private /dev/shm, or alone the session's own directory, where the guard makes and
    // removes the names the program gives in /dev/shm.
    match layering {
        Layering::UnderBwrap => add(Path::new("/dev/shm"), Access::ReadWrite),
        Layering::Alone => {
            if let Some(dir) = session.shm_dir {
                add(dir, Access::ReadWrite);
            }
        }
    }
    for device in DEVICES_RW {
        add(
            Path::new(device),
            if *device == "/dev/tty" {
                Access::Terminal
            } else {
                Access::ReadWriteFiles
            },
        );
    }
    if policy.nested_pty {
        add(Path::new("/dev/ptmx"), Access::Terminal);
        if layering == Layering::UnderBwrap {
            // bwrap's /dev/pts is a devpts instance of the sandbox's own; alone it would
            // be the host's, with every other terminal of the user.
            add(Path::new("/dev/pts"), Access::Terminal);
        }
    }
    // Under bwrap or in a container the program's network namespace is its own (with no
    // network or an allow-list): its loopback holds the proxy and the servers the program
    // starts, and leads nowhere else, so TCP there is the program's, as bare. Alone,
    // loopback is the host's: nothing but the proxy's port.
    let own = layering == Layering::UnderBwrap || session.network_of_its_own;
    let deny_tcp = policy.network != Network::Full && !own;
    Ok(Ruleset {
        layering,
        rules,
        deny_tcp,
        connect_port,
        scoped: true,
        min_abi: MIN_ABI,
        audit_marker: None,
        carved,
        pools: Vec::new(),
    })
}

/// The read rules: each readable root, carved around the denied paths (Landlock alone;
/// under bwrap they are hidden by mounts already) and, for `/`, the host's private trees.
fn read_rules(
    fs: &crate::policy::Filesystem,
    layering: Layering,
    readable: Vec<&Path>,
    children: &dyn Fn(&Path) -> Vec<PathBuf>,
) -> Vec<PathRule> {
    let mut rules = Vec::new();
    let mut add = |path: &Path, access| {
        rules.push(PathRule {
            path: path.to_path_buf(),
            access,
        })
    };
    // Under bwrap the denied paths are hidden by mounts already.
    let denied: Vec<&Path> = match layering {
        Layering::Alone => fs.denied.iter().map(real).collect(),
        Layering::UnderBwrap => Vec::new(),
    };
    // What the policy reveals inside a denied path (bwrap shows a copy instead).
    if layering == Layering::Alone {
        for path in fs.revealed.iter().map(real) {
            add(path, Access::Read);
        }
    }
    let mut readable = readable;
    readable.sort();
    readable.dedup();
    let mut denied_or_private = denied.clone();
    denied_or_private.extend(HOST_PRIVATE.iter().map(Path::new));
    for path in readable {
        // `/` alone: all but the denied paths and the host's private trees.
        let left_out = match (layering, path == Path::new("/")) {
            (Layering::Alone, true) => &denied_or_private,
            _ => &denied,
        };
        let (parts, carved) = super::carve::around(path, left_out, children);
        for part in parts {
            add(&part, Access::Read);
        }
        for dir in carved {
            // Listing is inherited down the tree: on `/` it would list the host's /tmp and
            // /dev/shm (other sessions' and users' names). `/` itself is not listed.
            if dir != Path::new("/") {
                add(&dir, Access::List);
            }
        }
    }
    rules
}

/// Under bwrap, the paths where the helper binds a twin from the private home
/// (`bwrap::mounts`): writable. Landlock walks up from a file through the mounts it
/// crosses, so a write under `~/.cache`, the twin's mount, never passes the private home's
/// rule; the rule goes on the mount's root, the twin itself (not on the twin's path in the
/// private home, which the program could have replaced by a symlink).
pub fn allow_twins(ruleset: &mut Ruleset, mounts: &[super::bwrap::Mount]) {
    ruleset.rules.extend(
        mounts
            .iter()
            .filter(|m| {
                matches!(
                    m.how,
                    super::bwrap::How::Twin { .. } | super::bwrap::How::Layered { .. }
                )
            })
            .map(|m| PathRule {
                path: m.path.clone(),
                access: Access::ReadWrite,
            }),
    );
}

/// Whether the policy makes the host's `/dev/shm` writable (`--write /dev/shm`,
/// unrestricted): then, alone, the program uses it, and no directory of the session
/// stands for it.
pub fn host_shm_writable(fs: &Filesystem) -> bool {
    writable_roots(fs, Layering::Alone, None)
        .iter()
        .any(|w| Path::new("/dev/shm").starts_with(w))
}

/// The trees the program may write: in workspace-write, `/tmp` is bwrap's private one, or
/// alone the session's temporary directory.
fn writable_roots<'a>(
    fs: &'a Filesystem,
    layering: Layering,
    temp_dir: Option<&'a Path>,
) -> Vec<&'a Path> {
    match fs.mode {
        FsMode::Unrestricted => vec![Path::new("/")],
        FsMode::WorkspaceWrite => {
            let mut w: Vec<&Path> = vec![real(&fs.workspace)];
            match layering {
                Layering::UnderBwrap if fs.private_tmp_writable => w.push(Path::new("/tmp")),
                Layering::UnderBwrap => {}
                Layering::Alone => w.extend(temp_dir),
            }
            w.extend(fs.writable.iter().map(real));
            w
        }
        FsMode::ReadOnly => fs.writable.iter().map(real).collect(),
    }
}

/// The trees the program may read: everything under bwrap (whose mounts hide the rest);
/// alone `/` (left out around the denied paths and `HOST_PRIVATE`) and what lies in those.
fn readable_roots<'a>(
    fs: &'a Filesystem,
    layering: Layering,
    tools: &'a [PathBuf],
) -> Vec<&'a Path> {
    match layering {
        Layering::UnderBwrap => vec![Path::new("/")],
        Layering::Alone => {
            // The filesystem around what is denied and the host's private trees, as bwrap
            // shows it; what the user declared readable, even there.
            let mut r: Vec<&Path> = vec![Path::new("/")];
            // What lies in the host's private trees (a checkout under /tmp, a home there,
            // a declared root, a tool's prefix) stays readable.
            let inside_private = |p: &&Path| HOST_PRIVATE.iter().any(|h| p.starts_with(h));
            r.extend(
                [real(&fs.home), real(&fs.workspace)]
                    .into_iter()
                    .chain(fs.readable.iter().chain(&fs.protected).map(real))
                    .chain(tools.iter().map(PathBuf::as_path))
                    .filter(inside_private),
            );
            r
        }
    }
}

/// The install prefixes of the directories tools run from (`SessionParts::tools`): each
/// directory's parent — `bin/` beside `lib/` and `share/`, `node_modules/.bin` beside the
/// packages its links name, a virtualenv's `bin/` beside its `lib/` — or the directory
/// itself where its parent is `/`. Readable alone, so that a program installed outside
/// the home and the system directories (linuxbrew, a project's `node_modules`, `/snap`)
/// starts, as it does under bwrap, where everything not denied is readable; denied paths
/// inside stay left out (`carve::around`).
pub fn tool_prefixes(dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| d.is_absolute() && *d != Path::new("/"))
        .map(|d| match d.parent() {
            Some(parent) if parent != Path::new("/") => parent.to_path_buf(),
            _ => d.clone(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Alone, Landlock cannot deny inside a writable tree nor protect inside one, and no host
/// socket can be granted (seccomp refuses unix sockets by path, `seccomp::build_filter`):
/// such a policy is refused, never weakened — except a protected path inside a writable
/// tree other than `/`, which the helper's guard refuses to change (`protect::names`;
/// without it, before Linux 5.14, Landlock alone does not run: `SandboxError::AloneUnjudged`), and, where
/// the guard makes every name (`carving`), a denied path inside a writable tree other
/// than `/`, which the tree's rules are carved around (`carve`).
fn check_alone(
    fs: &Filesystem,
    writable: &[&Path],
    carving: bool,
    exists: &dyn Fn(&Path) -> bool,
) -> Result<(), LandlockError> {
    if let Some(socket) = fs.sockets.first() {
        return Err(LandlockError::SocketGrant {
            socket: real(socket).into(),
        });
    }
    for denied in fs.denied.iter().map(real) {
        let carved = |r: &Path| carving && r != Path::new("/");
        if let Some(inside) = writable
            .iter()
            .find(|r| denied.starts_with(r) && !carved(r))
        {
            return Err(LandlockError::DeniedInsideWritable {
                denied: denied.into(),
                inside: inside.into(),
            });
        }
    }
    // Inside the writable trees of a workspace, the guard refuses changes; inside `/`
    // (unrestricted, no tree it judges), nothing could.
    for protected in fs.protected.iter().map(real).filter(|p| exists(p)) {
        if let Some(inside) = writable
            .iter()
            .find(|w| **w == Path::new("/") && protected.starts_with(w))
        {
            return Err(LandlockError::ProtectedInsideWritable {
                protected: protected.into(),
                inside: inside.into(),
            });
        }
    }
    Ok(())
}

fn real(path: &ResolvedPath) -> &Path {
    path.real.as_deref().unwrap_or(&path.path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::policy_with;

    /// A fake host: a home with a few entries, an /etc with a shadow file.
    fn children(dir: &Path) -> Vec<PathBuf> {
        let names: &[&str] = match dir.to_str().unwrap() {
            "/" => &["data", "dev", "etc", "home", "srv", "tmp", "usr", "var"],
            "/home" => &["u"],
            "/srv" => &["proj", "tools"],
            "/home/u" => &[".ssh", ".config", "notes", "proj"],
            "/home/u/.config" => &["gh", "nvim"],
            "/etc" => &["passwd", "shadow", "ssh"],
            "/etc/ssh" => &["ssh_config", "ssh_host_ed25519_key"],
            _ => &[],
        };
        names.iter().map(|n| dir.join(n)).collect()
    }

    fn access_of(ruleset: &Ruleset, path: &str) -> Vec<Access> {
        ruleset
            .rules
            .iter()
            .filter(|r| r.path == Path::new(path))
            .map(|r| r.access)
            .collect()
    }

    fn port(proxy_port: Option<u16>) -> SessionParts<'static> {
        SessionParts {
            proxy_port,
            temp_dir: None,
            shm_dir: None,
            tools: &[],
            names_judged: false,
            network_of_its_own: false,
        }
    }

    fn build_ruleset(policy: &Policy, layering: Layering) -> Result<Ruleset, LandlockError> {
        super::build_ruleset(
            policy,
            layering,
            &|p| p == Path::new("/srv/proj/.git/config") || p.starts_with("/home/u"),
            &children,
            SessionParts {
                proxy_port: Some(3128),
                temp_dir: Some(Path::new("/tmp/sbx-shell-0/session-9")),
                shm_dir: Some(Path::new("/dev/shm/sbx-shell-0/session-9")),
                tools: &[],
                names_judged: false,
                network_of_its_own: false,
            },
        )
    }

    /// Alone, a tool's install prefix is readable: a PATH directory's parent (the
    /// directory itself below `/`), and a denied path inside it is still left out.
    #[test]
    fn alone_the_tools_install_prefixes_are_readable() {
        let dirs = [
            PathBuf::from("/opt/node/lib/node_modules/.bin"),
            PathBuf::from("/home/linuxbrew/.linuxbrew/bin"),
            PathBuf::from("/sbin"),
            PathBuf::from("/"),
            PathBuf::from("relative/bin"),
        ];
        assert_eq!(
            tool_prefixes(&dirs),
            [
                PathBuf::from("/home/linuxbrew/.linuxbrew"),
                PathBuf::from("/opt/node/lib/node_modules"),
                PathBuf::from("/sbin"),
            ]
        );
        let p = policy_with(
            "/srv/proj",
            r#"{"filesystem": {"mode": "read-only", "deny": ["/srv/tools/secret"]}}"#,
        );
        let tools = [PathBuf::from("/srv/tools/bin")];
        let children = |dir: &Path| match dir.to_str().unwrap() {
            "/srv/tools" => vec![
                PathBuf::from("/srv/tools/bin"),
                PathBuf::from("/srv/tools/secret"),
            ],
            other => super::tests::children(Path::new(other)),
        };
        let r = super::build_ruleset(
            &p,
            Layering::Alone,
            &|_| true,
            &children,
            SessionParts {
                tools: &tools,
                ..port(None)
            },
        )
        .unwrap();
        assert_eq!(access_of(&r, "/srv/tools/bin"), [Access::Read]);
        assert_eq!(access_of(&r, "/srv/tools"), [Access::List]);
        assert!(access_of(&r, "/srv/tools/secret").is_empty());
        // Under bwrap nothing changes: everything is readable there already.
        let under = super::build_ruleset(
            &p,
            Layering::UnderBwrap,
            &|_| true,
            &children,
            SessionParts {
                tools: &tools,
                ..port(None)
            },
        )
        .unwrap();
        assert!(access_of(&under, "/srv/tools/bin").is_empty());
    }

    #[test]
    fn an_allow_list_leaves_only_the_proxy_port_to_connect_to() {
        let allow = policy_with(
            "/home/u/proj",
            r#"{"network": {"allow": ["api.example.com"]}}"#,
        );
        let nothing = |_: &Path| false;
        let r = super::build_ruleset(
            &allow,
            Layering::Alone,
            &nothing,
            &children,
            port(Some(3128)),
        )
        .unwrap();
        assert!(r.deny_tcp);
        assert_eq!(r.connect_port, Some(3128));
        // No network: alone, no proxy and no port; under bwrap the proxy that refuses all.
        let none = policy_with("/home/u/proj", "{}");
        let alone =
            super::build_ruleset(&none, Layering::Alone, &nothing, &children, port(None)).unwrap();
        assert_eq!((alone.deny_tcp, alone.connect_port), (true, None));
        let under = super::build_ruleset(
            &none,
            Layering::UnderBwrap,
            &nothing,
            &children,
            port(Some(3128)),
        )
        .unwrap();
        assert_eq!((under.deny_tcp, under.connect_port), (false, Some(3128)));
        let no_port =
            super::build_ruleset(&allow, Layering::Alone, &nothing, &children, port(None));
        assert_eq!(no_port, Err(LandlockError::NoProxy));
        // Alone in a container, whose network is the session's own: TCP is the program's,
        // as under bwrap.
        let contained = SessionParts {
            network_of_its_own: true,
            ..port(Some(3128))
        };
        let inside =
            super::build_ruleset(&allow, Layering::Alone, &nothing, &children, contained).unwrap();
        assert_eq!((inside.deny_tcp, inside.connect_port), (false, Some(3128)));
    }

    #[test]
    fn under_bwrap_reads_are_open_and_writes_limited() {
        let r = build_ruleset(&policy_with("/home/u/proj", "{}"), Layering::UnderBwrap).unwrap();
        assert_eq!(access_of(&r, "/"), [Access::Read]);
        assert_eq!(access_of(&r, "/home/u/proj"), [Access::ReadWrite]);
        assert_eq!(access_of(&r, "/dev/pts"), [Access::Terminal]);
        // TCP in the sandbox's own network namespace is the program's.
        assert!(!r.deny_tcp && r.scoped);
        assert!(!r.rules.iter().any(|rule| rule.path == Path::new("/home/u")));
    }

    #[test]
    fn alone_reads_are_the_filesystem_around_its_secrets_as_under_bwrap() {
        let p = policy_with(
            "/srv/proj",
            r#"{"filesystem": {"read": ["/data"]}, "network": "full", "nested_pty": false}"#,
        );
        // An existing protected path inside the writable workspace: the workspace is
        // writable all the same (the guard refuses a write to it, `protect::names`).
        let r = build_ruleset(&p, Layering::Alone).unwrap();
        assert_eq!(access_of(&r, "/srv"), [Access::Read]);
        assert_eq!(access_of(&r, "/srv/proj"), [Access::ReadWrite]);
        // The host's /tmp and /dev are not read: the session's own temporary directory
        // and the named devices have rules of their own.
        assert!(
            access_of(&r, "/").is_empty(),
            "listing / would list /tmp and /dev/shm"
        );
        assert!(access_of(&r, "/tmp").is_empty() && access_of(&r, "/dev").is_empty());
        // Unrestricted, where nothing could restore it: refused.
        let everything = policy_with(
            "/srv/proj",
            r#"{"filesystem": {"mode": "unrestricted"}, "network": "full"}"#,
        );
        assert!(matches!(
            build_ruleset(&everything, Layering::Alone),
            Err(LandlockError::DeniedInsideWritable { .. }
                | LandlockError::ProtectedInsideWritable { .. })
        ));
        let ro = policy_with(
            "/srv/proj",
            r#"{"filesystem": {"mode": "read-only", "read": ["/data"]}, "network": "full", "nested_pty": false}"#,
        );
        let r = build_ruleset(&ro, Layering::Alone).unwrap();
        assert_eq!(access_of(&r, "/usr"), [Access::Read]);
        assert_eq!(access_of(&r, "/data"), [Access::Read]);
        // The home directory around its denied paths: listed, its other entries read.
        assert_eq!(
            access_of(&r, "/home/u"),
            [Access::List],
            "not $HOME wholesale"
        );
        assert_eq!(access_of(&r, "/home/u/notes"), [Access::Read]);
        assert!(access_of(&r, "/home/u/.ssh").is_empty());
        assert!(access_of(&r, "/dev/ptmx").is_empty());
        assert!(!r.deny_tcp);
    }

    #[test]
    fn a_denied_path_inside_a_readable_tree_is_allowed_around() {
        let p = policy_with(
            "/home/u",
            r#"{"filesystem": {"mode": "read-only", "deny": ["/etc/shadow", "/etc/ssh/ssh_host_ed25519_key"]}}"#,
        );
        let r = build_ruleset(&p, Layering::Alone).unwrap();
        let read: Vec<&str> = r
            .rules
            .iter()
            .filter(|r| r.access == Access::Read)
            .map(|r| r.path.to_str().unwrap())
            .collect();
        for allowed in [
            "/home/u/notes",
            "/home/u/proj",
            "/home/u/.config/nvim",
            "/etc/passwd",
            "/etc/ssh/ssh_config",
            "/usr",
        ] {
            assert!(read.contains(&allowed), "{allowed}: {read:?}");
        }
        for left_out in [
            "/home/u",
            "/home/u/.ssh",
            "/home/u/.config",
            "/home/u/.config/gh",
            "/etc",
            "/etc/shadow",
            "/etc/ssh",
            "/etc/ssh/ssh_host_ed25519_key",
        ] {
            assert!(!read.contains(&left_out), "{left_out}: {read:?}");
        }
        // The carved directories can be listed, nothing more.
        for dir in ["/home/u", "/home/u/.config", "/etc", "/etc/ssh"] {
            assert_eq!(access_of(&r, dir), [Access::List], "{dir}");
        }
        assert!(access_of(&r, "/home/u/.ssh").is_empty());
        // Inside a writable tree, where no guard makes the names (before Linux 5.14): refused.
        let w = policy_with("/home/u", "{}");
        let err = build_ruleset(&w, Layering::Alone).unwrap_err().to_string();
        assert!(
            err.contains("cannot deny /home/u/.")
                && err.contains("writable /home/u")
                && err.contains("Hint: "),
            "{err}"
        );
    }

    /// Where the guard makes every name, a writable home is carved around its denied
    /// paths and its dot entries (bwrap's seal): its other entries writable, itself only
    /// listed, and the guard told what it leaves out.
    #[test]
    fn alone_a_writable_home_is_carved_where_the_guard_makes_names() {
        let w = policy_with("/home/u", "{}");
        let exists = |p: &Path| p.starts_with("/home/u");
        let parts = SessionParts {
            names_judged: true,
            ..port(None)
        };
        let r = super::build_ruleset(&w, Layering::Alone, &exists, &children, parts).unwrap();
        assert_eq!(
            access_of(&r, "/home/u/proj"),
            [Access::Read, Access::ReadWrite]
        );
        assert_eq!(
            access_of(&r, "/home/u/notes"),
            [Access::Read, Access::ReadWrite]
        );
        assert_eq!(access_of(&r, "/home/u"), [Access::List]);
        assert!(access_of(&r, "/home/u/.ssh").is_empty());
        assert!(!access_of(&r, "/home/u/.config/nvim").contains(&Access::ReadWrite));
        assert_eq!(r.carved.len(), 1);
        let home = &r.carved[0];
        assert_eq!(home.dir, Path::new("/home/u"));
        for out in ["/home/u/.ssh", "/home/u/.config", "/home/u/bin"] {
            assert!(
                home.left_out.contains(&PathBuf::from(out)),
                "{out}: {home:?}"
            );
        }
        // Unrestricted (`/` writable): still refused.
        let everything = policy_with(
            "/srv/proj",
            r#"{"filesystem": {"mode": "unrestricted"}, "network": "full"}"#,
        );
        let parts = SessionParts {
            names_judged: true,
            ..port(None)
        };
        assert!(
            super::build_ruleset(&everything, Layering::Alone, &exists, &children, parts).is_err()
        );
    }

    #[test]
    fn alone_the_host_tmp_shm_and_other_terminals_get_no_rule() {
        let p = policy_with("/srv/work", "{}");
        let alone = build_ruleset(&p, Layering::Alone).unwrap();
        let named = [DEVICES_RW, &["/dev/ptmx"]].concat();
        for rule in &alone.rules {
            let p = rule.path.as_path();
            if p.starts_with("/tmp") {
                assert_eq!(p, Path::new("/tmp/sbx-shell-0/session-9"));
            }
            if p.starts_with("/dev/shm") {
                assert_eq!(p, Path::new("/dev/shm/sbx-shell-0/session-9"));
            } else if p.starts_with("/dev") {
                assert!(named.iter().any(|d| p == Path::new(d)), "{p:?}");
            }
        }
        for own in [
            "/tmp/sbx-shell-0/session-9",
            "/dev/shm/sbx-shell-0/session-9",
        ] {
            assert_eq!(access_of(&alone, own), [Access::ReadWrite], "{own}");
        }
        assert!(access_of(&alone, "/dev/shm").is_empty());
        assert_eq!(access_of(&alone, "/dev/ptmx"), [Access::Terminal]);
        assert_eq!(access_of(&alone, "/dev/tty"), [Access::Terminal]);
        // Under bwrap, /tmp, /dev/shm and /dev/pts are the sandbox's own.
        let under = build_ruleset(&p, Layering::UnderBwrap).unwrap();
        for own in ["/tmp", "/dev/shm"] {
            assert_eq!(access_of(&under, own), [Access::ReadWrite], "{own}");
        }
        assert_eq!(access_of(&under, "/dev/pts"), [Access::Terminal]);
        assert!(access_of(&under, "/tmp/sbx-shell-0/session-9").is_empty());
        // Read-only alone: no temporary directory either.
        let ro = policy_with("/srv/work", r#"{"filesystem": {"mode": "read-only"}}"#);
        let ro = build_ruleset(&ro, Layering::Alone).unwrap();
        assert!(access_of(&ro, "/tmp/sbx-shell-0/session-9").is_empty());
    }

    #[test]
    fn alone_a_socket_grant_is_refused() {
        let p = policy_with(
            "/srv/work",
            r#"{"filesystem": {"sockets": ["/run/user/1000/ssh-agent.sock"]}}"#,
        );
        let err = build_ruleset(&p, Layering::Alone).unwrap_err().to_string();
        assert!(
            err.contains("cannot grant the host socket /run/user/1000/ssh-agent.sock"),
            "{err}"
        );
        assert!(err.contains("Hint: "), "{err}");
        assert!(build_ruleset(&p, Layering::UnderBwrap).is_ok());
    }
}
