//! The metadata calls (Landlock alone): `chmod`, `chown`, times, extended attributes, done
//! by the guard on the object the program named, opened once, when it lies in a writable
//! tree outside the protected paths (`Scope::may_change`) — or refused.

use super::notify::{Call, Caller, Reply, EPERM};
use super::threads::{Known, Threads};
use super::Scope;
use crate::sys::at::{self, open_path_as, Res};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// What a metadata call does to its object.
pub(super) enum Change {
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
pub(super) enum MetaTarget {
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

pub(super) fn metadata(
    c: &Caller<'_>,
    threads: &mut Threads,
    name: &str,
    rules: &Scope,
) -> io::Result<Reply> {
    let call = c.call;
    let a = call.args;
    let int = |i: usize| a[i] as u32 as i32;
    let at = |dirfd: usize, path: usize, flags: i32| at(call, dirfd, path, flags);
    let cwd = |path: usize, follow: bool| cwd(call, path, follow);
    let known = threads.known(call.pid)?;
    let pid = known;
    let (target, change) = match name {
        "chmod" => (cwd(0, true), Change::Mode(a[1] as libc::mode_t)),
        "fchmod" => (MetaTarget::Fd(a[0]), Change::Mode(a[1] as libc::mode_t)),
        "fchmodat" => (at(0, 1, 0), Change::Mode(a[2] as libc::mode_t)),
        "fchmodat2" => (at(0, 1, int(3)), Change::Mode(a[2] as libc::mode_t)),
        "chown" => (cwd(0, true), Change::Owner(a[1] as u32, a[2] as u32)),
        "lchown" => (cwd(0, false), Change::Owner(a[1] as u32, a[2] as u32)),
        "fchown" => (
            MetaTarget::Fd(a[0]),
            Change::Owner(a[1] as u32, a[2] as u32),
        ),
        "fchownat" => (at(0, 1, int(4)), Change::Owner(a[2] as u32, a[3] as u32)),
        "utime" => (cwd(0, true), Change::Times(utimbuf(pid, a[1])?)),
        "utimes" => (cwd(0, true), Change::Times(timevals(pid, a[1])?)),
        "futimesat" => (at(0, 1, 0), Change::Times(timevals(pid, a[2])?)),
        "utimensat" => {
            let times = timespecs(pid, a[2])?;
            if a[1] == 0 {
                (MetaTarget::Fd(a[0]), Change::Times(times))
            } else {
                (at(0, 1, int(3)), Change::Times(times))
            }
        }
        "setxattr" | "lsetxattr" | "fsetxattr" | "setxattrat" => set_xattr(call, known, name)?,
        "removexattr" | "lremovexattr" | "fremovexattr" => {
            let change = Change::RemoveXattr(pid.cstr(a[1])?);
            let target = match name {
                "fremovexattr" => MetaTarget::Fd(a[0]),
                "lremovexattr" => cwd(0, false),
                _ => cwd(0, true),
            };
            (target, change)
        }
        "removexattrat" => (at(0, 1, int(2)), Change::RemoveXattr(pid.cstr(a[3])?)),
        _ => return Ok(Reply::Answer(EPERM)),
    };
    if let (Change::Mode(mode), MetaTarget::Path { dirfd, path, .. }) = (&change, &target) {
        if *dirfd == libc::AT_FDCWD {
            if let Some(done) = chmod_here(c, threads, *path, *mode, rules)? {
                return Ok(done);
            }
        }
    }
    let (object, known_path) = open_target(c, threads, &target)?;
    let (path, links, symlink) = describe(&object, known_path)?;
    if !rules.may_change(&path, links) {
        return Ok(Reply::Answer(EPERM));
    }
    Ok(match apply(&object, symlink, &change) {
        done if done < 0 => Reply::Answer(super::notify::Answer::Done(done)),
        done => Reply::Acted(done),
    })
}

/// A `chmod` of a name in the caller's working directory (no slash: the name itself is the
/// only component that could be a symlink), done by that name when its path may be changed:
/// `fchmodat2` without following, which changes no symlink (EOPNOTSUPP), so what is
/// changed is the name's own object, the one judged. `None`: asked the usual way (a symlink
/// there, whose target is judged; a path the name alone may not be changed at; an older
/// kernel or a profile without `fchmodat2`).
fn chmod_here(
    c: &Caller<'_>,
    threads: &mut Threads,
    path: u64,
    mode: libc::mode_t,
    rules: &Scope,
) -> io::Result<Option<Reply>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static MISSING: AtomicBool = AtomicBool::new(false);
    if MISSING.load(Ordering::Relaxed) {
        return Ok(None);
    }
    let name = threads.known(c.call.pid)?.cstr(path)?;
    let plain = !matches!(name.as_bytes(), b"" | b"." | b"..") && !name.as_bytes().contains(&b'/');
    if !plain {
        return Ok(None);
    }
    let cwd = threads.cwd(c.listener, c.call)?;
    let Some(dir) = &cwd.path else {
        return Ok(None);
    };
    if !rules.may_change(&dir.join(std::ffi::OsStr::from_bytes(name.as_bytes())), 1) {
        return Ok(None);
    }
    let nofollow = libc::AT_SYMLINK_NOFOLLOW;
    Ok(
        match crate::sys::at::fchmodat2(cwd.fd.as_fd(), &name, mode, nofollow) {
            Ok(()) => Some(Reply::Acted(0)),
            // A symlink; or EPERM, which a container's profile may give for a call it does not
            // know (the usual way tells that from the object's owner refusing).
            Err(libc::EOPNOTSUPP) | Err(libc::EPERM) => None,
            Err(libc::ENOSYS) | Err(libc::EINVAL) => {
                MISSING.store(true, Ordering::Relaxed);
                None
            }
            Err(e) => Some(Reply::Answer(super::notify::Answer::Done(-i64::from(e)))),
        },
    )
}

/// A path argument relative to a directory descriptor argument, with its `AT_*` flags.
fn at(call: &Call, dirfd: usize, path: usize, flags: i32) -> MetaTarget {
    MetaTarget::Path {
        dirfd: call.args[dirfd] as u32 as i32,
        path: call.args[path],
        follow: flags & libc::AT_SYMLINK_NOFOLLOW == 0,
        empty: flags & libc::AT_EMPTY_PATH != 0,
    }
}

/// A path argument relative to the working directory.
fn cwd(call: &Call, path: usize, follow: bool) -> MetaTarget {
    MetaTarget::Path {
        dirfd: libc::AT_FDCWD,
        path: call.args[path],
        follow,
        empty: false,
    }
}

/// What an extended attribute's setting names and sets, read from the program's memory.
fn set_xattr(call: &Call, pid: &Known, name: &str) -> io::Result<(MetaTarget, Change)> {
    let a = call.args;
    let int = |i: usize| a[i] as u32 as i32;
    let at = |dirfd: usize, path: usize, flags: i32| at(call, dirfd, path, flags);
    let cwd = |path: usize, follow: bool| cwd(call, path, follow);
    Ok(match name {
        "setxattr" | "lsetxattr" | "fsetxattr" => {
            let change = Change::SetXattr {
                name: pid.cstr(a[1])?,
                value: pid.read(a[2], usize::try_from(a[3]).unwrap_or(usize::MAX))?,
                flags: int(4),
            };
            let target = match name {
                "fsetxattr" => MetaTarget::Fd(a[0]),
                "lsetxattr" => cwd(0, false),
                _ => cwd(0, true),
            };
            (target, change)
        }
        "setxattrat" => {
            // struct xattr_args { u64 value; u32 size; u32 flags; }
            let args = pid.read(a[4], 16)?;
            let word = |r: std::ops::Range<usize>| args.get(r).unwrap_or_default().to_vec();
            let value_ptr = u64::from_ne_bytes(word(0..8).try_into().unwrap_or([0; 8]));
            let size = u32::from_ne_bytes(word(8..12).try_into().unwrap_or([0; 4]));
            let flags = i32::from_ne_bytes(word(12..16).try_into().unwrap_or([0; 4]));
            let change = Change::SetXattr {
                name: pid.cstr(a[3])?,
                value: pid.read(value_ptr, size as usize)?,
                flags,
            };
            (at(0, 1, int(2)), change)
        }
        _ => return Err(io::Error::from_raw_os_error(libc::ENOSYS)),
    })
}

/// The object a call names, opened here: the caller's descriptor (its object), or its path
/// resolved once from the caller's working directory or descriptor (O_PATH) — with that
/// path, when no symlink was on its way (`paths::join_plain`: then its words are its path).
pub(super) fn open_target(
    c: &Caller<'_>,
    threads: &mut Threads,
    target: &MetaTarget,
) -> io::Result<(OwnedFd, Option<PathBuf>)> {
    let tid = c.call.pid;
    match *target {
        MetaTarget::Fd(fd) => Ok((
            threads.known(tid)?.their_object(fd as u32, c.copy_fds)?,
            None,
        )),
        MetaTarget::Path {
            dirfd,
            path,
            follow,
            empty,
        } => {
            let path = threads.known(tid)?.cstr(path)?;
            // The caller's own descriptor under its usual spellings (`/proc/self/fd/N`,
            // as glibc's `fchmodat` on an O_PATH descriptor names it): the caller's.
            if let Some((fd, rest)) = super::paths::own_descriptor(path.as_bytes()) {
                let object = threads.known(tid)?.their_object(fd, c.copy_fds)?;
                if rest.is_empty() {
                    return Ok((object, None));
                }
                let rest = CString::new(rest)?;
                return Ok((open_path_as(object.as_fd(), &rest, follow)?, None));
            }
            let path = CString::new(super::paths::as_caller(path.as_bytes(), tid).into_owned())?;
            if path.as_bytes().first() == Some(&b'/') {
                let root = std::path::Path::new("/");
                return open_known(crate::sys::at::CWD, Some(root), &path, follow);
            }
            if dirfd == libc::AT_FDCWD {
                let cwd = threads.cwd(c.listener, c.call)?;
                if path.as_bytes().is_empty() {
                    return match empty {
                        true => Ok((cwd.fd.try_clone()?, cwd.path.clone())),
                        false => Err(io::Error::from_raw_os_error(libc::ENOENT)),
                    };
                }
                return open_known(cwd.fd.as_fd(), cwd.path.as_deref(), &path, follow);
            }
            let base = threads.known(tid)?.their_object(dirfd as u32, c.copy_fds)?;
            if path.as_bytes().is_empty() {
                if !empty {
                    return Err(io::Error::from_raw_os_error(libc::ENOENT));
                }
                return Ok((base, None));
            }
            Ok((open_path_as(base.as_fd(), &path, follow)?, None))
        }
    }
}

/// `path` from `base` (whose path is `base_path`) opened O_PATH, with its path when no
/// symlink is on its way — the last component too: it is what is changed.
fn open_known(
    base: BorrowedFd<'_>,
    base_path: Option<&std::path::Path>,
    path: &CString,
    follow: bool,
) -> io::Result<(OwnedFd, Option<PathBuf>)> {
    if let Some(base_path) = base_path {
        if let Ok(Some(fd)) = crate::sys::at::open_plain(base, path) {
            return Ok((
                fd,
                Some(super::paths::join_plain(base_path, path.as_bytes())),
            ));
        }
    }
    Ok((open_path_as(base, path, follow)?, None))
}

/// The object's path as the kernel names it (`known` when the guard knows it already), its
/// link count, and whether it is a symlink.
pub(super) fn describe(
    object: &OwnedFd,
    known: Option<PathBuf>,
) -> io::Result<(PathBuf, u64, bool)> {
    let path = match known {
        // Reached by its name with no symlink on the way (the last component neither): a
        // name it has, so it is linked and no symlink.
        Some(path) => return Ok((path, 1, false)),
        None => std::fs::read_link(format!("/proc/self/fd/{}", object.as_raw_fd()))?,
    };
    let st = crate::sys::at::fstat(object.as_fd()).map_err(io::Error::from_raw_os_error)?;
    let symlink = st.st_mode & libc::S_IFMT == libc::S_IFLNK;
    Ok((path, st.st_nlink, symlink))
}

/// Do the change on the object; the call's result (0 or -errno).
pub(super) fn apply(object: &OwnedFd, symlink: bool, change: &Change) -> i64 {
    let fd = object.as_fd();
    // Made only where a change goes through the magic link (digits hold no NUL).
    let magic = || CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap_or_default();
    let done = match change {
        Change::Mode(_) if symlink => Err(libc::EOPNOTSUPP),
        Change::Mode(mode) => chmod(fd, magic, *mode),
        Change::Owner(uid, gid) => at::chown_object(fd, *uid, *gid),
        Change::Times(times) => at::set_times(fd, times.as_ref()),
        // user.* attributes are not allowed on symlinks, the others need capabilities.
        Change::SetXattr { .. } | Change::RemoveXattr(_) if symlink => Err(libc::EPERM),
        Change::SetXattr { name, value, flags } => at::setxattr(&magic(), name, value, *flags),
        Change::RemoveXattr(name) => at::removexattr(&magic(), name),
    };
    match done {
        Ok(()) => 0,
        Err(e) => -i64::from(e),
    }
}

/// chmod of the object `fd` is open on (O_PATH): `fchmodat2` with an empty path (Linux
/// 6.6), else through its magic link `magic`.
fn chmod(fd: BorrowedFd<'_>, magic: impl FnOnce() -> CString, mode: libc::mode_t) -> Res<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    static MISSING: AtomicBool = AtomicBool::new(false);
    if !MISSING.load(Ordering::Relaxed) {
        match at::fchmodat2(fd, c"", mode, libc::AT_EMPTY_PATH) {
            Ok(()) => return Ok(()),
            Err(libc::ENOSYS) | Err(libc::EINVAL) | Err(libc::EPERM) => {
                MISSING.store(true, Ordering::Relaxed)
            }
            Err(e) => return Err(e),
        }
    }
    at::chmod_path(&magic(), mode)
}

pub(super) fn word(bytes: &[u8], i: usize) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(bytes.get(i * 8..i * 8 + 8).unwrap_or(&[0; 8]));
    i64::from_ne_bytes(w)
}

pub(super) fn timespec(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// utimensat's `struct timespec[2]`, or `None` (now) for a null pointer.
pub(super) fn timespecs(pid: &Known, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = pid.read(addr, 32)?;
    Ok(Some([
        timespec(word(&b, 0), word(&b, 1)),
        timespec(word(&b, 2), word(&b, 3)),
    ]))
}

/// utimes' `struct timeval[2]` (microseconds), or `None` (now).
pub(super) fn timevals(pid: &Known, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = pid.read(addr, 32)?;
    let usec = |i| word(&b, i).checked_mul(1000).unwrap_or(i64::MAX);
    Ok(Some([
        timespec(word(&b, 0), usec(1)),
        timespec(word(&b, 2), usec(3)),
    ]))
}

/// utime's `struct utimbuf` (seconds), or `None` (now).
pub(super) fn utimbuf(pid: &Known, addr: u64) -> io::Result<Option<[libc::timespec; 2]>> {
    if addr == 0 {
        return Ok(None);
    }
    let b = pid.read(addr, 16)?;
    Ok(Some([timespec(word(&b, 0), 0), timespec(word(&b, 1), 0)]))
}
