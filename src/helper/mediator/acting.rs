//! What the guard does for one call (`Acting`): the entry a path names, resolved as the
//! kernel would (the directory by the kernel, the last component by hand), with that
//! directory's path, and the checks before anything is made or opened there. The acts
//! themselves are `opening.rs` (opens) and `making.rs` (every other call that makes a name).

use super::git::{completes_git, git_place, holds_plants, linked_worktree};
use super::nameat::{NameAt, OpenedDir};
use super::notify::{Call, Listener};
use super::opens::{self};
use super::threads::Cwd;
use crate::policy::report::Cause;
use crate::protect::names::{self, Made, Names};
use crate::sys::at::{fd_path, fstatat, open_path, open_plain, os_errno, Res};
use std::cell::RefCell;
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where a path argument starts.
pub(super) enum Base {
    /// The root: the path is absolute (or names nothing relative).
    Root,
    /// The caller's working directory.
    Cwd,
    /// A directory of the caller's (its descriptor), or the session's `/dev/shm`.
    Fd(OwnedFd),
    Shm,
}

/// Where a path argument starts, opened (`Acting::base`): the directory, and its path when
/// the guard knows it without asking (`None`: ask the kernel, `fd_path`).
pub(super) struct BaseDir<'a> {
    pub(super) fd: BorrowedFd<'a>,
    pub(super) path: Option<PathBuf>,
}

/// A path argument and where it starts; `path` empty names the start itself.
pub(super) struct Where {
    pub(super) base: Base,
    pub(super) path: Vec<u8>,
}

pub(super) enum Op {
    Open {
        at: Where,
        flags: i32,
        mode: u32,
    },
    Mkdir {
        at: Where,
        mode: u32,
    },
    Mknod {
        at: Where,
        mode: u32,
        dev: u64,
    },
    Symlink {
        target: CString,
        at: Where,
    },
    Link {
        old: Where,
        new: Where,
        flags: i32,
    },
    Rename {
        old: Where,
        new: Where,
        flags: u32,
    },
    /// `unlink`, `unlinkat`, `rmdir` (`AT_REMOVEDIR`).
    Remove {
        at: Where,
        flags: i32,
    },
}

impl Op {
    /// Whether the call may make something that takes the caller's umask.
    pub(super) fn takes_umask(&self) -> bool {
        match self {
            Op::Open { flags, .. } => flags & libc::O_CREAT != 0,
            Op::Mkdir { .. } | Op::Mknod { .. } => true,
            _ => false,
        }
    }

    /// Whether a path of the call starts at the caller's working directory.
    pub(super) fn uses_cwd(&self) -> bool {
        let cwd = |w: &Where| matches!(w.base, Base::Cwd);
        match self {
            Op::Open { at, .. } | Op::Mkdir { at, .. } | Op::Mknod { at, .. } => cwd(at),
            Op::Remove { at, .. } => cwd(at),
            Op::Symlink { at, .. } => cwd(at),
            Op::Link { old, new, .. } | Op::Rename { old, new, .. } => cwd(old) || cwd(new),
        }
    }
}

pub(super) struct Acting<'a> {
    pub(super) listener: &'a Listener,
    pub(super) names: &'a Names,
    pub(super) reach: &'a super::Reach,
    /// The carved directories' pools (`pool`).
    pub(super) pool: &'a super::pool::HeldPools,
    /// The `.git` files made in this session, by `(st_dev, st_ino)`: git rewrites a new
    /// submodule's, which may be rewritten; one that existed at the start may not.
    pub(super) made: &'a RefCell<Vec<(u64, u64)>>,
    /// git's operation state that can run a program, kept by the guard (`statefiles`).
    pub(super) state: &'a super::statefiles::StateFiles,
    /// The caller's umask (asked only for calls that may make something: `Op::takes_umask`).
    pub(super) umask: u32,
    pub(super) root: BorrowedFd<'a>,
    /// The session's `/dev/shm` (Landlock alone) and its path.
    pub(super) shm: Option<(BorrowedFd<'a>, &'a Path)>,
    /// The caller's working directory, when a path starts there.
    pub(super) cwd: Option<&'a Cwd>,
    pub(super) call: &'a Call,
    /// The guard's pid (the session's processes are its descendants) and this thread's id.
    pub(super) guard: (u32, u32),
    /// The paths the call renamed away: a working directory the guard keeps at or below
    /// one of them moved with it (`Threads::renamed`).
    pub(super) renamed: RefCell<Vec<PathBuf>>,
    /// Root's program where it stays host root: what it reads is judged (`rootreads`).
    pub(super) root_reads: Option<&'a super::RootReads>,
}

/// EACCES, once the refusal of `path` is reported (`report`).
pub(super) fn refuse(cause: Cause, path: &Path) -> i32 {
    super::report::refused(cause, path);
    libc::EACCES
}

/// EACCES for an open with `flags` of `path`, which the program's rules do not reach,
/// reported as a write or as a read (a read is the guard's only for root's program,
/// `rootreads`; an ordinary user's are Landlock's own, named from its audit records).
pub(super) fn refuse_open(path: &Path, flags: i32) -> i32 {
    match opens::writes(flags) {
        true => refuse(Cause::Outside, path),
        false => refuse(Cause::Unreadable, path),
    }
}

impl<'a> Acting<'a> {
    /// Where `at` starts, and that directory's path when the guard knows it without asking
    /// (`None`: ask the kernel, `fd_path`).
    pub(super) fn base<'w>(&'w self, at: &'w Where) -> Res<BaseDir<'w>> {
        let (fd, path) = match &at.base {
            Base::Root => (self.root, Some(PathBuf::from("/"))),
            Base::Cwd => {
                let cwd = self.cwd.ok_or(libc::ESRCH)?;
                (cwd.fd.as_fd(), cwd.path.clone())
            }
            Base::Fd(fd) => (fd.as_fd(), None),
            Base::Shm => {
                let (fd, path) = self.shm.ok_or(libc::ENOENT)?;
                (fd, Some(path.to_path_buf()))
            }
        };
        Ok(BaseDir { fd, path })
    }

    /// The directory of the path's last component, resolved by the kernel (symlinks
    /// followed, as for the program), with its path, and that component; `None` for a path
    /// that names its start itself (empty, `.`, `..`, `/`: no name is made there).
    pub(super) fn entry<'w>(&'w self, base: BaseDir<'w>, path: &[u8]) -> Res<Option<NameAt<'w>>> {
        let Some((dir, name)) = super::paths::split_last(path) else {
            return Ok(None);
        };
        let name = CString::new(name).map_err(|_| libc::EINVAL)?;
        let (start, start_path) = if dir.first() == Some(&b'/') {
            (self.root, Some(PathBuf::from("/")))
        } else {
            (base.fd, base.path)
        };
        if dir == b"." {
            if let Some(path) = start_path {
                return Ok(Some(NameAt {
                    dir: OpenedDir::Held(start),
                    path,
                    name,
                }));
            }
        }
        let dir_c = CString::new(dir).map_err(|_| libc::EINVAL)?;
        if let Some(start_path) = &start_path {
            if let Some(fd) = open_plain(start, &dir_c)? {
                return Ok(Some(NameAt {
                    dir: OpenedDir::Own(fd),
                    path: super::paths::join_plain(start_path, dir),
                    name,
                }));
            }
        }
        let fd = open_path(start, &dir_c).map_err(|e| os_errno(&e))?;
        let path = fd_path(fd.as_fd()).map_err(|_| libc::EACCES)?;
        Ok(Some(NameAt {
            dir: OpenedDir::Own(fd),
            path,
            name,
        }))
    }

    /// The entry a path names, which must not be its start itself (EEXIST: it exists).
    pub(super) fn entry_of<'w>(&'w self, at: &'w Where) -> Res<NameAt<'w>> {
        if at.path.is_empty() {
            return Err(libc::ENOENT);
        }
        self.entry(self.base(at)?, &at.path)?.ok_or(libc::EEXIST)
    }

    /// Refuse making `e` where `refusal` says (EACCES, reported), answered as the kernel
    /// answers: a name that exists is EEXIST before any question of whether it may be made
    /// there (`mkdir -p` of an existing directory in a read-only place). When the check
    /// allows it, the act itself fails with EEXIST where something is there.
    pub(super) fn check_new(&self, e: &NameAt<'_>, made: Made) -> Res<()> {
        match self.refusal(e, made) {
            None => Ok(()),
            Some(_) if fstatat(e.dir.as_fd(), &e.name).is_ok() => Err(libc::EEXIST),
            Some(cause) => Err(refuse(cause, &e.full())),
        }
    }

    /// Refuse putting something at `e` (which may exist: a rename's target) where
    /// `refusal` says (EACCES, reported).
    pub(super) fn check(&self, e: &NameAt<'_>, made: Made) -> Res<()> {
        match self.refusal(e, made) {
            None => Ok(()),
            Some(cause) => Err(refuse(cause, &e.full())),
        }
    }

    /// Why `e` may not be made: outside where the program may make names (`Reach`), a
    /// name `names` refuses, or the marker that would make a git directory of one that
    /// holds what a git directory may not (names made there before were not asked as a
    /// git directory's). At that moment its configs are judged and remade
    /// (`remake_configs`), so what git will trust is what was judged.
    pub(super) fn refusal(&self, e: &NameAt<'_>, made: Made) -> Option<Cause> {
        let parent = &e.path;
        let name = e.name_os();
        touched(parent, name);
        if !self.reach.may_make_in(parent) {
            return Some(Cause::Outside);
        }
        let git = git_place(e.dir.as_fd(), parent, name);
        if self.names.refused(parent, name, made, git).is_some() {
            return Some(Cause::Protected);
        }
        if !crate::protect::gitdir::MARKERS.iter().any(|m| name == *m) {
            return None;
        }
        // `HEAD` with `commondir` is a git directory too (a linked worktree's): outside
        // `worktrees/` of a git directory, neither completes the other.
        let has = |n: &CStr| fstatat(e.dir.as_fd(), n).is_ok();
        let pair = (name == "commondir" && has(c"HEAD")) || (name == "HEAD" && has(c"commondir"));
        let linked = pair && linked_worktree(e.dir.as_fd(), parent);
        if pair && !linked {
            return Some(Cause::Protected);
        }
        if completes_git(e.dir.as_fd(), parent, name)
            && (holds_plants(e.dir.as_fd(), linked) || self.remake_configs(e).is_err())
        {
            return Some(Cause::Protected);
        }
        None
    }

    /// A directory's configs (`config`, `config.worktree`) at the moment it becomes a git
    /// directory: each read once (a regular file, whole, `CONFIG_LIMIT` at most), judged,
    /// and put back as a new file (`place_fresh`), so that a descriptor opened or a link
    /// made while it was an ordinary directory reaches nothing git reads. Anything else by
    /// those names, or a config refused, refuses the marker.
    fn remake_configs(&self, e: &NameAt<'_>) -> Res<()> {
        for name in [c"config", c"config.worktree"] {
            let st = match fstatat(e.dir.as_fd(), name) {
                Err(libc::ENOENT) => continue,
                Err(err) => return Err(err),
                Ok(st) => st,
            };
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(libc::EACCES);
            }
            let limit = crate::policy::gitconfig::CONFIG_LIMIT;
            let (text, st) = crate::sys::at::read_regular(e.dir.as_fd(), name, limit)
                .map_err(|_| libc::EACCES)?;
            let at = NameAt {
                dir: OpenedDir::Held(e.dir.as_fd()),
                path: e.path.clone(),
                name: name.to_owned(),
            };
            self.judge_config(&at, &text)?;
            self.place_fresh(&at, &text, st.st_mode & 0o7777)?;
            if st.st_nlink > 1 {
                // Its other name is now an ordinary file: what is written there is not
                // read by git, and the session names the config as protected.
                super::report::refused(Cause::Protected, &at.full());
            }
        }
        Ok(())
    }

    /// Refuse opening the existing entry `e` for writing where `names::refused_write` says.
    pub(super) fn check_write(&self, e: &NameAt<'_>, flags: i32) -> Res<()> {
        if !opens::writes(flags) {
            return Ok(());
        }
        let name = e.name_os();
        touched(&e.path, name);
        if !self.names.protected.is_empty() && self.names.guards(&e.full()) {
            return Err(refuse(Cause::Protected, &e.full()));
        }
        // Reached another way than by its name (a descriptor's link): only ever written
        // through the guard's own file (`statefiles`).
        if crate::protect::gitstate::state_file(&e.path, name.as_bytes()).is_some() {
            return Err(refuse(Cause::Protected, &e.full()));
        }
        if !names::write_judged(name) {
            return Ok(());
        }
        match names::refused_write(name, git_place(e.dir.as_fd(), &e.path, name)) {
            // A `.git` file this session made (git writes a submodule's twice).
            Some(_) if name == ".git" && self.made_here(e) => Ok(()),
            Some(_) => Err(refuse(Cause::Protected, &e.full())),
            None => Ok(()),
        }
    }

    /// Refuse opening the existing entry `e` (a directory: `dir`) with `flags` where the
    /// program's own rules would not let it (`Reach`) — before anything is opened: an open
    /// may truncate.
    pub(super) fn check_reach(&self, e: &NameAt<'_>, flags: i32, dir: bool) -> Res<()> {
        if !self.reach.confined() {
            return Ok(());
        }
        let path = e.full();
        match self.reach.may_open_as(&path, flags, dir) {
            true => Ok(()),
            false => Err(refuse_open(&path, flags)),
        }
    }

    /// Whether `pid` is a process (or thread) of the session.
    pub(super) fn of_session(&self, pid: u32) -> bool {
        super::in_session(pid, self.guard.0, &super::answer::parent_of)
    }

    /// Whether the file `e` names was made in this session by this guard (`made`).
    pub(super) fn made_here(&self, e: &NameAt<'_>) -> bool {
        fstatat(e.dir.as_fd(), &e.name)
            .is_ok_and(|st| self.made.borrow().contains(&(st.st_dev, st.st_ino)))
    }
}

/// Report the state directory of git's (`gitstate::state_dir`) that making, writing or
/// linking `name` in `parent` touches, if any: it is looked at when the session ends.
pub(super) fn touched(parent: &Path, name: &OsStr) {
    if let Some(dir) = crate::protect::gitstate::state_dir(parent, name.as_bytes()) {
        super::report::state(dir);
    }
}

/// The path of a directory the guard opened (what a descriptor names): `EACCES` when the
/// kernel gives none.
pub(super) fn path_of(fd: BorrowedFd<'_>) -> Res<PathBuf> {
    fd_path(fd).map_err(|_| libc::EACCES)
}
