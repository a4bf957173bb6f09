//! Opens that wait for another party — a FIFO's other end — done in a thread of their own,
//! so that no other call of the program waits behind them, and answered when they end.
//!
//! The object was judged and opened O_PATH by the guard's thread; this thread opens it
//! again through its descriptor (nothing is looked up by name again) and hands the result
//! to the program. While it waits, the program's own wait is one only a fatal signal ends
//! (`notify::killable`): so every 20 ms this thread looks whether a signal waits for the
//! program's thread (`status::interrupts`), and then answers "restart" (`ERESTARTSYS`), as
//! the kernel answers a FIFO's open that a signal interrupts — the program runs its handler
//! and restarts the call or gets `EINTR`, by its `SA_RESTART`, or stops (^Z) and opens
//! again when continued. It also gives up when the call no longer waits (the program is
//! gone, or, on a kernel whose wait any signal ends, it was interrupted and will ask again).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use super::notify::{Answer, Call, Listener, ERESTARTSYS};

/// How often a waiting open looks at the program's thread.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Answer `call`, an open of the FIFO `object` with `how`, from a thread of its own.
pub(super) fn start(
    listener: &Listener,
    call: &Call,
    (object, how, cloexec): (OwnedFd, i32, bool),
    killable: bool,
) -> Answer {
    let spawned = listener.try_clone().and_then(|listener| {
        let call = *call;
        std::thread::Builder::new()
            .name("sbx-guard-wait".into())
            .spawn(move || wait(&listener, &call, (object, how, cloexec), killable))
    });
    match spawned {
        Ok(_) => Answer::Sent,
        Err(e) => Answer::Done(super::notify::errno(&e)),
    }
}

fn wait(
    listener: &Listener,
    call: &Call,
    (object, how, cloexec): (OwnedFd, i32, bool),
    killable: bool,
) {
    let answer = match Waker::every(LOOK_EVERY) {
        Ok(_waker) => loop {
            match open_again(&object, how) {
                Ok(fd) => match listener.send_fd(call.id, &fd, cloexec) {
                    Ok(_) => return,
                    Err(e) => break Answer::Done(e),
                },
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if !listener.still_waiting(call.id) {
                        return;
                    }
                    if killable && signalled(call.pid) {
                        break Answer::Done(-ERESTARTSYS);
                    }
                }
                Err(e) => break Answer::Done(super::notify::errno(&e)),
            }
        },
        Err(e) => Answer::Done(super::notify::errno(&e)),
    };
    listener.respond(call, answer);
}

/// Whether a signal waits for thread `tid` that its own wait would have taken.
pub(super) fn signalled(tid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|text| super::status::parse_signals(&text))
        .is_some_and(|s| super::status::interrupts(&s))
}

/// `object` opened again with `how`, through this process's `/proc/self/fd` (a magic link,
/// followed; nothing is made).
fn open_again(object: &OwnedFd, how: i32) -> io::Result<OwnedFd> {
    use std::os::fd::FromRawFd;
    let magic = std::ffi::CString::new(format!("/proc/self/fd/{}", object.as_raw_fd()))?;
    let how = (how & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW)) | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated path; a new descriptor or -1.
    let fd = unsafe { libc::open(magic.as_ptr(), how) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The signal that ends this thread's waiting call now and then (a handler that does
/// nothing, without `SA_RESTART`, so the call fails with EINTR).
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

/// A timer that signals this thread every so often, while it lives.
pub(super) struct Waker(libc::timer_t);

impl Waker {
    pub(super) fn every(period: Duration) -> io::Result<Waker> {
        extern "C" fn nothing(_: libc::c_int) {}
        let signal = wake_signal();
        // SAFETY: a zeroed sigaction is valid; the handler is a plain function that does
        // nothing (async-signal-safe), installed without SA_RESTART.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
            if libc::sigaction(signal, &action, std::ptr::null_mut()) == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: a zeroed sigset_t is emptied and given one valid signal; the mask
        // change is this thread's.
        unsafe {
            let mut only: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut only);
            libc::sigaddset(&mut only, signal);
            let rc = libc::pthread_sigmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
        }
        // SAFETY: a zeroed sigevent is valid; the fields set make it signal this thread.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = signal;
        // SAFETY: gettid takes nothing.
        event.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: timer_create reads the sigevent and writes the timer's id.
        if unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) } == -1 {
            return Err(io::Error::last_os_error());
        }
        let waker = Waker(timer);
        let every = libc::timespec {
            tv_sec: period.as_secs() as libc::time_t,
            tv_nsec: libc::c_long::from(period.subsec_nanos() as i32),
        };
        let spec = libc::itimerspec {
            it_interval: every,
            it_value: every,
        };
        // SAFETY: our timer, and a valid itimerspec; the old value is not asked for.
        if unsafe { libc::timer_settime(waker.0, 0, &spec, std::ptr::null_mut()) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(waker)
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        // SAFETY: our timer, deleted once.
        unsafe { libc::timer_delete(self.0) };
    }
}
