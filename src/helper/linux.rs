//! The helper's Linux parts (`helper::os` on Linux): the process guard, the in-process
//! layers (capabilities, Landlock, seccomp), signal dispositions through the raw syscall,
//! and close_range.

#[path = "confine.rs"]
mod confine;
#[path = "guard.rs"]
mod guard;

use std::io;
use std::process::ExitCode;

pub use confine::ConfineError;

use super::spec::HelperSpec;

/// No cap on the open-file limit beyond the hard limit.
pub const NOFILE_CAP: Option<u64> = None;

/// Guard mode: `Some(code)` in the guard once the program's tree is gone, `None` in the
/// child that goes on to exec the program.
pub fn split_off_guard(spec: &HelperSpec) -> io::Result<Option<ExitCode>> {
    guard::split(spec.stop_notify_fd, spec.lifeline_fd)
}

/// Hide each path (`sandbox::bwrap::Hide`): a directory under an empty read-only tmpfs,
/// anything else under `/dev/null`, read-only; or bind its twin from the private home. A path that no longer exists has nothing
/// left to hide and is skipped; any other failure ends the helper (never a weaker sandbox).
///
/// In a mount namespace of the helper's own: for an unprivileged user, bwrap puts the
/// sandbox in a second user namespace that does not own bwrap's mount namespace, so mounts
/// there fail; a new one is owned by ours (its mounts copied, locked, and mounted over).
pub fn apply_hides(hides: &[crate::sandbox::bwrap::Hide]) -> Result<(), super::HelperError> {
    confine::private_mount_namespace().map_err(|source| super::HelperError::Hide {
        path: "/ (a mount namespace of its own)".into(),
        source,
    })?;
    for hide in hides {
        let failed = |source: io::Error| super::HelperError::Hide {
            path: hide.path.display().to_string(),
            source,
        };
        let done = match &hide.twin {
            // A twin that is not what it should be (a symlink the program left in its
            // private home, or a host path of another kind): the host's path is hidden
            // instead, never shown (it may be the host's history).
            Some(twin) => match confine::bind_twin(twin, &hide.path, hide.dir) {
                Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                    confine::hide(&hide.path, hide.dir)
                }
                other => other,
            },
            None => confine::hide(&hide.path, hide.dir),
        };
        match done {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => return Err(failed(e)),
        }
    }
    Ok(())
}

/// Drop every capability and set no_new_privs (again later: it is idempotent).
pub fn confine_privileges() -> Result<(), ConfineError> {
    confine::apply_drop_privileges()
}

/// Capabilities and no_new_privs, then Landlock, then seccomp, as the spec asks.
pub fn confine(spec: &HelperSpec) -> Result<(), ConfineError> {
    if spec.drop_privileges {
        confine::apply_drop_privileges()?;
    }
    if let Some(ruleset) = &spec.landlock {
        confine::apply_landlock(ruleset)?;
    }
    if let Some(filter) = &spec.seccomp {
        confine::apply_seccomp(filter)?;
    }
    Ok(())
}

/// The number of signals, real-time ones included.
pub fn signal_count() -> i32 {
    libc::SIGRTMAX() + 1
}

/// SIG_DFL for `signal`, through the raw syscall: glibc's posix_spawn leaves its two
/// internal signals (32, 33) *ignored* in a spawned child and its sigaction() refuses to
/// touch them, so only the kernel interface can reset them.
pub fn set_default_disposition(signal: i32) {
    // A zeroed kernel `struct sigaction` is {SIG_DFL, no flags, no restorer, empty mask} on
    // every Linux ABI; 32 bytes covers its largest layout.
    let default = [0u64; 4];
    let sigset_size = std::mem::size_of::<u64>();
    // SAFETY: rt_sigaction reads one kernel sigaction from `default`, which is valid and
    // large enough, and writes nothing (old action pointer is null).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            default.as_ptr(),
            std::ptr::null_mut::<u8>(),
            sigset_size,
        )
    };
}

/// Mark every fd above 2 close-on-exec (this process only).
pub fn apply_cloexec_above_stderr() -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes fd flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    // A kernel before 5.11: one fd at a time.
    super::cloexec_each_fd_above_stderr()
}
