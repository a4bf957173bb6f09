//! The window size of a terminal, read and set (`TIOCGWINSZ`, `TIOCSWINSZ`).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::pty::Winsize;

/// The size the terminal on `fd` reports; None when it is not a terminal.
pub fn window_size(fd: BorrowedFd<'_>) -> Option<Winsize> {
    let mut size = Winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the valid, exclusively borrowed `size`.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &mut size) };
    (rc == 0).then_some(size)
}

/// Set the size of the terminal (a pty's master) on `fd`; the kernel signals its
/// foreground group.
pub fn set_window_size(fd: BorrowedFd<'_>, size: &Winsize) -> io::Result<()> {
    // SAFETY: TIOCSWINSZ reads one `winsize` from the valid `size`.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, size) };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
