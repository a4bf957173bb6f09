//! The helper's parts on platforms other than Linux (`helper::os` there; macOS in
//! practice): no guard and no in-process layers — Seatbelt confines from outside.

use super::parts::MountError;
use std::io;

use thiserror::Error;

use super::spec::HelperSpec;

/// The in-process layers exist on Linux only.
#[derive(Debug, Error)]
pub enum ConfineError {
    #[error("Landlock and seccomp exist on Linux only")]
    Unsupported,
}

/// macOS: setrlimit(RLIMIT_NOFILE) above OPEN_MAX fails, even as root.
pub const NOFILE_CAP: Option<u64> = Some(10240);

pub fn split_off_guard(_spec: &HelperSpec) -> io::Result<super::parts::Split> {
    Err(io::Error::other("guard mode exists on Linux only"))
}

pub fn check_mounted(
    mounted: &[(std::path::PathBuf, crate::sys::files::Identity)],
) -> Result<(), MountError> {
    match mounted.first() {
        None => Ok(()),
        Some((path, _)) => Err(MountError::Failed {
            path: path.display().to_string(),
            source: io::Error::other("containers exist on Linux only"),
        }),
    }
}

pub fn apply_mounts(
    plan: &[crate::sandbox::bwrap::Mount],
    _root_as: Option<&RootAsTaken>,
) -> Result<(), MountError> {
    Err(MountError::Failed {
        path: plan
            .first()
            .map_or(String::new(), |m| m.path.display().to_string()),
        source: io::Error::other("mounts inside a sandbox exist on Linux only"),
    })
}

pub fn confine_privileges(_root_reads: bool, _map_root: bool) -> Result<(), ConfineError> {
    Err(ConfineError::Unsupported)
}

pub fn private_network() -> std::io::Result<()> {
    Err(std::io::Error::other(
        "network namespaces exist on Linux only",
    ))
}

pub fn confine(spec: &HelperSpec, names: Option<std::os::fd::OwnedFd>) -> Result<(), ConfineError> {
    if spec.drop_privileges || spec.landlock.is_some() || spec.seccomp.is_some() || names.is_some()
    {
        return Err(ConfineError::Unsupported);
    }
    Ok(())
}

pub fn show_as(_user: &crate::policy::ContainerUser) -> Result<(), String> {
    Err("containers run on Linux only".into())
}

/// Root's program as another host id: Linux only.
pub enum RootAsTaken {}

pub fn take_root_as(_spec: &HelperSpec) -> io::Result<Option<RootAsTaken>> {
    Ok(None)
}

pub fn become_root_as(r: RootAsTaken) -> io::Result<()> {
    match r {}
}

/// No guard here: nothing binds git's state to a token (`protect::gitstate`).
pub fn set_session_token() {}
