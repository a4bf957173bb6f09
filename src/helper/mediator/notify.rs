//! The seccomp listener the guard answers the program's mediated calls on (`Listener`):
//! receiving a call, checking that it still waits, answering it (a result, an errno, a
//! descriptor added to the program, or "go on"); and the thread's effective capabilities
//! dropped.
//!
//! The filter is installed with `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` where the kernel
//! has it (Linux 5.19, `killable`): once the guard has received a call, only a fatal signal
//! ends the program's wait, so no act of the guard is followed by the program restarting
//! the same call. A signal that arrives before the guard received the call interrupts it
//! as the kernel interrupts any wait (`EINTR`, or a restart under `SA_RESTART`): nothing
//! was done yet. The guard waits in `SECCOMP_IOCTL_NOTIF_RECV` itself, so that a call is
//! received the moment it is made, on the caller's CPU (`SYNC_WAKE_UP`).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

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

/// A notification's fields that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Call {
    pub id: u64,
    /// The calling thread (its id in the guard's pid namespace).
    pub pid: u32,
    pub nr: i64,
    pub args: [u64; 6],
}

/// How an answer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delivered {
    Yes,
    /// The call no longer waits (a signal ended the program's wait, or the program is
    /// gone): the answer reached nobody.
    Gone,
}

/// The listener of the program's mediated filter.
pub(super) struct Listener {
    fd: OwnedFd,
    sizes: libc::seccomp_notif_sizes,
    /// Where calls are received and answers written (allocated once: this is done for
    /// every call).
    notif: std::cell::RefCell<Vec<u64>>,
    resp: std::cell::RefCell<Vec<u64>>,
}

impl Listener {
    /// `fd`, as received from the program's side; its calls are handed to this thread
    /// directly (`SYNC_WAKE_UP`, Linux 6.6; without it calls are only slower).
    pub(super) fn new(fd: OwnedFd) -> io::Result<Listener> {
        let sizes = notif_sizes()?;
        let listener = Listener {
            fd,
            sizes,
            notif: buffer::<libc::seccomp_notif>(sizes.seccomp_notif).into(),
            resp: buffer::<libc::seccomp_notif_resp>(sizes.seccomp_notif_resp).into(),
        };
        const SYNC_WAKE_UP: u64 = 1;
        // SAFETY: SET_FLAGS reads one u64 by value.
        unsafe {
            libc::ioctl(
                listener.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
                SYNC_WAKE_UP,
            )
        };
        Ok(listener)
    }

    /// A second handle on the same listener (for a thread that answers a call later).
    pub(super) fn try_clone(&self) -> io::Result<Listener> {
        Ok(Listener {
            fd: self.fd.try_clone()?,
            sizes: self.sizes,
            notif: self.notif.clone(),
            resp: self.resp.clone(),
        })
    }

    /// The next call, waiting in the kernel until one is made. `Ok(None)`: the one made
    /// went away before it was received; `Err` with `ENOTCONN`: no process of the filter
    /// is left.
    pub(super) fn receive(&self) -> io::Result<Option<Call>> {
        let mut buf = self.notif.borrow_mut();
        buf.fill(0);
        // SAFETY: the buffer is zeroed, aligned and at least as large as the kernel's
        // seccomp_notif, which RECV fills.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                buf.as_mut_ptr(),
            )
        };
        if rc == -1 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                // ENOENT: the caller went away before it was received — or nobody is left
                // (RECV does not wait then), which the listener's hang-up tells.
                Some(libc::ENOENT) if self.hung_up() => Err(io::ErrorKind::NotConnected.into()),
                Some(libc::ENOENT) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        // SAFETY: the buffer holds a seccomp_notif (its fields are a stable prefix).
        let notif = unsafe { &*(buf.as_ptr() as *const libc::seccomp_notif) };
        Ok(Some(Call {
            id: notif.id,
            pid: notif.pid,
            nr: i64::from(notif.data.nr),
            args: notif.data.args,
        }))
    }

    /// Whether no process of the filter is left.
    fn hung_up(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call; no timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        n == 1 && pfd.revents & libc::POLLHUP != 0
    }

    /// Answer `call` (`Sent`: nothing more to say).
    pub(super) fn respond(&self, call: &Call, answer: Answer) -> Delivered {
        let (val, error, flags) = match answer {
            Answer::Sent => return Delivered::Yes,
            Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
            Answer::Done(v) if v < 0 => (0, i32::try_from(v).unwrap_or(-libc::EPERM), 0),
            Answer::Done(v) => (v, 0, 0),
        };
        let mut buf = self.resp.borrow_mut();
        buf.fill(0);
        // SAFETY: the buffer is aligned and large enough for a seccomp_notif_resp.
        let resp = unsafe { &mut *(buf.as_mut_ptr() as *mut libc::seccomp_notif_resp) };
        resp.id = call.id;
        resp.val = val;
        resp.error = error;
        resp.flags = flags;
        // SAFETY: SEND reads one seccomp_notif_resp from the buffer.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_SEND as _,
                buf.as_ptr(),
            )
        };
        match rc {
            -1 => Delivered::Gone,
            _ => Delivered::Yes,
        }
    }

    /// Whether the caller still waits on notification `id` (so its pid still names it).
    pub(super) fn still_waiting(&self, id: u64) -> bool {
        // SAFETY: ID_VALID reads one u64.
        unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
                &id as *const u64,
            ) == 0
        }
    }

    /// Hand `fd` to the caller of notification `id` as the call's result (its number
    /// there), close-on-exec when `cloexec`: `Ok(Yes)` once installed, `Ok(Gone)` when the
    /// call no longer waits, `Err` when the program could not take it (`EMFILE`).
    pub(super) fn send_fd(&self, id: u64, fd: &OwnedFd, cloexec: bool) -> Result<Delivered, i64> {
        // With SEND, ADDFD also answers the call (the descriptor's number in the caller is
        // the call's result).
        let rc = self.add_fd(id, libc::SECCOMP_ADDFD_FLAG_SEND, (fd, 0), cloexec);
        if rc >= 0 {
            return Ok(Delivered::Yes);
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOENT) | Some(libc::EINPROGRESS) => Ok(Delivered::Gone),
            _ => Err(errno(&io::Error::last_os_error())),
        }
    }
}

impl Listener {
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
        let rc = self.add_fd(id, libc::SECCOMP_ADDFD_FLAG_SETFD, (fd, newfd), cloexec);
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Listener {
    /// `SECCOMP_IOCTL_NOTIF_ADDFD`: `fd` put in the caller of notification `id` (at
    /// `newfd` with SETFD), close-on-exec when `cloexec`; the ioctl's result.
    fn add_fd(
        &self,
        id: u64,
        flags: libc::c_ulong,
        (fd, newfd): (&OwnedFd, u32),
        cloexec: bool,
    ) -> libc::c_int {
        let addfd = libc::seccomp_notif_addfd {
            id,
            flags: flags as u32,
            srcfd: fd.as_raw_fd() as u32,
            newfd,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: ADDFD reads one seccomp_notif_addfd.
        unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
                &addfd as *const libc::seccomp_notif_addfd,
            )
        }
    }
}

fn notif_sizes() -> io::Result<libc::seccomp_notif_sizes> {
    let mut sizes = libc::seccomp_notif_sizes {
        seccomp_notif: 0,
        seccomp_notif_resp: 0,
        seccomp_data: 0,
    };
    // SAFETY: SECCOMP_GET_NOTIF_SIZES writes one seccomp_notif_sizes.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_GET_NOTIF_SIZES,
            0,
            &mut sizes as *mut libc::seccomp_notif_sizes,
        )
    };
    if rc == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(sizes)
}

/// A zeroed buffer of at least `size` bytes (and of `T`), aligned for `T`.
fn buffer<T>(size: u16) -> Vec<u64> {
    let bytes = usize::from(size).max(std::mem::size_of::<T>());
    vec![0u64; bytes.div_ceil(8)]
}

/// Clear this thread's effective capabilities (permitted ones stay, unused): the kernel
/// then checks what the mediator does as it checks the program, which has none.
pub(super) fn drop_effective_capabilities() -> io::Result<()> {
    let mut sets = crate::sys::capabilities::get()?;
    for half in &mut sets {
        half.effective = 0;
    }
    crate::sys::capabilities::set(&sets)
}
