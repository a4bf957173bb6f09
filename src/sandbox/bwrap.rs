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

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::host::PathKind;
use crate::policy::config::FsMode;
use crate::policy::{Network, Policy, ResolvedPath};
use crate::sys::files::Identity;

#[derive(Clone, Copy)]
pub struct Inputs<'a> {
    pub policy: &'a Policy,
    /// The bwrap binary (from a fixed system path).
    pub bwrap: &'a Path,
    /// Where the program starts.
    pub cwd: &'a Path,
    /// The host's runtime directories and sockets to hide, and the granted ones
    /// (`sockets::for_policy`).
    pub sockets: &'a crate::host::sockets::Hidden,
    /// The sbx-shell executable as an inherited fd, put at `HELPER_PATH` and run from
    /// there: its own path may be hidden inside (under /tmp, a denied path).
    pub helper: Option<HelperFd>,
    pub kind_of: &'a dyn Fn(&Path) -> PathKind,
    /// What each path names now, seen without following symlinks (`files::identity_of`).
    pub identity_of: &'a dyn Fn(&Path) -> Option<Identity>,
    /// What each path names after following symlinks (`files::followed_identity_of`).
    pub followed_identity_of: &'a dyn Fn(&Path) -> Option<Identity>,
    /// The git directories found in the writable trees (`repos::scan`).
    pub git_dirs: &'a [crate::protect::repos::GitDir],
    /// The helper's guard judges every name made and every writing open
    /// (`sandbox::names_judged`): git's config files are then not mounted read-only, so
    /// that git can rename its `config.lock` over them (which the guard checks).
    pub names_judged: bool,
    /// The sandbox's name server (`netproxy::lookups`), which the helper opens on port 53.
    pub name_server: Option<NameServer<'a>>,
}

/// What the sandbox's name server needs of bwrap: CAP_NET_BIND_SERVICE for the helper,
/// and `resolv.conf` pointing there (a readable fd of `lookups::RESOLV_CONF`, put over the
/// host's file: its real path, `/etc/resolv.conf` being a symlink on many hosts). With no
/// `resolv.conf` on the host, resolvers ask 127.0.0.1 already.
#[derive(Clone, Copy)]
pub struct NameServer<'a> {
    pub resolv_conf: Option<(RawFd, &'a Path)>,
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
    if let Some(NameServer {
        resolv_conf: Some((fd, path)),
    }) = inputs.name_server
    {
        a.flags(&["--ro-bind-data", &fd.to_string()]);
        a.0.push(path.as_os_str().to_owned());
    }
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
    if !mounts(inputs).is_empty() || inputs.name_server.is_some() {
        a.flags(&["--cap-add", "CAP_SETPCAP"]);
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

/// One mount the helper makes (or, for `Writable`, checks) inside the sandbox, in the
/// order `mounts` gives. Every path is opened without following a symlink anywhere in it
/// (`files::open_nofollow`) and mounted through that descriptor, never by name again; with
/// `id`, the object found there must be the one sbx-shell saw when it planned, or the
/// helper ends the session before anything runs (a rename or a symlink flipped while the
/// sandbox started).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mount {
    pub path: PathBuf,
    pub how: How,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Identity>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum How {
    /// bwrap bound it read-write: checked to be that mount, writable.
    Writable,
    /// A writable root inside another (`nested_root`): bound on itself by the helper, as
    /// writable as the root around it.
    InnerWritable,
    /// Read-only, except its entries that `stays_writable` keeps writable (each bound
    /// read-write again): nothing can be created, renamed or removed at its top.
    Seal { readonly: Vec<String> },
    /// Writable, but its dot entries and `readonly` (those that exist) bound read-only
    /// each, except a writable root among them: where the helper's guard judges every
    /// name made (`mediator::names::Names::home`), which refuses new dot names and
    /// `readonly` at the top while ordinary names can be made there.
    SealDots { readonly: Vec<String> },
    /// Bound on itself, so that it cannot be renamed or removed (EBUSY): an ancestor of a
    /// protected or denied path inside a writable tree.
    Pin,
    /// Read-only, with everything in it (a writable grant deeper inside stays writable).
    ReadOnly,
    /// Nothing mounted: `path` (a protected or denied path as written, through a symlink)
    /// must still lead, following symlinks, to the object `id` — or to nothing when `id` is
    /// `None` — as it did when sbx-shell planned; a flipped symlink ends the session.
    Resolves,
    /// Out of reach: a directory under an empty read-only tmpfs, anything else under
    /// `/dev/null`, read-only.
    Hide { dir: bool },
    /// Its twin in the private home (`privatehome`) bound over it, read-write; hidden
    /// instead when the twin is missing, a symlink or of the other kind. With `layers`
    /// (upper, work): an overlay of those over the host's directory itself, so that what
    /// the host has shows through read-only; the twin when the kernel refuses it.
    Twin {
        twin: PathBuf,
        dir: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layers: Option<(PathBuf, PathBuf)>,
    },
    /// A cache's twin that a variable points at (`privatehome::Entry::layered`): the
    /// host's directory `lower` beneath it read-only, an overlay with the private home's
    /// `upper` and `work`; left as it is when the kernel refuses the overlay.
    Layered {
        lower: PathBuf,
        upper: PathBuf,
        work: PathBuf,
    },
}

/// Whether the entry `name` of a sealed directory stays writable: not a dotfile or
/// dot-directory (they configure what runs outside) and not one of `readonly`.
pub fn stays_writable(name: &std::ffi::OsStr, readonly: &[String]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    !name.as_bytes().starts_with(b".") && !readonly.iter().any(|r| r.as_bytes() == name.as_bytes())
}

/// Entries of the home directory that run code outside although their names have no dot.
pub const HOME_READONLY: &[&str] = &["bin"];

/// Directories the sandbox gets fresh (private `/dev`, `/proc`, `/tmp`): nothing of the
/// host's shows there, so nothing there needs hiding.
const PRIVATE_DIRS: &[&str] = &["/dev", "/proc", "/tmp"];

/// Whether the writable root `path` lies inside another of `roots`: bwrap is not asked to
/// bind it (it would create a mount point below what the program could write), the helper
/// binds it on itself, through descriptors opened without following symlinks.
pub fn nested_root(path: &Path, roots: &[&Path]) -> bool {
    roots.iter().any(|r| *r != path && path.starts_with(r))
}

/// What the helper mounts, in order (`Mount`):
///
/// 1. `Writable`: each writable root bwrap bound, checked; `InnerWritable`: each one
///    inside another, bound on itself;
/// 2. `Seal`: the home directory, when a writable root holds it (the workspace is `$HOME`,
///    or above it) in workspace-write mode: its dot entries and `HOME_READONLY` stay
///    read-only, and nothing new can appear at its top;
/// 3. `Pin`: every existing directory between a writable root and a protected or denied
///    path inside it, parents first, so that no ancestor can be renamed away;
/// 4. `ReadOnly`: the protected paths inside writable roots (the rest is read-only anyway);
/// 5. the denied paths and the private home's kept paths (parents first; a kept path that
///    is also denied gets its twin, not a hide), then the host's runtime directory and
///    sockets (unless granted), each once, skipping what does not exist and what a private
///    or an already covered directory covers.
///
/// A kept path that is mounted (`privatehome::Entry::mount`) gets its twin only where
/// the host has it, as the same kind (file or directory); one with a grant inside it stays
/// the host's (the grant says the program should see it); the tools' variables cover the
/// rest (`privatehome::variables`).
///
/// The helper does it, not bwrap: bwrap resolves a destination by name when it mounts (a
/// symlink flipped meanwhile moves the mount elsewhere) and ends the session when one
/// vanished since it was looked at (a container engine restarting); the helper opens each
/// path without following symlinks, checks what it found, and skips a socket that is gone.
pub fn mounts(inputs: &Inputs<'_>) -> Vec<Mount> {
    let fs = &inputs.policy.filesystem;
    let kind = |p: &Path| (inputs.kind_of)(p);
    let id = |p: &Path| (inputs.identity_of)(p);
    // A path that exists (following symlinks) but has no identity without following them
    // has a symlink where the plan has none: flipped since the policy was resolved.
    let checked_id = |path: &Path| match id(path) {
        None if kind(path) != PathKind::Missing => Some(Identity::THROUGH_SYMLINK),
        other => other,
    };
    let mount = |path: &Path, how: How| Mount {
        path: path.to_path_buf(),
        how,
        id: checked_id(path),
    };
    let roots = fs.writable_roots();
    let mut out: Vec<Mount> = roots
        .iter()
        .filter(|r| **r != Path::new("/") && kind(r) != PathKind::Missing)
        .map(|r| match nested_root(r, &roots) {
            // Bound on itself by the helper (bwrap did not: `nested_root`), before the
            // home is sealed, so that it stays writable.
            true => mount(r, How::InnerWritable),
            false => mount(r, How::Writable),
        })
        .collect();
    // The protected paths: the policy's, and what makes each repository's git run code.
    let git: Vec<PathBuf> = inputs
        .git_dirs
        .iter()
        .flat_map(|g| {
            crate::protect::repos::sensitive(&g.dir)
                .into_iter()
                .chain(g.pointer.clone())
        })
        .collect();
    // What the scan saw that is gone now was moved in between: planned with an identity
    // nothing has, so the session does not start.
    let moved: Vec<&Path> = inputs
        .git_dirs
        .iter()
        .flat_map(|g| &g.present)
        .map(PathBuf::as_path)
        .filter(|p| kind(p) == PathKind::Missing)
        .collect();
    let protected: Vec<&Path> = {
        let mut all: Vec<&Path> = fs
            .protected
            .iter()
            .map(real)
            .chain(git.iter().map(PathBuf::as_path))
            .collect();
        all.sort();
        all.dedup();
        all
    };
    let guarded: Vec<&Path> = {
        let mut all: Vec<&Path> = protected
            .iter()
            .copied()
            .chain(fs.denied.iter().map(real))
            .collect();
        all.sort();
        all.dedup();
        all
    };
    let home = real(&fs.home);
    if fs.mode == FsMode::WorkspaceWrite
        && roots.iter().any(|r| home.starts_with(r))
        && kind(home) == PathKind::Dir
    {
        let mut readonly: Vec<String> = HOME_READONLY.iter().map(|s| s.to_string()).collect();
        readonly.extend(
            guarded
                .iter()
                .filter(|g| g.parent() == Some(home))
                .filter_map(|g| g.file_name()?.to_str().map(str::to_string))
                .filter(|name| !name.starts_with('.')),
        );
        readonly.sort();
        readonly.dedup();
        let how = if inputs.names_judged {
            How::SealDots { readonly }
        } else {
            How::Seal { readonly }
        };
        out.push(mount(home, how));
    }
    // The deepest writable root holding `path` (not `path` itself).
    let root_of = |path: &Path| {
        roots
            .iter()
            .filter(|r| path.starts_with(r) && **r != path)
            .max_by_key(|r| r.components().count())
            .copied()
    };
    let mut pins: Vec<&Path> = Vec::new();
    for target in &guarded {
        let Some(root) = root_of(target) else {
            continue;
        };
        for ancestor in target.ancestors().skip(1).take_while(|a| *a != root) {
            if kind(ancestor) == PathKind::Dir
                && !roots.contains(&ancestor)
                && !guarded.contains(&ancestor)
                && !pins.contains(&ancestor)
            {
                pins.push(ancestor);
            }
        }
    }
    pins.sort();
    out.extend(pins.into_iter().map(|p| mount(p, How::Pin)));
    // A git config is written by renaming `config.lock` over it, which a mount refuses
    // (EBUSY), and `git gc` writes in `objects/info`: where the guard judges every write,
    // it checks those instead (`mediator::names::is_judged_git_path`).
    let judged_config = |p: &Path| {
        inputs.names_judged && crate::protect::names::is_judged_git_path(p, inputs.git_dirs)
    };
    out.extend(
        protected
            .iter()
            .filter(|p| root_of(p).is_some() && kind(p) != PathKind::Missing)
            .filter(|p| !judged_config(p))
            .map(|p| mount(p, How::ReadOnly)),
    );
    out.extend(moved.into_iter().map(|p| Mount {
        path: p.to_path_buf(),
        how: How::ReadOnly,
        id: Some(Identity::THROUGH_SYMLINK),
    }));
    // The spellings through a symlink of protected and denied paths inside writable roots
    // must still lead where the plan's real paths are.
    for p in fs.protected.iter().chain(&fs.denied) {
        if p.real.is_some() && root_of(&p.path).is_some() {
            out.push(Mount {
                path: p.path.clone(),
                how: How::Resolves,
                id: (inputs.followed_identity_of)(real(p)),
            });
        }
    }
    out.extend(
        covers(inputs)
            .into_iter()
            .map(|(path, how, checked)| Mount {
                id: if checked { checked_id(&path) } else { None },
                path,
                how,
            }),
    );
    out
}

/// Step 5 of `mounts`: each path with how it is covered, and whether its identity is
/// checked (the policy's paths are; the host's sockets, which come and go, are not).
fn covers(inputs: &Inputs<'_>) -> Vec<(PathBuf, How, bool)> {
    let fs = &inputs.policy.filesystem;
    let grants = || fs.writable.iter().chain(&fs.readable).map(real);
    let twins: Vec<&crate::policy::home::Kept> = inputs
        .policy
        .private_home
        .iter()
        .flat_map(|h| &h.kept)
        .filter(|k| k.mount)
        .filter(|k| {
            let want = match k.kind {
                crate::policy::home::Kind::Dir => PathKind::Dir,
                crate::policy::home::Kind::File => PathKind::File,
            };
            // Not through a symlink (the host's own arrangement, e.g. a history file kept in
            // a dotfiles repository): then the denied path's hide covers its target.
            (inputs.kind_of)(&k.path) == want
                && (inputs.identity_of)(&k.path).is_some()
                && !grants().any(|g| g != k.path && g.starts_with(&k.path))
        })
        .collect();
    let mut home: Vec<(&Path, Option<&crate::policy::home::Kept>)> = fs
        .denied
        .iter()
        .map(real)
        .filter(|d| !twins.iter().any(|k| k.path == *d))
        .map(|d| (d, None))
        .chain(twins.iter().map(|k| (k.path.as_path(), Some(*k))))
        .collect();
    home.sort_by(|a, b| a.0.cmp(b.0));
    // Root's credentials found on the host come and go like sockets: not checked.
    let home = home
        .into_iter()
        .map(|(p, t)| (p, t, !fs.found_denied.iter().any(|f| f == p)));
    let host_objects = inputs
        .sockets
        .dirs
        .iter()
        .chain(&inputs.sockets.sockets)
        .map(|p| (p.as_path(), None, false));
    let mut covered: Vec<&Path> = PRIVATE_DIRS.iter().map(Path::new).collect();
    let mut out: Vec<(PathBuf, How, bool)> = Vec::new();
    for (path, twin, checked) in home.chain(host_objects) {
        let kind = (inputs.kind_of)(path);
        if kind == PathKind::Missing
            || covered.iter().any(|d| path.starts_with(d))
            || out.iter().any(|(p, _, _)| p == path)
        {
            continue;
        }
        let dir = kind == PathKind::Dir;
        let how = match twin {
            Some(kept) => How::Twin {
                twin: kept.twin.clone(),
                dir,
                layers: kept.layers.clone().filter(|_| dir),
            },
            None => How::Hide { dir },
        };
        out.push((path.to_path_buf(), how, checked));
        if dir {
            covered.push(path);
        }
    }
    // The caches a variable points at: the host's own beneath the twin, where the host
    // has it as a directory that nothing above hides.
    let layered = inputs
        .policy
        .private_home
        .iter()
        .flat_map(|h| &h.kept)
        .filter(|k| !k.mount);
    for k in layered {
        let Some((upper, work)) = &k.layers else {
            continue;
        };
        if (inputs.kind_of)(&k.path) != PathKind::Dir
            || (inputs.identity_of)(&k.path).is_none()
            || covered.iter().any(|d| k.path.starts_with(d))
        {
            continue;
        }
        let how = How::Layered {
            lower: k.path.clone(),
            upper: upper.clone(),
            work: work.clone(),
        };
        out.push((k.twin.clone(), how, false));
    }
    out
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
