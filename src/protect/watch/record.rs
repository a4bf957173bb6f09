//! Landlock alone: the protected paths inside the writable trees, recorded when the
//! session starts and put back by the watch whenever they change. Landlock cannot refuse
//! a change below a writable directory (its rights pass down, and a rename needs rights
//! on the parent only), so these are *restored, not prevented*: a program outside that
//! reads one in the instant between the change and the restore sees the change.
//!
//! Recorded: each path's bytes (a file), target (a symlink) or entries (a directory,
//! recursively), with modes and owners. Restored: whatever differs is taken out (a copy
//! kept, as the watch keeps what it moves aside) and made again from the record; what is
//! new inside a recorded directory is taken out; a non-directory standing where one of a
//! recorded path's ancestors was is taken out. A missing ancestor is not made again:
//! without it nothing is at the path, and the watch restores the path when the ancestor
//! reappears. Every step goes through descriptors and follows no symlink.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::hash::BuildHasher;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FchmodatFlags, Mode};

/// At most this many entries, and bytes of file content, are recorded in all: a larger
/// record is refused (the session does not start), never cut short.
pub const ENTRIES_LIMIT: usize = 20_000;
pub const BYTES_LIMIT: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Content {
    File(Vec<u8>),
    Dir(BTreeMap<OsString, Item>),
    Link(OsString),
    /// A fifo, socket or device: left alone while it stays one.
    Other(libc::mode_t),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) kind: Content,
    /// The permission bits (`st_mode & 0o7777`).
    pub(super) perm: u32,
    /// Its names (`st_nlink`): a second one made during the session is a way to write it
    /// unseen, so it is replaced.
    pub(super) links: u64,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

/// The mode of a file or directory while the session runs: without write permission, so
/// that the program (which has no capabilities) cannot open a file for writing — a write
/// through a mapping would be seen by no inotify event — nor make, rename or remove an
/// entry of a directory (a hook planted in `hooks` is refused, not undone).
pub(super) fn sealed(perm: u32) -> u32 {
    perm & !0o222
}

/// One recorded path, inside the writable tree `root`.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: PathBuf,
    pub root: PathBuf,
    pub(super) item: Item,
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the protected paths inside the writable trees are too large to record (more than {ENTRIES_LIMIT} entries or {} MiB; the first beyond is {path})", BYTES_LIMIT >> 20)]
    TooLarge { path: PathBuf },
    #[error("cannot record the protected path {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

struct Budget {
    entries: usize,
    bytes: u64,
}

/// Record each `(path, root)` (absolute; `path` strictly inside the writable tree `root`);
/// a path that does not exist is left out (the watch's `missing` covers it), and so is one
/// inside another recorded path.
pub fn record(paths: &[(PathBuf, PathBuf)]) -> Result<Vec<Recorded>, RecordError> {
    let mut sorted: Vec<&(PathBuf, PathBuf)> = paths
        .iter()
        .filter(|(p, r)| p.starts_with(r) && p != r)
        .collect();
    sorted.sort();
    sorted.dedup();
    let mut budget = Budget {
        entries: ENTRIES_LIMIT,
        bytes: BYTES_LIMIT,
    };
    let mut out: Vec<Recorded> = Vec::new();
    for (path, root) in sorted {
        if out.iter().any(|r| path.starts_with(&r.path)) {
            continue;
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            continue;
        };
        // Most protected paths do not exist: one stat says so (what exists is then read
        // without following a symlink anywhere).
        if path.symlink_metadata().is_err() {
            continue;
        }
        let io = |source| RecordError::Io {
            path: path.clone(),
            source,
        };
        let dir = match crate::sys::files::open_nofollow(parent) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(e)),
        };
        if let Some(item) = read_item(dir.as_fd(), name, path, &mut budget)? {
            out.push(Recorded {
                path: path.clone(),
                root: root.clone(),
                item,
            });
        }
    }
    Ok(out)
}

fn read_item(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    path: &Path,
    budget: &mut Budget,
) -> Result<Option<Item>, RecordError> {
    let io = |source: io::Error| RecordError::Io {
        path: path.to_path_buf(),
        source,
    };
    let st = match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(io(e.into())),
    };
    budget.entries = budget
        .entries
        .checked_sub(1)
        .ok_or_else(|| RecordError::TooLarge {
            path: path.to_path_buf(),
        })?;
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => {
            let fd = nix::fcntl::openat(dir, name, read_flags(), Mode::empty())
                .map_err(|e| io(e.into()))?;
            let mut bytes = Vec::new();
            std::fs::File::from(fd)
                .take(budget.bytes + 1)
                .read_to_end(&mut bytes)
                .map_err(io)?;
            let len = bytes.len() as u64;
            budget.bytes = budget
                .bytes
                .checked_sub(len)
                .ok_or_else(|| RecordError::TooLarge {
                    path: path.to_path_buf(),
                })?;
            Content::File(bytes)
        }
        libc::S_IFDIR => {
            let fd =
                nix::fcntl::openat(dir, name, read_flags() | OFlag::O_DIRECTORY, Mode::empty())
                    .map_err(|e| io(e.into()))?;
            let mut entries = BTreeMap::new();
            for child in list(&fd).map_err(io)? {
                if let Some(item) = read_item(fd.as_fd(), &child, &path.join(&child), budget)? {
                    entries.insert(child, item);
                }
            }
            Content::Dir(entries)
        }
        libc::S_IFLNK => {
            Content::Link(nix::fcntl::readlinkat(dir, name).map_err(|e| io(e.into()))?)
        }
        other => Content::Other(other),
    };
    Ok(Some(Item {
        kind,
        perm: st.st_mode & 0o7777,
        links: st.st_nlink,
        uid: st.st_uid,
        gid: st.st_gid,
    }))
}

fn read_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC
}

/// The names in the directory `fd`.
fn list(fd: &OwnedFd) -> io::Result<Vec<OsString>> {
    Ok(std::fs::read_dir(super::files::proc_path(fd))?
        .flatten()
        .map(|e| e.file_name())
        .collect())
}

/// What a restore needs besides the record.
pub struct Restorer<'a> {
    /// Where to keep a copy of what is taken out at a path (`None`: no copy).
    pub keep: &'a dyn Fn(&Path) -> Option<PathBuf>,
    /// Owners are put back too (only root can).
    pub as_root: bool,
    /// While the session runs: files are kept without write permission (`sealed`); after
    /// it, as recorded.
    pub sealed: bool,
    /// What was done, by path, for the report.
    pub done: Vec<(PathBuf, String)>,
}

/// Seal the recorded files (`sealed`: no write permission), or give them their own modes
/// back; anything else that differs is put back too, unreported.
pub fn seal(recorded: &[Recorded], sealed: bool) {
    let no_copy = |_: &Path| None;
    let mut restorer = Restorer {
        keep: &no_copy,
        as_root: nix::unistd::geteuid().is_root(),
        sealed,
        done: Vec::new(),
    };
    for rec in recorded {
        restorer.restore(rec);
    }
}

impl Recorded {
    /// The regular files of the record, by path: the watch watches each one itself (a
    /// change through another name of the same file reaches no directory's watch).
    pub fn files(&self) -> Vec<PathBuf> {
        fn walk(item: &Item, path: &Path, out: &mut Vec<PathBuf>) {
            match &item.kind {
                Content::File(_) => out.push(path.to_path_buf()),
                Content::Dir(entries) => {
                    for (name, inner) in entries {
                        walk(inner, &path.join(name), out);
                    }
                }
                Content::Link(_) | Content::Other(_) => {}
            }
        }
        let mut out = Vec::new();
        walk(&self.item, &self.path, &mut out);
        out
    }
}

impl Restorer<'_> {
    /// Put `rec` back as it was recorded.
    pub fn restore(&mut self, rec: &Recorded) {
        let Ok(rel) = rec.path.strip_prefix(&rec.root) else {
            return;
        };
        let names: Vec<&OsStr> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(name) => Some(name),
                _ => None,
            })
            .collect();
        let Some((last, ancestors)) = names.split_last() else {
            return;
        };
        let Ok(mut at) = crate::sys::files::open_nofollow(&rec.root) else {
            return;
        };
        let mut path = rec.root.clone();
        for name in ancestors {
            path.push(name);
            match nix::sys::stat::fstatat(at.as_fd(), *name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => {}
                Ok(_) => {
                    let how = self.take_out(at.as_fd(), name, &path);
                    self.done.push((
                        path,
                        format!("not a directory, in place of a protected path's: {how}"),
                    ));
                    return;
                }
                // Missing (or unreachable for now): nothing is at the path.
                Err(_) => return,
            }
            match nix::fcntl::openat(at.as_fd(), *name, dir_flags(), Mode::empty()) {
                Ok(fd) => at = fd,
                Err(_) => return,
            }
        }
        self.sync(at.as_fd(), last, &rec.item, &rec.path);
    }

    /// Make the entry `name` of `dir` (at `path`) what `item` says.
    fn sync(&mut self, dir: BorrowedFd<'_>, name: &OsStr, item: &Item, path: &Path) {
        let now = nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        let intact = now.is_some_and(|st| self.same(dir, name, &st, item));
        self.sync_seen(dir, name, item, path, now, intact);
    }

    /// `sync`, with the entry as `fstatat` saw it and whether it is what `item` recorded.
    fn sync_seen(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        item: &Item,
        path: &Path,
        now: Option<libc::stat>,
        intact: bool,
    ) {
        let what = match &now {
            Some(st) if intact => {
                let (mode, want) = (st.st_mode & 0o7777, self.want(item));
                let opened = match &item.kind {
                    Content::Dir(entries) => self.sync_entries(dir, name, entries, path, mode),
                    _ => false,
                };
                if mode != want && !matches!(item.kind, Content::Link(_)) {
                    let _ = chmod(dir, name, want);
                    // Sealing and unsealing a file are not changes.
                    if mode != item.perm && mode != sealed(item.perm) {
                        self.done
                            .push((path.to_path_buf(), "mode changed: put back".into()));
                    }
                } else if opened {
                    // Opened for `sync_entries` (see there): sealed again.
                    let _ = chmod(dir, name, mode);
                }
                return;
            }
            // A file or a symlink is replaced by a rename over it (`make`): the path is
            // never missing. A directory, or anything where one belongs, is taken out first.
            Some(st)
                if st.st_mode & libc::S_IFMT != libc::S_IFDIR
                    && !matches!(item.kind, Content::Dir(_)) =>
            {
                self.keep_copy(dir, name, path)
            }
            Some(_) => format!("changed: {}", self.take_out(dir, name, path)),
            None => "removed".to_string(),
        };
        let how = match self.make(dir, name, item) {
            Ok(()) => "restored from the record".to_string(),
            Err(e) => format!("could not be restored: {e}"),
        };
        self.done
            .push((path.to_path_buf(), format!("{what}, {how}")));
    }

    /// Make the entries of the directory `name` of `dir` (its mode `mode` now) what
    /// `entries` say. A sealed directory is opened to its owner only when an entry must be
    /// made, replaced or taken out (sbx-shell is not root: that needs write permission on
    /// it), and only then: whether it was is returned, and the caller seals it again. What
    /// the program makes in that instant is seen by the next event and taken out.
    fn sync_entries(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &OsStr,
        entries: &BTreeMap<OsString, Item>,
        path: &Path,
        mode: u32,
    ) -> bool {
        let mut opened = false;
        let as_root = self.as_root;
        let open = |opened: &mut bool| {
            if !*opened && mode & 0o200 == 0 && !as_root {
                *opened = chmod(dir, name, mode | 0o200).is_ok();
            }
        };
        let Ok(fd) = nix::fcntl::openat(dir, name, dir_flags(), Mode::empty()) else {
            return opened;
        };
        for (child, item) in entries {
            let now = nix::sys::stat::fstatat(
                fd.as_fd(),
                child.as_os_str(),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .ok();
            let intact = now.is_some_and(|st| self.same(fd.as_fd(), child, &st, item));
            if !intact {
                open(&mut opened);
            }
            self.sync_seen(fd.as_fd(), child, item, &path.join(child), now, intact);
        }
        let Ok(present) = list(&fd) else {
            return opened;
        };
        for child in present.iter().filter(|c| !entries.contains_key(*c)) {
            open(&mut opened);
            let at = path.join(child);
            let how = self.take_out(fd.as_fd(), child, &at);
            self.done.push((at, format!("new: {how}")));
        }
        opened
    }

    /// The mode `item` should have now.
    fn want(&self, item: &Item) -> u32 {
        match item.kind {
            Content::File(_) | Content::Dir(_) if self.sealed => sealed(item.perm),
            _ => item.perm,
        }
    }

    /// Whether the entry (`st`, as `fstatat` saw it) is what `item` recorded (a file
    /// sealed or not); a directory's entries are compared by `sync_entries`, and its mode
    /// put back by `sync`.
    fn same(&self, dir: BorrowedFd<'_>, name: &OsStr, st: &libc::stat, item: &Item) -> bool {
        let kind = st.st_mode & libc::S_IFMT;
        let owner = !self.as_root || (st.st_uid == item.uid && st.st_gid == item.gid);
        let mode = st.st_mode & 0o7777;
        let perm = mode == item.perm;
        owner
            && match &item.kind {
                Content::Dir(_) => kind == libc::S_IFDIR,
                Content::File(bytes) => {
                    kind == libc::S_IFREG
                        && (perm || mode == sealed(item.perm))
                        && (st.st_nlink == 1 || item.links > 1)
                        && u64::try_from(st.st_size).ok() == Some(bytes.len() as u64)
                        && read_file(dir, name).is_ok_and(|now| now == *bytes)
                }
                Content::Link(target) => {
                    kind == libc::S_IFLNK
                        && nix::fcntl::readlinkat(dir, name).is_ok_and(|now| now == *target)
                }
                Content::Other(was) => kind == *was && perm,
            }
    }

    /// Take the entry out of the tree (a copy kept where `keep` says); how it went.
    fn take_out(&self, dir: BorrowedFd<'_>, name: &OsStr, path: &Path) -> String {
        let keep = (self.keep)(path);
        match super::files::remove_keeping(dir, name, keep.as_deref(), 0) {
            Ok(()) => "taken out".into(),
            Err(e) => format!("could not be taken out ({e})"),
        }
    }

    /// Keep a copy of what is at the path (a file or a symlink), which `make` replaces.
    fn keep_copy(&self, dir: BorrowedFd<'_>, name: &OsStr, path: &Path) -> String {
        match (self.keep)(path).map(|keep| super::files::keep_copy(dir, name, &keep)) {
            Some(Err(e)) => format!("changed (no copy kept: {e})"),
            _ => "changed".into(),
        }
    }

    /// Make `item` as the entry `name` of `dir`: a file or a symlink is made under a name
    /// of its own and renamed into place, over what is there (never half-written, never
    /// missing); a directory where nothing is.
    fn make(&self, dir: BorrowedFd<'_>, name: &OsStr, item: &Item) -> io::Result<()> {
        if let Content::Dir(entries) = &item.kind {
            nix::sys::stat::mkdirat(dir, name, Mode::from_bits_truncate(0o700))?;
            let fd = nix::fcntl::openat(dir, name, dir_flags(), Mode::empty())?;
            for (child, inner) in entries {
                // One that cannot be made is found again by the next restore.
                let _ = self.make(fd.as_fd(), child, inner);
            }
            self.own(dir, name, item)?;
            return Ok(chmod(dir, name, self.want(item))?);
        }
        // A name the program cannot guess (it shares the directory), and another one if
        // it is taken all the same.
        let mut tries = 0u64;
        let (temp, file) = loop {
            let temp = format!(
                ".sbx-shell-restore.{:016x}",
                std::collections::hash_map::RandomState::new().hash_one(tries)
            );
            let made = match &item.kind {
                Content::File(_) => nix::fcntl::openat(
                    dir,
                    temp.as_str(),
                    OFlag::O_WRONLY
                        | OFlag::O_CREAT
                        | OFlag::O_EXCL
                        | OFlag::O_NOFOLLOW
                        | OFlag::O_CLOEXEC,
                    Mode::from_bits_truncate(0o600),
                )
                .map(Some),
                Content::Link(target) => {
                    nix::unistd::symlinkat(target.as_os_str(), dir, temp.as_str()).map(|()| None)
                }
                Content::Dir(_) | Content::Other(_) => {
                    return Err(io::Error::other("not a file, directory or symlink"))
                }
            };
            match made {
                Err(Errno::EEXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(e.into()),
                Ok(file) => break (temp, file),
            }
        };
        let filled = match (file, &item.kind) {
            (Some(fd), Content::File(bytes)) => self.fill(fd, bytes, item),
            _ => self.own(dir, OsStr::new(&temp), item),
        };
        let placed = filled.and_then(|()| Ok(nix::fcntl::renameat(dir, temp.as_str(), dir, name)?));
        if placed.is_err() {
            let _ =
                nix::unistd::unlinkat(dir, temp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        }
        placed
    }

    fn fill(&self, fd: OwnedFd, bytes: &[u8], item: &Item) -> io::Result<()> {
        let mut file = std::fs::File::from(fd);
        file.write_all(bytes)?;
        if self.as_root {
            nix::unistd::fchown(file.as_fd(), Some(item.uid.into()), Some(item.gid.into()))?;
        }
        // After the owner: a chown clears the set-id bits.
        Ok(nix::sys::stat::fchmod(
            file.as_fd(),
            Mode::from_bits_truncate(self.want(item)),
        )?)
    }

    fn own(&self, dir: BorrowedFd<'_>, name: &OsStr, item: &Item) -> io::Result<()> {
        if self.as_root {
            nix::unistd::fchownat(
                dir,
                name,
                Some(item.uid.into()),
                Some(item.gid.into()),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            )?;
        }
        Ok(())
    }
}

fn dir_flags() -> OFlag {
    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
}

pub(super) fn chmod(dir: BorrowedFd<'_>, name: &OsStr, perm: u32) -> nix::Result<()> {
    nix::sys::stat::fchmodat(
        dir,
        name,
        Mode::from_bits_truncate(perm),
        FchmodatFlags::NoFollowSymlink,
    )
}

fn read_file(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Vec<u8>> {
    let fd = nix::fcntl::openat(dir, name, read_flags(), Mode::empty())?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(BYTES_LIMIT)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protect::watch::seals::{
        parse_journal_line, sealed_modes, undo_left_seals, write_journal,
    };
    use std::os::unix::fs::PermissionsExt;

    fn tree(name: &str) -> PathBuf {
        let base = std::env::temp_dir().join(format!("sbx-record-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("ws/.git/hooks")).unwrap();
        std::fs::write(base.join("ws/.git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(base.join("ws/.git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            base.join("ws/.git/hooks/pre-commit.sample"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("config", base.join("ws/.git/hooks/link")).unwrap();
        std::fs::canonicalize(&base).unwrap()
    }

    fn restore_all(recorded: &[Recorded], keep: &Path) -> Vec<(PathBuf, String)> {
        let keep_at = |p: &Path| Some(keep.join(p.strip_prefix("/").unwrap()));
        let mut r = Restorer {
            keep: &keep_at,
            as_root: nix::unistd::geteuid().is_root(),
            sealed: false,
            done: Vec::new(),
        };
        for rec in recorded {
            r.restore(rec);
        }
        r.done
    }

    /// Changed, removed, new, replaced by a symlink, made not a directory: each put back
    /// as recorded, and what was there kept; an unchanged record does nothing.
    #[test]
    fn what_changes_is_put_back_and_kept() {
        let base = tree("back");
        let ws = base.join("ws");
        let git = ws.join(".git");
        let recorded = record(&[
            (git.join("config"), ws.clone()),
            (git.join("hooks"), ws.clone()),
            (git.join("hooks/pre-commit.sample"), ws.clone()),
            (ws.join(".mcp.json"), ws.clone()),
        ])
        .unwrap();
        // The sample is inside the hooks, and .mcp.json does not exist.
        assert_eq!(recorded.len(), 2);
        let keep = base.join("keep");
        assert_eq!(restore_all(&recorded, &keep), []);

        std::fs::write(git.join("config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(git.join("hooks/post-checkout"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::remove_file(git.join("hooks/pre-commit.sample")).unwrap();
        std::fs::remove_file(git.join("hooks/link")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", git.join("hooks/link")).unwrap();
        let mut done: Vec<String> = restore_all(&recorded, &keep)
            .into_iter()
            .map(|(p, what)| format!("{} {what}", p.strip_prefix(&ws).unwrap().display()))
            .collect();
        done.sort();
        assert_eq!(
            done,
            [
                ".git/config changed, restored from the record",
                ".git/hooks/link changed, restored from the record",
                ".git/hooks/post-checkout new: taken out",
                ".git/hooks/pre-commit.sample removed, restored from the record",
            ]
        );
        assert_eq!(
            std::fs::read_to_string(git.join("config")).unwrap(),
            "[core]\n\tbare = false\n"
        );
        assert!(!git.join("hooks/post-checkout").exists());
        let sample = git.join("hooks/pre-commit.sample");
        assert_eq!(
            std::fs::metadata(&sample).unwrap().permissions().mode() & 0o7777,
            0o755
        );
        assert_eq!(
            std::fs::read_link(git.join("hooks/link")).unwrap(),
            Path::new("config")
        );
        let kept = keep.join(git.strip_prefix("/").unwrap());
        assert_eq!(
            std::fs::read_to_string(kept.join("config")).unwrap(),
            "[core]\n\tfsmonitor = evil\n"
        );
        assert!(kept.join("hooks/post-checkout").is_file());

        // The whole hooks directory replaced by a file.
        std::fs::remove_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("hooks"), "x").unwrap();
        let done = restore_all(&recorded, &keep);
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(git.join("hooks/pre-commit.sample").is_file());
        assert_eq!(restore_all(&recorded, &keep), []);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// While the session runs the files are kept without write permission, silently, and
    /// get their own modes back after it; a second name made for one gets it replaced.
    #[test]
    fn files_are_sealed_while_the_session_runs_and_a_second_name_is_cut_off() {
        use std::os::unix::fs::MetadataExt;
        let base = tree("seal");
        let ws = base.join("ws");
        let config = ws.join(".git/config");
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o664)).unwrap();
        let recorded = record(&[(config.clone(), ws.clone())]).unwrap();
        assert_eq!(recorded[0].files(), std::slice::from_ref(&config));
        let keep = base.join("keep");
        let pass = |sealed: bool| {
            let keep_at = |p: &Path| Some(keep.join(p.strip_prefix("/").unwrap()));
            let mut r = Restorer {
                keep: &keep_at,
                as_root: nix::unistd::geteuid().is_root(),
                sealed,
                done: Vec::new(),
            };
            r.restore(&recorded[0]);
            r.done
        };
        let mode = || std::fs::metadata(&config).unwrap().mode() & 0o7777;
        assert_eq!(pass(true), []);
        assert_eq!(mode(), 0o444);
        // A hard link: the file is replaced, so the other name reaches another file.
        std::fs::hard_link(&config, ws.join("other")).unwrap();
        let done = pass(true);
        assert_eq!(done.len(), 1, "{done:?}");
        assert_eq!(std::fs::metadata(&config).unwrap().nlink(), 1);
        assert_eq!(mode(), 0o444);
        assert_eq!(pass(false), []);
        assert_eq!(mode(), 0o664);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A recorded directory is sealed too (no entry can be made in it without
    /// capabilities), an entry that appears in it all the same is taken out, and it gets its
    /// mode back at the end.
    #[test]
    fn directories_are_sealed_and_kept_as_recorded() {
        use std::os::unix::fs::MetadataExt;
        let base = tree("sealdir");
        let ws = base.join("ws");
        let hooks = ws.join(".git/hooks");
        std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o755)).unwrap();
        let recorded = record(&[(hooks.clone(), ws.clone())]).unwrap();
        let pass = |sealed: bool| {
            let no_copy = |_: &Path| None;
            let mut r = Restorer {
                keep: &no_copy,
                as_root: nix::unistd::geteuid().is_root(),
                sealed,
                done: Vec::new(),
            };
            r.restore(&recorded[0]);
            r.done
        };
        let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(pass(true), []);
        assert_eq!(mode(&hooks), 0o555);
        assert_eq!(mode(&hooks.join("pre-commit.sample")), 0o555);
        // Made by someone with the right to (root here): taken out, still sealed after.
        std::fs::write(hooks.join("post-checkout"), "#!/bin/sh\n").unwrap();
        let done = pass(true);
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(!hooks.join("post-checkout").exists());
        assert_eq!(mode(&hooks), 0o555);
        assert_eq!(pass(false), []);
        assert_eq!(mode(&hooks), 0o755);
        assert_eq!(mode(&hooks.join("pre-commit.sample")), 0o755);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A renamed ancestor: nothing is made where it was; a new one is restored into, and a
    /// symlink standing in its place is taken out, not followed.
    #[test]
    fn an_ancestor_moved_away_is_not_followed() {
        let base = tree("ancestor");
        let ws = base.join("ws");
        let git = ws.join(".git");
        let recorded = record(&[(git.join("config"), ws.clone())]).unwrap();
        let keep = base.join("keep");
        std::fs::rename(&git, ws.join("old")).unwrap();
        assert_eq!(restore_all(&recorded, &keep), []);
        assert!(!git.exists());

        std::fs::create_dir(&git).unwrap();
        std::fs::write(git.join("config"), "[core]\n\tpager = evil\n").unwrap();
        restore_all(&recorded, &keep);
        assert_eq!(
            std::fs::read_to_string(git.join("config")).unwrap(),
            "[core]\n\tbare = false\n"
        );

        std::fs::remove_dir_all(&git).unwrap();
        std::os::unix::fs::symlink(ws.join("old"), &git).unwrap();
        std::fs::write(ws.join("old/config"), "[core]\n\tpager = evil\n").unwrap();
        let done = restore_all(&recorded, &keep);
        assert_eq!(done.len(), 1, "{done:?}");
        assert!(git.symlink_metadata().is_err());
        // Not followed: the directory the symlink named is as the program left it.
        assert!(std::fs::read_to_string(ws.join("old/config"))
            .unwrap()
            .contains("evil"));
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_record_too_large_is_refused() {
        let base = tree("large");
        let ws = base.join("ws");
        std::fs::create_dir(ws.join("many")).unwrap();
        // Names of one file (a link costs a call; a new file three).
        std::fs::write(ws.join("many/0"), "").unwrap();
        for i in 1..ENTRIES_LIMIT {
            std::fs::hard_link(ws.join("many/0"), ws.join(format!("many/{i}"))).unwrap();
        }
        let err = record(&[(ws.join("many"), ws.clone())]).unwrap_err();
        assert!(matches!(err, RecordError::TooLarge { .. }), "{err}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn seals_left_by_a_killed_session_are_undone_by_the_next_run() {
        let base = tree("journal");
        let ws = base.join("ws");
        let mode = |p: &str| {
            std::fs::symlink_metadata(ws.join(p))
                .unwrap()
                .permissions()
                .mode()
                & 0o7777
        };
        let before = [
            mode(".git/config"),
            mode(".git/hooks"),
            mode(".git/hooks/pre-commit.sample"),
        ];
        let recorded = record(&[(ws.join(".git"), ws.clone())]).unwrap();
        let journals = base.join("sealed");
        let journal = write_journal(&journals, &sealed_modes(&recorded)).unwrap();
        seal(&recorded, true);
        assert_eq!(mode(".git/hooks"), before[1] & !0o222, "sealed");
        // Killed here: never unsealed. A journal of a live process is left alone.
        assert!(undo_left_seals(&journals, &|_| true).is_empty());
        assert_eq!(mode(".git/config"), before[0] & !0o222);
        // The next run, the process gone: every mode back, the journal gone.
        let undone = undo_left_seals(&journals, &|_| false);
        assert_eq!(
            [
                mode(".git/config"),
                mode(".git/hooks"),
                mode(".git/hooks/pre-commit.sample")
            ],
            before
        );
        assert!(undone.contains(&ws.join(".git/config")), "{undone:?}");
        assert!(!journal.exists());
        // A file changed since (its mode no longer the sealed one) is not touched.
        let recorded = record(&[(ws.join(".git"), ws.clone())]).unwrap();
        let _ = write_journal(&journals, &sealed_modes(&recorded)).unwrap();
        seal(&recorded, true);
        std::fs::set_permissions(
            ws.join(".git/config"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let undone = undo_left_seals(&journals, &|_| false);
        assert_eq!(mode(".git/config"), 0o600);
        assert!(!undone.contains(&ws.join(".git/config")));
        assert_eq!(
            parse_journal_line("644 2f612062"),
            Some((PathBuf::from("/a b"), 0o644))
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
