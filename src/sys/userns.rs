//! A root user's program as another host id (Linux): a user namespace in which uid and gid
//! 0 are an otherwise unused host id, and mounts of the writable trees that show their
//! files, and make new ones, as host root's (id-mapped mounts). A process that enters the
//! namespace is root inside it and that id outside: every file only host root may read is
//! refused to it by the kernel's own permission check.
//!
//! Thin wrappers over the raw calls: `mapped_root` (made by a host-root caller with
//! CAP_SETUID and CAP_SETGID, owned by it), `idmapped_clone` (CAP_SYS_ADMIN), and `enter`,
//! which the owner may call without capabilities (the owner of a user namespace has every
//! capability in it).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    match rc {
        -1 => Err(io::Error::last_os_error()),
        n => Ok(n),
    }
}

/// A new user namespace, owned by the caller, in which uid and gid 0 are `host` (and no
/// other id is mapped): made by a child that unshares it and waits while the caller writes
/// its maps, then exits — also when the caller is killed meanwhile; the namespace lives on
/// through the returned descriptor.
pub fn mapped_root(host: u32) -> io::Result<OwnedFd> {
    let (ready_r, ready_w) = nix::unistd::pipe()?;
    let (go_r, go_w) = nix::unistd::pipe()?;
    // SAFETY: the child only calls async-signal-safe functions (unshare, write, read,
    // _exit) before it exits.
    let child = match unsafe { libc::fork() } {
        -1 => return Err(io::Error::last_os_error()),
        0 => {
            // SAFETY: our copies of the ends the parent keeps, closed (the child never
            // returns, so they are not closed twice), and integer arguments: the read below
            // ends when the parent goes, however it goes (a SIGKILL), and the child with it.
            unsafe {
                libc::close(go_w.as_raw_fd());
                libc::close(ready_r.as_raw_fd());
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            }
            // SAFETY: flags only.
            let ok = unsafe { libc::unshare(libc::CLONE_NEWUSER) } == 0;
            let byte = [u8::from(ok)];
            // SAFETY: our pipe ends and a one-byte buffer; then the child exits.
            unsafe {
                libc::write(ready_w.as_raw_fd(), byte.as_ptr().cast(), 1);
                let mut b = [0u8; 1];
                libc::read(go_r.as_raw_fd(), b.as_mut_ptr().cast(), 1);
                libc::_exit(0)
            }
        }
        pid => pid,
    };
    drop((ready_w, go_r));
    let mut byte = [0u8; 1];
    let made = nix::unistd::read(&ready_r, &mut byte).map(|n| n == 1 && byte[0] == 1);
    let result = match made {
        Ok(true) => map_and_open(child, host),
        Ok(false) => Err(io::Error::other("cannot make a user namespace")),
        Err(e) => Err(e.into()),
    };
    // Told to go on; had this process been killed, the child would see the pipe's end.
    let _ = nix::unistd::write(&go_w, b"g");
    // SAFETY: our own child, reaped once.
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    result
}

/// This process (one thread) into a user namespace of its own in which its ids are `uid` and
/// `gid`: the ids it has outside, mapped — no others, so it gains nothing it did not have.
/// Its supplementary groups stay as they were (shown as the overflow group), and no new
/// ones may be set in it.
pub fn show_as(uid: u32, gid: u32) -> io::Result<()> {
    let (outside_uid, outside_gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)?;
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {outside_uid} 1\n"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {outside_gid} 1\n"))?;
    Ok(())
}

fn map_and_open(child: libc::pid_t, host: u32) -> io::Result<OwnedFd> {
    let proc = format!("/proc/{child}");
    std::fs::write(format!("{proc}/uid_map"), format!("0 {host} 1\n"))?;
    std::fs::write(format!("{proc}/gid_map"), format!("0 {host} 1\n"))?;
    let ns = std::fs::File::open(format!("{proc}/ns/user"))?;
    Ok(OwnedFd::from(ns))
}

/// A detached copy of the mount at `path` (the one on top there, without the mounts below
/// it), id-mapped through `userns` where its file system allows: a file owned by host id
/// 0 shows as owned by the id 0 maps to in it, and what a process with that id makes there
/// is host root's. `false` with the copy: not id-mapped (a `/dev/null` bound over a hidden
/// file, an overlay), as it was.
pub fn idmapped_clone(path: &Path, userns: BorrowedFd<'_>) -> io::Result<(OwnedFd, bool)> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    idmap(open_tree(libc::AT_FDCWD, &c, 0)?, userns)
}

/// The same for the object `fd` names (a layer of an overlay), an error where it cannot be
/// id-mapped.
pub fn idmapped_clone_of(fd: BorrowedFd<'_>, userns: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    match idmap(
        open_tree(fd.as_raw_fd(), c"", libc::AT_EMPTY_PATH as libc::c_uint)?,
        userns,
    )? {
        (tree, true) => Ok(tree),
        (_, false) => Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
}

/// A detached tree (`open_tree`) put over `path` (`move_mount`).
pub fn move_tree(tree: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: a detached tree's descriptor, an empty path, and a NUL-terminated
    // destination.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            c.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })?;
    Ok(())
}

/// A detached copy of the mount `path` names from `dirfd` (`open_tree`, OPEN_TREE_CLONE).
fn open_tree(dirfd: i32, path: &std::ffi::CStr, flags: libc::c_uint) -> io::Result<OwnedFd> {
    const OPEN_TREE_CLONE: libc::c_uint = 1;
    let flags = flags | OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint;
    // SAFETY: a NUL-terminated path and integer flags; the result is a new descriptor.
    let fd = check(unsafe { libc::syscall(libc::SYS_open_tree, dirfd, path.as_ptr(), flags) })?;
    // SAFETY: the kernel just gave us this descriptor, owned here alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `struct mount_attr` of <linux/mount.h>, as `mount_setattr` reads it (here and in the
/// helper's mounts).
#[repr(C)]
pub struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

/// `tree` id-mapped through `userns` (`mount_setattr`, MOUNT_ATTR_IDMAP); `false` where its
/// file system does not allow it (EINVAL).
fn idmap(tree: OwnedFd, userns: BorrowedFd<'_>) -> io::Result<(OwnedFd, bool)> {
    const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: our descriptor, an empty path with AT_EMPTY_PATH, and a struct of the size
    // passed, valid for the call.
    let rc = check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    });
    match rc {
        Ok(_) => Ok((tree, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok((tree, false)),
        Err(e) => Err(e),
    }
}

/// Whether a tmpfs can be id-mapped (Linux 6.3), as bwrap's own `/tmp` and `/dev/shm`
/// must be: a new one made detached (`fsopen`, `fsmount`), tried, and dropped.
pub fn tmpfs_idmaps(userns: BorrowedFd<'_>) -> io::Result<bool> {
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    // FSOPEN_CLOEXEC and FSMOUNT_CLOEXEC.
    const CLOEXEC: libc::c_uint = 1;
    // SAFETY: a NUL-terminated name and a flag; the result is a new descriptor.
    let fs = check(unsafe { libc::syscall(libc::SYS_fsopen, c"tmpfs".as_ptr(), CLOEXEC) })?;
    // SAFETY: the kernel just gave us this descriptor, owned here alone.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as i32) };
    // SAFETY: our descriptor and a command that takes no key or value.
    check(unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    })?;
    // SAFETY: our descriptor and flags; the result is a new descriptor.
    let tree = check(unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), CLOEXEC, 0) })?;
    // SAFETY: the kernel just gave us this descriptor, owned here alone.
    let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
    Ok(idmap(tree, userns)?.1)
}

/// Each of `tops` (a mount point or not: then a bind of it), then the mount points below
/// them, from `mountinfo` (this process's), in its order (a mount before those on it),
/// each once (the last mount at a point is on top).
pub fn mounts_under(mountinfo: &str, tops: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    let mut points: Vec<std::path::PathBuf> = tops.to_vec();
    for line in mountinfo.lines() {
        let Some(point) = line.split(' ').nth(4) else {
            continue;
        };
        let point = std::path::PathBuf::from(unescape(point));
        if tops.iter().any(|t| point.starts_with(t)) {
            points.retain(|p| *p != point);
            points.push(point);
        }
    }
    points
}

/// A mountinfo field with its octal escapes (`\040` …) undone.
fn unescape(field: &str) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStringExt;
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    std::ffi::OsString::from_vec(out)
}

/// Enter `userns` (its owner needs no capability), in a mount namespace of its own where
/// each of `trees` (`idmapped_clone`) covers its path, and become its root: uid and gid 0
/// there, no supplementary groups.
pub fn enter(userns: BorrowedFd<'_>, trees: &[(OwnedFd, std::path::PathBuf)]) -> io::Result<()> {
    use std::os::fd::AsFd;
    // SAFETY: a namespace descriptor of ours and a flag.
    check(unsafe { libc::setns(userns.as_raw_fd(), libc::CLONE_NEWUSER) }.into())?;
    // SAFETY: flags only.
    check(unsafe { libc::unshare(libc::CLONE_NEWNS) }.into())?;
    for (tree, path) in trees {
        move_tree(tree.as_fd(), path)?;
    }
    nix::unistd::setgroups(&[])?;
    nix::unistd::setresgid(0.into(), 0.into(), 0.into())?;
    nix::unistd::setresuid(0.into(), 0.into(), 0.into())?;
    // A change of ids leaves the process undumpable, which would keep the guard (its
    // parent, the namespace's owner) from reading the memory its calls name.
    // SAFETY: integer arguments only.
    check(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) }.into())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn mount_points_come_each_once_the_top_first() {
        let info = "1 0 8:1 / / rw - ext4 /dev/a rw\n\
                    2 1 8:1 /w /work rw - ext4 /dev/a rw\n\
                    3 2 0:5 / /work/sub\\040dir rw - tmpfs t rw\n\
                    4 1 0:6 / /other rw - tmpfs t rw\n\
                    5 3 0:7 / /work/sub\\040dir rw - tmpfs t rw\n";
        let got = mounts_under(info, &[PathBuf::from("/work")]);
        assert_eq!(
            got,
            [PathBuf::from("/work"), PathBuf::from("/work/sub dir")]
        );
    }
}
