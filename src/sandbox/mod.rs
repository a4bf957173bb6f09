//! Sandbox backends. Each is a pure builder that turns the policy into what runs (an argv
//! prefix, a profile, rule tables). This file is the one place that knows, per backend, which
//! layers run where:
//! - `wrap`: the launcher in front of the helper's argv (`bwrap …`, `sandbox-exec …`);
//! - `in_process`: what the helper applies to itself before exec (Landlock, seccomp,
//!   dropped privileges, the process guard).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::host::{PathKind, Place};
use crate::policy::Policy;

#[cfg(target_os = "linux")]
pub mod bpf;
pub mod bwrap;
pub mod carve;
pub mod container;
pub mod landlock;
pub mod mediated;
mod messages;
pub mod plan;
pub mod rootas;
pub mod seatbelt;
pub mod seccomp;
pub mod select;

mod backend;
pub use backend::{Backend, Container, Engine};

#[derive(Debug, Error)]
pub enum SandboxError {
    #[error(transparent)]
    Seatbelt(#[from] seatbelt::SeatbeltError),
    #[error(transparent)]
    Landlock(#[from] landlock::LandlockError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error("{0}\nHint: cd to a directory that exists")]
    NoCwd(String),
    #[error("internal error: a container backend without its session's launch")]
    NoContainerSession,
    #[error("{} cannot be mounted into the container: a comma, quote or line end in a path would be \
        read as the engine's syntax\nHint: rename the directory, or use --backend bwrap or \
        landlock there", .0.display())]
    Unmountable(PathBuf),
    #[error("{0}")]
    RunArgs(String),
    #[error(
        "without Landlock the bwrap backend cannot enforce {what}\nHint: use Linux 6.12 or later \
        (Landlock ABI 6; `sbx-shell doctor` shows this kernel's), or drop {what} from the \
        policy"
    )]
    NeedsLandlock { what: &'static str },
    #[error(
        "Landlock alone cannot keep what would run code outside read-only in the writable trees \
        on Linux {kernel}: it needs the guard to judge every name the program makes, which needs \
        Linux 5.14\nHint: use the bwrap backend, which mounts them read-only (`sbx-shell setup` \
        enables it), or run read-only: --profile read-only"
    )]
    AloneUnjudged { kernel: String },
}

/// What the builders need beyond the policy: the session's place on the host, and what the
/// session itself brings.
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub place: &'a Place,
    /// The child's terminal, when it has one.
    pub tty: Option<&'a Path>,
    /// With a network allow-list: the loopback port where the sandbox reaches the proxy
    /// (inside bwrap, a port of its private network namespace).
    pub proxy_port: Option<u16>,
    /// The sbx-shell executable that runs now, as an fd the launcher inherits, for launchers
    /// whose view of the host may not reach its path.
    pub helper_fd: Option<bwrap::HelperFd>,
    /// The git directories in the writable trees (`repos::scan`), protected like `.git`.
    pub git_dirs: &'a [crate::protect::repos::GitDir],
    /// Landlock alone, workspace-write: the session's private temporary directory.
    pub temp_dir: Option<&'a Path>,
    /// Landlock alone: the session's own directory standing for `/dev/shm`.
    pub shm_dir: Option<&'a Path>,
    /// Under bwrap: the sandbox's name server (`netproxy::lookups`).
    pub name_server: Option<bwrap::NameServer<'a>>,
    /// Landlock alone: the directories the program's tools run from (real paths: the
    /// child's `PATH` and the program's own), whose install prefixes stay readable even
    /// inside the host's /tmp or /dev, which reads alone leave out.
    pub tools: &'a [PathBuf],
    /// Root's program stays host root: its reads are judged by the guard (`bwrap::Inputs`).
    pub root_reads: bool,
    /// A container backend: what the session gives the engine's argv.
    pub container: Option<&'a ContainerLaunch<'a>>,
}

/// What a container session brings to the engine's argv (`container::EngineInputs`).
#[derive(Debug, Clone, Copy)]
pub struct ContainerLaunch<'a> {
    pub name: &'a str,
    pub user: (u32, u32, &'a [u32]),
    pub exe: &'a Path,
    pub socket: &'a Path,
    pub cwd: &'a Path,
    pub top: &'a [PathBuf],
    pub host_image: &'a str,
    /// The sandbox's `resolv.conf`, when its name server is there.
    pub resolv_conf: Option<&'a Path>,
}

impl<'a> Context<'a> {
    /// What Landlock's ruleset takes of the session.
    pub fn session_parts(&self) -> landlock::SessionParts<'a> {
        landlock::SessionParts {
            proxy_port: self.proxy_port,
            temp_dir: self.temp_dir,
            shm_dir: self.shm_dir,
            tools: self.tools,
            names_judged: false,
            network_of_its_own: false,
        }
    }
}

impl Context<'_> {
    fn exists(&self, path: &Path) -> bool {
        self.place.kind(path) != PathKind::Missing
    }
}

/// The argv that runs `command` (the helper's argv) inside `backend`'s launcher.
pub fn wrap(
    backend: &Backend,
    policy: &Policy,
    ctx: &Context<'_>,
    command: &[OsString],
) -> Result<Vec<OsString>, SandboxError> {
    match backend {
        Backend::Seatbelt => {
            let inputs = seatbelt::SeatbeltInputs {
                policy,
                temp_dir: ctx.place.temp_dir.as_deref(),
                // Without a pty of its own the program inherits sbx-shell's terminal.
                tty: ctx.tty.or(ctx.place.stdio_terminal.as_deref()),
                terminals: &ctx.place.terminals,
                user_dirs: &ctx.place.user_dirs,
                proxy_port: ctx.proxy_port,
            };
            Ok(seatbelt::build_argv(
                &seatbelt::build_profile(&inputs)?,
                command,
            ))
        }
        Backend::Bwrap { path, .. } => with_bwrap_inputs(policy, ctx, path, |inputs| {
            bwrap::build_argv(inputs, command)
        }),
        Backend::Container(container) => {
            let launch = ctx.container.ok_or(SandboxError::NoContainerSession)?;
            let inputs = container::EngineInputs {
                container,
                policy,
                name: launch.name,
                supervisor: std::process::id(),
                user: launch.user,
                exe: launch.exe,
                socket: launch.socket,
                cwd: launch.cwd,
                tty: ctx.tty,
                top: launch.top,
                host_image: launch.host_image,
                session_dirs: &[ctx.temp_dir, ctx.shm_dir]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>(),
                root_reads: ctx.root_reads,
                resolv_conf: launch.resolv_conf,
            };
            if let Some(path) = container::unmountable(&inputs) {
                return Err(SandboxError::Unmountable(path));
            }
            container::vet_run_args(&policy.container.run_args).map_err(SandboxError::RunArgs)?;
            Ok(container::build_argv(&inputs, command))
        }
        Backend::Landlock | Backend::None => Ok(command.to_vec()),
    }
}

/// `f` of the bwrap builder's inputs for `policy` in `ctx`.
fn with_bwrap_inputs<R>(
    policy: &Policy,
    ctx: &Context<'_>,
    bwrap: &Path,
    f: impl FnOnce(&bwrap::Inputs<'_>) -> R,
) -> Result<R, SandboxError> {
    let kind_of = |p: &Path| ctx.place.kind(p);
    let identity_of = |p: &Path| ctx.place.identity(p);
    let inputs = bwrap::Inputs {
        policy,
        bwrap,
        cwd: ctx
            .place
            .cwd
            .as_deref()
            .map_err(|e| SandboxError::NoCwd(e.clone()))?,
        sockets: &crate::host::sockets::for_policy(&ctx.place.sockets, &policy.filesystem),
        helper: ctx.helper_fd,
        kind_of: &kind_of,
        identity_of: &identity_of,
        followed_identity_of: &crate::sys::files::followed_identity_of,
        git_dirs: ctx.git_dirs,
        names_judged: names_judged(policy),
        name_server: ctx.name_server,
        root_reads: ctx.root_reads,
    };
    Ok(f(&inputs))
}

/// Whether the helper's guard judges every name the program makes and every writing open
/// (`protect::names`): when the program has writable trees and the kernel can
/// (`host::judges_names`). Before 5.14 only mounts hold what would run code outside: what exists
/// of it is mounted read-only, and what does not exist yet can be made (`unjudged`).
pub fn names_judged(policy: &Policy) -> bool {
    crate::host::judges_names(&crate::host::kernel_release())
        && !crate::protect::repos::trees(policy).is_empty()
}

/// Where the guard cannot judge names (`release` before 5.14) and the program has writable
/// trees: the protected paths in them that do not exist now, which no read-only mount can
/// hold (a repository's own places — its hooks, its config — are open the same way when
/// the repository is made during the session). `None` where nothing is open.
pub fn unjudged(
    policy: &Policy,
    release: &str,
    exists: &dyn Fn(&Path) -> bool,
) -> Option<Vec<PathBuf>> {
    let trees = crate::protect::repos::trees(policy);
    if crate::host::judges_names(release) || trees.is_empty() {
        return None;
    }
    let mut missing: Vec<PathBuf> = policy
        .filesystem
        .protected
        .iter()
        .map(crate::policy::ResolvedPath::real)
        .filter(|p| trees.iter().any(|(t, _)| p.starts_with(t) && p != t))
        .filter(|p| !exists(p))
        .map(Path::to_path_buf)
        .collect();
    missing.sort();
    missing.dedup();
    Some(missing)
}

/// The home directory and the names no new entry at its top may have, when a session's
/// workspace holds it (`bwrap::How::SealDots`).
fn home_top(mounts: &[bwrap::Mount]) -> Option<(PathBuf, Vec<String>)> {
    mounts.iter().find_map(|m| match &m.how {
        bwrap::How::SealDots { readonly } => Some((m.path.clone(), readonly.clone())),
        _ => None,
    })
}

/// The protected files that exist now, by `(st_dev, st_ino)` (`protect::names::Names`):
/// the policy's protected paths that are files and the files directly in those that are
/// directories (`.vscode/settings.json`), and in every git directory of the writable trees
/// its config files, `commondir` and hooks. Read without following symlinks.
fn protected_objects(
    policy: &Policy,
    git_dirs: &[crate::protect::repos::GitDir],
) -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out: Vec<(u64, u64)> = protected_files(policy, git_dirs)
        .iter()
        .map(|(_, m)| (m.dev(), m.ino()))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The protected files that have another name besides (a hard link made earlier, by an
/// earlier session or by the host): every name is treated as protected (`Names::objects`),
/// and the start names them, since a writer through another name is refused.
pub fn linked_protected_files(
    policy: &Policy,
    git_dirs: &[crate::protect::repos::GitDir],
) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let mut out = Vec::new();
    for (path, m) in protected_files(policy, git_dirs) {
        if m.nlink() > 1 && !seen.contains(&(m.dev(), m.ino())) {
            seen.push((m.dev(), m.ino()));
            out.push(path);
        }
    }
    out
}

/// The protected files that exist now, as `protected_objects` describes them.
fn protected_files(
    policy: &Policy,
    git_dirs: &[crate::protect::repos::GitDir],
) -> Vec<(PathBuf, std::fs::Metadata)> {
    /// At most this many entries of one protected directory are recorded.
    const PER_DIR: usize = 1000;
    let entries = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|it| it.flatten().take(PER_DIR).map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let protected: Vec<PathBuf> = policy
        .filesystem
        .protected
        .iter()
        .map(|p| p.real().to_path_buf())
        .collect();
    protected
        .iter()
        .flat_map(|p| {
            let mut all = vec![p.clone()];
            if p.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                all.extend(entries(p));
            }
            all
        })
        .chain(git_dirs.iter().flat_map(|g| {
            ["config", "config.worktree", "commondir"]
                .iter()
                .map(|n| g.dir.join(n))
                .chain(entries(&g.dir.join("hooks")))
                .collect::<Vec<_>>()
        }))
        .filter_map(|p| std::fs::symlink_metadata(&p).ok().map(|m| (p, m)))
        .filter(|(_, m)| m.is_file())
        .collect()
}

/// What the helper applies to itself before exec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InProcess {
    pub drop_privileges: bool,
    pub landlock: Option<landlock::Ruleset>,
    pub seccomp: Option<seccomp::Filter>,
    /// The helper stays behind as the guard of the program's tree (`helper/guard.rs`).
    pub guard: bool,
    /// What the helper mounts first, inside bwrap's mounts (`bwrap::mounts`).
    pub mounts: Vec<bwrap::Mount>,
    /// Launcher processes between sbx-shell and the helper (bwrap: its own process; the
    /// helper's guard is the pid namespace's init). They hide the program's stops, which
    /// the guard then reports,
    /// and signals for the program go to the guard.
    pub launcher_depth: usize,
    /// Landlock alone: the calls Landlock cannot judge go to sbx-shell (`mediated`).
    pub mediate: bool,
    /// The names the helper's guard refuses to make (`protect::names`), when the program
    /// has writable trees (`repos::trees`).
    pub names: Option<crate::protect::names::Names>,
}

/// The in-process layers of `backend` for `policy`. Errors when a layer refuses the policy.
pub fn in_process(
    backend: &Backend,
    policy: &Policy,
    ctx: &Context<'_>,
) -> Result<InProcess, SandboxError> {
    let exists = |p: &Path| ctx.exists(p);
    let own_network = backend.network_of_its_own();
    let filter = |alone| -> Result<seccomp::Filter, SandboxError> {
        let filter = seccomp::build_filter(policy, alone, own_network);
        seccomp::check(&filter)?;
        Ok(filter)
    };
    let names = names_judged(policy).then(|| judged_names(policy, ctx));
    Ok(match backend {
        Backend::Seatbelt | Backend::None => InProcess::default(),
        Backend::Bwrap {
            landlock: false, ..
        } if !policy.nested_pty => {
            // bwrap's private /dev always offers /dev/ptmx; only Landlock can withhold it.
            return Err(SandboxError::NeedsLandlock {
                what: "nested_pty: false",
            });
        }
        Backend::Bwrap { landlock, path } => under_bwrap(policy, ctx, *landlock, path, names)?,
        Backend::Landlock | Backend::Container(_) => {
            if names.is_none() && !crate::protect::repos::trees(policy).is_empty() {
                return Err(SandboxError::AloneUnjudged {
                    kernel: crate::host::kernel_release(),
                });
            }
            let mut ruleset = landlock::build_ruleset(
                policy,
                landlock::Layering::Alone,
                &exists,
                &crate::host::children,
                landlock::SessionParts {
                    names_judged: names.is_some(),
                    network_of_its_own: own_network,
                    ..ctx.session_parts()
                },
            )?;
            if let Backend::Container(_) = backend {
                // The container's own /dev (the engine's, with nothing of the host's but
                // the session's terminal), listed by ttyname(3) to find that terminal at
                // /dev/console: its name in /proc leads to the host's /dev/pts.
                ruleset.rules.push(landlock::PathRule {
                    path: PathBuf::from("/dev"),
                    access: landlock::Access::List,
                });
            }
            InProcess {
                drop_privileges: true,
                seccomp: Some(filter(true)?),
                guard: true,
                mounts: Vec::new(),
                launcher_depth: 0,
                mediate: true,
                names: names.map(|n| carved_names(n, policy, &ruleset.carved, &exists)),
                landlock: Some(ruleset),
            }
        }
    })
}

/// Alone, with writable trees carved (`carve`): the names the guard judges, with the
/// home sealed as bwrap seals it and what is left out pinned (renaming a directory that
/// holds it away, or it, would carry it out of what is left out; bwrap pins with mounts).
fn carved_names(
    names: crate::protect::names::Names,
    policy: &Policy,
    carved: &[carve::Carved],
    exists: &dyn Fn(&Path) -> bool,
) -> crate::protect::names::Names {
    let mut pinned = names.pinned;
    pinned.extend(
        carved
            .iter()
            .flat_map(|c| &c.left_out)
            .filter(|l| exists(l))
            .cloned(),
    );
    pinned.sort();
    pinned.dedup();
    crate::protect::names::Names {
        home: carve::sealed_home(&policy.filesystem),
        pinned,
        ..names
    }
}

/// What the guard judges by name (`protect::names::Names`), from the policy and the
/// repositories found.
fn judged_names(policy: &Policy, ctx: &Context<'_>) -> crate::protect::names::Names {
    // The policy's, and where a repository's `hooks` or config leads when it is a
    // symlink (git follows it there: a missing target may not be made, an existing one
    // not written). `objects/info` reached through a symlinked `objects` is data.
    let protected = || {
        let links = ctx.git_dirs.iter().flat_map(|g| &g.links);
        policy
            .filesystem
            .protected
            .iter()
            .map(|p| p.real().to_path_buf())
            .chain(
                links
                    .filter(|(link, _)| link.symlink_metadata().is_ok_and(|m| m.is_symlink()))
                    .map(|(_, target)| target.clone()),
            )
    };
    crate::protect::names::Names {
        protected: protected().collect(),
        git_config_allow: policy.git_config_allow.iter().cloned().collect(),
        objects: protected_objects(policy, ctx.git_dirs),
        pinned: protected()
            .filter(|p| p.symlink_metadata().is_ok())
            .chain(ctx.git_dirs.iter().map(|g| g.dir.clone()))
            .collect(),
        home: None,
        writable: policy
            .filesystem
            .writable_roots()
            .into_iter()
            .map(Path::to_path_buf)
            .collect(),
    }
}

/// The layers inside bwrap: the mount plan, Landlock layered under it (when the kernel
/// has it), the seccomp filter, the guard.
fn under_bwrap(
    policy: &Policy,
    ctx: &Context<'_>,
    with_landlock: bool,
    path: &Path,
    names: Option<crate::protect::names::Names>,
) -> Result<InProcess, SandboxError> {
    let exists = |p: &Path| ctx.exists(p);
    let mounts = with_bwrap_inputs(policy, ctx, path, bwrap::mounts)?;
    let home = home_top(&mounts);
    let landlock = with_landlock
        .then(|| {
            landlock::build_ruleset(
                policy,
                landlock::Layering::UnderBwrap,
                &exists,
                &crate::host::children,
                ctx.session_parts(),
            )
        })
        .transpose()?
        .map(|mut ruleset| {
            landlock::allow_twins(&mut ruleset, &mounts);
            ruleset
        });
    let seccomp = seccomp::build_filter(policy, false, true);
    seccomp::check(&seccomp)?;
    Ok(InProcess {
        mounts,
        drop_privileges: true,
        landlock,
        seccomp: Some(seccomp),
        guard: true,
        launcher_depth: 1,
        mediate: false,
        names: names.map(|n| crate::protect::names::Names { home, ..n }),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn before_5_14_what_is_open_is_the_missing_protected_paths_in_the_writable_trees() {
        use crate::policy::test_support::policy_with;
        let p = policy_with("/srv/proj", "{}");
        let protected: Vec<std::path::PathBuf> = p
            .filesystem
            .protected
            .iter()
            .map(|r| r.real().to_path_buf())
            .filter(|r| r.starts_with("/srv/proj"))
            .collect();
        assert!(!protected.is_empty(), "the workspace holds protected paths");
        let envrc = std::path::Path::new("/srv/proj/.mcp.json");
        assert!(protected.iter().any(|p| p == envrc), "{protected:?}");
        let only_envrc_exists = |p: &std::path::Path| p == envrc;
        assert_eq!(super::unjudged(&p, "6.1.0", &only_envrc_exists), None);
        let open = super::unjudged(&p, "5.10.0-28-amd64", &only_envrc_exists).unwrap();
        assert!(
            !open.iter().any(|p| p == envrc),
            "it exists: mounted read-only"
        );
        assert_eq!(open.len(), protected.len() - 1, "{open:?}");
        // Nothing writable, nothing open.
        let read_only = policy_with("/srv/proj", r#"{"filesystem": {"mode": "read-only"}}"#);
        assert_eq!(super::unjudged(&read_only, "5.10.0", &|_| false), None);
    }
}
