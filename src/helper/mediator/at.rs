//! The descriptor-relative calls the guard acts through, each answering an errno
//! (`Res`), and what a descriptor names (`fd_path`).

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

/// An errno on failure: what the program is answered.
pub(super) type Res<T> = Result<T, i32>;

pub(super) fn last_errno() -> i32 {
    os_errno(&io::Error::last_os_error())
}

pub(super) fn os_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

pub(super) fn open_path(dirfd: RawFd, path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; openat returns a new descriptor or -1.
    let fd = unsafe { libc::openat(dirfd, path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `path` from `dir` opened O_PATH when no component of it is a symlink (nor a magic
/// link), so that its own words are its path (`paths::join_plain`); `Ok(None)` when one is,
/// or where the kernel (before Linux 5.6) or a container's profile has no `openat2`: then
/// the caller opens it the usual way and asks the kernel for its path.
pub(super) fn open_plain(dir: BorrowedFd<'_>, path: &CStr) -> Res<Option<OwnedFd>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static MISSING: AtomicBool = AtomicBool::new(false);
    if MISSING.load(Ordering::Relaxed) {
        return Ok(None);
    }
    // SAFETY: open_how is plain data; all zeroes is a valid value.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: our directory descriptor, a NUL-terminated path and one open_how of the size
    // given; a new descriptor or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd >= 0 {
        // SAFETY: a new descriptor of ours.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }));
    }
    match last_errno() {
        libc::ELOOP | libc::EXDEV | libc::EAGAIN => Ok(None),
        libc::ENOSYS | libc::EPERM | libc::E2BIG | libc::EINVAL => {
            MISSING.store(true, Ordering::Relaxed);
            Ok(None)
        }
        e => Err(e),
    }
}

pub(super) fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> Res<OwnedFd> {
    // SAFETY: our directory descriptor and a NUL-terminated name; a new descriptor or -1.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(super) fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> Res<libc::stat> {
    // SAFETY: struct stat is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our descriptor, a NUL-terminated name, one struct stat written.
    if unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } == -1
    {
        return Err(last_errno());
    }
    Ok(st)
}

/// A regular file's contents and metadata, never opening anything else
/// (`sys::files::read_regular_at`).
pub(super) fn read_regular(
    dir: BorrowedFd<'_>,
    name: &CStr,
    limit: u64,
) -> Res<(Vec<u8>, libc::stat)> {
    crate::sys::files::read_regular_at(dir, OsStr::from_bytes(name.to_bytes()), limit)
        .map_err(|e| os_errno(&e))
}

pub(super) fn fstat(fd: BorrowedFd<'_>) -> Res<libc::stat> {
    // SAFETY: struct stat is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our descriptor (fstat works on O_PATH ones), one struct stat written.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == -1 {
        return Err(last_errno());
    }
    Ok(st)
}

pub(super) fn readlink(dir: BorrowedFd<'_>, name: &CStr) -> Res<Vec<u8>> {
    nix::fcntl::readlinkat(dir, OsStr::from_bytes(name.to_bytes()))
        .map(|t| t.into_vec())
        .map_err(|e| e as i32)
}

/// Whether the directory is on a procfs (its symlinks are magic links).
pub(super) fn is_proc(dir: BorrowedFd<'_>) -> bool {
    nix::sys::statfs::fstatfs(dir)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// The path of a descriptor's object as the kernel names it.
pub(super) fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}
