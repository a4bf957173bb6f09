//! A session: the child running under sbx-shell's supervision, on a pty of its own (`pty`)
//! or on the inherited stdio (`direct`).
//!
//! The order a run relies on: `Session::open` first (signal handling; with a pty, the inner
//! pty sized and the outer terminal raw), which exposes what the launch needs (the child's
//! terminal, the fd on which the helper's guard reports stops); the caller then builds the
//! argv once; `run` spawns it and supervises until the end. Both kinds share the supervision
//! (`supervise`): reaping, the timeout, termination and the exit code.

#[cfg(target_os = "linux")]
pub mod audit;
pub mod cgroup;
pub mod claim;
pub mod journal;
pub mod log;
#[cfg(target_os = "linux")]
pub mod pool;
pub mod pty;
pub mod signals;
pub mod temp;

mod direct;
pub mod supervise;

use std::io;
use std::os::fd::RawFd;
use std::path::Path;

pub use supervise::{Child, Ended, SessionOptions, Timeout};

/// An open session, ready to run the child.
pub enum Session {
    Pty(pty::PtySession),
    Direct(direct::DirectSession),
}

impl Session {
    /// Open a session with a pty when `use_pty`, else on the inherited stdio.
    pub fn open(use_pty: bool) -> io::Result<Session> {
        Ok(if use_pty {
            Session::Pty(pty::PtySession::open()?)
        } else {
            Session::Direct(direct::DirectSession::open()?)
        })
    }

    /// Whether the child gets a pty of its own (and so a new session, led by the helper).
    pub fn is_pty(&self) -> bool {
        matches!(self, Session::Pty(_))
    }

    /// The child's terminal (the inner pty's slave), when it has one.
    pub fn tty(&self) -> Option<&Path> {
        match self {
            Session::Pty(session) => session.tty(),
            Session::Direct(_) => None,
        }
    }

    /// An fd the helper's guard inherits to report that the program stopped itself: a
    /// launcher in between (bwrap) hides that from us, and the guard itself never stops —
    /// its mediator goes on answering the session's other processes.
    pub fn stop_notify_fd(&self) -> Option<RawFd> {
        match self {
            Session::Pty(session) => Some(session.stop_notify_fd()),
            Session::Direct(session) => Some(session.stop_notify_fd()),
        }
    }

    /// Spawn the child and supervise it until the end.
    pub fn run(self, child: Child) -> io::Result<Ended> {
        match self {
            Session::Pty(session) => session.run(child),
            Session::Direct(session) => session.run(child),
        }
    }
}
