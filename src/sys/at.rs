//! Calls relative to a directory's descriptor, and what a descriptor names: the calls the
//! guard acts through. Those that answer a program say an errno on failure (`Res`).

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use nix::fcntl::{AtFlags, OFlag, OpenHow, RenameFlags, ResolveFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;

/// Numbers of the generic syscall table (the same on x86_64 and aarch64) that the libc
/// crate does not name: fchmodat2 (Linux 6.6), setxattrat and removexattrat (6.13).
pub const SYS_FCHMODAT2: i64 = 452;
pub const SYS_SETXATTRAT: i64 = 463;
pub const SYS_REMOVEXATTRAT: i64 = 466;

/// An errno on failure: what the program is answered.
pub type Res<T> = Result<T, i32>;

/// The working directory, where a descriptor is asked for.
pub const CWD: BorrowedFd<'static> = nix::fcntl::AT_FDCWD;

pub fn last_errno() -> i32 {
    os_errno(&io::Error::last_os_error())
}

pub fn os_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// `path` from `dir` opened O_PATH, the last component followed.
pub fn open_path(dir: BorrowedFd<'_>, path: &CStr) -> io::Result<OwnedFd> {
    open_path_as(dir, path, true)
}

/// `path` from `dir` opened O_PATH; its last component followed when `follow`.
pub fn open_path_as(dir: BorrowedFd<'_>, path: &CStr, follow: bool) -> io::Result<OwnedFd> {
    let mut flags = OFlag::O_PATH | OFlag::O_CLOEXEC;
    if !follow {
        flags |= OFlag::O_NOFOLLOW;
    }
    nix::fcntl::openat(dir, path, flags, Mode::empty()).map_err(io::Error::from)
}

/// `path` from `dir` opened O_PATH when no component of it is a symlink (nor a magic
/// link), so that its own words are its path; `Ok(None)` when one is, or where the kernel
/// (before Linux 5.6) or a container's profile has no `openat2`: then the caller opens it
/// the usual way and asks the kernel for its path.
pub fn open_plain(dir: BorrowedFd<'_>, path: &CStr) -> Res<Option<OwnedFd>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static MISSING: AtomicBool = AtomicBool::new(false);
    if MISSING.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    match nix::fcntl::openat2(dir, path, how) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) => match e as i32 {
            libc::ELOOP | libc::EXDEV | libc::EAGAIN => Ok(None),
            libc::ENOSYS | libc::EPERM | libc::E2BIG | libc::EINVAL => {
                MISSING.store(true, Ordering::Relaxed);
                Ok(None)
            }
            e => Err(e),
        },
    }
}

/// `name` in `dir` opened with the program's `flags` and `mode`.
pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> Res<OwnedFd> {
    let flags = OFlag::from_bits_retain(flags);
    let mode = Mode::from_bits_retain(mode as libc::mode_t);
    nix::fcntl::openat(dir, name, flags, mode).map_err(|e| e as i32)
}

/// What `name` in `dir` is, the name itself (a symlink is not followed).
pub fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> Res<libc::stat> {
    nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| e as i32)
}

/// What a descriptor's object is (O_PATH descriptors too).
pub fn fstat(fd: BorrowedFd<'_>) -> Res<libc::stat> {
    nix::sys::stat::fstat(fd).map_err(|e| e as i32)
}

/// A directory `name` made in `dir` with `mode` (the umask applies).
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> Res<()> {
    let mode = Mode::from_bits_retain(mode as libc::mode_t);
    nix::sys::stat::mkdirat(dir, name, mode).map_err(|e| e as i32)
}

/// `name` in `dir` removed; a directory when `dir_only` (AT_REMOVEDIR).
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr, dir_only: bool) -> Res<()> {
    let how = match dir_only {
        true => UnlinkatFlags::RemoveDir,
        false => UnlinkatFlags::NoRemoveDir,
    };
    nix::unistd::unlinkat(dir, name, how).map_err(|e| e as i32)
}

/// A node `name` made in `dir`: `mode` holds its type and permissions.
pub fn mknodat(dir: BorrowedFd<'_>, name: &CStr, mode: u32, dev: u64) -> Res<()> {
    let kind = SFlag::from_bits_retain(mode as libc::mode_t & libc::S_IFMT);
    let perm = Mode::from_bits_retain(mode as libc::mode_t & !libc::S_IFMT);
    nix::sys::stat::mknodat(dir, name, kind, perm, dev).map_err(|e| e as i32)
}

/// A symlink `name` in `dir` to `target`.
pub fn symlinkat(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> Res<()> {
    nix::unistd::symlinkat(target, dir, name).map_err(|e| e as i32)
}

/// A new name `to` in `to_dir` for `from` in `from_dir` (`flags`: AT_SYMLINK_FOLLOW,
/// AT_EMPTY_PATH).
pub fn linkat(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
    flags: i32,
) -> Res<()> {
    let flags = AtFlags::from_bits_retain(flags);
    nix::unistd::linkat(from_dir, from, to_dir, to, flags).map_err(|e| e as i32)
}

/// `from` in `from_dir` renamed to `to` in `to_dir`, with renameat2's `flags`.
pub fn renameat2(
    from_dir: BorrowedFd<'_>,
    from: &CStr,
    to_dir: BorrowedFd<'_>,
    to: &CStr,
    flags: u32,
) -> Res<()> {
    let flags = RenameFlags::from_bits_retain(flags);
    nix::fcntl::renameat2(from_dir, from, to_dir, to, flags).map_err(|e| e as i32)
}

/// fchmodat2 (Linux 6.6): the mode of `name` in `dir` (with AT_EMPTY_PATH and an empty
/// name, of `dir`'s own object; with AT_SYMLINK_NOFOLLOW, a symlink is not changed).
pub fn fchmodat2(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t, flags: i32) -> Res<()> {
    // SAFETY: our descriptor, a NUL-terminated name, integers.
    let rc = unsafe { libc::syscall(SYS_FCHMODAT2, dir.as_raw_fd(), name.as_ptr(), mode, flags) };
    done(rc)
}

/// The mode of what `path` names, followed (a descriptor's magic link, from here).
pub fn chmod_path(path: &CStr, mode: libc::mode_t) -> Res<()> {
    // SAFETY: a NUL-terminated path.
    done(unsafe { libc::fchmodat(libc::AT_FDCWD, path.as_ptr(), mode, 0) }.into())
}

/// The owner and group of the object `fd` is open on (`u32::MAX`: left as it is).
pub fn chown_object(fd: BorrowedFd<'_>, uid: libc::uid_t, gid: libc::gid_t) -> Res<()> {
    // SAFETY: our descriptor and an empty NUL-terminated path.
    let rc = unsafe { libc::fchownat(fd.as_raw_fd(), c"".as_ptr(), uid, gid, libc::AT_EMPTY_PATH) };
    done(rc.into())
}

/// The times of the object `fd` is open on: `times` as utimensat takes them, `None` now.
pub fn set_times(fd: BorrowedFd<'_>, times: Option<&[libc::timespec; 2]>) -> Res<()> {
    let ptr = times.map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: our descriptor, an empty path, and null or two timespecs.
    let rc = unsafe { libc::utimensat(fd.as_raw_fd(), c"".as_ptr(), ptr, libc::AT_EMPTY_PATH) };
    done(rc.into())
}

/// An extended attribute `name` set to `value` on what `path` names (followed).
pub fn setxattr(path: &CStr, name: &CStr, value: &[u8], flags: i32) -> Res<()> {
    // SAFETY: NUL-terminated path and name; `value` is valid for its length.
    let rc = unsafe {
        libc::setxattr(
            path.as_ptr(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            flags,
        )
    };
    done(rc.into())
}

/// The extended attribute `name` removed from what `path` names (followed).
pub fn removexattr(path: &CStr, name: &CStr) -> Res<()> {
    // SAFETY: NUL-terminated path and name.
    done(unsafe { libc::removexattr(path.as_ptr(), name.as_ptr()) }.into())
}

/// A call's -1 as its errno.
fn done(rc: i64) -> Res<()> {
    match rc {
        -1 => Err(last_errno()),
        _ => Ok(()),
    }
}

/// A regular file's contents and metadata, never opening anything else
/// (`sys::files::read_regular_at`).
pub fn read_regular(dir: BorrowedFd<'_>, name: &CStr, limit: u64) -> Res<(Vec<u8>, libc::stat)> {
    super::files::read_regular_at(dir, OsStr::from_bytes(name.to_bytes()), limit)
        .map_err(|e| os_errno(&e))
}

/// The target of the symlink `name` in `dir`.
pub fn readlink(dir: BorrowedFd<'_>, name: &CStr) -> Res<Vec<u8>> {
    nix::fcntl::readlinkat(dir, OsStr::from_bytes(name.to_bytes()))
        .map(|t| t.into_vec())
        .map_err(|e| e as i32)
}

/// Whether the directory is on a procfs (its symlinks are magic links).
pub fn is_proc(dir: BorrowedFd<'_>) -> bool {
    nix::sys::statfs::fstatfs(dir)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// Whether `id` (as user and group, with no other group) may read `path` — every directory
/// on the way searched, the object itself read — by the kernel's own check: this thread's
/// file-system ids are switched to `id` for the look and back to 0 (Linux keeps them per
/// thread; it needs CAP_SETUID and CAP_SETGID, and no supplementary group: `clear_groups`).
pub fn readable_as(id: u32, path: &std::path::Path) -> Res<()> {
    use nix::unistd::{faccessat, setfsgid, setfsuid, AccessFlags, Gid, Uid};
    setfsgid(Gid::from_raw(id));
    setfsuid(Uid::from_raw(id));
    // (setfsuid answers the ids it had: asked again, the one it has now.)
    let switched =
        setfsuid(Uid::from_raw(id)).as_raw() == id && setfsgid(Gid::from_raw(id)).as_raw() == id;
    let seen = match switched {
        true => faccessat(
            CWD,
            path,
            AccessFlags::R_OK,
            nix::fcntl::AtFlags::AT_EACCESS,
        )
        .map_err(|e| e as i32),
        false => Err(libc::EPERM),
    };
    setfsuid(Uid::from_raw(0));
    setfsgid(Gid::from_raw(0));
    seen
}

/// Leave this process with no supplementary group (`readable_as` checks with none).
pub fn clear_groups() -> io::Result<()> {
    nix::unistd::setgroups(&[]).map_err(io::Error::from)
}

/// The path of a descriptor's object as the kernel names it.
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn names_are_opened_and_looked_at_from_their_directory_without_following_the_last() {
        let dir = std::env::temp_dir().join(format!("sbx-at-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        std::fs::write(dir.join("d/f"), b"x").unwrap();
        std::os::unix::fs::symlink("d", dir.join("l")).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let top = open_path(CWD, &c(dir.to_str().unwrap())).unwrap();
        let st = fstatat(top.as_fd(), c"l").unwrap();
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFLNK);
        assert_eq!(readlink(top.as_fd(), c"l").unwrap(), b"d");
        let link = open_path_as(top.as_fd(), c"l", false).unwrap();
        assert_eq!(
            fstat(link.as_fd()).unwrap().st_mode & libc::S_IFMT,
            libc::S_IFLNK
        );
        // A symlink on the way: not plain.
        assert!(open_plain(top.as_fd(), c"l/f").unwrap().is_none());
        let f = open_plain(top.as_fd(), c"d/f").unwrap().unwrap();
        assert_eq!(fd_path(f.as_fd()).unwrap(), dir.join("d/f"));
        let w = openat(
            top.as_fd(),
            c"d/new",
            libc::O_CREAT | libc::O_WRONLY | libc::O_EXCL,
            0o600,
        );
        assert!(w.is_ok());
        assert_eq!(
            openat(top.as_fd(), c"d/new", libc::O_CREAT | libc::O_EXCL, 0o600).err(),
            Some(libc::EEXIST)
        );
        assert_eq!(read_regular(top.as_fd(), c"d/f", 10).unwrap().0, b"x");
        assert!(!is_proc(top.as_fd()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn names_are_made_renamed_linked_and_removed_through_their_directory() {
        let dir = std::env::temp_dir().join(format!("sbx-at-made-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let top = open_path(CWD, &c(dir.to_str().unwrap())).unwrap();
        let top = top.as_fd();
        mkdirat(top, c"d", 0o700).unwrap();
        assert_eq!(mkdirat(top, c"d", 0o700), Err(libc::EEXIST));
        mknodat(top, c"p", libc::S_IFIFO | 0o600, 0).unwrap();
        assert_eq!(
            fstatat(top, c"p").unwrap().st_mode & libc::S_IFMT,
            libc::S_IFIFO
        );
        symlinkat(c"d", top, c"s").unwrap();
        assert_eq!(readlink(top, c"s").unwrap(), b"d");
        drop(openat(top, c"f", libc::O_CREAT | libc::O_WRONLY, 0o600).unwrap());
        linkat(top, c"f", top, c"g", 0).unwrap();
        assert_eq!(fstatat(top, c"f").unwrap().st_nlink, 2);
        // A name that is there stays, with RENAME_NOREPLACE.
        let noreplace = libc::RENAME_NOREPLACE;
        assert_eq!(
            renameat2(top, c"f", top, c"g", noreplace),
            Err(libc::EEXIST)
        );
        renameat2(top, c"f", top, c"h", noreplace).unwrap();
        assert_eq!(fstatat(top, c"f").err(), Some(libc::ENOENT));
        assert_eq!(unlinkat(top, c"d", false), Err(libc::EISDIR));
        unlinkat(top, c"d", true).unwrap();
        for name in [c"p", c"s", c"g", c"h"] {
            unlinkat(top, name, false).unwrap();
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn metadata_is_changed_on_the_object_a_descriptor_holds() {
        let dir = std::env::temp_dir().join(format!("sbx-at-meta-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        let top = open_path(CWD, &c(dir.to_str().unwrap())).unwrap();
        let f = open_path_as(top.as_fd(), c"f", false).unwrap();
        let magic = c(&format!("/proc/self/fd/{}", f.as_raw_fd()));
        match fchmodat2(f.as_fd(), c"", 0o640, libc::AT_EMPTY_PATH) {
            // Before Linux 6.6: the magic link, as the guard falls back to.
            Err(libc::ENOSYS) | Err(libc::EINVAL) => chmod_path(&magic, 0o640).unwrap(),
            other => other.unwrap(),
        }
        assert_eq!(fstat(f.as_fd()).unwrap().st_mode & 0o7777, 0o640);
        let times = [libc::timespec {
            tv_sec: 1_000_000,
            tv_nsec: 0,
        }; 2];
        set_times(f.as_fd(), Some(&times)).unwrap();
        assert_eq!(fstat(f.as_fd()).unwrap().st_mtime, 1_000_000);
        let me = fstat(f.as_fd()).unwrap();
        chown_object(f.as_fd(), me.st_uid, u32::MAX).unwrap();
        // user.* attributes: where the file system has them (tmpfs since Linux 6.6).
        match setxattr(&magic, c"user.sbx", b"v", 0) {
            Ok(()) => removexattr(&magic, c"user.sbx").unwrap(),
            Err(e) => assert!([libc::EOPNOTSUPP, libc::EPERM].contains(&e), "{e}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
