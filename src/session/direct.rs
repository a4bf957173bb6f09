//! Running without a pty: when stdin or stdout is not a terminal (ssh remote commands, scp,
//! sftp, rsync, git over ssh, pipes), the child runs on the inherited fds, because a pty
//! would corrupt binary streams. No raw mode, no relay: the loop only waits, passes on
//! signals that a process sent to sbx-shell, and leaves the rest to the `Supervisor`.
//!
//! The child stays in our process group, so signals from a terminal (^C) reach it directly;
//! those are not passed on again.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};

use super::supervise::Child;
use super::supervise::Supervisor;
use crate::session::signals::{self, SignalPipes};
use crate::sys::process;

const HANDLED: [Signal; 5] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
];

/// A session on the inherited stdio: the signal handling, installed before the spawn, and
/// the pipe the helper's guard reports the program's stops on (it never stops itself: its
/// mediator goes on answering the session's other processes).
pub struct DirectSession {
    signals: SignalPipes,
    stops: OwnedFd,
    stops_write: OwnedFd,
}

impl DirectSession {
    pub fn open() -> io::Result<DirectSession> {
        use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
        let (stops, stops_write) = nix::unistd::pipe()?;
        fcntl(stops.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(stops.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        Ok(DirectSession {
            signals: signals::install(&HANDLED, false)?,
            stops,
            stops_write,
        })
    }

    /// The write end of the stop-notice pipe, for the helper's guard to inherit.
    pub fn stop_notify_fd(&self) -> RawFd {
        self.stops_write.as_raw_fd()
    }

    /// Run `argv` on the inherited stdio until it ends (no relay: no clipboard to filter).
    pub fn run(self, child: Child) -> io::Result<super::supervise::Ended> {
        let Child {
            argv, env, options, ..
        } = child;
        let pid = process::spawn_child(&argv, &env, None, false, options.cgroup)?;
        // The pipe reports EOF once the helper's guard is gone.
        drop(self.stops_write);
        let mut stops = Some(self.stops);
        let mut supervisor = Supervisor::new(pid, options, None);
        while !(supervisor.is_over() && supervisor.child_ended()) {
            let wait = supervisor.next_deadline().map_or(PollTimeout::NONE, |at| {
                PollTimeout::try_from(at.saturating_duration_since(Instant::now()))
                    .unwrap_or(PollTimeout::MAX)
            });
            let mut fds = vec![PollFd::new(self.signals.events.as_fd(), PollFlags::POLLIN)];
            if let Some(stops) = &stops {
                fds.push(PollFd::new(stops.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, wait) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
            let noticed = fds
                .get(1)
                .and_then(PollFd::revents)
                .is_some_and(|r| !r.is_empty());
            drop(fds);
            if noticed && stop_noticed(&mut stops) {
                // The program stopped itself: stop with it, and continue it when we are.
                let _ = signals::stop_self();
                let _ = kill(supervisor.child(), Signal::SIGCONT);
            }
            supervisor.on_time(Instant::now(), || None);
            for event in signals::read_events(self.signals.events.as_fd()) {
                if event.signal == libc::SIGCHLD {
                    if supervisor.on_child_events() {
                        let _ = signals::stop_self();
                        let _ = kill(supervisor.child(), Signal::SIGCONT);
                    }
                } else if signals::FAULTS.contains(&event.signal) {
                    // A fault signal that another process sent: like SIGTERM, exit 128+N.
                    supervisor.terminate(
                        Signal::SIGTERM,
                        event.signal,
                        super::supervise::TERMINATE_GRACE,
                        None,
                    );
                } else if let (true, Ok(signal)) =
                    (event.sent_by_process, Signal::try_from(event.signal))
                {
                    supervisor.forward(signal);
                }
            }
        }
        Ok(super::supervise::Ended {
            code: supervisor.exit_code(),
        })
    }
}

/// Read the guard's stop notices: whether the program stopped. End of file (the guard is
/// gone) closes the pipe.
fn stop_noticed(stops: &mut Option<OwnedFd>) -> bool {
    let mut buf = [0u8; 64];
    match stops.as_ref().map(|fd| nix::unistd::read(fd, &mut buf)) {
        Some(Ok(0)) | Some(Err(Errno::EBADF)) | None => {
            *stops = None;
            false
        }
        Some(Ok(_)) => true,
        Some(Err(_)) => false,
    }
}
