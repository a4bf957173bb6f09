//! The helper's mounts inside bwrap (`sandbox::bwrap::Mount`), made through descriptors:
//! each path is opened without following a symlink (`files::open_nofollow`), checked, and
//! mounted on that very object with the new mount API (`open_tree`, `mount_setattr`,
//! `move_mount`, Linux 5.12), so that nothing is resolved by name a second time.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::files::{identify, open_nofollow, Identity, NodeKind};

// From <linux/mount.h> (kernel ABI).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// `struct mount_attr` of <linux/mount.h>.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// What the helper found at a planned path.
pub enum Found {
    /// Nothing there (or a symlink where a directory was on the way).
    Missing,
    /// A symlink itself.
    Symlink,
    /// The object, opened `O_PATH`, with its identity and whether it is a directory.
    Node(OwnedFd, Identity, bool),
}

/// `path` opened without following a symlink anywhere in it.
pub fn find(path: &Path) -> io::Result<Found> {
    let fd = match open_nofollow(path) {
        Ok(fd) => fd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(Found::Missing)
        }
        Err(e) => return Err(e),
    };
    Ok(match identify(fd.as_fd())? {
        (_, NodeKind::Symlink) => Found::Symlink,
        (id, kind) => Found::Node(fd, id, kind == NodeKind::Dir),
    })
}

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

const EMPTY: &CStr = c"";

/// A detached copy of the mount tree at `fd` (its submounts included).
fn clone_tree(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: open_tree with an open fd, an empty NUL-terminated path and AT_EMPTY_PATH
    // reads nothing else; the returned fd is owned below.
    let tree = check(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            fd.as_raw_fd(),
            EMPTY.as_ptr(),
            OPEN_TREE_CLONE
                | OPEN_TREE_CLOEXEC
                | libc::AT_EMPTY_PATH as libc::c_uint
                | libc::AT_RECURSIVE as libc::c_uint,
        )
    })?;
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(tree as i32) })
}

/// Set and clear mount attributes of the top mount of `tree` only (a grant deeper inside
/// keeps its own).
fn set_attrs(tree: BorrowedFd<'_>, set: u64, clear: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `attr` is a valid mount_attr of the size passed; the path is empty with
    // AT_EMPTY_PATH.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            EMPTY.as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })?;
    Ok(())
}

/// Attach the detached `tree` on the object `target` refers to.
fn attach(tree: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: two open fds and empty paths with the EMPTY_PATH flags; nothing else is read.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            EMPTY.as_ptr(),
            target.as_raw_fd(),
            EMPTY.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })?;
    Ok(())
}

/// Bind the object at `fd` on itself: a mount point, so it cannot be renamed or removed.
pub fn pin(fd: BorrowedFd<'_>) -> io::Result<()> {
    let tree = clone_tree(fd)?;
    attach(tree.as_fd(), fd)
}

/// Bind the object at `fd` on itself, read-only (its top mount; deeper mounts keep theirs).
pub fn read_only(fd: BorrowedFd<'_>) -> io::Result<()> {
    let tree = clone_tree(fd)?;
    set_attrs(tree.as_fd(), MOUNT_ATTR_RDONLY, 0)?;
    attach(tree.as_fd(), fd)
}

/// Seal the directory at `path` (opened as `fd`): read-only, then each entry that
/// `keep(name)` accepts bound read-write again as it was (a copy taken before), so that
/// nothing can be created, renamed or removed at its top. Symlinks among the entries stay
/// as they are, read-only.
pub fn seal(path: &Path, fd: BorrowedFd<'_>, keep: &dyn Fn(&OsStr) -> bool) -> io::Result<()> {
    // The directory read through its descriptor's magic link, which names that very object.
    let entries = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let mut kept: Vec<(std::ffi::OsString, OwnedFd)> = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.as_os_str();
        if !keep(name) {
            continue;
        }
        let child = nix::fcntl::openat(
            fd,
            name,
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        if identify(child.as_fd())?.1 == NodeKind::Symlink {
            continue;
        }
        kept.push((name.to_owned(), clone_tree(child.as_fd())?));
    }
    read_only(fd)?;
    // The sealed directory as it is now, its new top mount.
    let Found::Node(sealed, _, true) = find(path)? else {
        return Err(io::Error::from_raw_os_error(libc::ESTALE));
    };
    for (name, tree) in kept {
        let child = nix::fcntl::openat(
            sealed.as_fd(),
            name.as_os_str(),
            nix::fcntl::OFlag::O_PATH
                | nix::fcntl::OFlag::O_NOFOLLOW
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )?;
        attach(tree.as_fd(), child.as_fd())?;
    }
    Ok(())
}

/// Hide the object at `fd`: an empty read-only tmpfs over a directory, `/dev/null` bound
/// read-only over anything else.
pub fn hide(fd: BorrowedFd<'_>, dir: bool) -> io::Result<()> {
    let hardened = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    if dir {
        let target = std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: NUL-terminated strings that outlive the call; the target is the magic
        // link of an fd this process holds, which names that very object.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                target.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
                c"mode=0755,size=4k".as_ptr().cast(),
            )
        };
        return check(rc.into()).map(drop);
    }
    let Found::Node(null, _, false) = find(Path::new("/dev/null"))? else {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    };
    let tree = clone_tree(null.as_fd())?;
    set_attrs(tree.as_fd(), MOUNT_ATTR_RDONLY | hardened, 0)?;
    attach(tree.as_fd(), fd)
}

/// Bind the twin at `twin` (a directory when `dir`, else a regular file) over the object at
/// `fd`, as it is (read-write). `ELOOP` when the twin is missing, a symlink or of the
/// other kind.
pub fn bind_twin(twin: &Path, dir: bool, fd: BorrowedFd<'_>) -> io::Result<()> {
    let Found::Node(source, _, is_dir) = find(twin)? else {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    };
    if is_dir != dir {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    let tree = clone_tree(source.as_fd())?;
    attach(tree.as_fd(), fd)
}

/// Whether the object at `fd` is the root of a mount, and whether that mount is writable.
pub fn mount_state(fd: BorrowedFd<'_>) -> io::Result<(bool, bool)> {
    // SAFETY: a zeroed statx is valid to be filled in.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: an open fd, an empty NUL-terminated path with AT_EMPTY_PATH, and a writable
    // statx.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            EMPTY.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_BASIC_STATS,
            &mut stx,
        )
    };
    check(rc.into())?;
    let root = stx.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0;
    let vfs = nix::sys::statvfs::fstatvfs(fd)?;
    let writable = !vfs.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY);
    Ok((root, writable))
}
