//! What the watch does to the files it watches, each through a directory's descriptor:
//! reading a config as it is, taking a planted name out (kept aside when it is small),
//! and the identity of what it saw (`Node`).

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

/// At most this many bytes of each file moved aside are kept.
pub(super) const KEEP_LIMIT: u64 = 1 << 20;

pub(super) fn never_written_by_git(path: &Path) -> bool {
    path.file_name() == Some(OsStr::new("commondir"))
        && path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            != Some(OsStr::new("worktrees"))
}

/// Close the inotify instance without waiting for it. The last close of one that has
/// watches waits for the kernel's SRCU grace period — 15 to 20 ms measured here, at the
/// end of every session. A child process keeps a copy, closes it after this process has
/// (a pipe says when) and takes that wait instead.
pub(super) fn close_elsewhere(fd: OwnedFd) {
    let Ok((after_read, after_write)) = nix::unistd::pipe2(OFlag::O_CLOEXEC) else {
        return;
    };
    // SAFETY: the child below makes only async-signal-safe calls, then exits.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => {
            // SAFETY: sigprocmask, close, read and _exit are async-signal-safe; they touch
            // a local sigset and descriptors this process inherited.
            unsafe {
                let mut all: libc::sigset_t = std::mem::zeroed();
                libc::sigfillset(&mut all);
                libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
                libc::close(after_write.as_raw_fd());
                let mut byte = 0u8;
                libc::read(after_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                libc::_exit(0)
            }
        }
        _ => {
            drop(fd);
            drop(after_write);
        }
    }
}

/// A path that reaches `fd`'s directory (and, joined with a name, an entry in it) through
/// the descriptor: no component of the directory's own path is looked up again.
pub(super) fn proc_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// An entry as `fstatat` saw it.
pub(super) struct Node {
    /// `S_IFDIR`, `S_IFLNK`, `S_IFREG` …
    pub(super) kind: libc::mode_t,
    pub(super) len: u64,
    pub(super) print: crate::protect::planted::Print,
}

impl Node {
    pub(super) fn of(st: &libc::stat) -> Node {
        Node {
            kind: st.st_mode & libc::S_IFMT,
            len: u64::try_from(st.st_size).unwrap_or(u64::MAX),
            print: crate::protect::planted::Print::of_stat(st),
        }
    }
}

/// Whether the directory `dir` is a git directory by what it holds
/// (`gitdir::is_git_dir`; a `.git` is one by its name, which the caller knows).
pub(super) fn looks_like_git(dir: BorrowedFd<'_>) -> bool {
    crate::protect::gitdir::is_git_dir(None, |name| {
        nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    })
}

/// A git config's text; `None` when it is not a regular file, or too large to read.
pub(super) fn read_config(at: &Path, node: &Node) -> Option<String> {
    if node.kind != libc::S_IFREG || node.len > crate::policy::gitconfig::CONFIG_LIMIT {
        return None;
    }
    let mut file = open_plain(at).ok()?;
    let mut bytes = Vec::new();
    file.by_ref()
        .take(crate::policy::gitconfig::CONFIG_LIMIT)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

pub(super) fn open_plain(at: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(at)
}

/// `path`, or `path.1`, `path.2` … whichever does not exist yet.
pub(super) fn unique(path: &Path) -> PathBuf {
    let mut candidate = path.to_path_buf();
    let mut n = 0;
    while candidate.symlink_metadata().is_ok() {
        n += 1;
        let mut name = path.as_os_str().to_os_string();
        name.push(format!(".{n}"));
        candidate = PathBuf::from(name);
    }
    candidate
}

/// Take the entry `name` of `dir` out of the tree (`remove_keeping`). A directory is first
/// renamed to a name of the watch's own in the same place, so the path is free at once
/// whatever the program still adds to it, then emptied there.
pub(super) fn take_out(dir: BorrowedFd<'_>, name: &OsStr, keep: Option<&Path>) -> io::Result<()> {
    use std::hash::BuildHasher;
    let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
        return remove_keeping(dir, name, keep, 0);
    }
    let mut tries = 0u64;
    let aside = loop {
        // A name the program cannot guess (it shares the directory), another if taken.
        let aside = format!(
            ".sbx-shell-aside.{:016x}",
            std::collections::hash_map::RandomState::new().hash_one(tries)
        );
        match nix::fcntl::renameat2(
            dir,
            name,
            dir,
            aside.as_str(),
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => break aside,
            Err(nix::errno::Errno::EEXIST) if tries < 8 => tries += 1,
            Err(e) => return Err(e.into()),
        }
    };
    remove_keeping(dir, OsStr::new(&aside), keep, 0)
}

/// Remove the entry `name` of the directory `dir` (never following a symlink: every step
/// is taken through a descriptor), keeping a copy at `keep` if given: a regular file's
/// first `KEEP_LIMIT` bytes, a symlink as a file naming its target, a directory's entries
/// likewise (at most 32 deep).
pub(super) fn remove_keeping(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    keep: Option<&Path>,
    depth: usize,
) -> io::Result<()> {
    use nix::unistd::UnlinkatFlags;
    let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    let kind = st.st_mode & libc::S_IFMT;
    if kind == libc::S_IFDIR {
        if depth > 32 {
            return Err(io::Error::other("nested too deep"));
        }
        let inner = nix::fcntl::openat(
            dir,
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        if let Some(keep) = keep {
            crate::sys::files::create_private_dir(keep)?;
        }
        // Emptied again while a program is still adding to it (`mkdir -p .vscode && echo >
        // .vscode/tasks.json` racing the watch): a few rounds.
        let mut rounds = 0;
        loop {
            let names: Vec<OsString> = std::fs::read_dir(proc_path(&inner))?
                .flatten()
                .map(|e| e.file_name())
                .collect();
            for child in names {
                let keep = keep.map(|k| k.join(&child));
                remove_keeping(inner.as_fd(), &child, keep.as_deref(), depth + 1)?;
            }
            match nix::unistd::unlinkat(dir, name, UnlinkatFlags::RemoveDir) {
                Err(nix::errno::Errno::ENOTEMPTY) if rounds < 16 => rounds += 1,
                done => return Ok(done?),
            }
        }
    }
    let copy = match keep {
        Some(_) => copy_of(dir, name, kind)?,
        None => None,
    };
    nix::unistd::unlinkat(dir, name, UnlinkatFlags::NoRemoveDir)?;
    if let (Some(keep), Some(bytes)) = (keep, copy) {
        // 0600, whatever the mode was: kept to be looked at, never run from here.
        crate::sys::files::write_private(keep, &bytes)?;
    }
    Ok(())
}

/// Keep a copy of the entry `name` of `dir` (a file or a symlink) at `keep`, leaving it.
pub(super) fn keep_copy(dir: BorrowedFd<'_>, name: &OsStr, keep: &Path) -> io::Result<()> {
    let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    match copy_of(dir, name, st.st_mode & libc::S_IFMT)? {
        Some(bytes) => crate::sys::files::write_private(keep, &bytes),
        None => Ok(()),
    }
}

/// What is kept of a non-directory: a regular file's first `KEEP_LIMIT` bytes, a symlink
/// as a line naming its target; nothing of anything else.
pub(super) fn copy_of(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    kind: libc::mode_t,
) -> io::Result<Option<Vec<u8>>> {
    if kind == libc::S_IFLNK {
        let target = nix::fcntl::readlinkat(dir, name)?;
        return Ok(Some(
            format!("symlink to {}\n", Path::new(&target).display()).into_bytes(),
        ));
    }
    if kind != libc::S_IFREG {
        return Ok(None);
    }
    let fd = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(KEEP_LIMIT)
        .read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}
