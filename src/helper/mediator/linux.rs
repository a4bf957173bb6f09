//! The mediated calls other than those that make names (Linux), answered by the guard's
//! listening thread (`create::listen`): reading what the program passed from its memory,
//! opening what it named through its own descriptors (`/proc/PID/cwd`, `pidfd_getfd`),
//! checking the object, and acting on it or refusing; and the seccomp plumbing both share.
//! That thread runs with its effective capabilities dropped, so a root session's calls are
//! checked by the kernel as the program's would be.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use super::{in_session, Scope};
use crate::sandbox::mediated::{syscall_name, IOPRIO_WHO_USER, PRIO_USER};

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

const EPERM: Answer = Answer::Done(-(libc::EPERM as i64));

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
fn buffer<T>(size: u16) -> Vec<u64> {
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

pub(super) fn answer(listener: &OwnedFd, call: &Call, rules: &Scope, supervisor: u32) -> Answer {
    let Some(name) = syscall_name(call.nr) else {
        return EPERM;
    };
    let a = call.args;
    // Ints the kernel reads from the low 32 bits.
    let int = |i: usize| a[i] as u32 as i32;
    match name {
        "setpriority" | "ioprio_set" => {
            let user = if name == "setpriority" {
                PRIO_USER
            } else {
                IOPRIO_WHO_USER
            };
            let (which, who) = (int(0) as u32, int(1) as u32);
            let group = if name == "setpriority" { 1 } else { 2 };
            let ok = match which {
                w if w == user => false,
                w if w == group => group_in_session(who, supervisor),
                _ => in_session(who, supervisor, &parent_of),
            };
            if ok {
                Answer::Continue
            } else {
                EPERM
            }
        }
        "prlimit64" | "sched_setaffinity" | "sched_setscheduler" | "sched_setparam"
        | "sched_setattr" => {
            if in_session(int(0) as u32, supervisor, &parent_of) {
                Answer::Continue
            } else {
                EPERM
            }
        }
        "ioctl" => pty_peer(listener, call),
        "connect" => unix_connect(listener, call, rules),
        "unlink" => unlink_in_shm(listener, call, rules, (a[0], 0)),
        // An absolute path: the directory descriptor plays no part.
        "unlinkat" => unlink_in_shm(listener, call, rules, (a[1], int(2))),
        _ => match metadata(listener, call, name, rules) {
            Ok(answer) => answer,
            Err(e) => Answer::Done(errno(&e)),
        },
    }
}

/// A name removed from `/dev/shm` (`shm_unlink`, `sem_unlink`): removed from the session's
/// own directory for it (`Scope::shm`). Any other removal runs as asked: the kernel reads
/// the path again, but Landlock judges it then, so a name another thread swapped in after
/// this look reaches only what the program's own rules let it remove.
fn unlink_in_shm(
    listener: &OwnedFd,
    call: &Call,
    rules: &Scope,
    (addr, flags): (u64, i32),
) -> Answer {
    let Some(dir) = &rules.shm else {
        return Answer::Continue;
    };
    let Ok(path) = read_cstr(call.pid, addr) else {
        // The kernel gives the program its own EFAULT or ENAMETOOLONG.
        return Answer::Continue;
    };
    let Some(name) = super::shm_name(path.as_bytes()) else {
        return Answer::Continue;
    };
    if !still_waiting(listener, call.id) {
        return Answer::Done(-i64::from(libc::ESRCH));
    }
    let (Ok(dir), Ok(name)) = (
        CString::new(dir.as_os_str().as_encoded_bytes()),
        CString::new(name),
    ) else {
        return Answer::Done(-i64::from(libc::ENOENT));
    };
    // SAFETY: two NUL-terminated paths.
    let dirfd = unsafe {
        libc::open(
            dir.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if dirfd < 0 {
        return Answer::Done(errno(&io::Error::last_os_error()));
    }
    // SAFETY: a new descriptor of ours.
    let dirfd = unsafe { OwnedFd::from_raw_fd(dirfd) };
    // SAFETY: a descriptor and a NUL-terminated name.
    let r = unsafe { libc::unlinkat(dirfd.as_raw_fd(), name.as_ptr(), flags & libc::AT_REMOVEDIR) };
    if r < 0 {
        Answer::Done(errno(&io::Error::last_os_error()))
    } else {
        Answer::Done(0)
    }
}

/// A process's parent, from /proc; `None` when it is gone. Threads count as their process.
fn parent_of(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let tgid = field("Tgid:")?;
    if tgid != pid {
        // A thread: its process's parent.
        return parent_of(tgid);
    }
    field("PPid:")
}

/// Whether every process of group `pgid` is in the session (and there is one).
fn group_in_session(pgid: u32, supervisor: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    let mut found = false;
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command's closing parenthesis: state, ppid, pgrp.
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2))
            .and_then(|g| g.parse::<u32>().ok());
        if pgrp == Some(pgid) {
            if !in_session(pid, supervisor, &parent_of) {
                return false;
            }
            found = true;
        }
    }
    found
}

/// PIDFD_THREAD (Linux 6.9): a pidfd of one thread, which is what a notification names.
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

/// A pidfd of the calling thread, then a check that it still waits: from here on the
/// pidfd is that very thread.
fn pidfd_of(listener: &OwnedFd, call: &Call) -> io::Result<OwnedFd> {
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
fn their_fd(pidfd: &OwnedFd, fd: u64) -> io::Result<OwnedFd> {
    let fd = fd as u32 as i32;
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number and flags.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// TIOCGPTPEER: open the peer of the caller's pty master and hand it over.
fn pty_peer(listener: &OwnedFd, call: &Call) -> Answer {
    let run = || -> io::Result<Answer> {
        let pidfd = pidfd_of(listener, call)?;
        let master = their_fd(&pidfd, call.args[0])?;
        let asked = call.args[2] as u32 as i32;
        let flags =
            (asked & (libc::O_ACCMODE | libc::O_NONBLOCK)) | libc::O_NOCTTY | libc::O_CLOEXEC;
        // SAFETY: TIOCGPTPEER takes open flags and returns a new descriptor.
        let peer = unsafe { libc::ioctl(master.as_raw_fd(), 0x5441 as _, flags) };
        if peer < 0 {
            return Ok(Answer::Done(errno(&io::Error::last_os_error())));
        }
        // SAFETY: a new descriptor of ours.
        let peer = unsafe { OwnedFd::from_raw_fd(peer) };
        Ok(send_fd(
            listener,
            call.id,
            &peer,
            asked & libc::O_CLOEXEC != 0,
        ))
    };
    run().unwrap_or_else(|e| Answer::Done(errno(&e)))
}

/// `connect`: a unix socket is connected here, to the socket file the address names
/// (resolved once, from the caller's working directory, every symlink followed as the
/// kernel follows them, and held open), when that file lies where the program may make
/// names; abstract addresses are refused. A socket of any other family is let through:
/// its family was fixed when it was made, so no address put in its place reaches a unix
/// socket. A full listener's backlog blocks this thread as it would block the caller.
fn unix_connect(listener: &OwnedFd, call: &Call, rules: &Scope) -> Answer {
    let run = || -> io::Result<Answer> {
        let pidfd = pidfd_of(listener, call)?;
        let socket = their_fd(&pidfd, call.args[0])?;
        let mut domain: libc::c_int = 0;
        let mut size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: SO_DOMAIN writes one int into `domain`, whose size `size` gives.
        let rc = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_DOMAIN,
                (&mut domain as *mut libc::c_int).cast(),
                &mut size,
            )
        };
        if rc == -1 {
            return Ok(Answer::Done(errno(&io::Error::last_os_error())));
        }
        if domain != libc::AF_UNIX {
            return Ok(Answer::Continue);
        }
        let len = (call.args[2] as u32 as usize).min(std::mem::size_of::<libc::sockaddr_un>());
        let addr = read_mem(call.pid, call.args[1], len)?;
        let Some(path) = unix_path(&addr) else {
            return Ok(Answer::Done(-i64::from(libc::EINVAL)));
        };
        if path.is_empty() {
            // Abstract: no file to judge it by.
            return Ok(EPERM);
        }
        if let Some(name) = rules
            .lookups
            .as_deref()
            .filter(|_| crate::netproxy::lookups::NAME_SERVICE_SOCKETS.contains(&path))
        {
            return Ok(connect_abstract(&socket, name));
        }
        let start = if path.first() == Some(&b'/') {
            None
        } else {
            let cwd = open_path(
                libc::AT_FDCWD,
                &CString::new(format!("/proc/{}/cwd", call.pid))?,
                true,
            )?;
            if !still_waiting(listener, call.id) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Some(cwd)
        };
        let dirfd = start.as_ref().map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
        let object = open_path(dirfd, &CString::new(path)?, true)?;
        let (real, links, _) = describe(&object)?;
        // SAFETY: struct stat is plain data; all zeroes is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes one struct stat (also for O_PATH descriptors).
        if unsafe { libc::fstat(object.as_raw_fd(), &mut st) } == -1 {
            return Err(io::Error::last_os_error());
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Ok(Answer::Done(-i64::from(libc::ECONNREFUSED)));
        }
        if !rules.may_change(&real, links) {
            return Ok(Answer::Done(-i64::from(libc::EACCES)));
        }
        // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
        let mut to: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        to.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let name = format!("/proc/self/fd/{}", object.as_raw_fd());
        for (slot, byte) in to.sun_path.iter_mut().zip(name.bytes()) {
            *slot = byte as libc::c_char;
        }
        let to_len = (std::mem::size_of::<libc::sa_family_t>() + name.len() + 1) as libc::socklen_t;
        // SAFETY: `to` is a valid sockaddr_un of `to_len` bytes; connect reads it.
        let rc = unsafe {
            libc::connect(
                socket.as_raw_fd(),
                (&to as *const libc::sockaddr_un).cast(),
                to_len,
            )
        };
        Ok(Answer::Done(if rc == -1 {
            errno(&io::Error::last_os_error())
        } else {
            0
        }))
    };
    run().unwrap_or_else(|e| Answer::Done(errno(&e)))
}

/// Connect the program's `socket` to sbx-shell's abstract socket `name` (the name service,
/// `Scope::lookups`).
fn connect_abstract(socket: &OwnedFd, name: &str) -> Answer {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut to: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    to.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // The leading NUL of an abstract name is the zeroed first byte.
    for (slot, byte) in to.sun_path.iter_mut().skip(1).zip(name.bytes()) {
        *slot = byte as libc::c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
    // SAFETY: `to` is a valid sockaddr_un of `len` bytes; connect reads it.
    let rc = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            (&to as *const libc::sockaddr_un).cast(),
            len,
        )
    };
    Answer::Done(if rc == -1 {
        errno(&io::Error::last_os_error())
    } else {
        0
    })
}

/// The path of a unix socket address (`sockaddr_un` bytes): empty for an abstract one,
/// `None` for another family or no path at all.
fn unix_path(addr: &[u8]) -> Option<&[u8]> {
    let family = u16::from_ne_bytes([*addr.first()?, *addr.get(1)?]);
    if family != libc::AF_UNIX as u16 || addr.len() <= 2 {
        return None;
    }
    let path = &addr[2..];
    if path[0] == 0 {
        return Some(&[]);
    }
    Some(&path[..path.iter().position(|b| *b == 0).unwrap_or(path.len())])
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

/// What a metadata call does to its object.
enum Change {
    Mode(libc::mode_t),
    Owner(libc::uid_t, libc::gid_t),
    /// utimensat's pair; `None` for "now".
    Times(Option<[libc::timespec; 2]>),
    SetXattr {
        name: CString,
        value: Vec<u8>,
        flags: i32,
    },
    RemoveXattr(CString),
}

/// Which object a metadata call names.
enum Target {
    /// The caller's descriptor.
    Fd(u64),
    /// A path (in the caller's memory at `path`) relative to its descriptor `dirfd`
    /// (AT_FDCWD: its working directory); `empty`: an empty path names `dirfd` itself.
    Path {
        dirfd: i32,
        path: u64,
        follow: bool,
        empty: bool,
    },
}

fn metadata(listener: &OwnedFd, call: &Call, name: &str, rules: &Scope) -> io::Result<Answer> {
    let a = call.args;
    let int = |i: usize| a[i] as u32 as i32;
    let at = |dirfd: usize, path: usize, flags: i32| Target::Path {
        dirfd: int(dirfd),
        path: a[path],
        follow: flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        empty: flags & libc::AT_EMPTY_PATH != 0,
    };
    let cwd = |path: usize, follow: bool| Target::Path {
        dirfd: libc::AT_FDCWD,
        path: a[path],
        follow,
        empty: false,
    };
    let pid = call.pid;
    let (target, change) = match name {
        "chmod" => (cwd(0, true), Change::Mode(a[1] as libc::mode_t)),
        "fchmod" => (Target::Fd(a[0]), Change::Mode(a[1] as libc::mode_t)),
        "fchmodat" => (at(0, 1, 0), Change::Mode(a[2] as libc::mode_t)),
        "fchmodat2" => (at(0, 1, int(3)), Change::Mode(a[2] as libc::mode_t)),
        "chown" => (cwd(0, true), Change::Owner(a[1] as u32, a[2] as u32)),
        "lchown" => (cwd(0, false), Change::Owner(a[1] as u32, a[2] as u32)),
        "fchown" => (Target::Fd(a[0]), Change::Owner(a[1] as u32, a[2] as u32)),
        "fchownat" => (at(0, 1, int(4)), Change::Owner(a[2] as u32, a[3] as u32)),
        "utime" => (cwd(0, true), Change::Times(utimbuf(pid, a[1])?)),
        "utimes" => (cwd(0, true), Change::Times(timevals(pid, a[1])?)),
        "futimesat" => (at(0, 1, 0), Change::Times(timevals(pid, a[2])?)),
        "utimensat" => {
            let times = timespecs(pid, a[2])?;
            if a[1] == 0 {
                (Target::Fd(a[0]), Change::Times(times))
            } else {
                (at(0, 1, int(3)), Change::Times(times))
            }
        }
        "setxattr" | "lsetxattr" | "fsetxattr" => {
            let change = Change::SetXattr {
                name: read_cstr(pid, a[1])?,
                value: read_mem(pid, a[2], usize::try_from(a[3]).unwrap_or(usize::MAX))?,
                flags: int(4),
            };
            let target = match name {
                "fsetxattr" => Target::Fd(a[0]),
                "lsetxattr" => cwd(0, false),
                _ => cwd(0, true),
            };
            (target, change)
        }
        "setxattrat" => {
            // struct xattr_args { u64 value; u32 size; u32 flags; }
            let args = read_mem(pid, a[4], 16)?;
            let word = |r: std::ops::Range<usize>| args.get(r).unwrap_or_default().to_vec();
            let value_ptr = u64::from_ne_bytes(word(0..8).try_into().unwrap_or([0; 8]));
            let size = u32::from_ne_bytes(word(8..12).try_into().unwrap_or([0; 4]));
            let flags = i32::from_ne_bytes(word(12..16).try_into().unwrap_or([0; 4]));
            let change = Change::SetXattr {
                name: read_cstr(pid, a[3])?,
                value: read_mem(pid, value_ptr, size as usize)?,
                flags,
            };
            (at(0, 1, int(2)), change)
        }
        "removexattr" | "lremovexattr" | "fremovexattr" => {
            let change = Change::RemoveXattr(read_cstr(pid, a[1])?);
            let target = match name {
                "fremovexattr" => Target::Fd(a[0]),
                "lremovexattr" => cwd(0, false),
                _ => cwd(0, true),
            };
            (target, change)
        }
        "removexattrat" => (at(0, 1, int(2)), Change::RemoveXattr(read_cstr(pid, a[3])?)),
        _ => return Ok(EPERM),
    };
    let object = open_target(listener, call, &target)?;
    let (path, links, symlink) = describe(&object)?;
    if !rules.may_change(&path, links) {
        return Ok(EPERM);
    }
    Ok(Answer::Done(apply(&object, symlink, &change)))
}

/// The object a call names, opened here: the caller's descriptor copied, or its path
/// resolved once from the caller's working directory or descriptor (O_PATH).
fn open_target(listener: &OwnedFd, call: &Call, target: &Target) -> io::Result<OwnedFd> {
    let pidfd = pidfd_of(listener, call)?;
    match *target {
        Target::Fd(fd) => their_fd(&pidfd, fd),
        Target::Path {
            dirfd,
            path,
            follow,
            empty,
        } => {
            let path = read_cstr(call.pid, path)?;
            let base = if dirfd == libc::AT_FDCWD {
                let cwd = CString::new(format!("/proc/{}/cwd", call.pid))?;
                let base = open_path(libc::AT_FDCWD, &cwd, true)?;
                // The cwd was the caller's if it still waits now.
                if !still_waiting(listener, call.id) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                base
            } else {
                their_fd(&pidfd, dirfd as u32 as u64)?
            };
            if path.as_bytes().is_empty() {
                if !empty {
                    return Err(io::Error::from_raw_os_error(libc::ENOENT));
                }
                return Ok(base);
            }
            open_path(base.as_raw_fd(), &path, follow)
        }
    }
}

fn open_path(dirfd: RawFd, path: &CString, follow: bool) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH | libc::O_CLOEXEC | if follow { 0 } else { libc::O_NOFOLLOW };
    // SAFETY: a NUL-terminated path; openat returns a new descriptor or -1.
    let fd = unsafe { libc::openat(dirfd, path.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The object's path as the kernel names it, its link count, and whether it is a symlink.
fn describe(object: &OwnedFd) -> io::Result<(PathBuf, u64, bool)> {
    let path = std::fs::read_link(format!("/proc/self/fd/{}", object.as_raw_fd()))?;
    // SAFETY: struct stat is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes one struct stat (also for O_PATH descriptors).
    if unsafe { libc::fstat(object.as_raw_fd(), &mut st) } == -1 {
        return Err(io::Error::last_os_error());
    }
    let symlink = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
    Ok((path, st.st_nlink, symlink))
}

/// Do the change on the object; the call's result (0 or -errno).
fn apply(object: &OwnedFd, symlink: bool, change: &Change) -> i64 {
    let fd = object.as_raw_fd();
    let Ok(magic) = CString::new(format!("/proc/self/fd/{fd}")) else {
        return -i64::from(libc::EINVAL);
    };
    let empty = c"";
    let rc = match change {
        Change::Mode(_) if symlink => return -i64::from(libc::EOPNOTSUPP),
        // SAFETY: a NUL-terminated path.
        Change::Mode(mode) => unsafe { libc::fchmodat(libc::AT_FDCWD, magic.as_ptr(), *mode, 0) },
        // SAFETY: our descriptor and an empty NUL-terminated path.
        Change::Owner(uid, gid) => unsafe {
            libc::fchownat(fd, empty.as_ptr(), *uid, *gid, libc::AT_EMPTY_PATH)
        },
        Change::Times(times) => {
            let ptr = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            // SAFETY: our descriptor, an empty path, and null or two timespecs.
            unsafe { libc::utimensat(fd, empty.as_ptr(), ptr, libc::AT_EMPTY_PATH) }
        }
        // user.* attributes are not allowed on symlinks, the others need capabilities.
        Change::SetXattr { .. } | Change::RemoveXattr(_) if symlink => {
            return -i64::from(libc::EPERM)
        }
        // SAFETY: NUL-terminated path and name; `value` is value.len() bytes.
        Change::SetXattr { name, value, flags } => unsafe {
            libc::setxattr(
                magic.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                *flags,
            )
        },
        // SAFETY: NUL-terminated path and name.
        Change::RemoveXattr(name) => unsafe { libc::removexattr(magic.as_ptr(), name.as_ptr()) },
    };
    if rc == -1 {
        errno(&io::Error::last_os_error())
    } else {
        0
    }
}

/// `len` bytes of the caller's memory at `addr`.
fn read_mem(pid: u32, addr: u64, len: usize) -> io::Result<Vec<u8>> {
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

fn word(bytes: &[u8], i: usize) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes.get(i * 8..i * 8 + 8).unwrap_or(&[0; 8]));
    i64::from_ne_bytes(w)
}

fn timespec(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// utimensat's `struct timespec[2]`, or `None` (now) for a null pointer.
fn timespecs(pid: u32, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = read_mem(pid, addr, 32)?;
    Ok(Some([
        timespec(word(&b, 0), word(&b, 1)),
        timespec(word(&b, 2), word(&b, 3)),
    ]))
}

/// utimes' `struct timeval[2]` (microseconds), or `None` (now).
fn timevals(pid: u32, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = read_mem(pid, addr, 32)?;
    let usec = |i| word(&b, i).checked_mul(1000).unwrap_or(i64::MAX);
    Ok(Some([
        timespec(word(&b, 0), usec(1)),
        timespec(word(&b, 2), usec(3)),
    ]))
}

/// utime's `struct utimbuf` (seconds), or `None` (now).
fn utimbuf(pid: u32, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = read_mem(pid, addr, 16)?;
    Ok(Some([timespec(word(&b, 0), 0), timespec(word(&b, 1), 0)]))
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

#[cfg(test)]
mod tests {
    use super::unix_path;

    fn addr(family: u16, path: &[u8]) -> Vec<u8> {
        [&family.to_ne_bytes()[..], path].concat()
    }

    #[test]
    fn a_unix_address_gives_its_path_up_to_the_nul_or_empty_when_abstract() {
        let unix = libc::AF_UNIX as u16;
        assert_eq!(
            unix_path(&addr(unix, b"/tmp/s\0junk")),
            Some(&b"/tmp/s"[..])
        );
        assert_eq!(unix_path(&addr(unix, b"rel/s")), Some(&b"rel/s"[..]));
        assert_eq!(unix_path(&addr(unix, b"\0abstract")), Some(&b""[..]));
        assert_eq!(unix_path(&addr(unix, b"")), None, "unnamed");
        assert_eq!(unix_path(&addr(libc::AF_INET as u16, b"1234")), None);
        assert_eq!(unix_path(&[1]), None);
    }
}
