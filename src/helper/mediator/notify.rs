//! The guard's answers to the program's mediated calls, on the filter's listener
//! (`sys::seccomp::Listener`, which receives a call, checks that it still waits and writes
//! an answer): a result, an errno, a descriptor added to the program, or "go on"; and the
//! thread's effective capabilities dropped.
//!
//! The filter is installed with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` where the kernel
//! has it (Linux 5.19, `killable`): once the guard has received a call, only a fatal signal
//! ends the program's wait, so no act of the guard is followed by the program restarting
//! the same call. A signal that arrives before the guard received the call interrupts it
//! as the kernel interrupts any wait (`EINTR`, or a restart under `SA_RESTART`): nothing
//! was done yet. The guard waits in `SECCOMP_IOCTL_NOTIF_RECV` itself, so that a call is
//! received the moment it is made, on the caller's CPU (`SYNC_WAKE_UP`).

use std::io;
use std::os::fd::{AsFd, OwnedFd};

pub(super) use crate::sys::seccomp::{Call, Delivered, Listener};

/// What one notification gets.
pub(super) enum Answer {
    /// The call's result, done here: a value, or -errno.
    Done(i64),
    /// Let the kernel run it as asked.
    Continue,
    /// Already answered (a descriptor handed over with `SECCOMP_ADDFD_FLAG_SEND`, or by a
    /// thread of its own).
    Sent,
}

pub(super) fn errno(e: &io::Error) -> i64 {
    -i64::from(e.raw_os_error().unwrap_or(libc::EPERM))
}

pub(super) const EPERM: Answer = Answer::Done(-(libc::EPERM as i64));

/// The kernel's "restart this call": answered when the program has a signal to take while
/// its call waits for another party (`waiting`); the kernel then restarts the call or
/// fails it with `EINTR`, by the handler's `SA_RESTART`, as for any interrupted wait.
pub(super) const ERESTARTSYS: i64 = 512;

/// What the guard answers: an answer, or a descriptor to hand over.
pub(super) enum Reply {
    Answer(Answer),
    Fd(OwnedFd, bool),
    /// A value the guard's act gave (kept for a restart on kernels that need it, `replay`).
    Acted(i64),
}

/// The call being answered, and what the guard learned of this machine and the program
/// that bears on how it answers.
pub(super) struct Caller<'a> {
    pub(super) listener: &'a Listener,
    pub(super) call: &'a Call,
    /// The guard may copy the caller's descriptors (`handshake::Learned::copy_fds`).
    pub(super) copy_fds: bool,
    /// The caller waits killably once its call is received (`handshake::Learned`).
    pub(super) killable: bool,
    /// The program's TCP rules, for a connect done for it (`connecting`).
    pub(super) net: super::NetRules,
}

/// The guard's answers, in its words (`Answer`), written on the listener.
impl Listener {
    /// Answer `call` (`Sent`: nothing more to say).
    pub(super) fn respond(&self, call: &Call, answer: Answer) -> Delivered {
        let (value, error, flags) = match answer {
            Answer::Sent => return Delivered::Yes,
            Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
            Answer::Done(v) if v < 0 => (0, i32::try_from(v).unwrap_or(-libc::EPERM), 0),
            Answer::Done(v) => (v, 0, 0),
        };
        self.send(call.id, value, error, flags)
    }

    /// Hand `fd` to the caller of notification `id` as the call's result (its number
    /// there), close-on-exec when `cloexec`: `Ok(Yes)` once installed, `Ok(Gone)` when the
    /// call no longer waits, `Err` when the program could not take it (`EMFILE`).
    pub(super) fn send_fd(&self, id: u64, fd: &OwnedFd, cloexec: bool) -> Result<Delivered, i64> {
        // With SEND, ADDFD also answers the call (the descriptor's number in the caller is
        // the call's result).
        let how = libc::SECCOMP_ADDFD_FLAG_SEND;
        match self.add_fd(id, how, fd.as_fd(), 0, cloexec) {
            Ok(_) => Ok(Delivered::Yes),
            Err(e) => match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EINPROGRESS) => Ok(Delivered::Gone),
                _ => Err(errno(&e)),
            },
        }
    }

    /// Put `fd` in the caller of notification `id` at its descriptor `newfd`, in place of
    /// what is there (as `dup3` would; close-on-exec when `cloexec`), without answering.
    pub(super) fn replace_fd(
        &self,
        id: u64,
        newfd: u32,
        fd: &OwnedFd,
        cloexec: bool,
    ) -> io::Result<()> {
        // With SETFD, ADDFD installs it at `newfd`.
        let how = libc::SECCOMP_ADDFD_FLAG_SETFD;
        self.add_fd(id, how, fd.as_fd(), newfd, cloexec).map(drop)
    }
}

/// This thread's capabilities: none but switching its ids (CAP_SETUID, CAP_SETGID),
/// effective and permitted — so that switching back to uid 0 brings no other back.
pub(super) fn keep_only_id_switching() -> io::Result<()> {
    let mut sets = crate::sys::capabilities::get()?;
    use crate::sys::capabilities::{SETGID, SETUID};
    let keep = (1u32 << SETUID) | (1u32 << SETGID);
    if sets[0].permitted & keep != keep {
        return Err(io::Error::other(
            "root's reads are judged as another user, which needs CAP_SETUID and CAP_SETGID",
        ));
    }
    sets[0] = crate::sys::capabilities::Sets {
        effective: keep,
        permitted: keep,
        inheritable: 0,
    };
    sets[1] = Default::default();
    crate::sys::capabilities::set(&sets)
}

pub(super) fn drop_effective_capabilities() -> io::Result<()> {
    let mut sets = crate::sys::capabilities::get()?;
    for half in &mut sets {
        half.effective = 0;
    }
    crate::sys::capabilities::set(&sets)
}
