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
use std::time::Instant;

use crate::process::{self, ChildEvent, SessionOptions};
use crate::signals;

const HANDLED: [Signal; 5] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
];

/// Run the child on the inherited stdio until it ends; returns the exit code.
pub fn run(
    argv_for: &crate::pty::ArgvFor<'_>,
    env: &[(OsString, OsString)],
    options: SessionOptions,
) -> io::Result<u8> {
    let signals = signals::install(&HANDLED, false)?;
    let argv = argv_for(&crate::pty::ChildSetup::default())?;
    let child = process::spawn_child(&argv, env, None, false)?;
    let timeout = options.timeout;
    // At the first deadline SIGTERM, at the second the whole tree is killed.
    let mut deadlines = timeout.map(|t| {
        let term = Instant::now() + t.after;
        (t, term, term + t.grace)
    });
    let mut timed_out = false;
    loop {
        let wait = match deadlines {
            None => PollTimeout::NONE,
            Some((timeout, term, kill_at)) => {
                let now = Instant::now();
                if !timed_out && now >= term {
                    timed_out = true;
                    process::report_timeout(&timeout);
                    let _ = kill(options.signal_target(child), Signal::SIGTERM);
                }
                if timed_out && now >= kill_at {
                    deadlines = None;
                    let _ = kill(child, Signal::SIGKILL);
                    process::kill_leftovers(None);
                }
                let next = if timed_out { kill_at } else { term };
                PollTimeout::try_from(next.saturating_duration_since(now))
                    .unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [PollFd::new(signals.events.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, wait) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        for event in signals::read_events(signals.events.as_fd()) {
            if event.signal != libc::SIGCHLD {
                if let (true, Ok(signal)) = (event.sent_by_process, Signal::try_from(event.signal))
                {
                    let _ = kill(options.signal_target(child), signal);
                }
                continue;
            }
            for change in process::reap_children() {
                match change {
                    ChildEvent::Ended(pid, end) if pid == child => {
                        process::kill_leftovers(None);
                        return Ok(if timed_out {
                            process::EXIT_TIMEOUT
                        } else {
                            exit_code(end)
                        });
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
