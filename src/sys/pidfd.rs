//! Process descriptors (pidfds): one that names a process or a thread for as long as it is
//! open, whether that one has ended, and a copy of one of its descriptors.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};

/// PIDFD_THREAD (Linux 6.9): a pidfd of one thread rather than of a process.
pub const THREAD: libc::c_int = libc::O_EXCL;

/// A pidfd of `pid` (`flags`: `THREAD` for one thread).
pub fn open(pid: u32, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The very file the process of `pidfd` has as descriptor `n` (needs the right to trace
/// it: container profiles refuse it without CAP_SYS_PTRACE).
pub fn get_fd(pidfd: BorrowedFd<'_>, n: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), n, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// Whether the process or thread of `pidfd` has ended (its pidfd is readable then).
pub fn ended(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    nix::poll::poll(&mut fds, PollTimeout::ZERO) != Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_named_until_it_ends_and_its_descriptors_can_be_copied() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pidfd = open(child.id(), 0).unwrap();
        assert!(!ended(&pidfd));
        // Its stdin, a pipe: copied where this machine lets us trace our child.
        match get_fd(pidfd.as_fd(), 0) {
            Ok(copy) => assert!(copy.as_raw_fd() > 2),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}"),
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(ended(&pidfd));
    }
}
