//! The guard (Linux, when no bwrap pid namespace holds the program's tree).
//!
//! sbx-shell can clean up after the program only while it runs; killed with SIGKILL, it leaves
//! the program's orphans to init. So in guard mode the helper forks: the child goes on to
//! confine itself and exec the program, and the parent — outside the Landlock domain, so the
//! program can neither signal nor trace it — stays behind as a child subreaper that:
//! - learns that sbx-shell died — from the lifeline, a pipe whose only write end sbx-shell
//!   holds (end-of-file, however and whenever it died: before the guard started too), and
//!   from the kernel (PR_SET_PDEATHSIG) — and then kills every process below it,
//!   setsid'd and double-forked ones included (they are re-parented to it);
//! - when the program ends, kills what is left and ends the same way the program did, so
//!   sbx-shell sees the program's exit status;
//! - reports the program's stops so that job control still reaches sbx-shell: on the notice
//!   fd sbx-shell gives it (bwrap's processes sit between us and sbx-shell and never pass a
//!   stop on; and a stopped guard would stop its mediator, and with it every other process
//!   of the session that makes a name), else by stopping itself; passes SIGCONT on;
//! - forwards signals that processes send it (not terminal-generated ones, which reach the
//!   program's process group directly).
//!
//! Inside bwrap the guard is the pid namespace's init (`--as-pid-1`): when it ends, the
//! kernel ends everything in the namespace. bwrap learns of sbx-shell's death only once it
//! armed its own death signal (a window at start-up): the lifeline closes that window.

use std::process::ExitCode;

use nix::sys::signal::{kill, SigSet, SigmaskHow, Signal};
use nix::unistd::{fork, getpid, getppid, ForkResult, Pid};

use crate::sys::exit::{self, ChildEnd};
use crate::sys::process::{self, ChildEvent};

/// The signal the kernel sends the guard when sbx-shell dies (never sent by sbx-shell).
fn death_signal() -> i32 {
    libc::SIGRTMIN() + 2
}

/// Fork. Returns `None` in the child (which goes on to exec the program); in the guard,
/// runs `on_guard` (its threads start there, every signal blocked; its error kills the
/// program and is returned), then returns the exit code once the program and everything
/// it started are gone.
pub fn split(
    stop_notify_fd: Option<i32>,
    lifeline_fd: Option<i32>,
    on_guard: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<Option<ExitCode>> {
    let parent = getppid();
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::all()), None)?;
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, death_signal(), 0, 0, 0) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    // Checked after arming: sbx-shell dying from here on is signalled and seen on the
    // lifeline; dying before is seen now. Either way, run nothing.
    if getppid() != parent || lifeline_fd.is_some_and(|fd| supervisor_gone(fd, 0)) {
        return Ok(Some(ExitCode::from(exit::FAILURE)));
    }
    process::install_subreaper();
    // SAFETY: the helper is single-threaded, so the child may run any code after fork.
    match unsafe { fork() }? {
        ForkResult::Child => {
            // The guard's death signal is not inherited; the mask is emptied before exec.
            Ok(None)
        }
        ForkResult::Parent { child } => {
            if let Err(e) = on_guard() {
                // Never a guard without what it was to be: the program goes with it.
                let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                return Err(e);
            }
            Ok(Some(watch(child, stop_notify_fd, lifeline_fd)?))
        }
    }
}

/// Whether the lifeline reads as end-of-file (or is broken) within `timeout_ms`: nobody
/// writes to it, so anything but "nothing yet" means sbx-shell is gone.
fn supervisor_gone(fd: i32, timeout_ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    n == 1 && pfd.revents != 0
}

/// Wait for signals (all blocked, read from a signalfd) and for the lifeline, and act on
/// them until the program is gone.
fn watch(
    child: Pid,
    stop_notify_fd: Option<i32>,
    lifeline_fd: Option<i32>,
) -> std::io::Result<ExitCode> {
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let signals = SignalFd::with_flags(&SigSet::all(), SfdFlags::SFD_CLOEXEC)?;
    loop {
        let mut fds = vec![libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(&signals),
            events: libc::POLLIN,
            revents: 0,
        }];
        fds.extend(lifeline_fd.map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `fds` is a valid array of pollfds for the duration of the call.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } == -1 {
            continue;
        }
        if fds.get(1).is_some_and(|l| l.revents != 0) {
            process::kill_leftovers(None);
            return Ok(ExitCode::from(exit::signal_exit_code(libc::SIGKILL)));
        }
        let Ok(Some(info)) = signals.read_signal() else {
            continue;
        };
        let signal = info.ssi_signo as i32;
        let sent_by_process = info.ssi_code <= 0;
        match signal {
            libc::SIGCHLD => {
                for event in process::reap_children() {
                    match event {
                        ChildEvent::Ended(pid, end) if pid == child => {
                            process::kill_leftovers(None);
                            return Ok(end_like(end));
                        }
                        ChildEvent::Stopped(pid) if pid == child => match stop_notify_fd {
                            // SAFETY: writes one byte from a valid buffer; a closed or
                            // full pipe only makes it fail.
                            Some(fd) => unsafe {
                                libc::write(fd, b"S".as_ptr().cast(), 1);
                            },
                            None => {
                                let _ = kill(getpid(), Signal::SIGSTOP);
                            }
                        },
                        _ => {}
                    }
                }
            }
            libc::SIGCONT => {
                let _ = kill(Pid::from_raw(-child.as_raw()), Signal::SIGCONT);
                let _ = kill(child, Signal::SIGCONT);
            }
            s if s == death_signal() => {
                process::kill_leftovers(None);
                return Ok(ExitCode::from(exit::signal_exit_code(libc::SIGKILL)));
            }
            s if sent_by_process => {
                // SAFETY: kill with a valid signal number touches no memory.
                unsafe { libc::kill(child.as_raw(), s) };
            }
            _ => {}
        }
    }
}

/// End the way the program ended: the same exit code, or death by the same signal (without
/// a core dump), so sbx-shell reports it exactly as it would the program's.
fn end_like(end: ChildEnd) -> ExitCode {
    if let ChildEnd::Signaled(signal) = end {
        let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
        if let Ok(sig) = Signal::try_from(signal) {
            // SAFETY: SIG_DFL installs no code of ours.
            let _ = unsafe { nix::sys::signal::signal(sig, nix::sys::signal::SigHandler::SigDfl) };
            let mut only = SigSet::empty();
            only.add(sig);
            let _ = kill(getpid(), sig);
            let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&only), None);
        }
    }
    ExitCode::from(exit::exit_code(end))
}
