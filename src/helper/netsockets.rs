//! The sockets a published port (`--publish`) is reached through under bwrap: the
//! supervisor, outside the sandbox's network namespace, asks the guard, inside it, for a
//! TCP socket, and connects it to the program's server on the sandbox's loopback. A socket
//! belongs to the namespace it was made in, wherever it is then used. One ask is one byte
//! (`4` or `6`, the family); the answer is the socket, or a message without one when it
//! cannot be made. End of file on the channel (sbx-shell gone) ends the thread.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Answer the asks on `channel` from a thread of the guard's own; returns at once.
pub fn serve(channel: OwnedFd) -> io::Result<()> {
    let mut channel = UnixStream::from(channel);
    std::thread::Builder::new()
        .name("sbx-guard-sockets".into())
        .spawn(move || {
            let mut ask = [0u8; 1];
            while matches!(channel.read(&mut ask), Ok(1)) {
                let family = match ask[0] {
                    b'6' => libc::AF_INET6,
                    _ => libc::AF_INET,
                };
                let sent = match tcp_socket(family) {
                    Ok(socket) => crate::sys::fdpass::send_fd_with(
                        channel.as_raw_fd(),
                        socket.as_raw_fd(),
                        b"T",
                    ),
                    Err(_) => io::Write::write_all(&mut channel, b"E"),
                };
                if sent.is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// A new TCP socket of `family`, in this process's network namespace.
fn tcp_socket(family: libc::c_int) -> io::Result<OwnedFd> {
    crate::sys::socket::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0)
}
