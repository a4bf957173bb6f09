//! Installing a seccomp filter on this thread (and what it starts): the one call that does.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19): once the listener received a call,
/// only a fatal signal ends the caller's wait.
pub const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;

/// Install `program` with `flags`, after setting no_new_privs (which an unprivileged
/// install needs; setting it again changes nothing); with SECCOMP_FILTER_FLAG_NEW_LISTENER
/// in `flags`, the filter's listener (else `None`).
pub fn install(program: &[libc::sock_filter], flags: libc::c_ulong) -> io::Result<Option<OwnedFd>> {
    // SAFETY: integer arguments only; it applies to this thread and what it starts.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::other("a seccomp filter longer than 65535 instructions"))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp reads `len` instructions through `prog`, valid for the call, and
    // copies them; the program is not written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 {
        return Ok(None);
    }
    // SAFETY: with NEW_LISTENER, seccomp returned a new descriptor, ours alone.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(rc as RawFd) }))
}
