//! What runs inside the supervisor's signal handlers, and what installs them: every call
//! a handler makes is async-signal-safe (write(2), tcsetattr(3), raise(3)), and each is
//! here, apart from the session's logic (`session::signals`), which sees only pipes of
//! bytes.
//!
//! A handled signal writes one byte naming itself to a pipe, with the high bit set when a
//! process sent it (kill) rather than the kernel (a terminal, a child). A fault signal
//! that sbx-shell raised itself restores the outer terminal from the copy taken before
//! raw mode and dies of the same signal; one another process sent is written like any
//! other.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};

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

/// On each `number`, one byte naming it written to `write_fd` (which must stay open for
/// the life of the process: the handler holds it).
pub fn byte_on_signal(number: i32, write_fd: RawFd) -> io::Result<()> {
    let action = move |info: &libc::siginfo_t| {
        write_byte(write_fd, encode(number, sent_by_process(info)));
    };
    // SAFETY: the action only calls write(2), which is async-signal-safe, on a descriptor
    // the caller keeps open for the life of the process.
    unsafe { signal_hook_registry::register_sigaction(number, action) }?;
    Ok(())
}

/// The fault handler for every fault signal, writing another process's to `events_fd`
/// (kept open for the life of the process).
pub fn on_faults(events_fd: RawFd) -> io::Result<()> {
    EVENTS_WRITE.store(events_fd, Ordering::SeqCst);
    install_fault_handlers()
}

/// The fault handler for each fault signal, on the alternate stack (a stack overflow is a
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
        write_byte(events, encode(signal, true));
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

/// The number of signals, real-time ones included.
#[cfg(target_os = "linux")]
pub fn signal_count() -> i32 {
    libc::SIGRTMAX() + 1
}

/// The number of signals.
#[cfg(not(target_os = "linux"))]
pub fn signal_count() -> i32 {
    32
}

/// SIG_DFL for `signal`, through the raw syscall: glibc's posix_spawn leaves its two
/// internal signals (32, 33) *ignored* in a spawned child and its sigaction() refuses to
/// touch them, so only the kernel interface can reset them.
#[cfg(target_os = "linux")]
pub fn set_default_disposition(signal: i32) {
    // A zeroed kernel `struct sigaction` is {SIG_DFL, no flags, no restorer, empty mask} on
    // every Linux ABI; 32 bytes covers its largest layout.
    let default = [0u64; 4];
    let sigset_size = std::mem::size_of::<u64>();
    // SAFETY: rt_sigaction reads one kernel sigaction from `default`, which is valid and
    // large enough, and writes nothing (old action pointer is null).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            signal,
            default.as_ptr(),
            std::ptr::null_mut::<u8>(),
            sigset_size,
        )
    };
}

/// SIG_DFL for `signal`.
#[cfg(not(target_os = "linux"))]
pub fn set_default_disposition(signal: i32) {
    // SAFETY: setting SIG_DFL installs no code of ours.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
}

/// One byte to `fd` (async-signal-safe; a full pipe drops it).
fn write_byte(fd: RawFd, byte: u8) {
    // SAFETY: `byte` is a valid one-byte buffer; write(2) is async-signal-safe.
    let _ = unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
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

/// The byte a handler writes for `signal`.
pub fn encode(signal: i32, by_process: bool) -> u8 {
    let number = u8::try_from(signal).unwrap_or(0) & !SENT_BY_PROCESS;
    if by_process {
        number | SENT_BY_PROCESS
    } else {
        number
    }
}

/// The signal a byte names, and whether a process sent it.
pub fn decode(byte: u8) -> (i32, bool) {
    (
        i32::from(byte & !SENT_BY_PROCESS),
        byte & SENT_BY_PROCESS != 0,
    )
}
