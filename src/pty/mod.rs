//! The pty session: the child on an inner pseudo-terminal, the outer terminal raw, and the
//! relay between them.
//!
//! Startup order matters (a signal between "raw on" and "handlers installed" would leave the
//! user's terminal raw): signal handling → outer termios and size → inner pty opened already
//! sized and with the outer termios → raw mode → spawn → relay. The `RawMode` guard restores
//! the terminal when this function returns, by any path.

mod modes;
mod raw_mode;
mod relay;
mod winsize;

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::Signal;

pub use raw_mode::install_panic_hook;

use crate::process;
use crate::signals;

/// The signals the supervisor handles in a pty session (SIGWINCH has its own pipe).
const HANDLED: [Signal; 7] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTSTP,
    Signal::SIGCONT,
];

/// What the argv to spawn is built from.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildSetup<'a> {
    /// The child's terminal (the inner pty's slave), when it has one.
    pub tty: Option<&'a Path>,
    /// An inherited fd on which the helper's guard reports that the program stopped itself,
    /// when a launcher in between (bwrap) hides that from us.
    pub stop_notify_fd: Option<RawFd>,
}

/// The argv to spawn, given the child's setup.
pub type ArgvFor<'a> = dyn Fn(&ChildSetup<'_>) -> io::Result<Vec<OsString>> + 'a;

/// Run the child on a new pty until it ends; returns the exit code.
pub fn run(
    argv_for: &ArgvFor<'_>,
    env: &[(OsString, OsString)],
    options: process::SessionOptions,
) -> io::Result<u8> {
    let signals = signals::install(&HANDLED, true)?;
    let winch = signals
        .winch
        .as_ref()
        .ok_or(io::ErrorKind::NotFound)?
        .as_fd();
    let outer = raw_mode::OuterTerminal::capture();
    let stdin = io::stdin();
    let stdout = io::stdout();
    let size = winsize::get(stdin.as_fd())
        .or_else(|| winsize::get(stdout.as_fd()))
        .unwrap_or(winsize::FALLBACK);
    let pty = nix::pty::openpty(Some(&size), outer.as_ref().map(|o| o.saved()))?;
    set_cloexec(&pty.slave)?;
    set_cloexec(&pty.master)?;
    fcntl(pty.master.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    let _raw = outer.as_ref().map(|o| o.enter_raw()).transpose()?;
    if debug_panic_requested() {
        panic!("SBX_SHELL_DEBUG_PANIC is set: panicking with the terminal raw, as asked");
    }
    let tty = nix::unistd::ttyname(&pty.slave).ok();
    // The write end is inherited by the helper only (its guard keeps it; the program never
    // gets it: the helper marks every fd above 2 close-on-exec).
    let (stops, stops_write) = nix::unistd::pipe()?;
    set_cloexec(&stops)?;
    fcntl(stops.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    let setup = ChildSetup {
        tty: tty.as_deref(),
        stop_notify_fd: Some(stops_write.as_raw_fd()),
    };
    let argv = argv_for(&setup)?;
    let child = process::spawn_child(&argv, env, Some(&pty.slave), options.launcher_depth > 0)?;
    // Only the child may hold the slave, or the master never reports EIO at the end; and
    // the pipe reports EOF once the helper's guard is gone.
    drop(pty.slave);
    drop(stops_write);
    let relay = relay::Relay::new(pty.master, child, outer.as_ref(), &signals, winch, options);
    Ok(relay.with_stop_notices(stops).run())
}

fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    fcntl(fd.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
    debug_assert!(fd.as_raw_fd() > 2);
    Ok(())
}

/// A hidden switch for the test suite: panic right after entering raw mode, to prove the
/// panic path restores the terminal. Documented in docs/testing.md.
fn debug_panic_requested() -> bool {
    std::env::var_os("SBX_SHELL_DEBUG_PANIC").is_some()
}
