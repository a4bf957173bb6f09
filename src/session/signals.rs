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
//! catch (README: "If the terminal is left raw").

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal};

const SENT_BY_PROCESS: u8 = 0x80;

/// The signals a fault raises, and `abort`.
pub const FAULTS: [i32; 5] = [
    libc::SIGABRT,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
];

/// The outer terminal's termios from before raw mode (set once, read in signal context).
static TERMINAL: OnceLock<libc::termios> = OnceLock::new();
/// The events pipe's write end, for the fault handler (-1 until installed).
static EVENTS_WRITE: AtomicI32 = AtomicI32::new(-1);

/// Keep `termios` (fd 0's, before raw mode) for restoring it where nothing else can run.
pub fn remember_terminal(termios: libc::termios) {
    let _ = TERMINAL.set(termios);
}

/// Put fd 0 back as remembered, if anything was (async-signal-safe).
pub fn restore_terminal(when: libc::c_int) {
    if let Some(saved) = TERMINAL.get() {
        // SAFETY: `saved` is a complete termios read by tcgetattr from this same fd.
        unsafe { libc::tcsetattr(0, when, saved) };
    }
}

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
    EVENTS_WRITE.store(write_fd, Ordering::SeqCst);
    install_fault_handlers()?;
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

/// The fault handler for every fault signal, on the alternate stack (a stack overflow is a
/// SIGSEGV too). Not through signal-hook, which refuses these signals.
fn install_fault_handlers() -> io::Result<()> {
    for signal in FAULTS {
        // SAFETY: a zeroed sigaction is valid; every field that matters is set below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_fault as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset to empty.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `action` is fully initialized; `on_fault` only makes async-signal-safe
        // calls; the old action is not needed.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A fault signal: from another process, an event like SIGTERM; our own, the terminal
/// restored and death by the same signal.
extern "C" fn on_fault(signal: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t.
    let info = unsafe { &*info };
    let events = EVENTS_WRITE.load(Ordering::SeqCst);
    if !own_fault(info) && events >= 0 {
        let byte = encode(signal, true);
        // SAFETY: a valid one-byte buffer; write(2) is async-signal-safe.
        let _ = unsafe { libc::write(events, (&byte as *const u8).cast(), 1) };
        return;
    }
    restore_terminal(libc::TCSANOW);
    // SAFETY: SIG_DFL, then unblocking the signal (blocked while its handler runs), are
    // async-signal-safe; the pending or re-raised signal then ends the process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        let mut only: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut only);
        libc::sigaddset(&mut only, signal);
        libc::raise(signal);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
    }
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

/// Whether this process raised the fault signal itself: the kernel's (a bad access, a bad
/// instruction) or its own `abort`/`raise`. Async-signal-safe.
fn own_fault(info: &libc::siginfo_t) -> bool {
    #[cfg(target_os = "linux")]
    {
        // Positive codes come from the kernel, and no process may queue one to another;
        // SI_TKILL (tgkill, as abort and raise use) with our own pid cannot be forged by
        // another process either (rt_sigqueueinfo refuses SI_TKILL to others).
        const SI_TKILL: i32 = -6;
        // SAFETY: si_pid is the union member filled for SI_TKILL; getpid is
        // async-signal-safe.
        info.si_code > 0 || (info.si_code == SI_TKILL && unsafe { info.si_pid() == libc::getpid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        // SAFETY: getpid is async-signal-safe.
        !sent_by_process(info) || info.si_pid == unsafe { libc::getpid() }
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
