//! What the guard looks at in a directory to tell a git directory: the markers it holds,
//! and what may not be in one (a config key git work does not write, `commondir`, hooks).

use crate::protect::names::GitPlace;
use crate::sys::at::{fstatat, open_path, openat};
use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// Whether `dir` (at `path`) holds the entry `name`, whatever it is.
fn has(dir: BorrowedFd<'_>, name: &str) -> bool {
    CString::new(name).is_ok_and(|n| fstatat(dir, &n).is_ok())
}

/// Whether making `name` in `dir` (at `path`) makes it a git directory
/// (`gitdir::completes`).
pub(super) fn completes_git(dir: BorrowedFd<'_>, path: &std::path::Path, name: &OsStr) -> bool {
    crate::protect::gitdir::completes(path.file_name(), name, |n| has(dir, n))
}

/// Whether `dir` holds what a git directory may not besides its configs (which are judged
/// as they are remade, `Acting::remake_configs`): a `commondir` (but in a linked
/// worktree's, `linked`), a hook other than a `*.sample`, or a `hooks` that is not a
/// directory.
pub(super) fn holds_plants(dir: BorrowedFd<'_>, linked: bool) -> bool {
    let exists = |name: &CStr| fstatat(dir, name).is_ok();
    // `hooks` as anything but a directory of its own (a symlink: git follows it, to a
    // directory nobody judges as hooks) is a plant too.
    let how = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let hooks = match fstatat(dir, c"hooks") {
        Err(_) => false,
        Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => true,
        Ok(_) => openat(dir, c"hooks", how, 0)
            .ok()
            .and_then(|fd| std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok())
            .is_none_or(|mut entries| {
                entries.any(|e| {
                    e.is_ok_and(|e| !e.file_name().as_encoded_bytes().ends_with(b".sample"))
                })
            }),
    };
    hooks || (!linked && exists(c"commondir"))
}

/// What the directory `dir` (at `path`) is among git's, as far as it matters for the name
/// `name` made in it (the rules look at few names: the rest costs no look).
pub(super) fn git_place(dir: BorrowedFd<'_>, path: &std::path::Path, name: &OsStr) -> GitPlace {
    // The last component, by bytes (the guard asks this for every name made).
    let file = |p: &std::path::Path| {
        let bytes = p.as_os_str().as_encoded_bytes();
        bytes
            .rsplit(|b| *b == b'/')
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let up = |fd: BorrowedFd<'_>| open_path(fd, c"..").ok();
    let above = |p: &std::path::Path| p.parent().unwrap_or(p).to_path_buf();
    // Whether the directory `n` levels up from `dir` is a git directory.
    let git_up = |n: usize| {
        let mut at = dir.try_clone_to_owned().ok();
        let mut p = path.to_path_buf();
        for _ in 0..n {
            at = at.and_then(|fd| up(fd.as_fd()));
            p = above(&p);
        }
        at.is_some_and(|fd| is_git(fd.as_fd(), &p))
    };
    let name_bytes = name.as_encoded_bytes();
    let judged = matches!(
        name_bytes,
        b"commondir" | b"hooks" | b"config" | b"config.worktree"
    );
    if !judged && !path.as_os_str().as_encoded_bytes().ends_with(b"/hooks") {
        return GitPlace::Plain;
    }
    match (file(path).as_slice(), name_bytes) {
        (_, b"commondir" | b"hooks" | b"config" | b"config.worktree") if git_up(0) => {
            let parent = above(path);
            GitPlace::GitDir {
                linked: file(&parent) == b"worktrees" && git_up(2),
            }
        }
        (b"hooks", _) if git_up(1) => GitPlace::Hooks,
        _ => GitPlace::Plain,
    }
}

/// Whether `dir` (at `path`) is `worktrees/NAME` of a git directory.
pub(super) fn linked_worktree(dir: BorrowedFd<'_>, path: &std::path::Path) -> bool {
    let Some(worktrees) = path.parent() else {
        return false;
    };
    let git = worktrees.parent().unwrap_or(worktrees);
    worktrees.file_name() == Some(OsStr::new("worktrees"))
        && open_path(dir, c"../..").is_ok_and(|g| is_git(g.as_fd(), git))
}

/// Whether `dir` (at `path`) is a git directory (`gitdir::is_git_dir`).
pub(super) fn is_git(dir: BorrowedFd<'_>, path: &std::path::Path) -> bool {
    crate::protect::gitdir::is_git_dir(path.file_name(), |n| has(dir, n))
}
