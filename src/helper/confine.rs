//! The in-process sandbox layers (Linux), applied by the helper just before exec, in this
//! order: capabilities dropped and no_new_privs set; the Landlock ruleset; the seccomp filter
//! last (so the calls the steps before it make are not filtered).
//!
//! Each applier either applies its layer in full or fails: a ruleset the kernel would only
//! partly enforce is an error, never a weaker sandbox.

use std::io;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use thiserror::Error;

use crate::sandbox::landlock::{Access as Rights, Ruleset};
use crate::sandbox::seccomp::{self, Filter, SeccompError};

/// Why a layer could not be applied: one variant per failing step, the source kept.
#[derive(Debug, Error)]
pub enum ConfineError {
    #[error("cannot drop capability {cap} from the bounding set: {source}")]
    BoundingSet {
        cap: libc::c_ulong,
        #[source]
        source: io::Error,
    },
    #[error("capget: {0}")]
    ReadCapabilities(#[source] io::Error),
    #[error("cannot drop capabilities: {0}")]
    DropCapabilities(#[source] io::Error),
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(#[source] io::Error),
    #[error("Landlock: {0}\nHint: `sbx-shell doctor` shows what this kernel supports; Linux 6.12 or later is needed")]
    Landlock(#[source] landlock::RulesetError),
    #[error("Landlock: cannot open {path}: {source}")]
    LandlockPath {
        path: PathBuf,
        #[source]
        source: landlock::PathFdError,
    },
    #[error(
        "Landlock: the ruleset is only {0:?} on this kernel\nHint: `sbx-shell doctor` shows the \
        Landlock ABI; use the bwrap backend or a newer kernel"
    )]
    PartlyEnforced(RulesetStatus),
    #[error(
        "seccomp: cannot hand the mediated calls to the guard: {0}\nHint: `sbx-shell doctor` \
        checks the kernel (seccomp user notification, Linux 5.14)"
    )]
    Mediation(#[source] io::Error),
    #[error("{0}")]
    Guard(#[source] io::Error),
    #[error(transparent)]
    SeccompCompile(#[from] SeccompError),
    #[error("seccomp: {0}")]
    SeccompApply(#[source] io::Error),
}

/// A new mount namespace for this process (and what it starts), with no propagation out.
pub fn private_mount_namespace() -> io::Result<()> {
    use nix::mount::{mount, MsFlags};
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )?;
    Ok(())
}

/// A network namespace of the helper's own, its loopback up: for an unprivileged user,
/// bwrap's namespace is owned by its first user namespace, not by the sandbox's, so the
/// helper could not open the name server's port 53 there (CAP_NET_BIND_SERVICE counts in
/// the owner's). The new one, like bwrap's, has nothing but the loopback.
pub fn private_network_namespace() -> io::Result<()> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
    crate::sys::socket::loopback_up()
}

/// Every capability gone for good (bounding set, ambient, effective/permitted/inheritable),
/// then no_new_privs, so neither root nor a set-uid program gets privileges back.
pub fn apply_drop_privileges() -> Result<(), ConfineError> {
    apply_drop_privileges_but(0)
}

/// The same, but for the capabilities in `keep` (bit N: capability N), which stay in
/// every set but the inheritable and ambient: what the guard needs beyond the mounts
/// (`HelperSpec::root_reads`); the program's side drops them with the rest.
pub fn apply_drop_privileges_but(keep: u64) -> Result<(), ConfineError> {
    let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<libc::c_ulong>().ok())
        .unwrap_or(63);
    if has_capabilities()? {
        for cap in (0..=last_cap).filter(|c| keep & (1 << c) == 0) {
            // SAFETY: PR_CAPBSET_DROP takes an integer and touches no memory of ours.
            if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == -1 {
                let source = io::Error::last_os_error();
                if source.raw_os_error() != Some(libc::EINVAL) {
                    return Err(ConfineError::BoundingSet { cap, source });
                }
            }
        }
        // SAFETY: integer arguments only.
        unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            )
        };
        set_capabilities_only(keep)?;
    }
    nix::sys::prctl::set_no_new_privs().map_err(|e| ConfineError::NoNewPrivs(e.into()))?;
    Ok(())
}

fn has_capabilities() -> Result<bool, ConfineError> {
    let sets = crate::sys::capabilities::get().map_err(ConfineError::ReadCapabilities)?;
    Ok(sets.iter().any(|d| d.permitted != 0 || d.effective != 0))
}

fn set_capabilities_only(keep: u64) -> Result<(), ConfineError> {
    let half = |bits: u64| crate::sys::capabilities::Sets {
        effective: bits as u32,
        permitted: bits as u32,
        inheritable: 0,
    };
    crate::sys::capabilities::set(&[half(keep), half(keep >> 32)])
        .map_err(ConfineError::DropCapabilities)
}

/// The Landlock ABI whose rights the ruleset handles.
fn abi_of(ruleset: &Ruleset) -> ABI {
    ABI::from(i32::try_from(ruleset.min_abi).unwrap_or(i32::MAX))
}

/// The rights one rule grants, for a directory or (narrowed) for a file.
fn rights(access: Rights, abi: ABI, is_dir: bool) -> BitFlags<AccessFs> {
    let read = AccessFs::from_read(abi);
    let rw_files = read | AccessFs::WriteFile | AccessFs::Truncate;
    let all = match access {
        Rights::Read => read,
        Rights::List => AccessFs::ReadDir.into(),
        Rights::ReadWriteFiles => rw_files,
        Rights::ReadWrite => AccessFs::from_all(abi),
        Rights::Terminal => rw_files | AccessFs::IoctlDev,
    };
    if is_dir {
        all
    } else {
        all & AccessFs::from_file(abi)
    }
}

/// Apply `ruleset` to this (single-threaded) process. Paths that do not exist are skipped
/// (nothing to grant); anything less than full enforcement is an error.
/// Terminal rights on every name of this process's own terminal: what fds 0–2 are open on
/// (`/proc/self/fd/N`), and `/dev/console`, which is what bwrap names it inside its private
/// /dev. A name counts only when it is the very same character device as the fd (on the
/// host, `/dev/console` is the system console and gets nothing). Pagers, `stty -F "$(tty)"`
/// and `tput` open their terminal by name, and every termios ioctl then needs the right.
pub(super) fn own_terminal_rules() -> Vec<crate::sandbox::landlock::PathRule> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut names: Vec<std::path::PathBuf> = Vec::new();
    for fd in 0..3 {
        use std::io::IsTerminal;
        let terminal = match fd {
            0 => io::stdin().is_terminal(),
            1 => io::stdout().is_terminal(),
            _ => io::stderr().is_terminal(),
        };
        if !terminal {
            continue;
        }
        let Ok(own) = std::fs::metadata(format!("/proc/self/fd/{fd}")) else {
            continue;
        };
        let candidates = std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .into_iter()
            .chain([std::path::PathBuf::from("/dev/console")]);
        for name in candidates {
            let same = std::fs::metadata(&name)
                .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == own.rdev());
            if same && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
        .into_iter()
        .map(|path| crate::sandbox::landlock::PathRule {
            path,
            access: Rights::Terminal,
        })
        .collect()
}

pub fn apply_landlock(ruleset: &Ruleset) -> Result<(), ConfineError> {
    let abi = abi_of(ruleset);
    let landlock_err = ConfineError::Landlock;
    let mut builder = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(landlock_err)?
        .scope(if ruleset.scoped {
            Scope::from_all(abi)
        } else {
            BitFlags::EMPTY
        })
        .map_err(landlock_err)?;
    if ruleset.deny_tcp {
        builder = builder
            .handle_access(AccessNet::from_all(abi))
            .map_err(landlock_err)?;
    }
    let mut created = builder.create().map_err(landlock_err)?;
    if let Some(port) = ruleset.connect_port.filter(|_| ruleset.deny_tcp) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(landlock_err)?;
    }
    let terminal = own_terminal_rules();
    for rule in ruleset.rules.iter().chain(&terminal) {
        let Some(is_dir) = kind(&rule.path) else {
            continue;
        };
        let fd = PathFd::new(&rule.path).map_err(|source| ConfineError::LandlockPath {
            path: rule.path.clone(),
            source,
        })?;
        created = created
            .add_rule(PathBeneath::new(fd, rights(rule.access, abi, is_dir)))
            .map_err(landlock_err)?;
    }
    if ruleset.audit_marker.is_some() {
        created = created.log_new_exec(true).map_err(landlock_err)?;
    }
    let status = created.restrict_self().map_err(landlock_err)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(ConfineError::PartlyEnforced(status.ruleset));
    }
    if let Some(marker) = &ruleset.audit_marker {
        // Refused (nothing is written): its record names this session's domain.
        let _ = std::fs::OpenOptions::new().append(true).open(marker);
    }
    Ok(())
}

/// The program's TCP rules, for the calling thread only (Landlock restricts the thread that
/// asks, before ABI 8): the guard's thread that connects a socket for the program, so that
/// the kernel judges where it connects as it would for the program (`mediator::connecting`).
pub fn restrict_thread_network(
    net: &crate::helper::mediator::NetRules,
) -> Result<(), ConfineError> {
    if !net.deny_tcp {
        return Ok(());
    }
    let abi = ABI::from(i32::try_from(net.min_abi).unwrap_or(i32::MAX));
    let landlock_err = ConfineError::Landlock;
    let mut created = landlock::Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessNet::from_all(abi))
        .map_err(landlock_err)?
        .create()
        .map_err(landlock_err)?;
    for port in net.connect_port.into_iter().chain(net.loopback_port) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(landlock_err)?;
    }
    let status = created.restrict_self().map_err(landlock_err)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(ConfineError::PartlyEnforced(status.ruleset));
    }
    Ok(())
}

/// Some(is_dir) for a path that exists.
fn kind(path: &Path) -> Option<bool> {
    std::fs::metadata(path).ok().map(|m| m.is_dir())
}

/// Install the mediated filter with a listener and send the listener to the guard over
/// `channel` (both closed here; `mediator::create`): the calls that make names
/// (`sandbox::mediated::creating`) when the spec has names to refuse, with Landlock
/// alone the calls it cannot judge (`sandbox::mediated::table`), and for root's program
/// that stays host root every open (`sandbox::mediated::reading`). One filter: a thread's
/// filters may have one listener in all. Needs no_new_privs (set before).
pub fn apply_mediation(
    spec: &crate::helper::spec::HelperSpec,
    channel: std::os::fd::OwnedFd,
) -> Result<(), ConfineError> {
    use crate::sandbox::mediated;
    let mut table = Vec::new();
    if spec.names.is_some() {
        table.extend(mediated::creating());
        if spec.mediated.is_none() {
            table.extend(mediated::removing_dirs());
        }
        // A network of the sandbox's own (bwrap, with an allow-list or none).
        if spec.mediated.is_none() && spec.proxy_listen.is_some() {
            table.extend(mediated::observed());
        }
    }
    if let Some(scope) = &spec.mediated {
        table.extend(mediated::table());
        if !scope.carved.is_empty() {
            table.retain(|m| m.syscall != "unlinkat");
            table.extend(mediated::removing());
        }
    }
    if spec.root_reads.is_some() {
        table.retain(|m| !mediated::READING.contains(&m.syscall));
        table.extend(mediated::reading());
    }
    install_listened(&table, channel)
}

/// Install `table` as a filter with a listener, and hand the listener to the guard over
/// `channel`, waiting for the guard to say it can do its work (`mediator::handshake`).
/// Once the guard received a call, only a fatal signal ends the program's wait where the
/// kernel allows it (`SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV`, Linux 5.19); before,
/// any signal does (`mediator::replay`).
fn install_listened(
    table: &[crate::sandbox::mediated::Mediated],
    channel: std::os::fd::OwnedFd,
) -> Result<(), ConfineError> {
    use crate::sandbox::mediated;
    use crate::sys::seccomp::{install, WAIT_KILLABLE_RECV};
    use std::os::fd::AsRawFd;
    // Readable by the guard, which checks that it can read this process's memory before
    // the program runs (`handshake`): an sbx-shell binary that may be run but not read
    // (mode 0711) leaves the process undumpable until the exec makes it the program's.
    let _ = nix::sys::prctl::set_dumpable(true);
    let program = mediated::compile(table)
        .map_err(|e| ConfineError::Mediation(io::Error::other(e.to_string())))?;
    let listened = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    let mut killable = true;
    let mut installed = install(&program, listened | WAIT_KILLABLE_RECV);
    if matches!(&installed, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
        killable = false;
        installed = install(&program, listened);
    }
    let listener = installed
        .map_err(ConfineError::Mediation)?
        .ok_or_else(|| ConfineError::Mediation(io::Error::other("seccomp gave no listener")))?;
    crate::helper::mediator::handshake::offer(&channel, listener.as_raw_fd(), killable)
        .map_err(ConfineError::Guard)
}

/// Install the seccomp filter (needs no_new_privs or CAP_SYS_ADMIN; set before).
pub fn apply_seccomp(filter: &Filter) -> Result<(), ConfineError> {
    let program = seccomp::compile(filter)?;
    crate::sys::seccomp::install(&program, 0)
        .map(drop)
        .map_err(ConfineError::SeccompApply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_rules_get_only_file_rights() {
        let dir = rights(Rights::ReadWrite, ABI::V6, true);
        let file = rights(Rights::ReadWrite, ABI::V6, false);
        assert!(dir.contains(AccessFs::MakeReg | AccessFs::Refer));
        assert!(!file.contains(AccessFs::MakeReg));
        assert!(file.contains(AccessFs::WriteFile | AccessFs::Truncate));
        let tty = rights(Rights::Terminal, ABI::V6, false);
        assert!(tty.contains(AccessFs::IoctlDev | AccessFs::ReadFile));
        assert!(!rights(Rights::Read, ABI::V6, true).contains(AccessFs::WriteFile));
    }
}
