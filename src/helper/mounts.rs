//! The helper's mounts inside bwrap (`sandbox::bwrap::Mount`), made through descriptors:
//! each path is opened without following a symlink (`files::open_nofollow`), checked, and
//! mounted on that very object with the new mount API (`open_tree`, `mount_setattr`,
//! `move_mount`, Linux 5.12), so that nothing is resolved by name a second time.
//!
//! On an older kernel (no `mount_setattr`) the same mounts are made with mount(2), source
//! and target named by their descriptors' magic links (`/proc/self/fd/N`, which name those
//! very objects); a read-only flag is then set by a remount of the new top mount, found
//! again by walking the path without following a symlink and checked to be a mount root.

use std::ffi::{CStr, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::sys::files::{identify, open_nofollow, Identity, NodeKind};

// From <linux/mount.h> (kernel ABI).
const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;

use crate::sys::userns::MountAttr;

/// What the helper found at a planned path.
pub enum Seen {
    /// Nothing there (or a symlink where a directory was on the way).
    Missing,
    /// A symlink itself.
    Symlink,
    /// The object, opened `O_PATH`, with its identity and whether it is a directory.
    Node(OwnedFd, Identity, bool),
}

/// Whether this kernel has the new mount API: `mount_setattr` (Linux 5.12, the last of
/// it) answers something other than ENOSYS.
fn new_api() -> bool {
    static NEW: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *NEW.get_or_init(|| {
        // SAFETY: mount_setattr on an invalid fd with a null attr reads nothing; it fails
        // (EBADF or EINVAL) where it exists.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                -1,
                EMPTY.as_ptr(),
                libc::AT_EMPTY_PATH as libc::c_uint,
                std::ptr::null::<MountAttr>(),
                0usize,
            )
        };
        !(rc == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS))
    })
}

/// What will be mounted: a detached copy of a mount tree (new API), or the object itself,
/// bound when it is put in place (mount(2)).
enum Tree {
    Detached(OwnedFd),
    Source(OwnedFd),
}

/// The mount tree at `fd`, taken now (its submounts included).
fn take(fd: BorrowedFd<'_>) -> io::Result<Tree> {
    if new_api() {
        clone_tree(fd).map(Tree::Detached)
    } else {
        fd.try_clone_to_owned().map(Tree::Source)
    }
}

/// Put `tree` on the object `target` (which `path` names), with the mount attributes `set`
/// (`MOUNT_ATTR_*`) on its top mount.
fn put(tree: Tree, target: BorrowedFd<'_>, path: &Path, set: u64) -> io::Result<()> {
    match tree {
        Tree::Detached(tree) => {
            if set != 0 {
                set_attrs(tree.as_fd(), set, 0)?;
            }
            attach(tree.as_fd(), target)
        }
        Tree::Source(source) => {
            legacy_mount(
                Some(&magic_link(source.as_fd())?),
                &magic_link(target)?,
                libc::MS_BIND | libc::MS_REC,
            )?;
            if set != 0 {
                legacy_remount(path, set)?;
            }
            Ok(())
        }
    }
}

/// `/proc/self/fd/N` for `fd`: a path that names that very object.
fn magic_link(fd: BorrowedFd<'_>) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn legacy_mount(
    source: Option<&std::ffi::CString>,
    target: &std::ffi::CString,
    flags: libc::c_ulong,
) -> io::Result<()> {
    // SAFETY: NUL-terminated strings (or null) that outlive the call; no data argument.
    let rc = unsafe {
        libc::mount(
            source.map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    check(rc.into()).map(drop)
}

/// Remount the top mount at `path` with the attributes `set` added to the ones it has (a
/// bind mount in a user namespace must keep its locked nosuid, nodev, noexec …).
fn legacy_remount(path: &Path, set: u64) -> io::Result<()> {
    use nix::sys::statvfs::FsFlags;
    let Seen::Node(top, _, _) = find(path)? else {
        return Err(io::Error::from_raw_os_error(libc::ESTALE));
    };
    if !mount_state(top.as_fd())?.0 {
        return Err(io::Error::from_raw_os_error(libc::ESTALE));
    }
    let has = nix::sys::statvfs::fstatvfs(top.as_fd())?.flags();
    let mut flags = libc::MS_REMOUNT | libc::MS_BIND;
    for (fs_flag, ms_flag) in [
        (FsFlags::ST_RDONLY, libc::MS_RDONLY),
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if has.contains(fs_flag) {
            flags |= ms_flag;
        }
    }
    for (attr, ms_flag) in [
        (MOUNT_ATTR_RDONLY, libc::MS_RDONLY),
        (MOUNT_ATTR_NOSUID, libc::MS_NOSUID),
        (MOUNT_ATTR_NODEV, libc::MS_NODEV),
        (MOUNT_ATTR_NOEXEC, libc::MS_NOEXEC),
    ] {
        if set & attr != 0 {
            flags |= ms_flag;
        }
    }
    legacy_mount(None, &magic_link(top.as_fd())?, flags)
}

/// `path` opened without following a symlink anywhere in it.
pub fn find(path: &Path) -> io::Result<Seen> {
    let fd = match open_nofollow(path) {
        Ok(fd) => fd,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(Seen::Missing)
        }
        Err(e) => return Err(e),
    };
    Ok(match identify(fd.as_fd())? {
        (_, NodeKind::Symlink) => Seen::Symlink,
        (id, kind) => Seen::Node(fd, id, kind == NodeKind::Dir),
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

/// Bind the object at `fd` (at `path`) on itself: a mount point, so it cannot be renamed
/// or removed.
pub fn pin(path: &Path, fd: BorrowedFd<'_>) -> io::Result<()> {
    put(take(fd)?, fd, path, 0)
}

/// Bind the object at `fd` (at `path`) on itself, read-only (its top mount; deeper mounts
/// keep theirs).
pub fn read_only(path: &Path, fd: BorrowedFd<'_>) -> io::Result<()> {
    put(take(fd)?, fd, path, MOUNT_ATTR_RDONLY)
}

/// Seal the directory at `path` (opened as `fd`): read-only, then each entry that
/// `keep(name)` accepts bound read-write again as it was (taken before), so that nothing
/// can be created, renamed or removed at its top. Symlinks among the entries stay as they
/// are, read-only.
pub fn seal(path: &Path, fd: BorrowedFd<'_>, keep: &dyn Fn(&OsStr) -> bool) -> io::Result<()> {
    let mut kept: Vec<(std::ffi::OsString, Tree)> = Vec::new();
    for (name, child) in entries_where(fd, keep)? {
        kept.push((name, take(child.as_fd())?));
    }
    read_only(path, fd)?;
    // The sealed directory as it is now, its new top mount.
    let Seen::Node(sealed, _, true) = find(path)? else {
        return Err(io::Error::from_raw_os_error(libc::ESTALE));
    };
    for (name, tree) in kept {
        let child = open_entry(sealed.as_fd(), &name)?;
        put(tree, child.as_fd(), &path.join(&name), 0)?;
    }
    Ok(())
}

/// The entry `name` of the directory `dir`, opened O_PATH without following a symlink.
fn open_entry(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(nix::fcntl::openat(
        dir,
        name,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?)
}

/// The entries of the directory `fd` that `pick(name)` accepts and that are not symlinks
/// (a mount cannot hold one), each opened O_PATH without following one.
fn entries_where(
    fd: BorrowedFd<'_>,
    pick: &dyn Fn(&OsStr) -> bool,
) -> io::Result<Vec<(std::ffi::OsString, OwnedFd)>> {
    // The directory read through its descriptor's magic link, which names that very object.
    let entries = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    let mut out = Vec::new();
    for entry in entries {
        let name = entry?.file_name();
        if !pick(&name) {
            continue;
        }
        let child = open_entry(fd, &name)?;
        if identify(child.as_fd())?.1 != NodeKind::Symlink {
            out.push((name, child));
        }
    }
    Ok(out)
}

/// Bind read-only, each on itself, the entries of the directory at `path` (opened as `fd`)
/// that `sealed(name)` names; the directory stays as it is. Symlinks are left alone (a
/// mount cannot hold one; the guard refuses a new one of a sealed name).
pub fn seal_entries(
    path: &Path,
    fd: BorrowedFd<'_>,
    sealed: &dyn Fn(&OsStr) -> bool,
) -> io::Result<()> {
    for (name, child) in entries_where(fd, sealed)? {
        read_only(&path.join(&name), child.as_fd())?;
    }
    Ok(())
}

/// Hide the object at `fd` (at `path`): an empty read-only tmpfs over a directory,
/// `/dev/null` bound read-only over anything else.
pub fn hide(path: &Path, fd: BorrowedFd<'_>, dir: bool) -> io::Result<()> {
    let hardened = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    if dir {
        let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY;
        return mount_new(c"tmpfs", fd, flags, c"mode=0755,size=4k");
    }
    let Seen::Node(null, _, false) = find(Path::new("/dev/null"))? else {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    };
    put(take(null.as_fd())?, fd, path, MOUNT_ATTR_RDONLY | hardened)
}

/// Bind `copy` over the object at `fd` (at `path`, a directory when `dir`), read-only.
/// `ELOOP` when the copy is missing, a symlink or of the other kind.
pub fn bind_view(copy: &Path, dir: bool, path: &Path, fd: BorrowedFd<'_>) -> io::Result<()> {
    let Seen::Node(source, _, is_dir) = find(copy)? else {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    };
    if is_dir != dir {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    let hardened = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
    put(
        take(source.as_fd())?,
        fd,
        path,
        MOUNT_ATTR_RDONLY | hardened,
    )
}

/// Bind the twin at `twin` (a directory when `dir`, else a regular file) over the object at
/// `fd` (at `path`), as it is (read-write). `ELOOP` when the twin is missing, a symlink or
/// of the other kind.
pub fn bind_twin(twin: &Path, dir: bool, path: &Path, fd: BorrowedFd<'_>) -> io::Result<()> {
    let Seen::Node(source, _, is_dir) = find(twin)? else {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    };
    if is_dir != dir {
        return Err(io::Error::from_raw_os_error(libc::ELOOP));
    }
    put(take(source.as_fd())?, fd, path, 0)
}

/// Root's program as another host id (`helper`'s `RootAsTaken`), for an overlay: its lower
/// layer id-mapped through `userns`, so that host root's files there are the program's; its
/// upper layer belonging to `id`, which the kernel writes what the program makes and copies
/// up as (an id-mapped upper cannot hold the overlay's own work files).
#[derive(Clone, Copy)]
pub struct LayersAs<'a> {
    pub userns: BorrowedFd<'a>,
    pub id: u32,
}

/// An overlay on the directory `target`: `lower` (a descriptor) read-only beneath the
/// directories `upper` and `work` (opened here without following a symlink). Every
/// directory is named by its descriptor's magic link, so nothing is looked up by a path
/// the program could have changed; `userxattr`, as an overlay in a user namespace needs;
/// nosuid and nodev (not noexec: `npx` runs what it keeps in npm's cache). With `layers_as`,
/// for root's program as another id: the lower layer id-mapped, the upper one that id's.
pub fn overlay(
    lower: BorrowedFd<'_>,
    upper: &Path,
    work: &Path,
    target: BorrowedFd<'_>,
    layers_as: Option<LayersAs<'_>>,
) -> io::Result<()> {
    let open_dir = |path: &Path| match find(path)? {
        Seen::Node(fd, _, true) => Ok(fd),
        _ => Err(io::Error::from_raw_os_error(libc::ELOOP)),
    };
    let (upper, work) = (open_dir(upper)?, open_dir(work)?);
    let mapped = match layers_as {
        Some(l) => {
            give_tree(upper.as_fd(), l.id)?;
            Some(crate::sys::userns::idmapped_clone_of(lower, l.userns)?)
        }
        None => None,
    };
    let lower = mapped.as_ref().map_or(lower, |m| m.as_fd());
    let link = |fd: BorrowedFd<'_>| magic_link(fd).map(|l| l.to_string_lossy().into_owned());
    let options = std::ffi::CString::new(format!(
        "lowerdir={},upperdir={},workdir={},userxattr",
        link(lower)?,
        link(upper.as_fd())?,
        link(work.as_fd())?
    ))?;
    mount_new(
        c"overlay",
        target,
        libc::MS_NOSUID | libc::MS_NODEV,
        &options,
    )
}

/// The directory `dir` and all beneath it made `id`'s (uid and gid), unless `dir` is that
/// id's already: an upper layer that sessions before root's program ran as another id left
/// as host root's. Through descriptors alone, never following a symlink; a file with more
/// than one name is left as it is.
fn give_tree(dir: BorrowedFd<'_>, id: u32) -> io::Result<()> {
    use nix::fcntl::{AtFlags, OFlag};
    use nix::sys::stat::Mode;
    let owner = Some(nix::unistd::Uid::from_raw(id));
    let group = Some(nix::unistd::Gid::from_raw(id));
    if nix::sys::stat::fstat(dir)?.st_uid == id {
        return Ok(());
    }
    let mut stack = vec![nix::fcntl::openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?];
    while let Some(fd) = stack.pop() {
        nix::unistd::fchown(&fd, owner, group)?;
        // Listed through the descriptor's magic link: the directory itself, not a path.
        for entry in std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))? {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.as_os_str();
            let sub = nix::fcntl::openat(
                &fd,
                name,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            );
            if let Ok(sub) = sub {
                stack.push(sub);
                continue;
            }
            // Anything else as the very object found (`O_PATH`, not followed); a file
            // with other names is left as it is: one of them could lie outside the layer.
            let node = nix::fcntl::openat(
                &fd,
                name,
                OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            let st = nix::sys::stat::fstat(&node)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR && st.st_nlink > 1 {
                continue;
            }
            nix::unistd::fchownat(&node, "", owner, group, AtFlags::AT_EMPTY_PATH)?;
        }
    }
    Ok(())
}

/// A scaffold (`sandbox::rootas`): the kept trees copied with the mounts below them, the
/// directory covered by an empty tmpfs, the way to each made there (directories 0755, an
/// empty file where a file goes), each copy put in its place, the tmpfs made read-only.
pub fn scaffold(s: &crate::sandbox::rootas::Scaffold) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let not_there = || io::Error::from_raw_os_error(libc::ENOENT);
    let mut kept = Vec::new();
    for path in &s.keep {
        let Seen::Node(fd, _, dir) = find(path)? else {
            return Err(not_there());
        };
        let names: Vec<_> = path
            .strip_prefix(&s.dir)
            .map_err(io::Error::other)?
            .iter()
            .collect();
        kept.push((clone_tree(fd.as_fd())?, names, dir));
    }
    let Seen::Node(top, _, true) = find(&s.dir)? else {
        return Err(not_there());
    };
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount_new(c"tmpfs", top.as_fd(), flags, c"mode=0755,size=64k")?;
    for (tree, names, dir) in kept {
        let mut at = s.dir.clone();
        for (i, name) in names.iter().enumerate() {
            at.push(name);
            let made = match i + 1 == names.len() && !dir {
                true => std::fs::File::create_new(&at).map(drop),
                false => std::fs::create_dir(&at),
            };
            match made {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                other => other?,
            }
            std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o755))?;
        }
        let Seen::Node(target, _, _) = find(&at)? else {
            return Err(not_there());
        };
        attach(tree.as_fd(), target.as_fd())?;
    }
    legacy_remount(&s.dir, MOUNT_ATTR_RDONLY)
}

/// A new file system of type `fstype`, with `flags` and the options `data`, mounted on
/// the object `target` (through its magic link).
fn mount_new(
    fstype: &std::ffi::CStr,
    target: BorrowedFd<'_>,
    flags: libc::c_ulong,
    data: &std::ffi::CStr,
) -> io::Result<()> {
    let target = magic_link(target)?;
    // SAFETY: NUL-terminated strings that outlive the call; the target is the magic link
    // of a descriptor this process holds, which names that very object.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    check(rc.into()).map(drop)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_layer_is_given_whole_but_a_file_with_another_name() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "giving files to another id takes root: run the unit tests as root"
        );
        let base = std::env::temp_dir().join(format!("sbx-give-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("upper/a/b")).unwrap();
        std::fs::write(base.join("upper/a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", base.join("upper/a/link")).unwrap();
        // A name in the layer for a file outside it.
        std::fs::write(base.join("outside"), "y").unwrap();
        std::fs::hard_link(base.join("outside"), base.join("upper/a/linked")).unwrap();
        let Seen::Node(upper, _, true) = find(&base.join("upper")).unwrap() else {
            panic!("no layer");
        };
        give_tree(upper.as_fd(), 4_000_123).unwrap();
        let uid = |p: &str| std::fs::symlink_metadata(base.join(p)).unwrap().uid();
        for given in [
            "upper",
            "upper/a",
            "upper/a/b",
            "upper/a/b/f",
            "upper/a/link",
        ] {
            assert_eq!(uid(given), 4_000_123, "{given}");
        }
        assert_eq!(uid("outside"), 0);
        assert_eq!(std::fs::metadata("/etc/passwd").unwrap().uid(), 0);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
