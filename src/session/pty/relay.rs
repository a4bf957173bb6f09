//! The relay: one poll loop moving bytes between the outer terminal and the inner pty, and
//! turning signals and child state changes into actions.
//!
//! - The master is non-blocking and input for it waits in a bounded queue, so we never block
//!   writing to the child while the child is blocked writing to us (the classic deadlock).
//! - Output goes straight to fd 1 with write(2), never through std's line buffering; fd 1's
//!   flags are shared with other processes, so it stays blocking and EAGAIN is waited out.
//! - Idle means no wakeups: poll has no timeout except while a deadline is pending at the end.
//! - The end: the child is reaped → what it left behind is hung up and killed → the master is
//!   drained until EIO (bounded) → the modes the child left on are switched off. The caller
//!   then restores termios (the `RawMode` guard) and exits with the code we return.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use super::clipboard::{ClipboardFilter, Direction};
use super::modes::ModeTracker;
use super::raw_mode::OuterTerminal;
use super::winsize;
use crate::policy::config::Clipboard;
use crate::policy::refusal::{self, Sink};
use crate::session::signals::{self, SignalPipes};
use crate::session::supervise::{self, Supervisor};

/// Input waiting for the child, at most; beyond it we stop reading the outer terminal.
const INPUT_QUEUE_MAX: usize = 64 * 1024;
/// The most we wait for the master to report EIO once everything below us is gone.
const DRAIN_MAX: Duration = Duration::from_secs(1);
/// Before sbx-shell stops with the program: how long the master must stay quiet for all the
/// program wrote before it stopped to have been shown.
const SUSPEND_DRAIN: Duration = Duration::from_millis(20);
/// The end-of-file character written for a non-terminal stdin that ended.
const VEOF: u8 = 0x04;

/// Everything the loop touches.
pub struct Relay<'a> {
    master: OwnedFd,
    supervisor: Supervisor,
    outer: Option<&'a OuterTerminal>,
    signals: &'a SignalPipes,
    /// The SIGWINCH self-pipe's read end.
    winch: BorrowedFd<'a>,
    modes: ModeTracker,
    to_child: Vec<u8>,
    stdin_open: bool,
    master_open: bool,
    stdout_open: bool,
    /// Once the tree is gone: read what is left in the pty until EIO or this deadline.
    drain_until: Option<Instant>,
    /// The helper's guard writes here when the program stopped itself (see `pty::PtySession`).
    stop_notices: Option<OwnedFd>,
    /// The terminal clipboard's policy, on the program's output and on its input, and
    /// where each request refused is recorded.
    clipboard_out: ClipboardFilter,
    clipboard_in: ClipboardFilter,
    clipboard: (Clipboard, Option<Sink>),
    /// Questions to the user (`ask`), answered by the next key typed.
    questions: Option<super::ask::Desk>,
    /// The foreground program's directory and command, taken on for the outer terminal.
    #[cfg(target_os = "linux")]
    follow: Option<super::follow::Follow>,
}

impl<'a> Relay<'a> {
    pub fn new(
        master: OwnedFd,
        supervisor: Supervisor,
        outer: Option<&'a OuterTerminal>,
        signals: &'a SignalPipes,
        winch: BorrowedFd<'a>,
    ) -> Self {
        Relay {
            master,
            supervisor,
            outer,
            signals,
            winch,
            modes: ModeTracker::default(),
            to_child: Vec::new(),
            stdin_open: true,
            master_open: true,
            stdout_open: true,
            drain_until: None,
            stop_notices: None,
            clipboard_out: ClipboardFilter::new(Clipboard::None, Direction::Output),
            clipboard_in: ClipboardFilter::new(Clipboard::None, Direction::Input),
            clipboard: (Clipboard::None, None),
            questions: None,
            #[cfg(target_os = "linux")]
            follow: outer.map(|_| super::follow::Follow::new()),
        }
    }

    /// Show the questions `desk` receives on the outer terminal (only there: piped input
    /// is the program's) and answer each with the next key typed.
    pub fn with_questions(mut self, desk: Option<super::ask::Desk>) -> Self {
        self.questions = desk.filter(|_| self.outer.is_some());
        self
    }

    /// A question arrived: shown on its own line.
    fn on_question(&mut self) {
        let Some(question) = self
            .questions
            .as_mut()
            .and_then(super::ask::Desk::next_question)
        else {
            return;
        };
        let line = format!(
            "\r\n\x1b[1msbx-shell:\x1b[0m allow the program to {}? [y/N] ",
            crate::policy::refusal::printable(&question)
        );
        self.write_stdout(line.as_bytes());
    }

    /// The key typed while a question is shown answers it, and the program is asked to
    /// redraw its screen (SIGWINCH). The rest of what was typed goes on to the program.
    fn answer_question<'b>(&mut self, typed: &'b [u8]) -> &'b [u8] {
        let Some(desk) = self.questions.as_mut().filter(|d| d.showing.is_some()) else {
            return typed;
        };
        if !desk.still_asked() {
            desk.answer(false);
            return typed;
        }
        let Some((&key, rest)) = typed.split_first() else {
            return typed;
        };
        let yes = super::ask::is_yes(key);
        desk.answer(yes);
        self.write_stdout(if yes { b"yes\r\n" } else { b"no\r\n" });
        if let Some(group) = self.foreground() {
            let _ = killpg(group, Signal::SIGWINCH);
        }
        rest
    }

    /// Let the terminal's clipboard requests through as `policy` says; record each
    /// refused in `refusals`.
    pub fn with_clipboard(mut self, policy: Clipboard, refusals: Option<Sink>) -> Self {
        self.clipboard_out = ClipboardFilter::new(policy, Direction::Output);
        self.clipboard_in = ClipboardFilter::new(policy, Direction::Input);
        self.clipboard = (policy, refusals);
        self
    }

    /// Record the clipboard requests refused since the filters had dropped `before`.
    fn clipboard_refused(&self, before: u64) {
        let now = self.clipboard_out.dropped + self.clipboard_in.dropped;
        if let (Some(sink), true) = (&self.clipboard.1, now > before) {
            for _ in before..now {
                sink.record(refusal::of_clipboard(self.clipboard.0));
            }
        }
    }

    /// Also watch `fd` (non-blocking) for the guard's notices that the program stopped.
    pub fn with_stop_notices(mut self, fd: OwnedFd) -> Self {
        self.stop_notices = Some(fd);
        self
    }

    /// Relay until the session ends.
    pub fn run(mut self) -> crate::session::Ended {
        while let Some(timeout) = self.next_timeout() {
            self.turn(timeout);
        }
        let before = self.clipboard_out.dropped + self.clipboard_in.dropped;
        let unfinished = self.clipboard_out.finish();
        self.clipboard_refused(before);
        self.write_stdout(&unfinished);
        let reset = self.modes.reset_sequence();
        if !reset.is_empty() {
            self.write_stdout(&reset);
        }
        crate::session::Ended {
            code: self.supervisor.exit_code(),
        }
    }

    /// The poll timeout for the next turn, or None when the session is over.
    fn next_timeout(&mut self) -> Option<PollTimeout> {
        let now = Instant::now();
        let master = &self.master;
        self.supervisor
            .on_time(now, || nix::unistd::tcgetpgrp(master.as_fd()).ok());
        let until = |at: Instant| PollTimeout::try_from(at - now).unwrap_or(PollTimeout::MAX);
        if !self.supervisor.is_over() {
            let next = [self.supervisor.next_deadline(), self.follow_due()]
                .into_iter()
                .flatten()
                .min();
            return Some(next.map_or(PollTimeout::NONE, |at| until(at.max(now))));
        }
        let deadline = *self.drain_until.get_or_insert(now + DRAIN_MAX);
        (now < deadline && self.master_open).then(|| until(deadline))
    }

    /// When the foreground program is next looked at (`follow`).
    fn follow_due(&self) -> Option<Instant> {
        #[cfg(target_os = "linux")]
        return self.follow.as_ref().and_then(super::follow::Follow::due);
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Look at the foreground program, when due (`follow`).
    fn follow_look(&mut self) {
        #[cfg(target_os = "linux")]
        {
            let group = self.foreground();
            if let Some(follow) = self.follow.as_mut() {
                follow.look(group, Instant::now());
            }
        }
    }

    /// The inner terminal's foreground process group.
    fn foreground(&self) -> Option<Pid> {
        nix::unistd::tcgetpgrp(self.master.as_fd()).ok()
    }

    fn turn(&mut self, timeout: PollTimeout) {
        let stdin = std::io::stdin();
        // poll reports POLLHUP even for fds polled for nothing, so a closed side is left
        // out altogether, or the loop would spin on it.
        let mut fds = vec![
            PollFd::new(self.signals.events.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.winch, PollFlags::POLLIN),
        ];
        let master_at = self.master_open.then(|| {
            let mut flags = PollFlags::POLLIN;
            if !self.to_child.is_empty() {
                flags |= PollFlags::POLLOUT;
            }
            fds.push(PollFd::new(self.master.as_fd(), flags));
            fds.len() - 1
        });
        let stdin_at = (self.stdin_open && self.to_child.len() < INPUT_QUEUE_MAX).then(|| {
            fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        let stops_at = self.stop_notices.as_ref().map(|fd| {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        let asks_at = self.questions.as_ref().map(|desk| {
            fds.push(PollFd::new(desk.fd(), PollFlags::POLLIN));
            fds.len() - 1
        });
        match poll(&mut fds, timeout) {
            Ok(_) => {}
            Err(Errno::EINTR) => return,
            Err(_) => {
                // poll itself failing leaves nothing sensible to relay: end the session.
                self.terminate(libc::SIGHUP, libc::SIGHUP);
                return;
            }
        }
        let ready = |at: Option<usize>| {
            at.and_then(|i| fds[i].revents())
                .unwrap_or(PollFlags::empty())
        };
        let (sig, win, master, input, stops) = (
            ready(Some(0)),
            ready(Some(1)),
            ready(master_at),
            ready(stdin_at),
            ready(stops_at),
        );
        let asked = ready(asks_at);
        drop(fds);
        if !asked.is_empty() {
            self.on_question();
        }
        if !stops.is_empty() {
            self.on_stop_notice();
        }
        if !sig.is_empty() {
            for event in signals::read_events(self.signals.events.as_fd()) {
                self.on_signal(event.signal);
            }
        }
        if !win.is_empty() && signals::drain(self.winch) {
            self.forward_size();
        }
        let hangup = PollFlags::POLLHUP | PollFlags::POLLERR;
        if master.intersects(PollFlags::POLLIN | hangup) {
            self.read_master();
        }
        if input.intersects(PollFlags::POLLIN | hangup) {
            self.read_stdin();
        }
        if master.contains(PollFlags::POLLOUT) && !self.to_child.is_empty() {
            self.write_master();
        }
        self.follow_look();
    }

    fn on_signal(&mut self, signal: i32) {
        match signal {
            // The child stopped itself (some TUIs do on ^Z, expecting a shell as parent):
            // stop with it, and continue it when we are continued.
            libc::SIGCHLD if self.supervisor.on_child_events() => {
                self.suspend();
                let _ = kill(self.supervisor.child(), Signal::SIGCONT);
            }
            libc::SIGTSTP => self.suspend(),
            libc::SIGCONT => self.resume(),
            libc::SIGTERM | libc::SIGINT | libc::SIGQUIT | libc::SIGHUP => {
                self.terminate(signal, signal)
            }
            // A fault signal that another process sent: like SIGTERM, exit 128+N.
            s if signals::FAULTS.contains(&s) => self.terminate(libc::SIGTERM, s),
            _ => {}
        }
    }

    /// The guard says the program stopped itself: stop with it, as when our own child stops,
    /// and continue its process group (the terminal's foreground) when we are continued.
    fn on_stop_notice(&mut self) {
        let mut buf = [0u8; 64];
        let stopped = match self
            .stop_notices
            .as_ref()
            .map(|fd| nix::unistd::read(fd, &mut buf))
        {
            Some(Ok(0)) | Some(Err(Errno::EBADF)) | None => {
                self.stop_notices = None;
                false
            }
            Some(Ok(_)) => true,
            Some(Err(_)) => false,
        };
        if stopped {
            let foreground = self.foreground();
            self.suspend();
            if let Some(foreground) = foreground {
                let _ = killpg(foreground, Signal::SIGCONT);
            }
        }
    }

    /// A terminating signal reached us (or the outer terminal went away): pass it on to the
    /// child and its foreground job, give them a moment, then end the tree.
    /// `signal` is passed on; sbx-shell then exits 128 + `reason`.
    fn terminate(&mut self, signal: i32, reason: i32) {
        if let Ok(signal) = Signal::try_from(signal) {
            let foreground = self.foreground();
            self.supervisor
                .terminate(signal, reason, supervise::TERMINATE_GRACE, foreground);
        }
    }

    /// Give the terminal back and stop; on continue, take it again. What the program wrote
    /// before it stopped is shown first (the shell's "Stopped" comes after it, as bare).
    fn suspend(&mut self) {
        self.drain_master(SUSPEND_DRAIN);
        if let Some(outer) = self.outer {
            outer.restore();
        }
        let _ = signals::stop_self();
        self.resume();
    }

    fn resume(&mut self) {
        if let Some(outer) = self.outer {
            let _ = outer.apply_raw();
        }
        self.forward_size();
    }

    fn forward_size(&self) {
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        let outer = if winsize::get(stdin.as_fd()).is_some() {
            stdin.as_fd()
        } else {
            stdout.as_fd()
        };
        winsize::forward(outer, self.master.as_fd());
    }

    /// Relay the program's output until the master stays quiet for `quiet` (bounded: the
    /// kernel hands a pty's output to the master a moment after the write).
    fn drain_master(&mut self, quiet: Duration) {
        while self.master_open {
            let mut fds = [PollFd::new(self.master.as_fd(), PollFlags::POLLIN)];
            let wait = PollTimeout::try_from(quiet).unwrap_or(PollTimeout::ZERO);
            match poll(&mut fds, wait) {
                Ok(1..) => self.read_master(),
                _ => return,
            }
        }
    }

    fn read_master(&mut self) {
        let mut buf = [0u8; 64 * 1024];
        for _ in 0..8 {
            match nix::unistd::read(self.master.as_fd(), &mut buf) {
                Ok(0) | Err(Errno::EIO) => {
                    self.master_open = false;
                    return;
                }
                Ok(n) => {
                    #[cfg(target_os = "linux")]
                    if let Some(follow) = self.follow.as_mut() {
                        follow.wrote();
                    }
                    self.modes.feed(&buf[..n]);
                    let before = self.clipboard_out.dropped + self.clipboard_in.dropped;
                    let shown = self.clipboard_out.filter(&buf[..n]);
                    self.clipboard_refused(before);
                    self.write_stdout(&shown);
                    if n < buf.len() {
                        return; // drained: no need for a read that says EAGAIN
                    }
                }
                Err(Errno::EAGAIN | Errno::EINTR) => return,
                Err(_) => {
                    self.master_open = false;
                    return;
                }
            }
        }
    }

    fn read_stdin(&mut self) {
        let mut buf = [0u8; 16 * 1024];
        match nix::unistd::read(std::io::stdin().as_fd(), &mut buf) {
            Ok(n @ 1..) => {
                let typed = self.answer_question(&buf[..n]);
                let before = self.clipboard_out.dropped + self.clipboard_in.dropped;
                let typed = self.clipboard_in.filter(typed);
                self.clipboard_refused(before);
                self.to_child.extend_from_slice(&typed);
                // Straight on, not at the next turn: a keystroke should cost one wakeup.
                self.write_master();
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            Ok(0) | Err(_) => {
                self.stdin_open = false;
                if self.outer.is_some() {
                    // The outer terminal hung up: the child's terminal goes away too.
                    self.terminate(libc::SIGHUP, libc::SIGHUP);
                } else {
                    // A pipe or file ended: tell the child the way a terminal would.
                    self.to_child.push(VEOF);
                }
            }
        }
    }

    fn write_master(&mut self) {
        match nix::unistd::write(self.master.as_fd(), &self.to_child) {
            Ok(n) => {
                self.to_child.drain(..n);
            }
            Err(Errno::EAGAIN | Errno::EINTR) => {}
            Err(_) => self.to_child.clear(),
        }
    }

    /// Write all of `bytes` to fd 1, unless it has failed before (then they are dropped).
    fn write_stdout(&mut self, mut bytes: &[u8]) {
        let stdout = std::io::stdout();
        while self.stdout_open && !bytes.is_empty() {
            match nix::unistd::write(stdout.as_fd(), bytes) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::EINTR) => {}
                Err(Errno::EAGAIN) => {
                    let mut fds = [PollFd::new(stdout.as_fd(), PollFlags::POLLOUT)];
                    let _ = poll(&mut fds, PollTimeout::NONE);
                }
                Err(_) => self.stdout_open = false,
            }
        }
    }
}
