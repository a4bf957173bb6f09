//! seccomp's calls: installing a filter on this thread (and what it starts), and the
//! listener of a filter that notifies (`Listener`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::poll::{PollFd, PollFlags, PollTimeout};

/// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19): once the listener received a call,
/// only a fatal signal ends the caller's wait.
pub const WAIT_KILLABLE_RECV: libc::c_ulong = 1 << 5;

/// Install `program` with `flags`, after setting no_new_privs (which an unprivileged
/// install needs; setting it again changes nothing); with SECCOMP_FILTER_FLAG_NEW_LISTENER
/// in `flags`, the filter's listener (else `None`).
pub fn install(program: &[libc::sock_filter], flags: libc::c_ulong) -> io::Result<Option<OwnedFd>> {
    // SAFETY: integer arguments only; it applies to this thread and what it starts.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::other("a seccomp filter longer than 65535 instructions"))?;
    let prog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp reads `len` instructions through `prog`, valid for the call, and
    // copies them; the program is not written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 {
        return Ok(None);
    }
    // SAFETY: with NEW_LISTENER, seccomp returned a new descriptor, ours alone.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(rc as RawFd) }))
}

/// A notification's fields that matter: which call waits, made by whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub id: u64,
    /// The calling thread (its id in the listener's pid namespace).
    pub pid: u32,
    pub nr: i64,
    pub args: [u64; 6],
}

/// How an answer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    Yes,
    /// The call no longer waits (a signal ended the caller's wait, or the caller is gone):
    /// the answer reached nobody.
    Gone,
}

/// The listener of a filter that notifies (SECCOMP_RET_USER_NOTIF): the calls it receives
/// and the answers it writes, each one ioctl.
pub struct Listener {
    fd: OwnedFd,
    sizes: libc::seccomp_notif_sizes,
    /// Where calls are received and answers written (allocated once: this is done for
    /// every call).
    notif: std::cell::RefCell<Vec<u64>>,
    resp: std::cell::RefCell<Vec<u64>>,
}

impl Listener {
    /// `fd`, a filter's listener; its calls are handed to the receiving thread directly
    /// (`SYNC_WAKE_UP`, Linux 6.6; without it calls are only slower).
    pub fn new(fd: OwnedFd) -> io::Result<Listener> {
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
    pub fn try_clone(&self) -> io::Result<Listener> {
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
    pub fn receive(&self) -> io::Result<Option<Call>> {
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
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        nix::poll::poll(&mut fds, PollTimeout::ZERO).is_ok_and(|n| n == 1)
            && fds[0]
                .revents()
                .is_some_and(|r| r.contains(PollFlags::POLLHUP))
    }

    /// Answer notification `id`: `val`, or `error` (a negative errno), with `flags`
    /// (SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel runs the call as asked).
    pub fn send(&self, id: u64, val: i64, error: i32, flags: u32) -> Delivered {
        let mut buf = self.resp.borrow_mut();
        buf.fill(0);
        // SAFETY: the buffer is aligned and large enough for a seccomp_notif_resp.
        let resp = unsafe { &mut *(buf.as_mut_ptr() as *mut libc::seccomp_notif_resp) };
        resp.id = id;
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
    pub fn still_waiting(&self, id: u64) -> bool {
        // SAFETY: ID_VALID reads one u64.
        unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
                &id as *const u64,
            ) == 0
        }
    }

    /// `SECCOMP_IOCTL_NOTIF_ADDFD`: `fd` put in the caller of notification `id` (at
    /// `newfd` with SETFD; with SEND as the call's answer), close-on-exec when `cloexec`;
    /// its number there.
    pub fn add_fd(
        &self,
        id: u64,
        flags: libc::c_ulong,
        fd: BorrowedFd<'_>,
        newfd: u32,
        cloexec: bool,
    ) -> io::Result<i32> {
        let addfd = libc::seccomp_notif_addfd {
            id,
            flags: flags as u32,
            srcfd: fd.as_raw_fd() as u32,
            newfd,
            newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
        };
        // SAFETY: ADDFD reads one seccomp_notif_addfd.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
                &addfd as *const libc::seccomp_notif_addfd,
            )
        };
        match rc {
            -1 => Err(io::Error::last_os_error()),
            n => Ok(n),
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
