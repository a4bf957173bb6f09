//! A session's **claims**: the names it holds in directories that other sessions share —
//! its temporary directories in `/tmp` and `/dev/shm`, its pools, its container's
//! directory, its own directories and journal in the state directory, its cgroup — and
//! the one rule for when a claim is a live session's.
//!
//! **The rule.** A claim `DIR/NAME` is alive while a lock on its lock file
//! `LOCKS/NAME.lock` is held (`flock`, exclusive). A session takes the lock before the
//! claimed name exists and holds it until it ends, however it ends: the kernel lets go of
//! the lock when the last descriptor closes, on SIGKILL too. A claim whose lock no one
//! holds belongs to a session that is gone, and the next session that looks removes what
//! is at its name, then its lock. Unlike a pid, a lock holds across pid namespaces (a
//! container sharing `/tmp` or the home) and is never reused. The lock file sits where the
//! program cannot write — beside the name, in a directory only sbx-shell writes (`LOCKS` is
//! `DIR`), or in the state directory when the claimed name's directory holds no files (a
//! cgroup) — so the program can neither remove a lock nor make one. A name without a lock
//! is never removed: sbx-shell makes none (the lock comes first, and goes last).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::sys::files::try_lock;

/// How many names a session tries for one claim: `NAME`, then `NAME-1` … when another
/// session holds the one before (the same pid in another pid namespace).
const NAMES: usize = 16;

/// Where one kind of claim lives.
#[derive(Clone, Copy)]
pub struct Claims<'a> {
    /// The directory of the claimed names.
    pub dir: &'a Path,
    /// The directory of their lock files: `dir`, unless it holds no files.
    pub locks: &'a Path,
    /// How every claimed name here starts: what a sweep looks at.
    pub prefix: &'a str,
    /// What follows a claim's name in its path, and not in its lock's (`.jsonl`).
    pub suffix: &'a str,
    /// How what is at a claimed name is removed (a tree; a file; a cgroup).
    pub remove: fn(&Path),
}

/// A live claim of this session's: what is at its name removed, then its lock, when
/// dropped.
#[derive(Debug)]
pub struct Claim {
    path: PathBuf,
    lock_path: PathBuf,
    _lock: File,
    remove: fn(&Path),
}

impl Claim {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        (self.remove)(&self.path);
        let _ = std::fs::remove_file(&self.lock_path);
    }
}

/// Remove a tree, never following a symlink inside it.
pub fn remove_tree(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
}

/// Remove a file.
pub fn remove_file(path: &Path) {
    let _ = std::fs::remove_file(path);
}

impl Claims<'_> {
    /// Claims with their locks beside them, in one directory.
    pub fn beside<'a>(dir: &'a Path, prefix: &'a str, remove: fn(&Path)) -> Claims<'a> {
        Claims {
            dir,
            locks: dir,
            prefix,
            suffix: "",
            remove,
        }
    }

    /// Remove what every claim here whose lock no one holds left, then its lock.
    pub fn sweep(&self) {
        for name in self.locked_names() {
            let lock_path = self.lock_path(&name);
            if let Ok(Some(_held)) = take_lock(&lock_path) {
                (self.remove)(&self.claimed_path(&name));
                let _ = std::fs::remove_file(&lock_path);
            }
        }
    }

    /// The claims here whose lock is held: each name, and its path.
    pub fn alive(&self) -> Vec<(String, PathBuf)> {
        let mut out: Vec<(String, PathBuf)> = self
            .locked_names()
            .into_iter()
            .filter(|name| crate::sys::files::lock_held(&self.lock_path(name)))
            .map(|name| {
                let path = self.claimed_path(&name);
                (name, path)
            })
            .collect();
        out.sort();
        out
    }

    /// This session's claim on `name` (or `name-1` … when another session holds that one),
    /// its lock taken first; what a gone session left at its name is removed, then
    /// `make` makes it. Sweeps first.
    pub fn take(&self, name: &str, make: &dyn Fn(&Path) -> io::Result<()>) -> io::Result<Claim> {
        self.sweep();
        for n in 0..NAMES {
            let name = match n {
                0 => name.to_string(),
                n => format!("{name}-{n}"),
            };
            let lock_path = self.lock_path(&name);
            let Some(lock) = take_lock(&lock_path)? else {
                continue;
            };
            let claim = Claim {
                path: self.claimed_path(&name),
                lock_path,
                _lock: lock,
                remove: self.remove,
            };
            (self.remove)(&claim.path);
            make(&claim.path)?;
            return Ok(claim);
        }
        Err(io::Error::other(format!(
            "every name of {name} in {} is held by another session",
            self.dir.display()
        )))
    }

    fn claimed_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}{}", self.suffix))
    }

    fn lock_path(&self, name: &str) -> PathBuf {
        self.locks.join(format!("{name}.lock"))
    }

    /// The names that have a lock file here.
    fn locked_names(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.locks) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let stem = name.strip_suffix(".lock")?;
                stem.starts_with(self.prefix).then(|| stem.to_string())
            })
            .collect()
    }
}

/// The lock at `path` (made 0600 when missing, never through a symlink), taken: `None`
/// when another holds it. A sweep may remove the file between its opening and the lock
/// (it removes what it locked itself): the lock taken must be on the file at the path.
fn take_lock(path: &Path) -> io::Result<Option<File>> {
    for _ in 0..3 {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        if !try_lock(&file, libc::LOCK_EX) {
            return Ok(None);
        }
        let held = file.metadata()?;
        let there = std::fs::symlink_metadata(path);
        if there.is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino()) {
            return Ok(Some(file));
        }
    }
    Err(io::Error::other(format!(
        "the lock {} keeps being replaced",
        path.display()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sbx-claim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mkdir(p: &Path) -> io::Result<()> {
        std::fs::create_dir(p)
    }

    #[test]
    fn a_claim_lives_while_its_lock_is_held_and_a_gone_ones_is_swept() {
        let dir = scratch("life");
        let shared = Claims::beside(&dir, "s-", remove_tree);
        let first = shared.take("s-7", &mkdir).unwrap();
        assert_eq!(first.path(), dir.join("s-7"));
        std::fs::write(first.path().join("f"), "x").unwrap();
        // Another session with the same name (pid) takes the next one; a sweep leaves
        // both: their locks are held.
        let second = shared.take("s-7", &mkdir).unwrap();
        assert_eq!(second.path(), dir.join("s-7-1"));
        shared.sweep();
        assert!(first.path().join("f").exists() && second.path().exists());
        let names: Vec<String> = shared.alive().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["s-7", "s-7-1"]);
        // A session killed: its lock let go (the descriptor closed), nothing removed.
        let killed = dir.join("s-9");
        std::fs::create_dir(&killed).unwrap();
        std::fs::write(dir.join("s-9.lock"), "").unwrap();
        // A name without a lock (nothing of sbx-shell's), and another kind's claim.
        std::fs::create_dir(dir.join("s-10")).unwrap();
        std::fs::create_dir(dir.join("other")).unwrap();
        std::fs::write(dir.join("other.lock"), "").unwrap();
        shared.sweep();
        assert!(!killed.exists() && !dir.join("s-9.lock").exists());
        assert!(dir.join("s-10").exists() && dir.join("other").exists());
        // Dropped at the end: the name, then its lock.
        drop(first);
        assert!(!dir.join("s-7").exists() && !dir.join("s-7.lock").exists());
        assert!(dir.join("s-7-1.lock").exists());
        // A name a gone session left is taken, emptied.
        std::fs::create_dir(dir.join("s-7")).unwrap();
        std::fs::write(dir.join("s-7/left"), "x").unwrap();
        let again = shared.take("s-7", &mkdir).unwrap();
        assert!(!again.path().join("left").exists());
        drop((second, again));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn locks_elsewhere_and_never_through_a_symlink() {
        let dir = scratch("apart");
        let (entries, locks) = (dir.join("entries"), dir.join("locks"));
        std::fs::create_dir_all(&entries).unwrap();
        std::fs::create_dir_all(&locks).unwrap();
        let shared = Claims {
            dir: &entries,
            locks: &locks,
            prefix: "",
            suffix: ".d",
            remove: remove_tree,
        };
        let claim = shared.take("a", &mkdir).unwrap();
        assert!(entries.join("a.d").is_dir() && locks.join("a.lock").is_file());
        assert_eq!(shared.alive(), [("a".to_string(), entries.join("a.d"))]);
        drop(claim);
        assert!(!entries.join("a.d").exists() && !locks.join("a.lock").exists());
        // A symlink where a lock belongs is not followed, and not taken.
        std::os::unix::fs::symlink(dir.join("target"), locks.join("b.lock")).unwrap();
        assert!(shared.take("b", &mkdir).is_err());
        assert!(!dir.join("target").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
