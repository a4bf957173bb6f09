//! Descriptors passed over a unix socket (SCM_RIGHTS): how the helper hands the sockets it
//! opens inside the sandbox's network namespace to the supervisor, and the program hands
//! its seccomp listener to the guard.

use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Send `fd` with SCM_RIGHTS over `channel` (the helper's side).
pub fn send_fd(channel: RawFd, fd: RawFd) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    let iov = [io::IoSlice::new(b"L")];
    let fds = [fd];
    sendmsg::<()>(
        channel,
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

/// Receive one fd sent with SCM_RIGHTS over `channel` (close-on-exec, as Linux allows:
/// `MSG_CMSG_CLOEXEC`).
#[cfg(target_os = "linux")]
pub fn receive_fd(channel: &OwnedFd) -> io::Result<RawFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::AsRawFd;
    let mut byte = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(RawFd);
    let msg = recvmsg::<()>(
        channel.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            if let Some(fd) = fds.first() {
                return Ok(*fd);
            }
        }
    }
    Err(io::ErrorKind::UnexpectedEof.into())
}

/// Elsewhere nothing is handed over (no bwrap, no seccomp).
#[cfg(not(target_os = "linux"))]
pub fn receive_fd(_channel: &OwnedFd) -> io::Result<RawFd> {
    Err(io::Error::other(
        "descriptors are handed over on Linux only",
    ))
}
