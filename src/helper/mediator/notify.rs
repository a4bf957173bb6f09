//! The seccomp user-notification plumbing the guard's thread uses for every mediated call:
//! receiving a call, reading what it passed from the program's memory, answering it (a
//! result, an errno, a descriptor added to the program, or "go on"), and the thread's
//! effective capabilities dropped.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What one notification gets.
pub(super) enum Answer {
    /// The call's result, done here: a value, or -errno.
    Done(i64),
    /// Let the kernel run it as asked.
    Continue,
    /// Already answered (a descriptor handed over with `SECCOMP_ADDFD_FLAG_SEND`).
    Sent,
}

pub(super) fn errno(e: &io::Error) -> i64 {
    -i64::from(e.raw_os_error().unwrap_or(libc::EPERM))
}

pub(super) const EPERM: Answer = Answer::Done(-(libc::EPERM as i64));

/// SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6): the caller and this thread hand the
/// CPU to each other directly, instead of each waking the other through the scheduler.
/// Without it (an older kernel) calls are only slower.
pub(super) fn sync_wake_up(listener: &OwnedFd) {
    const SYNC_WAKE_UP: u64 = 1;
    // SAFETY: SET_FLAGS reads one u64 by value.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS as _,
            SYNC_WAKE_UP,
        )
    };
}

/// A notification's fields that matter here.
pub(super) struct Call {
    pub id: u64,
    pub pid: u32,
    pub nr: i64,
    pub args: [u64; 6],
}

pub(super) fn notif_sizes() -> io::Result<libc::seccomp_notif_sizes> {
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
pub(super) fn buffer<T>(size: u16) -> Vec<u64> {
    let bytes = usize::from(size).max(std::mem::size_of::<T>());
    vec![0u64; bytes.div_ceil(8)]
}

pub(super) fn receive(
    listener: &OwnedFd,
    sizes: &libc::seccomp_notif_sizes,
) -> io::Result<Option<Call>> {
    let mut buf = buffer::<libc::seccomp_notif>(sizes.seccomp_notif);
    // SAFETY: the buffer is zeroed, aligned and at least as large as the kernel's
    // seccomp_notif, which RECV fills.
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            buf.as_mut_ptr(),
        )
    };
    if rc == -1 {
        let e = io::Error::last_os_error();
        // ENOENT: the caller went away (a signal) before we read it.
        return match e.raw_os_error() {
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

pub(super) fn respond(
    listener: &OwnedFd,
    sizes: &libc::seccomp_notif_sizes,
    call: &Call,
    answer: Answer,
) {
    let (val, error, flags) = match answer {
        Answer::Sent => return,
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Answer::Done(v) if v < 0 => (0, i32::try_from(v).unwrap_or(-libc::EPERM), 0),
        Answer::Done(v) => (v, 0, 0),
    };
    let mut buf = buffer::<libc::seccomp_notif_resp>(sizes.seccomp_notif_resp);
    // SAFETY: the buffer is aligned and large enough for a seccomp_notif_resp.
    let resp = unsafe { &mut *(buf.as_mut_ptr() as *mut libc::seccomp_notif_resp) };
    resp.id = call.id;
    resp.val = val;
    resp.error = error;
    resp.flags = flags;
    // SAFETY: SEND reads one seccomp_notif_resp from the buffer. Failing (the caller is
    // gone) needs nothing done.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            buf.as_ptr(),
        )
    };
}

/// Whether the caller still waits on this notification (so its pid still names it).
pub(super) fn still_waiting(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: ID_VALID reads one u64.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id as *const u64,
        ) == 0
    }
}

/// Hand `fd` to the caller of notification `id` as the call's result (its number there),
/// close-on-exec when `cloexec`.
pub(super) fn send_fd(listener: &OwnedFd, id: u64, fd: &OwnedFd, cloexec: bool) -> Answer {
    let addfd = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: ADDFD reads one seccomp_notif_addfd; with SEND it also answers the call
    // (the descriptor's number in the caller is the call's result).
    let rc = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ADDFD as _,
            &addfd as *const libc::seccomp_notif_addfd,
        )
    };
    if rc < 0 {
        return Answer::Done(errno(&io::Error::last_os_error()));
    }
    Answer::Sent
}

/// `len` bytes of the caller's memory at `addr`.
pub(super) fn read_mem(pid: u32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
    const MAX: usize = 1 << 20;
    if len > MAX {
        return Err(io::Error::from_raw_os_error(libc::E2BIG));
    }
    let mut buf = vec![0u8; len];
    if len == 0 {
        return Ok(buf);
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: one local iovec over `buf`, which is `len` bytes; the remote one is only read
    // by the kernel, in the other process.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != len {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(buf)
}

/// A NUL-terminated string of the caller's (at most PATH_MAX bytes), read page by page so
/// that a string ending just before an unmapped page is read whole.
pub(super) fn read_cstr(pid: u32, addr: u64) -> io::Result<CString> {
    const PAGE: u64 = 4096;
    let mut bytes = Vec::new();
    let mut at = addr;
    while bytes.len() < libc::PATH_MAX as usize {
        let chunk = (PAGE - at % PAGE) as usize;
        let part = read_mem(pid, at, chunk)?;
        if let Some(end) = part.iter().position(|b| *b == 0) {
            bytes.extend_from_slice(&part[..end]);
            return Ok(CString::new(bytes)?);
        }
        bytes.extend_from_slice(&part);
        at += chunk as u64;
    }
    Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
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

/// PIDFD_THREAD (Linux 6.9): a pidfd of one thread, which is what a notification names.
pub(super) const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

/// A pidfd of the calling thread, then a check that it still waits: from here on the
/// pidfd is that very thread.
pub(super) fn pidfd_of(listener: &OwnedFd, call: &Call) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, call.pid, PIDFD_THREAD) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    if !still_waiting(listener, call.id) {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(pidfd)
}

/// A copy of the caller's descriptor `fd`.
pub(super) fn their_fd(pidfd: &OwnedFd, fd: u64) -> io::Result<OwnedFd> {
    let fd = fd as u32 as i32;
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}
