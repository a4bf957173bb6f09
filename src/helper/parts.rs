//! What the helper's platform parts (`os`: `linux.rs`, `other.rs`) answer its steps: how
//! the process split (`Split`), and why a mount failed (`MountError`).

use std::io;
use std::os::fd::OwnedFd;
use std::process::ExitCode;

use thiserror::Error;

/// What `os::split_off_guard` leaves this process as (guard mode exists on Linux only).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub enum Split {
    /// The guard, once the program's tree is gone: its exit code.
    Guard(ExitCode),
    /// The process that goes on to exec the program. `names`: where it hands the guard
    /// the listener of the calls that make names (`os::confine`), when the spec has
    /// names to refuse (`HelperSpec::names`).
    Program { names: Option<OwnedFd> },
}

/// Why a mount of the plan failed.
#[derive(Debug, Error)]
pub enum MountError {
    #[error("cannot set up {path} in the sandbox: {source}")]
    Failed {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} changed while the sandbox started ({now}): it is not what sbx-shell saw a moment \
        before, so it could not be protected as planned; nothing ran\nHint: run again (a run \
        plans from what is there when it starts); if this repeats, something keeps changing it: \
        `ls -la {path}` shows what is there"
    )]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Changed { path: String, now: &'static str },
}
