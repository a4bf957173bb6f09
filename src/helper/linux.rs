//! The helper's Linux parts (`helper::os` on Linux): the process guard, the in-process
//! layers (capabilities, Landlock, seccomp), signal dispositions through the raw syscall,
//! and close_range.

#[path = "confine.rs"]
mod confine;
#[path = "guard.rs"]
mod guard;
#[path = "mounts.rs"]
mod mounts;
#[path = "netsockets.rs"]
mod netsockets;

use super::parts::MountError;
use std::io;

pub use confine::{restrict_thread_network, ConfineError};

use super::spec::HelperSpec;

/// No cap on the open-file limit beyond the hard limit.
pub const NOFILE_CAP: Option<u64> = None;

/// Guard mode: `Some(code)` in the guard once the program's tree is gone, `None` in the
/// child that goes on to exec the program.
pub fn split_off_guard(spec: &HelperSpec) -> io::Result<super::parts::Split> {
    use crate::helper::mediator::create;
    use std::os::fd::OwnedFd;
    // The guard makes the names the program asks for (`mediator::create`): a channel for
    // the listener, which the program's side installs in `confine`.
    let listened = spec.names.is_some() || spec.mediated.is_some() || spec.root_reads.is_some();
    let channel: Option<(OwnedFd, OwnedFd)> = match listened {
        true => Some(nix::sys::socket::socketpair(
            nix::sys::socket::AddressFamily::Unix,
            nix::sys::socket::SockType::Stream,
            None,
            nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        )?),
        false => None,
    };
    let (ours, theirs) = match channel {
        Some((ours, theirs)) => (Some(ours), Some(theirs)),
        None => (None, None),
    };
    // What the guard judges: the names, Landlock alone's calls, root's reads.
    let (names, mediated) = (spec.names.clone(), spec.mediated.clone());
    let reads = spec.root_reads.clone();
    // Where the program's rules let it make names and open files (and so the guard, which
    // acts for it): its ruleset and its terminal's names, as `confine` applies them.
    let rules = spec.landlock.as_ref().map(|r| {
        let mut rules = r.rules.clone();
        rules.extend(confine::own_terminal_rules());
        rules
    });
    let carved = spec.landlock.as_ref().map_or(&[][..], |r| &r.carved[..]);
    let reach = crate::helper::mediator::Reach::new(rules.as_deref(), carved);
    let net =
        spec.landlock
            .as_ref()
            .map_or(Default::default(), |r| crate::helper::mediator::NetRules {
                deny_tcp: r.deny_tcp,
                connect_port: r.connect_port,
                loopback_port: None,
                min_abi: r.min_abi,
                own_network: spec.proxy_listen.is_some(),
            });
    // The pipe the guard reports its refusals on (`mediator::report`), inherited for it
    // alone: the program's side closes it with every other descriptor before exec.
    let reports = spec
        .refusals_fd
        .filter(|_| listened)
        .map(crate::sys::files::take_inherited)
        .transpose()?;
    let sockets = spec.proxy_listen.as_ref().and_then(|l| l.sockets_fd);
    let (root_reads, map_root) = (spec.root_reads.is_some(), spec.shown_as.is_some());
    let on_guard = move || -> io::Result<()> {
        // Only the program's side maps ids (`show_as`): the guard, acting for it, drops it.
        if map_root {
            confine_privileges(root_reads, false).map_err(io::Error::other)?;
        }
        if let Some(fd) = sockets {
            // sbx-shell passed this channel for the guard's sockets (the program's side
            // closes it with every other before exec).
            let served = crate::sys::files::take_inherited(fd).and_then(netsockets::serve);
            if let Err(e) = served {
                eprintln!("sbx-shell: the guard cannot make sockets for the published ports: {e}");
            }
        }
        let Some(channel) = ours else {
            return Ok(());
        };
        let started = create::start(channel, names, mediated, reads, reach, net, reports);
        if let Err(e) = started {
            eprintln!("sbx-shell: the guard cannot answer the program's mediated calls: {e}");
        }
        Ok(())
    };
    Ok(
        match guard::split(spec.stop_notify_fd, spec.lifeline_fd, on_guard)? {
            Some(code) => super::parts::Split::Guard(code),
            None => super::parts::Split::Program { names: theirs },
        },
    )
}

/// Make the mounts of the plan (`sandbox::bwrap::mounts`), in order, each through a
/// descriptor of the path opened without following a symlink (`mounts.rs`), then move to
/// the working directory again (it was entered before, under what is now covered).
///
/// A planned path that is not what sbx-shell saw (another object, a symlink, gone) ends
/// the helper (`MountError::Changed`): something moved it while the sandbox started.
/// Exceptions: what was missing when planned and is still missing has nothing to cover;
/// a host object without a recorded identity (a socket, a root-only file found on the
/// host) that is gone, or is a symlink now, is skipped; a twin that is not
/// what it should be (a symlink the program left in its private home) gives way to a
/// hide of the host's path, never to the host's path itself.
///
/// In a mount namespace of the helper's own: for an unprivileged user, bwrap puts the
/// sandbox in a second user namespace that does not own bwrap's mount namespace, so mounts
/// there fail; a new one is owned by ours (its mounts copied, locked, and mounted over).
pub fn apply_mounts(
    plan: &[crate::sandbox::bwrap::Mount],
    root_as: Option<&RootAsTaken>,
) -> Result<(), MountError> {
    use crate::sandbox::bwrap::How;
    use mounts::Seen;
    use std::os::fd::AsFd;
    confine::private_mount_namespace().map_err(|source| MountError::Failed {
        path: "/ (a mount namespace of its own)".into(),
        source,
    })?;
    for m in plan {
        if m.how == How::Resolves {
            if crate::sys::files::followed_identity_of(&m.path) != m.id {
                return Err(changed(m, "it leads elsewhere now"));
            }
            continue;
        }
        let (fd, dir) = match mounts::find(&m.path).map_err(failed(m))? {
            Seen::Node(fd, id, dir) => {
                if m.id.is_some_and(|want| want != id) {
                    return Err(changed(m, "another file or directory is there now"));
                }
                (fd, dir)
            }
            Seen::Missing | Seen::Symlink if m.id.is_none() => continue,
            Seen::Missing => return Err(changed(m, "it is gone")),
            Seen::Symlink => return Err(changed(m, "it is a symlink now")),
        };
        apply_mount(plan, m, fd.as_fd(), dir, root_as.map(RootAsTaken::layers))?;
    }
    let cwd = std::env::current_dir().map_err(|source| MountError::Failed {
        path: "the working directory".into(),
        source,
    })?;
    std::env::set_current_dir(&cwd).map_err(|source| MountError::Failed {
        path: cwd.display().to_string(),
        source,
    })
}

/// One mount of the plan, on the object the helper found at its path (`fd`, a directory
/// when `dir`).
fn apply_mount(
    plan: &[crate::sandbox::bwrap::Mount],
    m: &crate::sandbox::bwrap::Mount,
    fd: std::os::fd::BorrowedFd<'_>,
    dir: bool,
    layers_as: Option<mounts::LayersAs<'_>>,
) -> Result<(), MountError> {
    use crate::sandbox::bwrap::{stays_writable, How};
    use mounts::Seen;
    use std::os::fd::AsFd;
    match &m.how {
        How::Writable => {
            let (root, writable) = mounts::mount_state(fd).map_err(failed(m))?;
            if !(root && writable) {
                return Err(changed(m, "it is not the writable mount it was"));
            }
        }
        How::Seal { readonly } => {
            mounts::seal(&m.path, fd, &|name| stays_writable(name, readonly)).map_err(failed(m))?;
        }
        How::SealDots { readonly } => {
            let writable: Vec<&std::path::Path> = plan
                .iter()
                .filter(|w| matches!(w.how, How::Writable | How::InnerWritable))
                .map(|w| w.path.as_path())
                .collect();
            mounts::seal_entries(&m.path, fd, &|name| {
                !stays_writable(name, readonly) && !writable.contains(&m.path.join(name).as_path())
            })
            .map_err(failed(m))?;
        }
        How::Pin | How::InnerWritable => mounts::pin(&m.path, fd).map_err(failed(m))?,
        How::ReadOnly => mounts::read_only(&m.path, fd).map_err(failed(m))?,
        How::Resolves => {}
        How::Hide { .. } => mounts::hide(&m.path, fd, dir).map_err(failed(m))?,
        How::View { copy } => match mounts::bind_view(copy, dir, &m.path, fd) {
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                mounts::hide(&m.path, fd, dir).map_err(failed(m))?;
            }
            other => other.map_err(failed(m))?,
        },
        How::Layered { lower, upper, work } => {
            // A cache's twin: left as it is when the host's cache or the layers are
            // not what they were (a symlink) or the kernel refuses the overlay.
            if let Ok(Seen::Node(lower, _, true)) = mounts::find(lower) {
                let _ = mounts::overlay(lower.as_fd(), upper, work, fd, layers_as);
            }
        }
        How::Twin {
            twin,
            dir: want,
            layers,
        } => {
            if *want != dir {
                return Err(match dir {
                    true => changed(m, "a directory is there now"),
                    false => changed(m, "a file is there now"),
                });
            }
            // The host's directory beneath the private layers; the twin when the
            // kernel refuses (no overlay in a user namespace before Linux 5.11).
            if let Some((upper, work)) = layers {
                if mounts::overlay(fd, upper, work, fd, layers_as).is_ok() {
                    return Ok(());
                }
            }
            match mounts::bind_twin(twin, dir, &m.path, fd) {
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    mounts::hide(&m.path, fd, dir).map_err(failed(m))?;
                }
                other => other.map_err(failed(m))?,
            }
        }
    }
    Ok(())
}

fn failed(m: &crate::sandbox::bwrap::Mount) -> impl Fn(io::Error) -> MountError + '_ {
    move |source| MountError::Failed {
        path: m.path.display().to_string(),
        source,
    }
}

/// Inside a container: each writable path the engine mounted is the directory sbx-shell
/// saw there (`HelperSpec::mounted`) — the engine resolved the path itself, later, and a
/// path switched for a symlink in between would have shown another tree. A mount, once
/// made, holds its object: checked now, it stays so.
pub fn check_mounted(
    mounted: &[(std::path::PathBuf, crate::sys::files::Identity)],
) -> Result<(), MountError> {
    for (path, id) in mounted {
        let now = match crate::sys::files::identity_of(path) {
            Some(now) if now == *id => continue,
            Some(_) => "another directory is there now",
            None => "it is a symlink or gone now",
        };
        return Err(MountError::Changed {
            path: path.display().to_string(),
            now,
        });
    }
    Ok(())
}

/// Inside a container: this process becomes `user` (`HelperSpec::shown_as`), by the ids
/// the container's own files give its names (`container::ids_of`).
pub fn show_as(user: &crate::policy::ContainerUser) -> Result<(), String> {
    let read = |path| std::fs::read_to_string(path).unwrap_or_default();
    let (uid, gid) =
        crate::policy::container::ids_of(user, &read("/etc/passwd"), &read("/etc/group"))?;
    crate::sys::userns::show_as(uid, gid).map_err(|e| no_user_namespace(uid, gid, e))
}

/// A user namespace for the container's user cannot be made.
fn no_user_namespace(uid: u32, gid: u32, e: impl std::fmt::Display) -> String {
    crate::sys::say::hinted(
        format_args!("a user namespace as {uid}:{gid}: {e}"),
        "the kernel or the engine refuses user namespaces here (`sysctl \
         user.max_user_namespaces`, the engine's seccomp profile); leave out \"user\" to run as \
         yourself",
    )
}

fn changed(m: &crate::sandbox::bwrap::Mount, now: &'static str) -> MountError {
    MountError::Changed {
        path: m.path.display().to_string(),
        now,
    }
}

/// Drop every capability and set no_new_privs (again later: it is idempotent) — but the
/// guard's CAP_SETUID and CAP_SETGID when it judges root's reads (`root_reads`), and
/// CAP_SETPCAP, with which the program's side drops them; and with `map_root`, CAP_SETFCAP,
/// with which the program's side maps root's own id into its user namespace (`show_as`),
/// and which the guard drops as it starts (`split_off_guard`).
pub fn confine_privileges(root_reads: bool, map_root: bool) -> Result<(), ConfineError> {
    use crate::sys::capabilities::{SETFCAP, SETGID, SETPCAP, SETUID};
    let mut keep = match root_reads {
        true => (1 << SETUID) | (1 << SETGID) | (1 << SETPCAP),
        false => 0,
    };
    if map_root {
        keep |= (1 << SETFCAP) | (1 << SETPCAP);
    }
    confine::apply_drop_privileges_but(keep)
}

/// A network namespace of the helper's own, for the name server (`confine`).
pub fn private_network() -> io::Result<()> {
    confine::private_network_namespace()
}

/// Capabilities and no_new_privs, then Landlock, then the mediated filter (the calls that
/// make names, and with Landlock alone those it cannot judge; its listener to the guard
/// over `names`), then seccomp, as the spec asks.
pub fn confine(spec: &HelperSpec, names: Option<std::os::fd::OwnedFd>) -> Result<(), ConfineError> {
    if spec.drop_privileges {
        confine::apply_drop_privileges()?;
    }
    if let Some(ruleset) = &spec.landlock {
        confine::apply_landlock(ruleset)?;
    }
    match names {
        Some(channel) => confine::apply_mediation(spec, channel)?,
        // Without the guard nobody would answer: never run without what was asked.
        None if spec.names.is_some() || spec.mediated.is_some() => {
            return Err(ConfineError::Mediation(io::Error::other(
                "the mediated calls need the guard",
            )))
        }
        None => {}
    }
    if let Some(filter) = &spec.seccomp {
        confine::apply_seccomp(filter)?;
    }
    Ok(())
}

/// Root's program as another host id (`HelperSpec::root_as`): the user namespace it
/// enters, that id, and the paths id-mapped for it.
pub struct RootAsTaken {
    userns: std::os::fd::OwnedFd,
    id: u32,
    tops: Vec<std::path::PathBuf>,
    scaffolds: Vec<crate::sandbox::rootas::Scaffold>,
}

impl RootAsTaken {
    /// What an overlay's lower layer is id-mapped through, and whom its upper belongs to.
    fn layers(&self) -> mounts::LayersAs<'_> {
        use std::os::fd::AsFd;
        mounts::LayersAs {
            userns: self.userns.as_fd(),
            id: self.id,
        }
    }
}

/// The namespace sbx-shell handed over, taken once.
pub fn take_root_as(spec: &HelperSpec) -> io::Result<Option<RootAsTaken>> {
    let Some(r) = spec.root_as.as_ref() else {
        return Ok(None);
    };
    Ok(Some(RootAsTaken {
        userns: crate::sys::files::take_inherited(r.userns_fd)?,
        id: r.id,
        tops: r.idmapped.clone(),
        scaffolds: r.scaffolds.clone(),
    }))
}

/// Become root's program as another host id: the scaffolds built, each mount at or below
/// the trees copied and id-mapped (where its file system allows; CAP_SYS_ADMIN, so before
/// the capabilities go), then the namespace entered over those copies, and the working
/// directory entered again under what now covers it.
pub fn become_root_as(r: RootAsTaken) -> io::Result<()> {
    use std::os::fd::AsFd;
    for s in &r.scaffolds {
        mounts::scaffold(s)?;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let trees = crate::sys::userns::mounts_under(&mountinfo, &r.tops)
        .into_iter()
        .map(|p| {
            Ok((
                crate::sys::userns::idmapped_clone(&p, r.userns.as_fd())?.0,
                p,
            ))
        })
        .collect::<io::Result<Vec<_>>>()?;
    crate::sys::userns::enter(r.userns.as_fd(), &trees)?;
    let cwd = std::env::current_dir()?;
    std::env::set_current_dir(cwd)
}

/// Put a new random token in this process's environment (`protect::gitstate::SESSION_VARIABLE`),
/// which the guard and the program inherit. The helper is single-threaded here.
pub fn set_session_token() {
    let token = crate::sys::files::random_token();
    std::env::set_var(crate::protect::gitstate::SESSION_VARIABLE, token);
}
