//! The proxy's end of the handover of the listening socket that the helper opens inside
//! bwrap's network namespace (Linux).

use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Receive one fd sent with SCM_RIGHTS over `channel`.
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
