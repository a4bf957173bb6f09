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
//!
//! Fault signals (SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE) get a handler of their own: one
//! that sbx-shell raised itself (a crash; an allocation failure aborts) restores the outer
//! terminal from a copy taken before raw mode — `tcsetattr` only, async-signal-safe — and
//! then dies of the same signal; one that another process sent is an event like SIGTERM
//! (the session ends, exit 128+N), never swallowed. SIGKILL is the one death nothing can
//! catch (README: "If the terminal is left raw"). The handlers themselves, and every call
//! made in them, are `sys::handlers`'.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};

use crate::sys::handlers;

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
    handlers::on_faults(write_fd)?;
    let mut unblock = SigSet::empty();
    for &signal in signals {
        handlers::byte_on_signal(signal as i32, write_fd)?;
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

/// A pipe with both ends close-on-exec and non-blocking (pipe2 is not on every platform).
fn nonblocking_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = nix::unistd::pipe()?;
    for end in [&read, &write] {
        fcntl(end.as_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))?;
        fcntl(end.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    }
    Ok((read, write))
}

pub use handlers::{remember_terminal, restore_terminal, stop_self, FAULTS};

fn decode(byte: u8) -> SignalEvent {
    let (signal, sent_by_process) = handlers::decode(byte);
    SignalEvent {
        signal,
        sent_by_process,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child run of this test binary (`FAULT_CHILD` set): fd 0 is a pty the parent
    /// made; remember its termios, make it raw as the relay does, install the handlers,
    /// and fault for real.
    #[test]
    fn fault_child() {
        let Some(how) = std::env::var_os("SBX_FAULT_CHILD") else {
            return;
        };
        let saved = nix::sys::termios::tcgetattr(std::io::stdin()).unwrap();
        remember_terminal(libc::termios::from(saved.clone()));
        let mut raw = saved;
        nix::sys::termios::cfmakeraw(&mut raw);
        nix::sys::termios::tcsetattr(std::io::stdin(), nix::sys::termios::SetArg::TCSANOW, &raw)
            .unwrap();
        let _pipes = install(&[], false).unwrap();
        if how == "abort" {
            std::process::abort();
        }
        // SAFETY: none; this is the point — a read of address 0 faults (SIGSEGV).
        unsafe { std::ptr::read_volatile(std::ptr::null::<u8>()) };
    }

    #[test]
    fn a_fault_or_abort_of_our_own_restores_the_terminal_and_dies_of_that_signal() {
        use std::os::unix::process::ExitStatusExt;
        for (how, signal) in [("abort", libc::SIGABRT), ("segv", libc::SIGSEGV)] {
            let pty = nix::pty::openpty(None, None).unwrap();
            let before = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "session::signals::tests::fault_child",
                    "--nocapture",
                ])
                .env("SBX_FAULT_CHILD", how)
                .env("RUST_BACKTRACE", "0")
                .stdin(std::process::Stdio::from(pty.slave.try_clone().unwrap()))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert_eq!(status.signal(), Some(signal), "{how}: {status:?}");
            let after = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
            assert_eq!(
                libc::termios::from(after),
                libc::termios::from(before),
                "{how}: the terminal was left changed"
            );
        }
    }

    #[test]
    fn events_round_trip_through_one_byte() {
        for signal in [libc::SIGHUP, libc::SIGTERM, libc::SIGCHLD, libc::SIGTSTP] {
            for by_process in [false, true] {
                let event = decode(handlers::encode(signal, by_process));
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
