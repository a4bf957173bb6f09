//! The supervisor's signal handling: self-pipes, so that signals become ordinary readable
//! events in the one poll loop.
//!
//! Two pipes, both non-blocking on the write side so a handler never blocks:
//! - SIGWINCH writes one byte to its own pipe; bursts coalesce (a full pipe drops bytes, and
//!   one pending byte is all the loop needs to re-read the size);
//! - every other handled signal writes one byte naming itself to the events pipe, with the
//!   high bit set when a process sent it (kill) rather than the kernel (terminal, child).
//!
//! Keeping SIGWINCH apart means a storm of resizes can never crowd a SIGTERM out of the pipe.
//! Install before reading the initial window size, so no resize between the two is lost.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};

const SENT_BY_PROCESS: u8 = 0x80;

/// One delivered signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalEvent {
    pub signal: i32,
    /// Sent with kill(2) and friends, rather than raised by the kernel (e.g. ^C on a tty).
    pub sent_by_process: bool,
}

/// The read ends of the self-pipes. The write ends live in the handlers for the life of the
/// process.
#[derive(Debug)]
pub struct SignalPipes {
    pub events: OwnedFd,
    pub winch: Option<OwnedFd>,
}

/// Install handlers for `signals` (and SIGWINCH when `watch_winch`), unblocking them.
pub fn install(signals: &[Signal], watch_winch: bool) -> io::Result<SignalPipes> {
    let (events_read, events_write) = nonblocking_pipe()?;
    let write_fd: RawFd = events_write.as_raw_fd();
    // The handlers use the write end until the process exits.
    std::mem::forget(events_write);
    let mut unblock = SigSet::empty();
    for &signal in signals {
        let number = signal as i32;
        let action = move |info: &libc::siginfo_t| {
            let byte = encode(number, sent_by_process(info));
            // SAFETY: `byte` is a valid one-byte buffer; write(2) is async-signal-safe.
            let _ = unsafe { libc::write(write_fd, (&byte as *const u8).cast(), 1) };
        };
        // SAFETY: the action only calls write(2), which is async-signal-safe, on a pipe fd
        // that stays open for the life of the process (forgotten above).
        unsafe { signal_hook_registry::register_sigaction(number, action) }?;
        unblock.add(signal);
    }
    let winch = if watch_winch {
        let (winch_read, winch_write) = nonblocking_pipe()?;
        signal_hook::low_level::pipe::register(libc::SIGWINCH, winch_write)?;
        unblock.add(Signal::SIGWINCH);
        Some(winch_read)
    } else {
        None
    };
    // A parent may have started us with these blocked; we must see them.
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&unblock), None)?;
    Ok(SignalPipes {
        events: events_read,
        winch,
    })
}

/// Read every pending event (empty when none is pending).
pub fn read_events(fd: BorrowedFd<'_>) -> Vec<SignalEvent> {
    let mut buf = [0u8; 64];
    let mut events = Vec::new();
    while let Ok(n @ 1..) = nix::unistd::read(fd, &mut buf) {
        events.extend(buf[..n].iter().map(|b| decode(*b)));
    }
    events
}

/// Empty a coalescing pipe; true when anything was pending.
pub fn drain(fd: BorrowedFd<'_>) -> bool {
    let mut buf = [0u8; 256];
    let mut any = false;
    while let Ok(1..) = nix::unistd::read(fd, &mut buf) {
        any = true;
    }
    any
}

/// Stop this process as SIGTSTP's default action would (the shell that started us then
/// takes the terminal back), and return once continued. The kernel discards the stop when
/// our process group is orphaned (a login shell, a tmux pane): then this returns at once,
/// since nobody could continue us.
pub fn stop_self() -> io::Result<()> {
    let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
    // SAFETY: installing SIG_DFL runs no code of ours in signal context.
    let previous = unsafe { sigaction(Signal::SIGTSTP, &default) }?;
    let raised = nix::sys::signal::raise(Signal::SIGTSTP);
    // SAFETY: `previous` is the action sigaction returned for this same signal.
    unsafe { sigaction(Signal::SIGTSTP, &previous) }?;
    Ok(raised?)
}

/// A pipe with both ends close-on-exec and non-blocking (pipe2 is not on every platform).
fn nonblocking_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe()?;
    for end in [&read, &write] {
        fcntl(end.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(end.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    }
    Ok((read, write))
}

/// Whether a process sent the signal (as opposed to the kernel: a terminal, a child).
fn sent_by_process(info: &libc::siginfo_t) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SI_USER (kill) is 0; SI_QUEUE, SI_TKILL and the other user codes are negative.
        info.si_code <= 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        // macOS leaves si_code 0 for both; only a sending process fills in its pid.
        info.si_pid != 0
    }
}

fn encode(signal: i32, by_process: bool) -> u8 {
    let number = u8::try_from(signal).unwrap_or(0) & !SENT_BY_PROCESS;
    if by_process {
        number | SENT_BY_PROCESS
    } else {
        number
    }
}

fn decode(byte: u8) -> SignalEvent {
    SignalEvent {
        signal: i32::from(byte & !SENT_BY_PROCESS),
        sent_by_process: byte & SENT_BY_PROCESS != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_through_one_byte() {
        for signal in [libc::SIGHUP, libc::SIGTERM, libc::SIGCHLD, libc::SIGTSTP] {
            for by_process in [false, true] {
                let event = decode(encode(signal, by_process));
                assert_eq!(
                    event,
                    SignalEvent {
                        signal,
                        sent_by_process: by_process
                    }
                );
            }
        }
    }
}
