//! Running without a pty: when stdin or stdout is not a terminal (ssh remote commands, scp,
//! sftp, rsync, git over ssh, pipes), the child runs on the inherited fds, because a pty
//! would corrupt binary streams. No raw mode, no relay: the supervisor only waits, passes on
//! signals that a process sent to it, and cleans up what the child left behind.
//!
//! The child stays in our process group, so signals from a terminal (^C) reach it directly;
//! those are not passed on again.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};

use crate::exit::exit_code;
use crate::process::{self, ChildEvent};
use crate::signals;

const HANDLED: [Signal; 5] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
];

/// Run the child on the inherited stdio until it ends; returns the exit code.
pub fn run(argv_for: &crate::pty::ArgvFor<'_>, env: &[(OsString, OsString)]) -> io::Result<u8> {
    let signals = signals::install(&HANDLED, false)?;
    let child = process::spawn_child(&argv_for(None)?, env, None)?;
    loop {
        let mut fds = [PollFd::new(signals.events.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        for event in signals::read_events(signals.events.as_fd()) {
            if event.signal != libc::SIGCHLD {
                if let (true, Ok(signal)) = (event.sent_by_process, Signal::try_from(event.signal))
                {
                    let _ = kill(child, signal);
                }
                continue;
            }
            for change in process::reap_children() {
                match change {
                    ChildEvent::Ended(pid, end) if pid == child => {
                        process::kill_leftovers(None);
                        return Ok(exit_code(end));
                    }
                    ChildEvent::Stopped(pid) if pid == child => {
                        let _ = signals::stop_self();
                        let _ = kill(child, Signal::SIGCONT);
                    }
                    _ => {}
                }
            }
        }
    }
}
