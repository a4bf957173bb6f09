//! Descriptors passed over a unix socket (SCM_RIGHTS): how the helper hands the sockets it
//! opens inside the sandbox's network namespace to the supervisor, and the program hands
//! its seccomp listener to the guard.

use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Send `fd` with SCM_RIGHTS over `channel` (the helper's side).
pub fn send_fd(channel: RawFd, fd: RawFd) -> io::Result<()> {
    send_fd_with(channel, fd, b"L")
}

/// Send `fd` with SCM_RIGHTS over `channel`, with `bytes` (at most `MESSAGE` of them).
pub fn send_fd_with(channel: RawFd, fd: RawFd, bytes: &[u8]) -> io::Result<()> {
    send_fds(channel, &[fd], bytes)
}

/// Receive one fd sent with SCM_RIGHTS over `channel` (close-on-exec, as Linux allows:
/// `MSG_CMSG_CLOEXEC`).
#[cfg(target_os = "linux")]
pub fn receive_fd(channel: &OwnedFd) -> io::Result<OwnedFd> {
    receive_fd_with(channel).map(|(fd, _)| fd)
}

/// The longest message sent with a descriptor.
pub const MESSAGE: usize = 256;

/// Receive one fd sent with SCM_RIGHTS over `channel`, ours alone now, and the bytes sent
/// with it (any more descriptors in the message are closed).
#[cfg(target_os = "linux")]
pub fn receive_fd_with(channel: &OwnedFd) -> io::Result<(OwnedFd, Vec<u8>)> {
    let (fds, bytes) = receive_fds(channel)?;
    match fds.into_iter().next() {
        Some(fd) => Ok((fd, bytes)),
        None => Err(io::ErrorKind::UnexpectedEof.into()),
    }
}

/// The most descriptors sent in one message (`send_fds`).
pub const MOST_FDS: usize = 32;

/// Send `fds` with SCM_RIGHTS over `channel` in one message, with `bytes` (at most
/// `MESSAGE` of them).
pub fn send_fds(channel: RawFd, fds: &[RawFd], bytes: &[u8]) -> io::Result<()> {
    use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags};
    if fds.len() > MOST_FDS || bytes.len() > MESSAGE {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let iov = [io::IoSlice::new(bytes)];
    sendmsg::<()>(
        channel,
        &iov,
        &[ControlMessage::ScmRights(fds)],
        MsgFlags::empty(),
        None,
    )?;
    Ok(())
}

/// Receive the descriptors of one message sent by `send_fds` (close-on-exec, ours alone
/// now, in the order sent), and its bytes.
#[cfg(target_os = "linux")]
pub fn receive_fds(channel: &OwnedFd) -> io::Result<(Vec<OwnedFd>, Vec<u8>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    use std::os::fd::{AsRawFd, FromRawFd};
    let mut bytes = [0u8; MESSAGE];
    let mut iov = [io::IoSliceMut::new(&mut bytes)];
    let mut space = nix::cmsg_space!([RawFd; MOST_FDS]);
    let msg = recvmsg::<()>(
        channel.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let len = msg.bytes;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(received) = cmsg {
            // SAFETY: the kernel put these descriptors in our table for this message:
            // nothing else owns them.
            fds.extend(
                received
                    .into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    Ok((fds, bytes[..len].to_vec()))
}

/// Elsewhere nothing is handed over (no bwrap, no seccomp).
#[cfg(not(target_os = "linux"))]
pub fn receive_fd(_channel: &OwnedFd) -> io::Result<OwnedFd> {
    Err(io::Error::other(
        "descriptors are handed over on Linux only",
    ))
}
