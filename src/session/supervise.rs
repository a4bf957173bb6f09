//! The supervision both kinds of session share (with a pty, and on inherited stdio): the
//! child's end, the wall-clock limit, termination with a grace period, what the child left
//! behind, and the exit code. The caller's loop owns the fds and the poll; this owns the
//! child's lifecycle and says when something is due.
//!
//! The phases: running → (a terminating signal or the timeout) terminating, with a deadline
//! → over: the child ended or the deadline passed, and everything left below sbx-shell was
//! hung up and killed (`process::kill_leftovers`).

use std::ffi::OsString;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use crate::sys::exit::{self, ChildEnd};
use crate::sys::process::{self, ChildEvent};

/// How long the child gets to act on a forwarded SIGTERM/SIGINT/SIGQUIT/SIGHUP before its
/// whole tree is hung up and killed.
pub const TERMINATE_GRACE: Duration = Duration::from_millis(500);

/// The session's wall-clock limit: SIGTERM after `after`, and the whole tree killed `grace`
/// later; sbx-shell then exits with `exit::TIMEOUT`, as timeout(1) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout {
    pub after: Duration,
    pub grace: Duration,
}

/// How the supervisor runs the session's child.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionOptions {
    pub timeout: Option<Timeout>,
    /// How many launcher processes (bwrap: 1) stand between our child and the helper's
    /// guard. Then the child gets a process group of its own (so that the outer terminal's
    /// signals never kill the launcher), and signals meant for the program go to the guard,
    /// which passes them on.
    pub launcher_depth: usize,
    /// The session's cgroup, which the child starts in.
    pub cgroup: Option<crate::sys::process::CgroupFds>,
    /// What the relay lets through of the terminal's clipboard requests (with a pty).
    pub clipboard: crate::policy::config::Clipboard,
}

/// How a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// The exit code, as the shell reports the child's end.
    pub code: u8,
}

impl SessionOptions {
    /// The process that signals for the program go to: `child`, or the guard below the
    /// launcher (`child` when it cannot be found, e.g. before it started).
    pub fn signal_target(&self, child: Pid) -> Pid {
        if self.launcher_depth == 0 {
            return child;
        }
        Pid::from_raw(
            process::only_child_chain(
                &process::list_processes(),
                child.as_raw(),
                self.launcher_depth,
            )
            .unwrap_or(child.as_raw()),
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// A terminating signal was passed on; the tree is killed at the deadline.
    Terminating {
        deadline: Instant,
    },
    /// The tree was killed (the child ended, or its grace ran out).
    Over,
}

/// One child's supervision.
#[derive(Debug)]
pub struct Supervisor {
    child: Pid,
    options: SessionOptions,
    /// The child's session, whose members are killed at the end too (a pty's child leads
    /// its own); `None` when the child shares ours.
    session: Option<Pid>,
    phase: Phase,
    timeout_at: Option<Instant>,
    end: Option<ChildEnd>,
    exit_override: Option<u8>,
}

impl Supervisor {
    pub fn new(child: Pid, options: SessionOptions, session: Option<Pid>) -> Supervisor {
        Supervisor {
            child,
            options,
            session,
            phase: Phase::Running,
            timeout_at: options.timeout.map(|t| Instant::now() + t.after),
            end: None,
            exit_override: None,
        }
    }

    pub fn child(&self) -> Pid {
        self.child
    }

    /// The child ended, or its grace ran out, and nothing of its tree is left.
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// The child was reaped.
    pub fn child_ended(&self) -> bool {
        self.end.is_some()
    }

    /// When something is next due (the poll's timeout), if anything is.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Running => self.timeout_at,
            Phase::Terminating { deadline } => Some(deadline),
            Phase::Over => None,
        }
    }

    /// Do what is due at `now`: the timeout's SIGTERM, or the end of a grace period.
    /// `foreground` gives the terminal's foreground group, which is signalled too; it is
    /// asked only when something is due (the relay calls this on every turn).
    pub fn on_time(&mut self, now: Instant, foreground: impl FnOnce() -> Option<Pid>) {
        match self.phase {
            Phase::Running => {
                if let (Some(at), Some(timeout)) = (self.timeout_at, self.options.timeout) {
                    if now >= at {
                        report_timeout(&timeout);
                        self.exit_override = Some(exit::TIMEOUT);
                        self.terminate_with_grace(Signal::SIGTERM, timeout.grace, foreground());
                    }
                }
            }
            Phase::Terminating { deadline } if now >= deadline => self.end_tree(),
            Phase::Terminating { .. } | Phase::Over => {}
        }
    }

    /// A terminating signal for the whole session: `signal` passed on to the program (and
    /// the terminal's foreground job), the tree killed after `grace`; sbx-shell then exits
    /// 128 + `reason` (the signal sbx-shell got).
    pub fn terminate(
        &mut self,
        signal: Signal,
        reason: i32,
        grace: Duration,
        foreground: Option<Pid>,
    ) {
        self.exit_override
            .get_or_insert(exit::signal_exit_code(reason));
        self.terminate_with_grace(signal, grace, foreground);
    }

    /// Pass on a signal that a process sent to sbx-shell; the program decides what it means.
    pub fn forward(&self, signal: Signal) {
        let _ = kill(self.options.signal_target(self.child), signal);
    }

    /// Reap every child that changed state. Returns true when our child stopped itself;
    /// when it ended, what it left behind is killed.
    pub fn on_child_events(&mut self) -> bool {
        let mut stopped = false;
        for event in process::reap_children() {
            match event {
                ChildEvent::Ended(pid, end) if pid == self.child => {
                    self.end = Some(end);
                    self.end_tree();
                }
                ChildEvent::Stopped(pid) if pid == self.child => stopped = true,
                _ => {}
            }
        }
        stopped
    }

    /// The code sbx-shell exits with: a timeout's or a terminating signal's, else the
    /// child's.
    pub fn exit_code(&self) -> u8 {
        match (self.exit_override, self.end) {
            (Some(code), _) => code,
            (None, Some(end)) => exit::exit_code(end),
            (None, None) => exit::FAILURE,
        }
    }

    fn terminate_with_grace(&mut self, signal: Signal, grace: Duration, foreground: Option<Pid>) {
        if self.phase != Phase::Running {
            return;
        }
        let target = self.options.signal_target(self.child);
        let _ = kill(target, signal);
        if let Some(foreground) = foreground.filter(|f| *f != target) {
            let _ = killpg(foreground, signal);
        }
        if signal == Signal::SIGHUP {
            let _ = kill(target, Signal::SIGCONT);
        }
        self.phase = Phase::Terminating {
            deadline: Instant::now() + grace,
        };
    }

    /// Kill everything below us that is still alive; learn the child's end if it was reaped
    /// meanwhile.
    fn end_tree(&mut self) {
        if self.phase == Phase::Over {
            return;
        }
        for event in process::kill_leftovers(self.session) {
            if let ChildEvent::Ended(pid, end) = event {
                if pid == self.child && self.end.is_none() {
                    self.end = Some(end);
                }
            }
        }
        self.phase = Phase::Over;
    }
}

/// Say that the session timed out (on a raw terminal too: hence the CR).
fn report_timeout(timeout: &Timeout) {
    eprint!(
        "\r\nsbx-shell: the session reached its timeout of {}s: ending it\r\n",
        timeout.after.as_secs()
    );
}

/// What the session runs: the argv (the launcher's, or the helper's), exactly this
/// environment, and how it is supervised.
#[derive(Debug)]
pub struct Child {
    pub argv: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
    pub options: SessionOptions,
    /// Where the relay records the clipboard requests it refuses, as it does.
    pub refusals: Option<crate::policy::refusal::Sink>,
    /// Questions to the user, shown on the outer terminal by the relay (`pty::ask`).
    pub questions: Option<crate::session::pty::ask::Desk>,
}
