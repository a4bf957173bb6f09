//! Window sizes: read from the outer terminal, set on the inner pty.

use std::io;
use std::os::fd::BorrowedFd;

pub use nix::pty::Winsize;

/// What the inner pty gets when the outer size is unknown or 0×0 (many TUIs draw nothing
/// into a 0×0 screen and look dead).
pub const FALLBACK: Winsize = Winsize {
    ws_row: 24,
    ws_col: 80,
    ws_xpixel: 0,
    ws_ypixel: 0,
};

/// The size of the terminal on `fd`; None when it is not a terminal or reports 0×0.
pub fn get(fd: BorrowedFd<'_>) -> Option<Winsize> {
    crate::sys::terminal::window_size(fd).filter(|size| size.ws_row > 0 && size.ws_col > 0)
}

/// Set the size of the pty whose master is `fd`; the kernel signals its foreground group.
pub fn set(fd: BorrowedFd<'_>, size: &Winsize) -> io::Result<()> {
    crate::sys::terminal::set_window_size(fd, size)
}

/// Copy the outer size (of `outer`) to the inner pty (`master`), skipping 0×0.
pub fn forward(outer: BorrowedFd<'_>, master: BorrowedFd<'_>) {
    if let Some(size) = get(outer) {
        let _ = set(master, &size);
    }
}
