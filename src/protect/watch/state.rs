//! The watch's state and its work: the watched directories (`Dir`, by role), each event
//! read from inotify judged (`check`), what was planted moved aside, and the recorded
//! files restored.

use super::files::{
    looks_like_git, never_written_by_git, proc_path, read_config, take_out, unique, Node,
};
use super::record;
use crate::protect::planted::{config_keys, Planted, Snapshot};
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, Inotify, WatchDescriptor};
use nix::sys::stat::Mode;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// At most this many directories are watched; beyond, the report says the rest was not.
pub const WATCH_BUDGET: usize = 100_000;

/// At most this many reads of queued events when the session ends: enough for a full
/// queue (`fs.inotify.max_queued_events`, 16384 by default).
pub(super) const FINAL_READS: usize = 200;

/// After this many answers (moves and restores, repeats counted) in one session the watch
/// ends it: a program that plants again what was just taken out is racing the watch, and
/// each round leaves the place planted for an instant (a tight loop kept a `commondir` in
/// place 85% of the time while the watch only answered). An ordinary session gives none or
/// a few.
pub const END_AFTER: u64 = 64;

/// What the watch is told when the session starts.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The writable trees (`repos::trees`), with whether the dot entries at the top are
    /// left alone (a sealed home's, read-only).
    pub roots: Vec<(PathBuf, bool)>,
    /// Protected paths inside them that did not exist at the start, none inside a git
    /// directory (the git rules cover those).
    pub missing: Vec<PathBuf>,
    /// The places as they were at the start (`planted::snapshot`): left alone while unchanged.
    pub before: Snapshot,
    /// `.git` symlinks and their targets at the start, put back when changed.
    pub links: Vec<(PathBuf, PathBuf)>,
    /// Where what is moved aside is kept: a private directory of the state directory.
    pub keep: PathBuf,
    /// Landlock alone: the protected paths inside the trees, put back when they change.
    pub recorded: std::sync::Arc<[record::Recorded]>,
    /// git config keys the policy allows besides those git work writes (`gitconfig`).
    pub git_config_allow: Vec<String>,
    /// Where the journal of the seals is written (`seals::write_journal`), so that a
    /// session killed while they hold is undone by the next run; `None`: none kept.
    pub seal_journals: Option<PathBuf>,
    /// After `END_AFTER` answers, kill every process below sbx-shell (a session's guard);
    /// otherwise (a test's) only say so in `Outcome::ended`.
    pub ends_session: bool,
}

/// What a watched directory is, for the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    /// Any directory of a writable tree.
    Tree,
    /// A git directory.
    Git,
    Hooks,
    Objects,
    ObjectsInfo,
    /// `worktrees/` of a git directory: every entry is one.
    Worktrees,
}

pub(super) struct Dir {
    /// `O_PATH`, opened without following a symlink; everything inside is reached through it.
    pub(super) fd: OwnedFd,
    /// Where it was when it was watched (for messages and the rules by path).
    pub(super) path: PathBuf,
    pub(super) role: Role,
    /// A root whose top dot entries are left alone.
    pub(super) sealed_top: bool,
    /// A missing protected path is below it (`Rules::missing`): its entries' names matter.
    pub(super) near_missing: bool,
    /// It is inside a recorded path, or one is below it (`Rules::recorded`).
    pub(super) near_recorded: bool,
}

/// What the watch did, for the report.
#[derive(Debug, Default)]
pub struct Outcome {
    pub moved: Vec<Planted>,
    /// Recorded paths the session changed, put back (`record`).
    pub restored: Vec<Planted>,
    /// Where the copies are (`Rules::keep`).
    pub keep: PathBuf,
    /// Directories were left unwatched: the budget, or the kernel's limit on watches.
    pub incomplete: bool,
    /// The watch ended the session (`END_AFTER`): the path whose answer ended it.
    pub ended: Option<PathBuf>,
    /// … at its first answer: a place no git command writes (`never_written_by_git`).
    pub ended_at_once: bool,
}

pub(super) struct State {
    pub(super) inotify: Inotify,
    /// Answers given so far (`END_AFTER`).
    pub(super) answers: u64,
    /// For each path moved aside or restored: how many times.
    pub(super) times: HashMap<PathBuf, u64>,
    /// The recorded paths to restore (indices into `rules.recorded`).
    pub(super) restores: std::collections::BTreeSet<usize>,
    /// The recorded files watched themselves, with the recorded path each is in.
    pub(super) files: HashMap<WatchDescriptor, usize>,
    /// The session has ended: the recorded files get their own modes back (`record`).
    pub(super) ended: bool,
    pub(super) dirs: HashMap<WatchDescriptor, Dir>,
    pub(super) queue: Vec<WatchDescriptor>,
    pub(super) rules: Rules,
    pub(super) out: Outcome,
}

pub(super) const MASK: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_ONLYDIR);

impl State {
    pub(super) fn watch_roots(&mut self) {
        for (root, sealed_top) in self.rules.roots.clone() {
            if let Ok(fd) = crate::sys::files::open_nofollow(&root) {
                self.add(fd, root, Role::Tree, sealed_top);
            }
        }
        // Each recorded path checked, its files sealed and watched, before any event.
        self.restores.extend(0..self.rules.recorded.len());
        self.work();
    }

    pub(super) fn run(&mut self, stop: &OwnedFd) {
        loop {
            let mut fds = [
                PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN),
                PollFd::new(stop.as_fd(), PollFlags::POLLIN),
            ];
            match nix::poll::poll(&mut fds, PollTimeout::NONE) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return,
            }
            if fds[1].any().unwrap_or(true) {
                return;
            }
            self.drain();
        }
    }

    /// Handle the events queued now (one read: the loop polls for the stop between
    /// reads); false when there were none.
    pub(super) fn drain(&mut self) -> bool {
        let Ok(events) = self.inotify.read_events() else {
            return false;
        };
        // Each entry once per read, however many events it had.
        let mut seen = std::collections::HashSet::new();
        for event in &events {
            if let Some(name) = &event.name {
                if !seen.insert((event.wd, name.clone())) {
                    continue;
                }
            }
            if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                self.queue = self.dirs.keys().copied().collect();
                self.restores.extend(0..self.rules.recorded.len());
            } else if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                self.dirs.remove(&event.wd);
                self.files.remove(&event.wd);
            } else if let Some(&i) = self.files.get(&event.wd) {
                self.restores.insert(i);
            } else if let Some(name) = &event.name {
                if event.mask.contains(AddWatchFlags::IN_ISDIR) || self.relevant(event.wd, name) {
                    self.check(event.wd, name);
                }
            }
        }
        self.work();
        !events.is_empty()
    }

    /// Whether the entry `name` of a watched directory can matter to the rules when it is
    /// not a directory (a directory always can: it is watched).
    pub(super) fn relevant(&self, wd: WatchDescriptor, name: &OsStr) -> bool {
        let Some(dir) = self.dirs.get(&wd) else {
            return false;
        };
        let bytes = name.as_encoded_bytes();
        let by_role = match dir.role {
            Role::Tree => crate::protect::gitdir::MARKERS.iter().any(|m| name == *m),
            Role::Git => matches!(bytes, b"config" | b"config.worktree" | b"commondir"),
            Role::Hooks => true,
            Role::ObjectsInfo => bytes == b"alternates",
            Role::Objects | Role::Worktrees => false,
        };
        by_role
            || bytes == b".git"
            || (dir.near_missing && {
                let path = dir.path.join(name);
                self.rules.missing.iter().any(|m| m.starts_with(&path))
            })
            || (dir.near_recorded && self.touched(&dir.path.join(name)).next().is_some())
    }

    /// The recorded paths that a change at `path` can touch: those it is inside, and
    /// those inside it.
    pub(super) fn touched<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = usize> + 'a {
        self.rules
            .recorded
            .iter()
            .enumerate()
            .filter(move |(_, r)| r.path.starts_with(path) || path.starts_with(&r.path))
            .map(|(i, _)| i)
    }

    /// Put back the recorded paths queued by the events.
    pub(super) fn restore_queued(&mut self) {
        let queued = std::mem::take(&mut self.restores);
        if queued.is_empty() {
            return;
        }
        let keep = |path: &Path| {
            (!self.times.contains_key(path))
                .then(|| unique(&self.rules.keep.join(path.strip_prefix("/").unwrap_or(path))))
        };
        let mut restorer = record::Restorer {
            keep: &keep,
            as_root: nix::unistd::geteuid().is_root(),
            sealed: !self.ended,
            done: Vec::new(),
        };
        for &i in &queued {
            if let Some(rec) = self.rules.recorded.get(i) {
                restorer.restore(rec);
            }
        }
        for (path, what) in restorer.done {
            self.note(&path, what, true);
        }
        if !self.ended {
            for i in queued {
                self.watch_files(i);
            }
        }
    }

    /// Watch the files of the recorded path `i` themselves (a restore made new ones): a
    /// change of mode or content through another name of the same file (a hard link)
    /// reaches only the file's own watch.
    pub(super) fn watch_files(&mut self, i: usize) {
        const FILE_MASK: AddWatchFlags = AddWatchFlags::IN_MODIFY
            .union(AddWatchFlags::IN_ATTRIB)
            .union(AddWatchFlags::IN_CLOSE_WRITE);
        let Some(rec) = self.rules.recorded.get(i) else {
            return;
        };
        for path in rec.files() {
            let Ok(fd) = crate::sys::files::open_nofollow(&path) else {
                continue;
            };
            let regular = nix::sys::stat::fstat(fd.as_fd())
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFREG);
            if !regular {
                continue;
            }
            match self.inotify.add_watch(&proc_path(&fd), FILE_MASK) {
                Ok(wd) => {
                    self.files.insert(wd, i);
                }
                Err(_) => self.out.incomplete = true,
            }
        }
    }

    /// List every queued directory and check each entry.
    pub(super) fn work(&mut self) {
        while let Some(wd) = self.queue.pop() {
            let Some(dir) = self.dirs.get(&wd) else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(proc_path(&dir.fd)) else {
                continue;
            };
            // The type from the directory entry itself: no stat for an ordinary file.
            let names: Vec<OsString> = entries
                .flatten()
                .filter(|e| {
                    e.file_type().map_or(true, |t| t.is_dir()) || self.relevant(wd, &e.file_name())
                })
                .map(|e| e.file_name())
                .collect();
            for name in names {
                self.check(wd, &name);
            }
        }
        self.restore_queued();
    }

    /// The rules, for one entry of a watched directory.
    pub(super) fn check(&mut self, wd: WatchDescriptor, name: &OsStr) {
        let Some(dir) = self.dirs.get(&wd) else {
            return;
        };
        let path = dir.path.join(name);
        // Inside a recorded path, the record says what belongs: the rules below are not
        // asked (but a directory is still watched, for what changes in it later).
        let mut recorded_inside = false;
        if dir.near_recorded {
            for i in self.touched(&path).collect::<Vec<_>>() {
                recorded_inside |= path.starts_with(&self.rules.recorded[i].path);
                self.restores.insert(i);
            }
        }
        let Some(dir) = self.dirs.get(&wd) else {
            return;
        };
        let at = proc_path(&dir.fd).join(name);
        let Ok(st) = nix::sys::stat::fstatat(
            dir.fd.as_fd(),
            name,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) else {
            return;
        };
        let node = Node::of(&st);
        let (role, sealed_top) = (dir.role, dir.sealed_top);
        let near_missing = dir.near_missing;
        let danger = if recorded_inside {
            None
        } else {
            self.danger(role, near_missing, name, &path, &at, &node)
        };
        if let Some(what) = danger {
            self.move_aside(wd, name, &path, what);
            return;
        }
        if node.kind == libc::S_IFDIR {
            let Some(watch) = child_watch(role, sealed_top, name) else {
                return;
            };
            let opened = nix::fcntl::openat(
                dir.fd.as_fd(),
                name,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            );
            match opened {
                Ok(fd) => {
                    let child = match watch {
                        Some(role) => role,
                        None if looks_like_git(fd.as_fd()) => Role::Git,
                        None => Role::Tree,
                    };
                    self.add(fd, path, child, false);
                }
                Err(nix::errno::Errno::EMFILE | nix::errno::Errno::ENFILE) => {
                    self.out.incomplete = true;
                }
                Err(_) => {}
            }
        } else if role == Role::Tree
            && crate::protect::gitdir::MARKERS.iter().any(|n| name == *n)
            && looks_like_git(dir.fd.as_fd())
        {
            if let Some(dir) = self.dirs.get_mut(&wd) {
                dir.role = Role::Git;
                self.queue.push(wd);
            }
        }
    }

    /// What is wrong with the entry `name` (at `path`, reached at `at`), if anything.
    pub(super) fn danger(
        &self,
        role: Role,
        near_missing: bool,
        name: &OsStr,
        path: &Path,
        at: &Path,
        node: &Node,
    ) -> Option<String> {
        let rules = &self.rules;
        let is_dir = node.kind == libc::S_IFDIR;
        if near_missing && rules.missing.iter().any(|m| m == path) {
            return Some("new protected path".into());
        }
        if near_missing && !is_dir && rules.missing.iter().any(|m| m.starts_with(path)) {
            return Some("not a directory, in place of a protected path's".into());
        }
        // A `.git` symlink is the same while it names the same target (one put back is a
        // new symlink).
        let unchanged = rules.before.unchanged(path, node.print)
            || (node.kind == libc::S_IFLNK
                && std::fs::read_link(at).is_ok_and(|target| {
                    rules.links.iter().any(|(l, t)| l == path && *t == target)
                }));
        let name = name.as_encoded_bytes();
        let pointer = match role {
            Role::Tree | Role::Git => name == b".git" && !is_dir,
            Role::ObjectsInfo => name == b"alternates",
            _ => false,
        } || (role == Role::Git && name == b"commondir");
        if pointer && !unchanged {
            return Some("git pointer to another directory".into());
        }
        if role == Role::Hooks && !is_dir && !name.ends_with(b".sample") && !unchanged {
            return Some("git hook".into());
        }
        if role == Role::Git && (name == b"config" || name == b"config.worktree") && !unchanged {
            return match read_config(at, node) {
                Some(text) => {
                    let keys = config_keys(text.as_bytes(), &rules.git_config_allow);
                    (!keys.is_empty()).then(|| format!("git config ({})", keys.join(", ")))
                }
                None => Some("git config that is not a plain file".into()),
            };
        }
        None
    }

    /// Watch the directory `fd` (at `path`); listed when new, or when its role or place
    /// changed.
    pub(super) fn add(&mut self, fd: OwnedFd, path: PathBuf, role: Role, sealed_top: bool) {
        if self.dirs.len() >= WATCH_BUDGET {
            self.out.incomplete = true;
            return;
        }
        let Ok(wd) = self.inotify.add_watch(&proc_path(&fd), MASK) else {
            self.out.incomplete = true;
            return;
        };
        let near_missing = self
            .rules
            .missing
            .iter()
            .any(|m| m.starts_with(&path) && *m != path);
        let near_recorded = self.touched(&path).next().is_some();
        let dir = Dir {
            fd,
            path,
            role,
            sealed_top,
            near_missing,
            near_recorded,
        };
        let changed = self
            .dirs
            .get(&wd)
            .is_none_or(|d| d.role != dir.role || d.path != dir.path);
        self.dirs.insert(wd, dir);
        if changed {
            self.queue.push(wd);
        }
    }

    /// Move `name` out of the watched directory into `rules.keep`, and record it. A `.git`
    /// symlink that was there at the start is put back as it was.
    pub(super) fn move_aside(
        &mut self,
        wd: WatchDescriptor,
        name: &OsStr,
        path: &Path,
        what: String,
    ) {
        let Some(dir) = self.dirs.get(&wd) else {
            return;
        };
        let at = proc_path(&dir.fd).join(name);
        // A copy of the first only: a program that plants the same thing again and again
        // costs a removal each time, not a copy.
        let first = !self.times.contains_key(path);
        let keep =
            first.then(|| unique(&self.rules.keep.join(path.strip_prefix("/").unwrap_or(path))));
        let moved = take_out(dir.fd.as_fd(), name, keep.as_deref());
        let restored = self
            .rules
            .links
            .iter()
            .find(|(link, _)| link == path)
            .is_some_and(|(_, target)| std::os::unix::fs::symlink(target, &at).is_ok());
        let how = match (moved, restored) {
            (Ok(()), true) => "moved aside, the old link put back".to_string(),
            (Ok(()), false) => "moved aside".to_string(),
            (Err(e), _) => format!("could not be moved aside: {e}"),
        };
        self.note(path, format!("{what}, {how}"), false);
    }

    /// Record what was done at `path` for the report: the first time only; every answer
    /// counts towards `END_AFTER`, which ends the session.
    pub(super) fn note(&mut self, path: &Path, what: String, restored: bool) {
        self.answers += 1;
        // From then on each answer ends what runs (a program started after the answer
        // that reached the count, with changes made by something outside before it, is
        // ended at the next one); said only once something was ended.
        let at_once = never_written_by_git(path);
        if (self.answers >= END_AFTER || at_once) && self.out.ended.is_none() && !self.ended {
            let ended = !self.rules.ends_session || crate::sys::process::kill_all_below() > 0;
            if ended {
                self.out.ended = Some(path.to_path_buf());
                self.out.ended_at_once = at_once;
            }
        }
        if let Some(times) = self.times.get_mut(path) {
            *times += 1;
            return;
        }
        self.times.insert(path.to_path_buf(), 1);
        let list = if restored {
            &mut self.out.restored
        } else {
            &mut self.out.moved
        };
        list.push(Planted {
            path: path.to_path_buf(),
            what,
        });
    }
}

/// How a subdirectory `name` of a directory with `role` is watched: not at all (`None`),
/// with the role its name decides (`Some(Some(role))`), or as a git directory or a plain
/// one by what it holds (`Some(None)`).
pub(super) fn child_watch(role: Role, sealed_top: bool, name: &OsStr) -> Option<Option<Role>> {
    let bytes = name.as_encoded_bytes();
    match role {
        Role::Tree => {
            if crate::protect::repos::SKIPPED.iter().any(|s| name == *s)
                || (sealed_top && bytes.starts_with(b"."))
            {
                None
            } else if bytes == b".git" {
                Some(Some(Role::Git))
            } else {
                Some(None)
            }
        }
        Role::Git => match bytes {
            b"hooks" => Some(Some(Role::Hooks)),
            b"objects" => Some(Some(Role::Objects)),
            b"worktrees" => Some(Some(Role::Worktrees)),
            b"modules" => Some(Some(Role::Tree)),
            _ => None,
        },
        Role::Objects => (bytes == b"info").then_some(Some(Role::ObjectsInfo)),
        Role::Worktrees => Some(Some(Role::Git)),
        Role::Hooks | Role::ObjectsInfo => None,
    }
}
