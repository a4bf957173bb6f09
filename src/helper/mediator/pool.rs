//! The carved directories' pools (`sandbox::carve`), as the guard uses them: a file or a
//! directory the program makes at the top of a carved directory is a pool entry renamed
//! into place (`RENAME_NOREPLACE`: what is there stays, `EEXIST`), given the mode asked
//! and the time of its making, so that it has the read-write rule its entry was given
//! before the program started. Each entry is known by its identity, taken when the guard
//! started: one that is not what it was (changed from outside) is never used.

use std::cell::RefCell;
use std::ffi::CString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use crate::sandbox::carve;
use crate::sys::at::{fstat, open_path, openat, Res};

/// What is made at a carved directory's top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pooled {
    File,
    Dir,
}

/// One carved directory's pool.
struct Holder {
    /// The carved directory's identity (`st_dev`, `st_ino`).
    dir: (u64, u64),
    holder: OwnedFd,
    /// The entries left.
    files: Vec<PoolEntry>,
    dirs: Vec<PoolEntry>,
}

/// One entry of a pool, by its name in the holder and the identity it had when the guard
/// started (`st_dev`, `st_ino`).
struct PoolEntry {
    name: CString,
    id: (u64, u64),
}

#[derive(Default)]
pub(super) struct HeldPools {
    holders: RefCell<Vec<Holder>>,
}

fn identity(st: &libc::stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

impl HeldPools {
    /// The pools the session made (`session::pool`), as they are now; one that cannot be
    /// opened is left out.
    pub(super) fn open(pools: &[carve::Pool]) -> HeldPools {
        let holders = pools.iter().filter_map(|p| Holder::open(p).ok()).collect();
        HeldPools {
            holders: RefCell::new(holders),
        }
    }

    /// Make `name` in `dir` from the pool when `dir` is a carved directory's top: a file
    /// opened with `flags` (no `O_CREAT`) and given `mode`, or a directory given `mode`.
    /// `None`: not a carved directory, or its pool is empty.
    pub(super) fn make(
        &self,
        dir: BorrowedFd<'_>,
        name: &CString,
        made: Pooled,
        flags: i32,
        mode: u32,
    ) -> Option<Res<Option<OwnedFd>>> {
        let mut holders = self.holders.borrow_mut();
        if holders.is_empty() {
            return None;
        }
        let at = identity(&fstat(dir).ok()?);
        let holder = holders.iter_mut().find(|h| h.dir == at)?;
        loop {
            let entry = match made {
                Pooled::File => holder.files.pop()?,
                Pooled::Dir => holder.dirs.pop()?,
            };
            let opened = match made {
                Pooled::File => flags,
                Pooled::Dir => libc::O_RDONLY | libc::O_DIRECTORY,
            };
            let how = (opened & !(libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC))
                | libc::O_NOFOLLOW
                | libc::O_CLOEXEC;
            let Ok(fd) = openat(holder.holder.as_fd(), &entry.name, how, 0) else {
                continue;
            };
            if fstat(fd.as_fd()).map(|st| identity(&st)) != Ok(entry.id) {
                continue;
            }
            return Some(place(holder, entry, fd, dir, name, made, mode));
        }
    }
}

/// Entry `entry` (open on `fd`) given `mode`, its times made now, and renamed to `name` in
/// `dir`; put back when something is there (`EEXIST`).
fn place(
    holder: &mut Holder,
    entry: PoolEntry,
    fd: OwnedFd,
    dir: BorrowedFd<'_>,
    name: &CString,
    made: Pooled,
    mode: u32,
) -> Res<Option<OwnedFd>> {
    let mode = nix::sys::stat::Mode::from_bits_retain((mode & 0o7777) as libc::mode_t);
    nix::sys::stat::fchmod(&fd, mode).map_err(|e| e as i32)?;
    // Both times now.
    let now = nix::sys::time::TimeSpec::UTIME_NOW;
    let _ = nix::sys::stat::futimens(&fd, &now, &now);
    let placed = crate::sys::at::renameat2(
        holder.holder.as_fd(),
        &entry.name,
        dir,
        name,
        libc::RENAME_NOREPLACE,
    );
    if let Err(err) = placed {
        let back = match made {
            Pooled::File => &mut holder.files,
            Pooled::Dir => &mut holder.dirs,
        };
        back.push(entry);
        return Err(err);
    }
    Ok((made == Pooled::File).then_some(fd))
}

impl Holder {
    fn open(pool: &carve::Pool) -> std::io::Result<Holder> {
        let c = |p: &std::path::Path| CString::new(p.as_os_str().as_bytes());
        let dir = open_path(crate::sys::at::CWD, &c(&pool.dir)?)?;
        let holder = open_path(crate::sys::at::CWD, &c(&pool.holder)?)?;
        let known = |names: &[String]| -> Vec<PoolEntry> {
            names
                .iter()
                .filter_map(|n| {
                    let name = CString::new(n.as_bytes()).ok()?;
                    let st = crate::sys::at::fstatat(holder.as_fd(), &name).ok()?;
                    let id = identity(&st);
                    Some(PoolEntry { name, id })
                })
                .collect()
        };
        let err = |e: i32| std::io::Error::from_raw_os_error(e);
        Ok(Holder {
            dir: identity(&fstat(dir.as_fd()).map_err(err)?),
            files: known(&pool.files),
            dirs: known(&pool.dirs),
            holder,
        })
    }
}
