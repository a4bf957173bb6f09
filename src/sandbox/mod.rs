//! Sandbox backends. Each is a pure builder that turns the policy into what runs (an argv
//! prefix, a profile, rule tables); `wrap` is the one place that picks the backend for this
//! platform and prefixes the helper's argv with its launcher.

use std::ffi::OsString;
use std::path::Path;

use thiserror::Error;

use crate::policy::Policy;

pub mod bwrap;
pub mod landlock;
pub mod seatbelt;
pub mod seccomp;

/// The backend that confines the child on this platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// macOS: Seatbelt through /usr/bin/sandbox-exec.
    Seatbelt,
    /// No backend in this build for this platform (Linux until its backend lands): only an
    /// explicit absence of policy may run.
    Unavailable,
}

impl Backend {
    /// The backend this build uses on this platform.
    pub fn for_this_platform() -> Backend {
        if cfg!(target_os = "macos") {
            Backend::Seatbelt
        } else {
            Backend::Unavailable
        }
    }

    /// The name the child sees in `SBX_SANDBOX`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Seatbelt => "seatbelt",
            Backend::Unavailable => "none",
        }
    }
}

#[derive(Debug, Error)]
pub enum SandboxError {
    #[error(transparent)]
    Seatbelt(#[from] seatbelt::SeatbeltError),
}

/// What the policy needs from the session to be built.
#[derive(Debug, Clone, Copy)]
pub struct Session<'a> {
    /// The per-user temporary directory (real path).
    pub temp_dir: Option<&'a Path>,
    /// The child's terminal, when it has one.
    pub tty: Option<&'a Path>,
}

/// The argv that runs `command` (the helper's argv) confined by `backend`.
pub fn wrap(
    backend: Backend,
    policy: &Policy,
    session: Session<'_>,
    command: &[OsString],
) -> Result<Vec<OsString>, SandboxError> {
    match backend {
        Backend::Seatbelt => {
            let inputs = seatbelt::Inputs {
                policy,
                temp_dir: session.temp_dir,
                tty: session.tty,
            };
            Ok(seatbelt::build_argv(
                &seatbelt::build_profile(&inputs)?,
                command,
            ))
        }
        Backend::Unavailable => Ok(command.to_vec()),
    }
}
