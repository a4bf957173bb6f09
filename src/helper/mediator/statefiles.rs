//! git's operation state that can make git run a program (`protect::gitstate::StateFile`:
//! a rebase's todo and strategy, the sequencer's options), kept by the guard so that those
//! names only ever hold what it judged, put there as a new file of its own.
//!
//! They change in two ways, and neither puts the program's bytes at the name:
//! - renamed into place (git's `git-rebase-todo.lock`, `sed -i`): the new content is read,
//!   judged and placed at once (`renamed_onto`);
//! - written in place (git's own `strategy`, an editor's save): the open is given the file
//!   that was there, no longer at the name, which gets a judged copy of it at once (vim
//!   checks that it writes the file it read), or, where nothing was, a new unnamed file
//!   (`open`); what the program wrote there is judged and placed before the guard answers
//!   any later call of the session — the writer's next one, its exit (`exit_group` is
//!   asked for this), another process's — and when the guard ends (`place_all`). So git,
//!   which reads the todo its editor wrote once the editor has exited, reads what the
//!   guard placed, and the host never reads what the program wrote before it was judged.
//!
//! Links, symlinks and nodes at those names, a new name for one, and a directory renamed
//! in as a state directory are refused (`protect::names`, `making`).

use super::nameat::NameAt;
use crate::policy::report::Cause;
use crate::protect::gitstate::{self, StateFile};
use crate::sys::at::{self, fstat, fstatat, openat, os_errno, Res};
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// What a state file may weigh: git reads it whole; a larger one is refused.
const LIMIT: u64 = 64 << 20;

/// How many in-place writes the guard keeps at once.
const MOST: usize = 64;

/// An in-place write waiting to be judged: the directory and name it was opened at, the
/// unnamed file the program writes, and what that file was when last placed.
struct Pending {
    dir: OwnedFd,
    path: PathBuf,
    name: CString,
    kind: StateFile,
    file: OwnedFd,
    mode: u32,
    placed: Option<(i64, i64, i64)>,
}

/// The session's token (`gitstate::SESSION_VARIABLE`) and the writes waiting.
pub(super) struct StateFiles {
    token: String,
    pending: RefCell<Vec<Pending>>,
}

impl StateFiles {
    /// With the token the helper put in its environment for the program.
    pub(super) fn new(token: Option<String>) -> StateFiles {
        // Without one, a token of its own that no process has: the lines run nowhere.
        let token = token
            .filter(|t| !t.is_empty())
            .unwrap_or_else(crate::sys::files::random_token);
        StateFiles {
            token,
            pending: RefCell::new(Vec::new()),
        }
    }

    pub(super) fn waiting(&self) -> bool {
        !self.pending.borrow().is_empty()
    }

    /// An open of the state file `at` that writes or may make it. The program gets a file
    /// no longer at the name, kept pending: the file that was there (so that an editor
    /// which checks it writes the file it read, as vim does), its name given a judged copy
    /// of what it held; or, where nothing was there, a new unnamed file.
    pub(super) fn open(
        &self,
        at: &NameAt<'_>,
        kind: StateFile,
        flags: i32,
        mode: u32,
    ) -> Res<OwnedFd> {
        let (dir, path, name) = (at.dir.as_fd(), at.path.as_path(), at.name.as_c_str());
        self.make_room(path, name)?;
        let (object, mode, was) = match fstatat(dir, name) {
            Err(libc::ENOENT) if flags & libc::O_CREAT != 0 => (unnamed(dir, mode)?, mode, false),
            Err(err) => return Err(err),
            Ok(_) if flags & libc::O_CREAT != 0 && flags & libc::O_EXCL != 0 => {
                return Err(libc::EEXIST)
            }
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => return Err(libc::EISDIR),
            Ok(st) if st.st_mode & libc::S_IFMT != libc::S_IFREG => return Err(libc::EACCES),
            Ok(_) => {
                let how = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                let object = openat(dir, name, how, 0)?;
                let st = fstat(object.as_fd())?;
                if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                    return Err(libc::EACCES);
                }
                let mode = st.st_mode & 0o7777;
                let text =
                    read_all(reopen(object.as_fd(), libc::O_RDONLY | libc::O_CLOEXEC)?.as_fd())?;
                match self.judged(&at.full(), kind, &text) {
                    Some(judged) => place(dir, name, &judged, mode)?,
                    None => at::unlinkat(dir, name, false)?,
                }
                (object, mode, true)
            }
        };
        // The name holds what this file holds now, judged: placed again once it changes (a
        // truncation included). A new file is placed at the session's next step, written
        // or not.
        let file = reopen(object.as_fd(), libc::O_RDONLY | libc::O_CLOEXEC)?;
        let placed = match was {
            true => fstat(file.as_fd()).ok().map(|st| stamp(&st)),
            false => None,
        };
        let access = flags & (libc::O_ACCMODE | libc::O_APPEND | libc::O_TRUNC);
        let theirs = reopen(object.as_fd(), access | libc::O_CLOEXEC)?;
        let dir = dir.try_clone_to_owned().map_err(|e| os_errno(&e))?;
        self.pending.borrow_mut().push(Pending {
            dir,
            path: path.to_path_buf(),
            name: name.to_owned(),
            kind,
            file,
            mode,
            placed,
        });
        Ok(theirs)
    }

    /// Room for one more write at `name` in the directory at `path`: an earlier one there
    /// is superseded, and, at `MOST`, the oldest already placed go (a write through one
    /// afterwards is lost, never placed unjudged); EMFILE when none has been.
    fn make_room(&self, path: &Path, name: &CStr) -> Res<()> {
        let mut pending = self.pending.borrow_mut();
        pending.retain(|p| !(p.path == path && *p.name == *name));
        while pending.len() >= MOST {
            match pending.iter().position(|p| p.placed.is_some()) {
                Some(i) => drop(pending.remove(i)),
                None => return Err(libc::EMFILE),
            }
        }
        Ok(())
    }

    /// The state file `to` (of kind `kind`) renamed over by `from`: what `from` holds is
    /// judged and placed as a new file of the guard's; `from` is removed. Refused (EACCES,
    /// reported) where `gitstate::judge` refuses.
    pub(super) fn renamed_onto(
        &self,
        from_dir: BorrowedFd<'_>,
        from: &CStr,
        to: &NameAt<'_>,
        kind: StateFile,
    ) -> Res<i64> {
        let (text, st) = at::read_regular(from_dir, from, LIMIT).map_err(|_| libc::EACCES)?;
        let judged = self.judged(&to.full(), kind, &text).ok_or(libc::EACCES)?;
        place(to.dir.as_fd(), &to.name, &judged, st.st_mode & 0o7777)?;
        let _ = at::unlinkat(from_dir, from, false);
        self.forget(&to.path, &to.name);
        Ok(0)
    }

    /// Writes waiting at `name` in the directory at `path` are no longer what stands there
    /// (it was renamed over, away, or removed).
    pub(super) fn forget(&self, path: &Path, name: &CStr) {
        if self.waiting() {
            self.pending
                .borrow_mut()
                .retain(|p| !(p.path == path && *p.name == *name));
        }
    }

    /// Judge and place every pending write that changed since it was last placed.
    pub(super) fn place_all(&self) {
        let mut pending = self.pending.borrow_mut();
        for p in pending.iter_mut() {
            let Ok(st) = fstat(p.file.as_fd()) else {
                continue;
            };
            let now = stamp(&st);
            if p.placed == Some(now) {
                continue;
            }
            p.placed = Some(now);
            let path = super::nameat::joined(&p.path, &p.name);
            let text = match read_all(p.file.as_fd()) {
                Ok(text) => text,
                Err(_) => {
                    super::report::refused_about(Cause::Protected, &path, b"too large");
                    continue;
                }
            };
            if let Some(judged) = self.judged(&path, p.kind, &text) {
                if place(p.dir.as_fd(), &p.name, &judged, p.mode).is_err() {
                    super::report::refused(Cause::Protected, &path);
                }
            }
        }
    }

    /// `text` as it may stand at `path`, or `None` once its refusal is reported.
    fn judged(&self, path: &Path, kind: StateFile, text: &[u8]) -> Option<Vec<u8>> {
        match gitstate::judge(kind, text, &self.token) {
            Ok(judged) => Some(judged),
            Err(why) => {
                super::report::refused_about(Cause::Protected, path, why.as_bytes());
                None
            }
        }
    }
}

/// What tells a file changed: its size and modification time.
fn stamp(st: &libc::stat) -> (i64, i64, i64) {
    (st.st_size, st.st_mtime, st.st_mtime_nsec)
}

/// A new file in `dir` with no name (`O_TMPFILE`; where the file system has none, a name
/// made and removed at once).
fn unnamed(dir: BorrowedFd<'_>, mode: u32) -> Res<OwnedFd> {
    let how = libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC;
    match openat(dir, c".", how, mode) {
        Ok(fd) => return Ok(fd),
        Err(libc::EOPNOTSUPP) | Err(libc::EISDIR) => {}
        Err(e) => return Err(e),
    }
    let temp = temp_name("pending");
    let how = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let fd = openat(dir, &temp, how, mode)?;
    let _ = at::unlinkat(dir, &temp, false);
    Ok(fd)
}

/// The file `file` is open on, opened again with `flags` (through its magic link).
fn reopen(file: BorrowedFd<'_>, flags: i32) -> Res<OwnedFd> {
    let magic = CString::new(file.as_raw_fd().to_string()).map_err(|_| libc::EINVAL)?;
    let fds = at::open_path(at::CWD, c"/proc/self/fd").map_err(|e| os_errno(&e))?;
    openat(fds.as_fd(), &magic, flags, 0)
}

fn read_all(file: BorrowedFd<'_>) -> Res<Vec<u8>> {
    let st = fstat(file)?;
    let size = u64::try_from(st.st_size).map_err(|_| libc::EINVAL)?;
    if size > LIMIT {
        return Err(libc::EFBIG);
    }
    let file = std::fs::File::from(file.try_clone_to_owned().map_err(|e| os_errno(&e))?);
    let mut text = vec![0; size as usize];
    let mut read = 0;
    while read < text.len() {
        match file.read_at(&mut text[read..], read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(os_errno(&e)),
        }
    }
    text.truncate(read);
    Ok(text)
}

/// A name in a state directory no git file has.
fn temp_name(what: &str) -> CString {
    use std::hash::BuildHasher;
    let salt = std::collections::hash_map::RandomState::new().hash_one(what);
    CString::new(format!(".sbx-shell-{what}.{salt:016x}")).unwrap_or_default()
}

/// `text` put at `name` in `dir` as a new file of the guard's own (with `mode`), renamed
/// over what is there: no descriptor opened before and no link made before reaches it.
pub(super) fn place(dir: BorrowedFd<'_>, name: &CStr, text: &[u8], mode: u32) -> Res<()> {
    let temp = temp_name("state");
    let how = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let file = std::fs::File::from(openat(dir, &temp, how, mode)?);
    let written = file.write_all_at(text, 0).map_err(|e| os_errno(&e));
    drop(file);
    let placed = written.and_then(|()| at::renameat2(dir, &temp, dir, name, 0));
    if let Err(e) = placed {
        let _ = at::unlinkat(dir, &temp, false);
        return Err(e);
    }
    Ok(())
}
