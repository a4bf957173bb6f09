//! A timer that signals the thread that made it every so often (`Waker`): what ends a
//! blocking call now and then (with EINTR), so that the thread can look around and wait
//! again.

use std::io;
use std::time::Duration;

/// The signal that ends this thread's waiting call now and then (a handler that does
/// nothing, without `SA_RESTART`, so the call fails with EINTR).
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

/// A timer that signals this thread every so often, while it lives.
pub struct Waker(libc::timer_t);

impl Waker {
    /// A timer for this thread, every `period`.
    pub fn every(period: Duration) -> io::Result<Waker> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocking_read_of_the_thread_that_made_the_waker_ends_with_eintr() {
        std::thread::spawn(|| {
            let (read, _write) = nix::unistd::pipe().unwrap();
            let _waker = Waker::every(Duration::from_millis(5)).unwrap();
            let mut byte = [0u8; 1];
            let got = nix::unistd::read(&read, &mut byte);
            assert_eq!(got, Err(nix::errno::Errno::EINTR));
        })
        .join()
        .unwrap();
    }
}
