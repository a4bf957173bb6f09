//! The outer terminal's termios: saved once, raw while we relay, restored on every way out.
//!
//! Raw mode is entered with TCSADRAIN (typeahead is kept for the child) and left with
//! TCSADRAIN + TCIFLUSH (see `restore` for why never TCSAFLUSH). `RawMode` restores in
//! `Drop`; the relay also calls `restore`/`apply_raw` around job control; a panic hook and
//! the fault handlers (`signals`) restore from a process-wide copy (with `panic = "abort"`
//! no destructor runs, the hook does; after a fault nothing else runs). Everything acts on fd 0 and is a no-op when fd 0 is not
//! a terminal — never on `/dev/tty` behind the user's back.

use std::io;
use std::os::fd::BorrowedFd;

use nix::sys::termios::{cfmakeraw, tcflush, tcgetattr, tcsetattr, FlushArg, SetArg, Termios};

/// fd 0, with the termios it had when we started.
#[derive(Debug)]
pub struct OuterTerminal {
    saved: Termios,
}

impl OuterTerminal {
    /// Save fd 0's termios; None when fd 0 is not a terminal.
    pub fn capture() -> Option<OuterTerminal> {
        let saved = tcgetattr(stdin()).ok()?;
        crate::session::signals::remember_terminal(libc::termios::from(saved.clone()));
        Some(OuterTerminal { saved })
    }

    /// The termios as we found it (the inner pty starts with a copy).
    pub fn saved(&self) -> &Termios {
        &self.saved
    }

    /// Put fd 0 into raw mode; the returned `RawMode` restores it when dropped.
    pub fn enter_raw(self) -> io::Result<RawMode> {
        self.apply_raw()?;
        Ok(RawMode { terminal: self })
    }

    /// Raw again (after a stop and continue). TCSADRAIN: input typed ahead before we got
    /// here is meant for the child and is kept.
    pub fn apply_raw(&self) -> io::Result<()> {
        let mut raw = self.saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(stdin(), SetArg::TCSADRAIN, &raw)?;
        Ok(())
    }

    /// Back to the termios we found, then discard keystrokes meant for the child that it
    /// never read, rather than let the user's outer shell run them.
    ///
    /// Not TCSAFLUSH: on a Linux pty slave it also flushes the driver, which throws away
    /// output the terminal (tmux, an emulator) has not read yet — our last lines.
    /// TCIFLUSH alone only empties the input queue.
    pub fn restore(&self) {
        let _ = tcsetattr(stdin(), SetArg::TCSADRAIN, &self.saved);
        let _ = tcflush(stdin(), FlushArg::TCIFLUSH);
    }
}

/// Raw mode on fd 0 for as long as it lives.
#[derive(Debug)]
pub struct RawMode {
    terminal: OuterTerminal,
}

impl RawMode {
    /// The terminal, for restoring and re-entering raw mode around job control.
    pub fn terminal(&self) -> &OuterTerminal {
        &self.terminal
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        self.terminal.restore();
    }
}

/// Restore fd 0 before any panic message is printed (process-wide hook, installed once).
pub fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        crate::session::signals::restore_terminal(libc::TCSADRAIN);
        previous(info);
    }));
}

fn stdin() -> BorrowedFd<'static> {
    // SAFETY: fd 0 is open for the whole process (std opens /dev/null there if it was closed
    // at startup, and nothing in sbx-shell closes it).
    unsafe { BorrowedFd::borrow_raw(0) }
}
