//! The mount plan: what bwrap and the helper mount, in order, each checked against what
//! sbx-shell saw (`mounts`). Pure; bwrap's argv takes its bwrap part, the helper does the
//! rest, Landlock alone reads it.

use crate::host::PathKind;
use crate::policy::config::FsMode;
use crate::policy::{Policy, ResolvedPath};
use crate::sys::files::Identity;
use serde::{Deserialize, Serialize};
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

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
    /// Root's program stays host root: the helper's guard judges its reads as another id
    /// (`mediator::rootreads`), which needs CAP_SETUID and CAP_SETGID.
    pub root_reads: bool,
}

/// An inherited fd of the sbx-shell executable that runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperFd {
    /// Bound read-only (bwrap binds the path the fd's link names).
    Bind(RawFd),
    /// Copied (readable fd): the file's path was deleted, by an upgrade in flight, so there
    /// is no path to bind.
    Copy(RawFd),
}

/// What the sandbox's name server needs of bwrap: CAP_NET_BIND_SERVICE for the helper,
/// and `resolv.conf` pointing there (a readable fd of `lookups::RESOLV_CONF`, put over the
/// host's file: its real path, `/etc/resolv.conf` being a symlink on many hosts). With no
/// `resolv.conf` on the host, resolvers ask 127.0.0.1 already.
#[derive(Clone, Copy)]
pub struct NameServer<'a> {
    pub resolv_conf: Option<(RawFd, &'a Path)>,
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
    /// name made (`protect::names::Names::home`), which refuses new dot names and
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
    /// A directory shown as sbx-shell's copy of what of it the program may read (the ssh
    /// client's `known_hosts` and `config` in a denied `~/.ssh`), bound read-only over it;
    /// hidden instead when the copy is missing or a symlink.
    View { copy: PathBuf },
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
    /// A cache's twin that a variable points at (`policy::home::KeptEntry::layered`): the
    /// host's directory `lower` beneath it read-only, an overlay with the private home's
    /// `upper` and `work`; left as it is when the kernel refuses the overlay.
    Layered {
        lower: PathBuf,
        upper: PathBuf,
        work: PathBuf,
    },
}

/// Entries of the home directory that run code outside although their names have no dot.
pub const HOME_READONLY: &[&str] = &["bin"];

/// Directories the sandbox gets fresh (private `/dev`, `/proc`, `/tmp`): nothing of the
/// host's shows there, so nothing there needs hiding.
pub(super) const PRIVATE_DIRS: &[&str] = &["/dev", "/proc", "/tmp"];

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
/// A kept path that is mounted (`policy::home::KeptEntry::mount`) gets its twin only where
/// the host has it, as the same kind (file or directory); one with a grant inside it stays
/// the host's (the grant says the program should see it); the tools' variables cover the
/// rest (`policy::home::variables`).
///
/// The helper does it, not bwrap: bwrap resolves a destination by name when it mounts (a
/// symlink flipped meanwhile moves the mount elsewhere) and ends the session when one
/// vanished since it was looked at (a container engine restarting); the helper opens each
/// path without following symlinks, checks what it found, and skips a socket that is gone.
pub fn mounts(inputs: &Inputs<'_>) -> Vec<Mount> {
    let plan = Planner {
        inputs,
        roots: inputs.policy.filesystem.writable_roots(),
    };
    let git = plan.git_paths();
    let paths = plan.protected_paths(&git);
    let mut out = plan.writable();
    out.extend(plan.home_seal(&paths.guarded));
    out.extend(plan.pins(&paths.guarded));
    out.extend(plan.read_only(&paths));
    out.extend(plan.resolves());
    out.extend(
        covers(inputs)
            .into_iter()
            .map(|(path, how, checked)| Mount {
                id: if checked {
                    plan.checked_id(&path)
                } else {
                    None
                },
                path,
                how,
            }),
    );
    out.extend(shown_files(inputs));
    out
}

/// The files shown as sbx-shell's copy (`Filesystem::views`: the system's bundle of
/// trusted roots with the session's authority); a directory's view is a denied
/// directory's, in `covers`.
fn shown_files(inputs: &Inputs<'_>) -> Vec<Mount> {
    inputs
        .policy
        .filesystem
        .views
        .iter()
        .filter(|(path, _)| (inputs.kind_of)(path) == PathKind::File)
        .map(|(path, copy)| Mount {
            path: path.clone(),
            how: How::View { copy: copy.clone() },
            id: None,
        })
        .collect()
}

/// What `mounts` works from: its inputs and the writable roots.
struct Planner<'a> {
    inputs: &'a Inputs<'a>,
    roots: Vec<&'a Path>,
}

/// The protected paths (the policy's, and what makes each repository's git run code),
/// those and the denied paths (`guarded`), and what the scan saw that is gone now.
struct Protected<'a> {
    protected: Vec<&'a Path>,
    guarded: Vec<&'a Path>,
    moved: Vec<&'a Path>,
}

impl<'a> Planner<'a> {
    fn kind(&self, p: &Path) -> PathKind {
        (self.inputs.kind_of)(p)
    }

    /// A path's identity; one that exists (following symlinks) but has none without
    /// following them has a symlink where the plan has none: flipped since the policy was
    /// resolved.
    fn checked_id(&self, path: &Path) -> Option<Identity> {
        match (self.inputs.identity_of)(path) {
            None if self.kind(path) != PathKind::Missing => Some(Identity::THROUGH_SYMLINK),
            other => other,
        }
    }

    fn mount(&self, path: &Path, how: How) -> Mount {
        Mount {
            path: path.to_path_buf(),
            how,
            id: self.checked_id(path),
        }
    }

    /// The deepest writable root holding `path` (not `path` itself).
    fn root_of(&self, path: &Path) -> Option<&'a Path> {
        self.roots
            .iter()
            .filter(|r| path.starts_with(r) && **r != path)
            .max_by_key(|r| r.components().count())
            .copied()
    }

    /// Step 1: each writable root bwrap bound, checked; one inside another bound on itself
    /// by the helper (bwrap did not: `nested_root`), before the home is sealed.
    fn writable(&self) -> Vec<Mount> {
        self.roots
            .iter()
            .filter(|r| **r != Path::new("/") && self.kind(r) != PathKind::Missing)
            .map(|r| match nested_root(r, &self.roots) {
                true => self.mount(r, How::InnerWritable),
                false => self.mount(r, How::Writable),
            })
            .collect()
    }

    /// What makes each repository's git run code: its sensitive paths and its pointer.
    fn git_paths(&self) -> Vec<PathBuf> {
        self.inputs
            .git_dirs
            .iter()
            .flat_map(|g| {
                // A path the guard judges is not mounted (`read_only`); reached through a
                // symlink (`objects` leading to a shared store: `objects/info`), it is
                // data where it leads, and nothing above it is pinned either.
                let judged = |p: &Path| {
                    self.inputs.names_judged
                        && crate::protect::names::is_judged_git_path(p, self.inputs.git_dirs)
                };
                crate::protect::repos::sensitive(&g.dir)
                    .into_iter()
                    .zip(g.protected())
                    .filter_map(move |(path, real)| match judged(&path) {
                        true if path != real => None,
                        true => Some(path),
                        false => Some(real),
                    })
                    .chain(g.pointer.clone())
            })
            .collect()
    }

    fn protected_paths<'g>(&self, git: &'g [PathBuf]) -> Protected<'g>
    where
        'a: 'g,
    {
        let inputs = self.inputs;
        let fs = &inputs.policy.filesystem;
        // What the scan saw that is gone now was moved in between: planned with an
        // identity nothing has, so the session does not start.
        // (A symlink that leads nowhere is not gone: `links`, checked by `resolves`.)
        let moved: Vec<&Path> = inputs
            .git_dirs
            .iter()
            .flat_map(|g| {
                g.present
                    .iter()
                    .filter(|p| !g.links.iter().any(|(link, _)| link == *p))
            })
            .map(PathBuf::as_path)
            .filter(|p| self.kind(p) == PathKind::Missing)
            .collect();
        let mut protected: Vec<&Path> = fs
            .protected
            .iter()
            .map(ResolvedPath::real)
            .chain(git.iter().map(PathBuf::as_path))
            .collect();
        protected.sort();
        protected.dedup();
        let mut guarded: Vec<&Path> = protected
            .iter()
            .copied()
            .chain(fs.denied.iter().map(ResolvedPath::real))
            .collect();
        guarded.sort();
        guarded.dedup();
        Protected {
            protected,
            guarded,
            moved,
        }
    }

    /// Step 2: the home, when a writable root holds it in workspace-write: its dot entries
    /// and `HOME_READONLY` (and the guarded names at its top) stay read-only.
    fn home_seal(&self, guarded: &[&Path]) -> Option<Mount> {
        let fs = &self.inputs.policy.filesystem;
        let home = fs.home.real();
        let sealed = fs.mode == FsMode::WorkspaceWrite
            && self.roots.iter().any(|r| home.starts_with(r))
            && self.kind(home) == PathKind::Dir;
        if !sealed {
            return None;
        }
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
        let how = if self.inputs.names_judged {
            How::SealDots { readonly }
        } else {
            How::Seal { readonly }
        };
        Some(self.mount(home, how))
    }

    /// Step 3: every directory between a writable root and a guarded path, pinned.
    fn pins(&self, guarded: &[&Path]) -> Vec<Mount> {
        let mut pins: Vec<&Path> = Vec::new();
        for target in guarded {
            let Some(root) = self.root_of(target) else {
                continue;
            };
            for ancestor in target.ancestors().skip(1).take_while(|a| *a != root) {
                if self.kind(ancestor) == PathKind::Dir
                    && !self.roots.contains(&ancestor)
                    && !guarded.contains(&ancestor)
                    && !pins.contains(&ancestor)
                {
                    pins.push(ancestor);
                }
            }
        }
        pins.sort();
        pins.into_iter().map(|p| self.mount(p, How::Pin)).collect()
    }

    /// Step 4: the protected paths inside writable roots, read-only — but a git config
    /// where the guard judges every write (it is written by renaming `config.lock` over
    /// it, which a mount refuses, and `git gc` writes in `objects/info`:
    /// `protect::names::is_judged_git_path`); and what moved since the scan.
    fn read_only(&self, paths: &Protected<'_>) -> Vec<Mount> {
        let inputs = self.inputs;
        let judged = |p: &Path| {
            inputs.names_judged && crate::protect::names::is_judged_git_path(p, inputs.git_dirs)
        };
        let mut out: Vec<Mount> = paths
            .protected
            .iter()
            .copied()
            .filter(|p| self.root_of(p).is_some() && self.kind(p) != PathKind::Missing)
            .filter(|p| !judged(p))
            .map(|p| self.mount(p, How::ReadOnly))
            .collect();
        out.extend(paths.moved.iter().map(|p| Mount {
            path: p.to_path_buf(),
            how: How::ReadOnly,
            id: Some(Identity::THROUGH_SYMLINK),
        }));
        out
    }

    /// The spellings through a symlink of protected and denied paths inside writable roots
    /// (and a repository's symlinked `hooks` or config) must still lead where the plan's
    /// real paths are.
    fn resolves(&self) -> Vec<Mount> {
        let fs = &self.inputs.policy.filesystem;
        let links = self.inputs.git_dirs.iter().flat_map(|g| &g.links);
        fs.protected
            .iter()
            .chain(&fs.denied)
            .filter(|p| p.real.is_some())
            .map(|p| (p.path.as_path(), p.real()))
            .chain(links.map(|(link, target)| (link.as_path(), target.as_path())))
            .filter(|(path, _)| self.root_of(path).is_some())
            .map(|(path, real)| Mount {
                path: path.to_path_buf(),
                how: How::Resolves,
                id: (self.inputs.followed_identity_of)(real),
            })
            .collect()
    }
}

/// Step 5 of `mounts`: each path with how it is covered, and whether its identity is
/// checked (the policy's paths are; the host's sockets, which come and go, are not).
fn covers(inputs: &Inputs<'_>) -> Vec<(PathBuf, How, bool)> {
    let fs = &inputs.policy.filesystem;
    let grants = || {
        fs.writable
            .iter()
            .chain(&fs.readable)
            .map(ResolvedPath::real)
    };
    let twins: Vec<&crate::policy::home::Kept> = inputs
        .policy
        .private_home
        .iter()
        .flat_map(|h| &h.kept)
        .filter(|k| k.mount)
        .filter(|k| {
            let want = match k.kind {
                crate::policy::home::KeptKind::Dir => PathKind::Dir,
                crate::policy::home::KeptKind::File => PathKind::File,
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
        .map(ResolvedPath::real)
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
            None => match fs.views.iter().find(|(p, _)| p == path) {
                Some((_, copy)) if dir => How::View { copy: copy.clone() },
                _ => How::Hide { dir },
            },
        };
        out.push((path.to_path_buf(), how, checked));
        if dir {
            covered.push(path);
        }
    }
    out.extend(layered_caches(inputs, &covered));
    out
}

/// The caches a variable points at: the host's own beneath the twin, where the host has it
/// as a directory that nothing above hides (`covered`).
fn layered_caches(inputs: &Inputs<'_>, covered: &[&Path]) -> Vec<(PathBuf, How, bool)> {
    let mut out = Vec::new();
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
