//! What the guard does for one call (`Acting`): the entry a path names, resolved as the
//! kernel would (the directory by the kernel, the last component by hand), and the checks
//! before anything is made or opened there. The acts themselves are `opening.rs` (opens)
//! and `making.rs` (every other call that makes a name).

use super::at::{fd_path, fstatat, open_path, os_errno, Res};
use super::git::{completes_git, git_place, holds_plants, is_git, linked_worktree};
use super::notify::Call;
use super::opens::{self};
use super::umasks::{self, Umasks};
use crate::policy::refusal::Cause;
use crate::protect::names::{self, Made, Names};
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Where a path argument starts: the program's working directory or descriptor (opened by
/// `listen`), or the root for an absolute path; `path` empty names `base` itself.
pub(super) struct Where {
    pub(super) base: Option<OwnedFd>,
    pub(super) path: Vec<u8>,
}

pub(super) enum Op {
    Open { at: Where, flags: i32, mode: u32 },
    Mkdir { at: Where, mode: u32 },
    Mknod { at: Where, mode: u32, dev: u64 },
    Symlink { target: CString, at: Where },
    Link { old: Where, new: Where, flags: i32 },
    Rename { old: Where, new: Where, flags: u32 },
}

pub(super) struct Acting<'a> {
    pub(super) listener: &'a OwnedFd,
    pub(super) names: &'a Names,
    pub(super) reach: &'a super::Reach,
    /// The `.git` files made in this session, by `(st_dev, st_ino)`: git rewrites a new
    /// submodule's, which may be rewritten; one that existed at the start may not.
    pub(super) made: &'a std::cell::RefCell<Vec<(u64, u64)>>,
    pub(super) umasks: &'a std::cell::RefCell<Umasks>,
    pub(super) root: BorrowedFd<'a>,
    pub(super) call: &'a Call,
}

/// A directory (O_PATH) and a name in it.
pub(super) struct Entry {
    pub(super) dir: OwnedFd,
    pub(super) name: CString,
}

/// EACCES, once the refusal of `path` is reported (`report`).
pub(super) fn refuse(cause: Cause, path: &std::path::Path) -> i32 {
    super::report::refused(cause, path);
    libc::EACCES
}

/// What `/proc/PID/status` says of thread `pid` (`None`: it is gone).
pub(super) fn status_of(pid: u32) -> Option<umasks::Status> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    umasks::parse_status(&text)
}

impl Acting<'_> {
    /// The directory of the path's last component, resolved by the kernel (symlinks
    /// followed, as for the program), and that component; `None` for a path that names
    /// its start itself (empty, `.`, `..`, `/`: no name is made there).
    pub(super) fn entry(&self, base: BorrowedFd<'_>, path: &[u8]) -> Res<Option<Entry>> {
        let Some((dir, name)) = super::paths::split_last(path) else {
            return Ok(None);
        };
        let start = if dir.first() == Some(&b'/') {
            self.root
        } else {
            base
        };
        let dir = CString::new(dir).map_err(|_| libc::EINVAL)?;
        let dir = open_path(start.as_raw_fd(), &dir).map_err(|e| os_errno(&e))?;
        Ok(Some(Entry {
            dir,
            name: CString::new(name).map_err(|_| libc::EINVAL)?,
        }))
    }

    pub(super) fn base<'w>(&'w self, at: &'w Where) -> BorrowedFd<'w> {
        at.base.as_ref().map_or(self.root, |b| b.as_fd())
    }

    /// The entry a path names, which must not be its start itself (EEXIST: it exists).
    /// As the kernel answers, a name that exists is EEXIST before any question of whether
    /// it may be made there (`mkdir -p` of an existing directory in a read-only place).
    pub(super) fn new_entry(&self, at: &Where) -> Res<Entry> {
        if at.path.is_empty() {
            return Err(libc::ENOENT);
        }
        let e = self.entry(self.base(at), &at.path)?.ok_or(libc::EEXIST)?;
        if fstatat(e.dir.as_fd(), &e.name).is_ok() {
            return Err(libc::EEXIST);
        }
        Ok(e)
    }

    /// Refuse a name `names` refuses (EACCES), and the last of `HEAD`, `objects` and
    /// `refs` in a directory that holds what a git directory may not (it would become one
    /// with it: names made there before were not asked as a git directory's).
    pub(super) fn check(&self, e: &Entry, made: Made) -> Res<()> {
        let parent = fd_path(e.dir.as_fd()).map_err(|_| libc::EACCES)?;
        let name = OsStr::from_bytes(e.name.as_bytes());
        if !self.reach.may_make_in(&parent) {
            return Err(refuse(Cause::Outside, &parent.join(name)));
        }
        let git = git_place(e.dir.as_fd(), &parent, name);
        if self.names.refused(&parent, name, made, git).is_some() {
            return Err(refuse(Cause::Protected, &parent.join(name)));
        }
        let marker = names::GIT_MARKERS.iter().any(|m| name == *m);
        if marker
            && !is_git(e.dir.as_fd(), &parent)
            && completes_git(e.dir.as_fd(), name)
            && holds_plants(e.dir.as_fd(), self.names)
        {
            return Err(refuse(Cause::Protected, &parent.join(name)));
        }
        // `HEAD` with `commondir` is a git directory too (a linked worktree's): outside
        // `worktrees/` of a git directory, neither completes the other.
        let has = |n: &CStr| fstatat(e.dir.as_fd(), n).is_ok();
        let pair = (name == "commondir" && has(c"HEAD")) || (name == "HEAD" && has(c"commondir"));
        if pair && !linked_worktree(e.dir.as_fd(), &parent) {
            return Err(refuse(Cause::Protected, &parent.join(name)));
        }
        Ok(())
    }

    /// Refuse opening the existing entry `e` for writing where `names::refused_write` says.
    pub(super) fn check_write(&self, e: &Entry, flags: i32) -> Res<()> {
        let name = OsStr::from_bytes(e.name.as_bytes());
        if !opens::writes(flags) {
            return Ok(());
        }
        let parent = fd_path(e.dir.as_fd()).map_err(|_| libc::EACCES)?;
        if !self.names.protected.is_empty() && self.names.guards(&parent.join(name)) {
            return Err(refuse(Cause::Protected, &parent.join(name)));
        }
        if !names::write_judged(name) {
            return Ok(());
        }
        match names::refused_write(name, git_place(e.dir.as_fd(), &parent, name)) {
            // A `.git` file this session made (git writes a submodule's twice).
            Some(_) if name == ".git" && self.made_here(e) => Ok(()),
            Some(_) => Err(refuse(Cause::Protected, &parent.join(name))),
            None => Ok(()),
        }
    }

    /// Refuse opening the existing entry `e` with `flags` where the program's own rules
    /// would not let it (`Reach`) — before anything is opened: an open may truncate.
    pub(super) fn check_reach(&self, e: &Entry, flags: i32) -> Res<()> {
        if self.reach.rules.is_none() {
            return Ok(());
        }
        let dir = fd_path(e.dir.as_fd()).map_err(|_| libc::EACCES)?;
        let path = dir.join(OsStr::from_bytes(e.name.as_bytes()));
        match self.reach.may_open(&path, flags) {
            true => Ok(()),
            false => Err(refuse(Cause::Outside, &path)),
        }
    }

    /// Whether the file `e` names was made in this session by this guard (`made`).
    pub(super) fn made_here(&self, e: &Entry) -> bool {
        fstatat(e.dir.as_fd(), &e.name)
            .is_ok_and(|st| self.made.borrow().contains(&(st.st_dev, st.st_ino)))
    }

    /// The program's umask (`umasks`: read once per thread, then followed through its
    /// `umask()` calls).
    pub(super) fn umask(&self) -> u32 {
        let pid = self.call.pid;
        self.umasks.borrow_mut().of(pid, || status_of(pid))
    }
}
