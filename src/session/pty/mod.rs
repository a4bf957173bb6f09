//! The pty session: the child on an inner pseudo-terminal, the outer terminal raw, and the
//! relay between them.
//!
//! Startup order matters (a signal between "raw on" and "handlers installed" would leave the
//! user's terminal raw): signal handling → outer termios and size → inner pty opened already
//! sized and with the outer termios → raw mode (`PtySession::open`) → the caller builds the argv
//! → spawn → relay (`PtySession::run`). The `RawMode` guard restores the terminal when the
//! session is dropped, by any path.

pub mod ask;
mod clipboard;
#[cfg(target_os = "linux")]
mod follow;
mod modes;
mod raw_mode;
mod relay;
mod winsize;

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::Signal;

pub use raw_mode::install_panic_hook;

use crate::session::signals;
use crate::session::supervise::Supervisor;
use crate::session::Child;
use crate::sys::process;

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

/// The pty side of a session: signal handling, the inner pty (sized like the outer terminal,
/// with its termios), the outer terminal raw (restored when this is dropped, by any path),
/// and the pipe on which the helper's guard reports stops.
pub struct PtySession {
    signals: signals::SignalPipes,
    raw: Option<raw_mode::RawMode>,
    master: OwnedFd,
    slave: OwnedFd,
    tty: Option<PathBuf>,
    stops: OwnedFd,
    stops_write: OwnedFd,
}

impl PtySession {
    /// Open the session, in the order the module doc gives.
    pub fn open() -> io::Result<PtySession> {
        let signals = signals::install(&HANDLED, true)?;
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
        let raw = outer.map(raw_mode::OuterTerminal::enter_raw).transpose()?;
        if debug_panic_requested() {
            panic!("SBX_SHELL_DEBUG_PANIC is set: panicking with the terminal raw, as asked");
        }
        let tty = nix::unistd::ttyname(&pty.slave).ok();
        // The write end is inherited by the helper only (its guard keeps it; the program
        // never gets it: the helper marks every fd above 2 close-on-exec).
        let (stops, stops_write) = nix::unistd::pipe()?;
        set_cloexec(&stops)?;
        fcntl(stops.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(PtySession {
            signals,
            raw,
            master: pty.master,
            slave: pty.slave,
            tty,
            stops,
            stops_write,
        })
    }

    /// The child's terminal (the inner pty's slave).
    pub fn tty(&self) -> Option<&Path> {
        self.tty.as_deref()
    }

    /// The write end of the stop-notice pipe, for the helper's guard to inherit.
    pub fn stop_notify_fd(&self) -> RawFd {
        self.stops_write.as_raw_fd()
    }

    /// Spawn `argv` on the inner pty and relay until the session ends.
    pub fn run(self, child: Child) -> io::Result<crate::session::Ended> {
        let Child {
            argv,
            env,
            options,
            refusals,
            questions,
        } = child;
        let PtySession {
            signals,
            raw,
            master,
            slave,
            stops,
            stops_write,
            ..
        } = self;
        let winch = signals
            .winch
            .as_ref()
            .ok_or(io::ErrorKind::NotFound)?
            .as_fd();
        let pid = process::spawn_child(
            &argv,
            &env,
            Some(&slave),
            options.launcher_depth > 0,
            options.cgroup,
        )?;
        // Only the child may hold the slave, or the master never reports EIO at the end; and
        // the pipe reports EOF once the helper's guard is gone.
        drop(slave);
        drop(stops_write);
        let supervisor = Supervisor::new(pid, options, Some(pid));
        let outer = raw.as_ref().map(raw_mode::RawMode::terminal);
        let ended = relay::Relay::new(master, supervisor, outer, &signals, winch)
            .with_stop_notices(stops)
            .with_clipboard(options.clipboard, refusals)
            .with_questions(questions)
            .run();
        // `raw` restores the outer terminal when it goes out of scope, after the relay.
        Ok(ended)
    }
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
