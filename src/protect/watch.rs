//! The guard: what no mount can refuse inside a writable tree, moved aside the moment it
//! appears. A mount protects what exists; it cannot refuse one new name in a directory
//! that must stay writable (`.mcp.json` at the top of a project, `commondir` in a git
//! directory that needs its lock files, a repository made with `git init`). The program's
//! own calls that make such names are refused when made (`mediator::names`); this is what
//! stays behind them, for what changes from outside the sandbox and what enters otherwise.
//! While the session runs, sbx-shell watches the writable trees from outside the sandbox
//! (inotify: no polling) and, as soon as one of these appears, moves it out of the tree
//! into its state directory and names it at the end:
//!
//! - a protected path that did not exist when the session started (`missing`), and
//!   anything that is not a directory standing where one of its ancestors should be;
//! - in every git directory, old or new: a hook (not a `*.sample`), a config holding a
//!   command-running key (`planted::config_keys`), `commondir`, `objects/info/alternates`;
//!   a `.git` file or symlink in any directory — unless it is exactly what was there at
//!   the start (`planted::Snapshot`). A `.git` symlink that was there and is changed is
//!   put back.
//!
//! With Landlock alone, which cannot refuse a change inside a writable tree, the guard
//! also puts back the protected paths that exist there, as recorded at the start
//! (`record`).
//!
//! This restores; it does not prevent: a program outside that reads the place in the
//! instant between the write and the move sees it. A program that plants again and again
//! would make those instants most of the time, so the guard ends a session after
//! `END_AFTER` answers — or at the first one for a place no git command writes
//! (`never_written_by_git`). Everything is reached through
//! descriptors held on the watched directories, never by following a path the program
//! could change.

pub mod record;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use nix::sys::stat::Mode;

use crate::protect::planted::{config_keys, Planted, Snapshot};

/// At most this many directories are watched; beyond, the report says the rest was not.
pub const WATCH_BUDGET: usize = 100_000;
/// A config larger than this is moved aside unread.
const CONFIG_READ_LIMIT: u64 = 16 << 20;
/// At most this many reads of queued events when the session ends: enough for a full
/// queue (`fs.inotify.max_queued_events`, 16384 by default).
const FINAL_READS: usize = 200;
/// After this many answers (moves and restores, repeats counted) in one session the guard
/// ends it: a program that plants again what was just taken out is racing the guard, and
/// each round leaves the place planted for an instant (a tight loop kept a `commondir` in
/// place 85% of the time while the guard only answered). An ordinary session gives none or
/// a few.
pub const END_AFTER: u64 = 64;
/// At most this many bytes of each file moved aside are kept.
const KEEP_LIMIT: u64 = 1 << 20;

/// What the guard is told when the session starts.
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
    /// Where the journal of the seals is written (`record::write_journal`), so that a
    /// session killed while they hold is undone by the next run; `None`: none kept.
    pub seal_journals: Option<PathBuf>,
    /// After `END_AFTER` answers, kill every process below sbx-shell (a session's guard);
    /// otherwise (a test's) only say so in `Outcome::ended`.
    pub ends_session: bool,
}

/// What a watched directory is, for the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
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

struct Dir {
    /// `O_PATH`, opened without following a symlink; everything inside is reached through it.
    fd: OwnedFd,
    /// Where it was when it was watched (for messages and the rules by path).
    path: PathBuf,
    role: Role,
    /// A root whose top dot entries are left alone.
    sealed_top: bool,
    /// A missing protected path is below it (`Rules::missing`): its entries' names matter.
    near_missing: bool,
    /// It is inside a recorded path, or one is below it (`Rules::recorded`).
    near_recorded: bool,
}

/// What the guard did, for the report.
#[derive(Debug, Default)]
pub struct Outcome {
    pub moved: Vec<Planted>,
    /// Recorded paths the session changed, put back (`record`).
    pub restored: Vec<Planted>,
    /// Where the copies are (`Rules::keep`).
    pub keep: PathBuf,
    /// Directories were left unwatched: the budget, or the kernel's limit on watches.
    pub incomplete: bool,
    /// The guard ended the session (`END_AFTER`): the path whose answer ended it.
    pub ended: Option<PathBuf>,
    /// … at its first answer: a place no git command writes (`never_written_by_git`).
    pub ended_at_once: bool,
}

struct State {
    inotify: Inotify,
    /// Answers given so far (`END_AFTER`).
    answers: u64,
    /// For each path moved aside or restored: how many times.
    times: HashMap<PathBuf, u64>,
    /// The recorded paths to restore (indices into `rules.recorded`).
    restores: std::collections::BTreeSet<usize>,
    /// The recorded files watched themselves, with the recorded path each is in.
    files: HashMap<WatchDescriptor, usize>,
    /// The session has ended: the recorded files get their own modes back (`record`).
    ended: bool,
    dirs: HashMap<WatchDescriptor, Dir>,
    queue: Vec<WatchDescriptor>,
    rules: Rules,
    out: Outcome,
}

/// The running guard.
pub struct Guard {
    stop: OwnedFd,
    /// Taken by `finish`; when the guard is dropped unfinished (the session never
    /// started), `Drop` stops it and gives the recorded files their modes back.
    thread: Option<std::thread::JoinHandle<State>>,
    /// Files were sealed (`record::seal`): an unfinished guard must unseal them.
    sealed: bool,
    /// The journal of the seals, removed once they are undone.
    journal: Option<PathBuf>,
}

const MASK: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_CLOSE_WRITE)
    .union(AddWatchFlags::IN_MODIFY)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_ONLYDIR);

impl Guard {
    /// Watch the trees from a thread of its own: the walk that sets the watches runs
    /// while the session starts (what is made before a directory is watched is found when
    /// it is listed, after the watch is set).
    pub fn start(rules: Rules) -> io::Result<Guard> {
        // One descriptor per watched directory, and the soft limit may be as low as 1024.
        // Raised here, before the session starts, so the program sees the same limit in
        // every run (the helper sets the program's own from the policy).
        use nix::sys::resource::{getrlimit, setrlimit, Resource};
        if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
            let want = (WATCH_BUDGET as u64 + 1024).min(hard);
            if soft < want {
                let _ = setrlimit(Resource::RLIMIT_NOFILE, want, hard);
            }
        }
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)?;
        let (stop_read, stop) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let mut state = State {
            inotify,
            answers: 0,
            times: HashMap::new(),
            restores: std::collections::BTreeSet::new(),
            files: HashMap::new(),
            ended: false,
            dirs: HashMap::new(),
            queue: Vec::new(),
            rules,
            out: Outcome::default(),
        };
        // Sealed before the program starts, so it can never hold one open for writing; the
        // journal first, so that no kill leaves a seal no run can undo.
        let journal = match (&state.rules.seal_journals, state.rules.recorded.is_empty()) {
            (Some(dir), false) => Some(record::write_journal(
                dir,
                &record::sealed_modes(&state.rules.recorded),
            )?),
            _ => None,
        };
        record::seal(&state.rules.recorded, true);
        let recorded = std::sync::Arc::clone(&state.rules.recorded);
        let thread = std::thread::Builder::new()
            .name("sbx-guard".into())
            .spawn(move || {
                state.watch_roots();
                state.run(&stop_read);
                state
            })
            .inspect_err(|_| {
                record::seal(&recorded, false);
                if let Some(j) = &journal {
                    let _ = std::fs::remove_file(j);
                }
            })?;
        Ok(Guard {
            stop,
            thread: Some(thread),
            sealed: !recorded.is_empty(),
            journal,
        })
    }

    /// Stop watching, handle what is still queued, and say what was moved. (The walk
    /// listed each directory after its watch was set, and a lost event is an overflow
    /// event, which lists everything again: nothing needs a last walk.)
    pub fn finish(mut self) -> Outcome {
        let _ = nix::unistd::write(&self.stop, b"x");
        let Some(Ok(mut state)) = self.thread.take().map(std::thread::JoinHandle::join) else {
            return Outcome {
                incomplete: true,
                ..Outcome::default()
            };
        };
        // Bounded, however busy the trees still are (a process outside may write on).
        for _ in 0..FINAL_READS {
            if !state.drain() {
                break;
            }
        }
        // Every recorded path once more, whatever the events said: the trees are left as
        // recorded, the files with their own modes again.
        state.ended = true;
        state.restores.extend(0..state.rules.recorded.len());
        state.restore_queued();
        let State {
            inotify,
            dirs,
            rules,
            mut out,
            ..
        } = state;
        drop(dirs);
        close_elsewhere(OwnedFd::from(inotify));
        if let Some(j) = self.journal.take() {
            let _ = std::fs::remove_file(j);
        }
        out.keep = rules.keep;
        out
    }
}

impl State {
    fn watch_roots(&mut self) {
        for (root, sealed_top) in self.rules.roots.clone() {
            if let Ok(fd) = crate::sys::files::open_nofollow(&root) {
                self.add(fd, root, Role::Tree, sealed_top);
            }
        }
        // Each recorded path checked, its files sealed and watched, before any event.
        self.restores.extend(0..self.rules.recorded.len());
        self.work();
    }

    fn run(&mut self, stop: &OwnedFd) {
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
    fn drain(&mut self) -> bool {
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
    fn relevant(&self, wd: WatchDescriptor, name: &OsStr) -> bool {
        let Some(dir) = self.dirs.get(&wd) else {
            return false;
        };
        let bytes = name.as_encoded_bytes();
        let by_role = match dir.role {
            Role::Tree => matches!(bytes, b"HEAD" | b"objects" | b"refs"),
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
    fn touched<'a>(&'a self, path: &'a Path) -> impl Iterator<Item = usize> + 'a {
        self.rules
            .recorded
            .iter()
            .enumerate()
            .filter(move |(_, r)| r.path.starts_with(path) || path.starts_with(&r.path))
            .map(|(i, _)| i)
    }

    /// Put back the recorded paths queued by the events.
    fn restore_queued(&mut self) {
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
    fn watch_files(&mut self, i: usize) {
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
    fn work(&mut self) {
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
    fn check(&mut self, wd: WatchDescriptor, name: &OsStr) {
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
            && ["HEAD", "objects", "refs"].iter().any(|n| name == *n)
            && looks_like_git(dir.fd.as_fd())
        {
            if let Some(dir) = self.dirs.get_mut(&wd) {
                dir.role = Role::Git;
                self.queue.push(wd);
            }
        }
    }

    /// What is wrong with the entry `name` (at `path`, reached at `at`), if anything.
    fn danger(
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
    fn add(&mut self, fd: OwnedFd, path: PathBuf, role: Role, sealed_top: bool) {
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
    fn move_aside(&mut self, wd: WatchDescriptor, name: &OsStr, path: &Path, what: String) {
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
    fn note(&mut self, path: &Path, what: String, restored: bool) {
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

/// A place no git command writes, so that making it once is an attack on the host's git,
/// and the guard ends the session at its first answer: `commondir` in a git directory
/// other than a linked worktree's (`worktrees/NAME/commondir` is git's own). It points the
/// host's git at another directory's config and hooks.
fn never_written_by_git(path: &Path) -> bool {
    path.file_name() == Some(OsStr::new("commondir"))
        && path
            .parent()
            .and_then(Path::parent)
            .and_then(Path::file_name)
            != Some(OsStr::new("worktrees"))
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Without sealed files, nothing to undo: the thread is not waited for (its walk
        // of a large tree could take a while), it ends with the process.
        let Some(thread) = self.thread.take().filter(|_| self.sealed) else {
            return;
        };
        let _ = nix::unistd::write(&self.stop, b"x");
        if let Ok(state) = thread.join() {
            record::seal(&state.rules.recorded, false);
            if let Some(j) = self.journal.take() {
                let _ = std::fs::remove_file(j);
            }
        }
    }
}

/// Where the journals of seals are kept (`record::write_journal`).
pub fn seal_journals(home: &Path) -> PathBuf {
    crate::sys::files::state_dir(home).join("sealed")
}

/// Give their own modes back to the files that a session killed while its seals held
/// left sealed (`record::undo_left_seals`); the line that says so, if any were.
pub fn undo_left_seals(home: &Path) -> Option<String> {
    let alive = |pid: u32| {
        i32::try_from(pid).is_ok_and(|pid| {
            // Signal 0 only checks: ESRCH means gone, EPERM that it exists.
            !matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
                Err(nix::errno::Errno::ESRCH)
            )
        })
    };
    let undone = record::undo_left_seals(&seal_journals(home), &alive);
    let named = crate::sys::say::first_and_more(&undone)?;
    Some(format!(
        "sbx-shell: gave {named} its own mode back: a session killed earlier left it sealed"
    ))
}

/// Close the inotify instance without waiting for it. The last close of one that has
/// watches waits for the kernel's SRCU grace period — 15 to 20 ms measured here, at the
/// end of every session. A child process keeps a copy, closes it after this process has
/// (a pipe says when) and takes that wait instead.
fn close_elsewhere(fd: OwnedFd) {
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
fn proc_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// An entry as `fstatat` saw it.
struct Node {
    /// `S_IFDIR`, `S_IFLNK`, `S_IFREG` …
    kind: libc::mode_t,
    len: u64,
    print: crate::protect::planted::Print,
}

impl Node {
    fn of(st: &libc::stat) -> Node {
        Node {
            kind: st.st_mode & libc::S_IFMT,
            len: u64::try_from(st.st_size).unwrap_or(u64::MAX),
            print: crate::protect::planted::Print::of_stat(st),
        }
    }
}

/// How a subdirectory `name` of a directory with `role` is watched: not at all (`None`),
/// with the role its name decides (`Some(Some(role))`), or as a git directory or a plain
/// one by what it holds (`Some(None)`).
fn child_watch(role: Role, sealed_top: bool, name: &OsStr) -> Option<Option<Role>> {
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

/// Whether the directory `dir` holds `HEAD`, `objects/` and `refs/`.
fn looks_like_git(dir: BorrowedFd<'_>) -> bool {
    let is = |name: &str, want_dir: bool| {
        nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| (st.st_mode & libc::S_IFMT == libc::S_IFDIR) == want_dir)
    };
    is("HEAD", false) && is("objects", true) && is("refs", true)
}

/// A git config's text; `None` when it is not a regular file, or too large to read.
fn read_config(at: &Path, node: &Node) -> Option<String> {
    if node.kind != libc::S_IFREG || node.len > CONFIG_READ_LIMIT {
        return None;
    }
    let mut file = open_plain(at).ok()?;
    let mut bytes = Vec::new();
    file.by_ref()
        .take(CONFIG_READ_LIMIT)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

fn open_plain(at: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(at)
}

/// `path`, or `path.1`, `path.2` … whichever does not exist yet.
fn unique(path: &Path) -> PathBuf {
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
/// renamed to a name of the guard's own in the same place, so the path is free at once
/// whatever the program still adds to it, then emptied there.
fn take_out(dir: BorrowedFd<'_>, name: &OsStr, keep: Option<&Path>) -> io::Result<()> {
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
fn remove_keeping(
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
        // .vscode/tasks.json` racing the guard): a few rounds.
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
fn keep_copy(dir: BorrowedFd<'_>, name: &OsStr, keep: &Path) -> io::Result<()> {
    let st = nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)?;
    match copy_of(dir, name, st.st_mode & libc::S_IFMT)? {
        Some(bytes) => crate::sys::files::write_private(keep, &bytes),
        None => Ok(()),
    }
}

/// What is kept of a non-directory: a regular file's first `KEEP_LIMIT` bytes, a symlink
/// as a line naming its target; nothing of anything else.
fn copy_of(dir: BorrowedFd<'_>, name: &OsStr, kind: libc::mode_t) -> io::Result<Option<Vec<u8>>> {
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

/// The protected paths inside `roots` that do not exist (`exists` says), and are not
/// inside a git directory: what the guard moves aside when it appears.
pub fn missing(
    protected: &[&Path],
    roots: &[(PathBuf, bool)],
    exists: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = protected
        .iter()
        .filter(|p| roots.iter().any(|(r, _)| p.starts_with(r) && *p != r))
        .filter(|p| !p.components().any(|c| c.as_os_str() == ".git"))
        .filter(|p| !exists(p))
        .map(|p| p.to_path_buf())
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_protected_paths_are_those_inside_a_tree_outside_git_directories() {
        let roots = [
            (PathBuf::from("/w"), false),
            (PathBuf::from("/h/.claude"), false),
        ];
        let protected = [
            Path::new("/w/.mcp.json"),
            Path::new("/w/.vscode"),
            Path::new("/w/.git/config"),
            Path::new("/w/sub/.git/hooks"),
            Path::new("/h/.claude/settings.json"),
            Path::new("/h/.bashrc"),
            Path::new("/w"),
        ];
        let exists = |p: &Path| p == Path::new("/w/.vscode");
        assert_eq!(
            missing(&protected, &roots, &exists),
            [
                PathBuf::from("/h/.claude/settings.json"),
                PathBuf::from("/w/.mcp.json")
            ]
        );
    }

    /// Landlock alone: a recorded config written and a hook planted while the guard runs
    /// are put back at once (before the session ends), and reported as restored.
    #[test]
    fn recorded_paths_are_restored_while_it_runs() {
        let base = std::env::temp_dir().join(format!("sbx-guard-rec-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(".git/objects")).unwrap();
        std::fs::create_dir_all(ws.join(".git/refs")).unwrap();
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(ws.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let git = ws.join(".git");
        let recorded = record::record(&[
            (git.join("config"), ws.clone()),
            (git.join("hooks"), ws.clone()),
        ])
        .unwrap();
        let found = crate::protect::repos::scan(&ws, false);
        let rules = Rules {
            roots: vec![(ws.clone(), false)],
            missing: Vec::new(),
            before: crate::protect::planted::snapshot(&found, Some(&ws), &[], &[&ws]),
            links: Vec::new(),
            keep: base.join("keep"),
            recorded: recorded.into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        let guard = Guard::start(rules).unwrap();
        let settle = |what: &dyn Fn() -> bool| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !what() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            what()
        };
        // The guard's first listing may see the tree before or after these: either way
        // the events, or that listing, restore them.
        std::fs::write(git.join("config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        assert!(settle(&|| std::fs::read_to_string(git.join("config"))
            .is_ok_and(|c| c == "[core]\n\tbare = false\n")));
        assert!(settle(&|| !git.join("hooks/pre-commit").exists()));
        // Through a second name of the file, which no directory watch sees.
        std::fs::hard_link(git.join("config"), ws.join("other")).unwrap();
        std::fs::write(ws.join("other"), "[core]\n\thooksPath = /evil\n").unwrap();
        assert!(settle(&|| std::fs::read_to_string(git.join("config"))
            .is_ok_and(|c| c == "[core]\n\tbare = false\n")));
        // Through a rename of the git directory and a new one in its place.
        std::fs::rename(&git, ws.join("moved")).unwrap();
        std::fs::create_dir(&git).unwrap();
        std::fs::write(git.join("config"), "[core]\n\tpager = evil\n").unwrap();
        assert!(settle(&|| std::fs::read_to_string(git.join("config"))
            .is_ok_and(|c| c == "[core]\n\tbare = false\n")));
        let out = guard.finish();
        let restored: Vec<String> = out
            .restored
            .iter()
            .map(|p| p.path.strip_prefix(&ws).unwrap().display().to_string())
            .collect();
        assert!(
            restored.contains(&".git/config".to_string()),
            "{restored:?}"
        );
        assert!(
            restored.contains(&".git/hooks/pre-commit".to_string()),
            "{restored:?}"
        );
        assert!(out.moved.is_empty(), "{:?}", out.moved);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// A fresh workspace under `tag` whose protected path `name` is missing, and the rules
    /// of a test's guard for it: (base, workspace, the path, rules).
    fn one_missing(tag: &str, name: &str) -> (PathBuf, PathBuf, PathBuf, Rules) {
        let base = std::env::temp_dir().join(format!("sbx-guard-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("ws")).unwrap();
        let ws = std::fs::canonicalize(base.join("ws")).unwrap();
        let planted = ws.join(name);
        let rules = Rules {
            roots: vec![(ws.clone(), false)],
            missing: vec![planted.clone()],
            before: crate::protect::planted::Snapshot::default(),
            links: Vec::new(),
            keep: base.join("keep"),
            recorded: Vec::new().into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        (base, ws, planted, rules)
    }

    /// A protected directory that a program keeps filling while the guard takes it out
    /// (`mkdir .vscode && echo > .vscode/tasks.json`, in a loop here): it is renamed out
    /// of the way first, so it is gone at once and not left behind half emptied.
    #[test]
    fn a_directory_filled_while_it_is_taken_out_is_taken_out() {
        let (base, ws, planted, rules) = one_missing("fill", ".vscode");
        let guard = Guard::start(rules).unwrap();
        // Give the guard's walk time to watch the workspace.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let filler = {
            let planted = planted.clone();
            std::thread::spawn(move || {
                let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
                let mut n = 0u64;
                while std::time::Instant::now() < until {
                    let _ = std::fs::create_dir(&planted);
                    let _ = std::fs::write(planted.join(format!("f{n}")), "x");
                    n += 1;
                }
            })
        };
        filler.join().unwrap();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while planted.exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!planted.exists(), "still there");
        let out = guard.finish();
        assert!(
            out.moved.iter().all(|p| !p.what.contains("could not")),
            "{:?}",
            out.moved
        );
        let litter: Vec<_> = std::fs::read_dir(&ws)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(litter.is_empty(), "{litter:?}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn only_a_commondir_outside_a_worktrees_directory_ends_a_session_at_once() {
        for (path, at_once) in [
            ("/ws/.git/commondir", true),
            ("/ws/sub/.git/commondir", true),
            ("/ws/bare.git/commondir", true),
            ("/ws/.git/modules/m/commondir", true),
            ("/ws/.git/worktrees/wt/commondir", false),
            ("/ws/.git/hooks/post-checkout", false),
            ("/ws/.mcp.json", false),
        ] {
            assert_eq!(never_written_by_git(Path::new(path)), at_once, "{path}");
        }
    }

    /// A place planted again the moment it is gone: the guard answers until `END_AFTER`
    /// answers, then says it ends the session (a test's guard kills nothing).
    #[test]
    fn a_place_planted_again_and_again_ends_the_session() {
        let (base, _, planted, rules) = one_missing("end", ".mcp.json");
        let guard = Guard::start(rules).unwrap();
        let gone = || {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while planted.exists() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            !planted.exists()
        };
        for i in 0..END_AFTER {
            std::fs::write(&planted, "{}").unwrap();
            assert!(gone(), "answer {i}");
        }
        let out = guard.finish();
        assert_eq!(out.ended.as_deref(), Some(planted.as_path()));
        assert_eq!(out.moved.len(), 1, "{:?}", out.moved);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The recorded files are sealed as soon as the guard starts (before the program
    /// can run), and get their modes back when it ends — also when it is dropped because
    /// the session never started.
    #[test]
    fn recorded_files_are_sealed_from_the_start_until_the_end() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let base = std::env::temp_dir().join(format!("sbx-guard-seal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        let config = ws.join(".git/config");
        std::fs::write(&config, "[core]\n").unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let config = ws.join(".git/config");
        let mode = || std::fs::metadata(&config).unwrap().mode() & 0o7777;
        let rules = || Rules {
            roots: vec![(ws.clone(), false)],
            missing: Vec::new(),
            before: crate::protect::planted::Snapshot::default(),
            links: Vec::new(),
            keep: base.join("keep"),
            recorded: record::record(&[(config.clone(), ws.clone())])
                .unwrap()
                .into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        let guard = Guard::start(rules()).unwrap();
        assert_eq!(mode(), 0o444);
        let out = guard.finish();
        assert_eq!(mode(), 0o644);
        assert!(out.restored.is_empty(), "{:?}", out.restored);
        drop(Guard::start(rules()).unwrap());
        assert_eq!(mode(), 0o644);
        let _ = std::fs::remove_dir_all(&base);
    }

    /// The guard on a real tree: what is planted while it runs is moved aside and kept;
    /// what was there at the start, and ordinary files, are left alone.
    #[test]
    fn planted_places_are_moved_aside_and_the_rest_is_left_alone() {
        let base = std::env::temp_dir().join(format!("sbx-guard-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let ws = base.join("ws");
        let keep = base.join("keep");
        std::fs::create_dir_all(ws.join("old/.git/hooks")).unwrap();
        std::fs::write(ws.join("old/.git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(ws.join("old/.git/config"), "[core]\n\tpager = less\n").unwrap();
        let ws = std::fs::canonicalize(&ws).unwrap();
        let found = crate::protect::repos::scan(&ws, false);
        let before = crate::protect::planted::snapshot(&found, Some(&ws), &[], &[&ws]);
        let rules = Rules {
            roots: vec![(ws.clone(), false)],
            missing: vec![ws.join(".mcp.json"), ws.join(".claude/settings.json")],
            before,
            links: Vec::new(),
            keep: keep.clone(),
            recorded: Vec::new().into(),
            ends_session: false,
            git_config_allow: Vec::new(),
            seal_journals: None,
        };
        let guard = Guard::start(rules).unwrap();
        // Whole, by a rename: a file made empty and then written may be moved aside (and
        // its copy kept) between the two.
        std::fs::write(ws.join("mcp.tmp"), "{}").unwrap();
        std::fs::rename(ws.join("mcp.tmp"), ws.join(".mcp.json")).unwrap();
        std::fs::create_dir_all(ws.join("new/deep/.git/hooks")).unwrap();
        std::fs::write(ws.join("new/deep/.git/hooks/post-merge"), "#!/bin/sh\n").unwrap();
        std::fs::write(ws.join("new/deep/.git/hooks/post-merge.sample"), "x").unwrap();
        std::fs::write(ws.join("new/deep/.git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::create_dir_all(ws.join("x")).unwrap();
        std::fs::write(ws.join("x/settings.json"), "{}").unwrap();
        std::fs::rename(ws.join("x"), ws.join(".claude")).unwrap();
        std::fs::write(ws.join("notes.txt"), "mine").unwrap();
        let out = guard.finish();
        let mut moved: Vec<String> = out
            .moved
            .iter()
            .map(|p| p.path.strip_prefix(&ws).unwrap().display().to_string())
            .collect();
        moved.sort();
        assert_eq!(
            moved,
            [
                ".claude/settings.json",
                ".mcp.json",
                "new/deep/.git/hooks/post-merge"
            ]
        );
        assert!(!out.incomplete);
        for left in [
            "old/.git/hooks/pre-commit",
            "old/.git/config",
            "new/deep/.git/config",
            "new/deep/.git/hooks/post-merge.sample",
            "notes.txt",
        ] {
            assert!(ws.join(left).exists(), "{left}");
        }
        let kept = keep.join(ws.strip_prefix("/").unwrap());
        assert_eq!(
            std::fs::read_to_string(kept.join(".mcp.json")).unwrap(),
            "{}"
        );
        assert!(kept.join("new/deep/.git/hooks/post-merge").is_file());
        let _ = std::fs::remove_dir_all(&base);
    }
}
