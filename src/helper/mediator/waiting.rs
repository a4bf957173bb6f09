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
pub(super) use crate::sys::timer::Waker;

/// How often a waiting open looks at the program's thread.
pub(super) const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Answer `call`, an open of the FIFO `object` with `how`, from a thread of its own.
pub(super) fn start(
    listener: &Listener,
    call: &Call,
    object: OwnedFd,
    how: i32,
    cloexec: bool,
    killable: bool,
) -> Answer {
    let spawned = listener.try_clone().and_then(|listener| {
        let call = *call;
        std::thread::Builder::new()
            .name("sbx-guard-wait".into())
            .spawn(move || wait(&listener, &call, object, how, cloexec, killable))
    });
    match spawned {
        Ok(_) => Answer::Sent,
        Err(e) => Answer::Done(super::notify::errno(&e)),
    }
}

fn wait(
    listener: &Listener,
    call: &Call,
    object: OwnedFd,
    how: i32,
    cloexec: bool,
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
    let magic = std::ffi::CString::new(format!("/proc/self/fd/{}", object.as_raw_fd()))?;
    let how = (how & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW)) | libc::O_CLOEXEC;
    crate::sys::at::openat(crate::sys::at::CWD, &magic, how, 0)
        .map_err(io::Error::from_raw_os_error)
}
