//! The calls that make a name, done by the helper's guard on the program's behalf (Linux):
//! it makes the name unless `names::Names` refuses it (EACCES), so a protected path missing
//! at the start, a hook, a `.git` pointer file or a `commondir` never exists. With Landlock
//! alone the same listener also carries the calls Landlock cannot judge (`linux::answer`).
//!
//! One thread of the guard process, which is the program's ancestor (so it may read the
//! program's memory where Yama's `ptrace_scope` 1 allows ancestors only) and shares its
//! mount namespace and root (inside bwrap: the pid namespace's init), receives each call,
//! reads what it names from the program's memory, opens the program's working directory
//! or descriptor (`/proc/PID/cwd`, `/proc/PID/fd/N`, O_PATH), resolves the directory of
//! the new name once (the kernel follows symlinks there as for the program) and the last
//! component by hand (a symlink there is followed to its target, whose name is checked in
//! turn), checks the name — and that the program's own rules let it make a name there or
//! open that object (`Reach`: the thread has no effective capabilities, no_new_privs, but
//! no Landlock domain, which would keep it from the program's memory) — and makes it
//! through the directory's descriptor, never by a path read again; the umask is 0 and the
//! program's is applied by hand. An opened file is handed to the program
//! (`SECCOMP_IOCTL_NOTIF_ADDFD`); a FIFO's open, which waits for the other end, in a
//! thread of its own.
//!
//! A check holds until the name is made: every name and every rename of the program is
//! made by this thread, one at a time, and every program's (another session's too) is judged by
//! these same rules wherever it lands, so no directory can be moved meanwhile to where a
//! name made in it would be refused. (What the host moves is the host's.)
//!
//! Nothing is ever let through as asked (`CONTINUE`): the kernel would read the path from
//! the program's memory again, which another of its threads can change after the check.
//! What the thread resolves through `/proc/self` is the guard's, not the program's: the
//! usual spellings of the program's own descriptors (`/dev/stdout`, `/dev/fd/N`,
//! `/proc/self/fd/N`) are recognised and opened as the program's.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use super::linux::{
    errno, notif_sizes, read_cstr, receive, respond, send_fd, still_waiting, sync_wake_up, Answer,
    Call,
};
use super::opens::{self, Missing};
use super::umasks::{self, Umasks};
use super::Rules;
use crate::policy::gitconfig::Kind;
use crate::protect::names::{self, GitPlace, Made, Names};
use crate::sandbox::mediated::syscall_name;

/// Start the thread that answers the program's calls, in this process (the helper's
/// guard): it first receives the filter's listener on `channel` (the program's side sends
/// it as soon as it installed the filter). Every signal stays blocked in it (they are the
/// guard's main thread's).
pub fn start(
    channel: OwnedFd,
    names: Option<Names>,
    mediated: Option<Rules>,
    reach: super::Reach,
) -> io::Result<()> {
    let names = names.unwrap_or_default();
    crate::sys::process::spawn_quiet("sbx-mediator", move || {
        let run = || -> io::Result<()> {
            let raw = crate::netproxy::handover::receive_fd(&channel)?;
            // SAFETY: receive_fd returned a descriptor that now belongs to us alone.
            let listener = unsafe { OwnedFd::from_raw_fd(raw) };
            serve(&listener, &names, mediated.as_ref(), &reach)
        };
        if let Err(e) = run() {
            eprintln!("sbx-shell: the guard stopped answering the program's mediated calls: {e}");
        }
    })
}

/// Where a path argument starts: the program's working directory or descriptor (opened by
/// `listen`), or the root for an absolute path; `path` empty names `base` itself.
struct Where {
    base: Option<OwnedFd>,
    path: Vec<u8>,
}

enum Op {
    Open { at: Where, flags: i32, mode: u32 },
    Mkdir { at: Where, mode: u32 },
    Mknod { at: Where, mode: u32, dev: u64 },
    Symlink { target: CString, at: Where },
    Link { old: Where, new: Where, flags: i32 },
    Rename { old: Where, new: Where, flags: u32 },
}

/// Receive and answer each call, one at a time, in this one thread: a call that makes a
/// name or opens for writing is done here (`Acting`); any other (Landlock alone's metadata
/// and process calls, by `mediated`) is answered by `linux::answer`. One thread, so that
/// the program's call hands the CPU to it and back (`sync_wake_up`) with no hop between
/// threads (a hop cost 55 µs of a refused `mkdir`'s 74, measured).
fn serve(
    listener: &OwnedFd,
    names: &Names,
    mediated: Option<&Rules>,
    reach: &super::Reach,
) -> io::Result<()> {
    confine_this_thread()?;
    let root = open_path(libc::AT_FDCWD, c"/")?;
    let shm = match mediated.and_then(|r| r.shm.as_deref()) {
        Some(dir) => Some(open_path(
            libc::AT_FDCWD,
            &CString::new(dir.as_os_str().as_bytes())?,
        )?),
        None => None,
    };
    let made = std::cell::RefCell::new(Vec::new());
    let umasks = std::cell::RefCell::new(Umasks::default());
    let sizes = notif_sizes()?;
    sync_wake_up(listener);
    let guard = std::process::id();
    let creating: Vec<i64> = crate::sandbox::mediated::creating()
        .iter()
        .filter_map(|m| crate::sandbox::mediated::number(m.syscall))
        .collect();
    loop {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, -1) } == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if pfd.revents & libc::POLLIN == 0 {
            // POLLHUP: no process of the filter is left.
            return Ok(());
        }
        let Some(call) = receive(listener, &sizes)? else {
            continue;
        };
        if syscall_name(call.nr) == Some("umask") {
            let read = || status_of(call.pid);
            umasks.borrow_mut().set(call.pid, call.args[0] as u32, read);
            respond(listener, &sizes, &call, Answer::Continue);
            continue;
        }
        if !creating.contains(&call.nr) {
            let answer = match mediated {
                Some(rules) => super::linux::answer(listener, &call, rules, guard),
                None => Answer::Done(-i64::from(libc::EPERM)),
            };
            respond(listener, &sizes, &call, answer);
            continue;
        }
        let answer = match read_op(listener, &call, shm.as_ref()) {
            Err(e) => Answer::Done(e),
            Ok(op) => Acting {
                listener,
                names,
                reach,
                made: &made,
                umasks: &umasks,
                root: root.as_fd(),
                call: &call,
            }
            .run(op),
        };
        respond(listener, &sizes, &call, answer);
    }
}

/// What `/proc/PID/status` says of thread `pid` (`None`: it is gone).
fn status_of(pid: u32) -> Option<umasks::Status> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    umasks::parse_status(&text)
}

/// What the call asks, read from its arguments and the program's memory; a name in
/// `/dev/shm` is taken in `shm`, the session's own directory for it (`mediator::shm_name`).
fn read_op(listener: &OwnedFd, call: &Call, shm: Option<&OwnedFd>) -> Result<Op, i64> {
    let a = call.args;
    let int = |i: usize| a[i] as u32 as i32;
    let err = |e: io::Error| errno(&e);
    let at = |dirfd: i32, path: u64| -> Result<Where, i64> {
        where_of(listener, call, (dirfd, path, false), shm).map_err(err)
    };
    let cwd = libc::AT_FDCWD;
    let cstr = |addr: u64| read_cstr(call.pid, addr).map_err(err);
    Ok(match syscall_name(call.nr) {
        Some("open") => Op::Open {
            at: at(cwd, a[0])?,
            flags: int(1),
            mode: a[2] as u32,
        },
        Some("openat") => Op::Open {
            at: at(int(0), a[1])?,
            flags: int(2),
            mode: a[3] as u32,
        },
        Some("creat") => Op::Open {
            at: at(cwd, a[0])?,
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            mode: a[1] as u32,
        },
        Some("mkdir") => Op::Mkdir {
            at: at(cwd, a[0])?,
            mode: a[1] as u32,
        },
        Some("mkdirat") => Op::Mkdir {
            at: at(int(0), a[1])?,
            mode: a[2] as u32,
        },
        Some("mknod") => Op::Mknod {
            at: at(cwd, a[0])?,
            mode: a[1] as u32,
            dev: a[2],
        },
        Some("mknodat") => Op::Mknod {
            at: at(int(0), a[1])?,
            mode: a[2] as u32,
            dev: a[3],
        },
        Some("symlink") => Op::Symlink {
            target: cstr(a[0])?,
            at: at(cwd, a[1])?,
        },
        Some("symlinkat") => Op::Symlink {
            target: cstr(a[0])?,
            at: at(int(1), a[2])?,
        },
        Some("link") => Op::Link {
            old: at(cwd, a[0])?,
            new: at(cwd, a[1])?,
            flags: 0,
        },
        Some("linkat") => Op::Link {
            old: where_of(
                listener,
                call,
                (int(0), a[1], int(4) & libc::AT_EMPTY_PATH != 0),
                shm,
            )
            .map_err(err)?,
            new: at(int(2), a[3])?,
            flags: int(4),
        },
        Some("rename") => Op::Rename {
            old: at(cwd, a[0])?,
            new: at(cwd, a[1])?,
            flags: 0,
        },
        Some("renameat") => Op::Rename {
            old: at(int(0), a[1])?,
            new: at(int(2), a[3])?,
            flags: 0,
        },
        Some("renameat2") => Op::Rename {
            old: at(int(0), a[1])?,
            new: at(int(2), a[3])?,
            flags: a[4] as u32,
        },
        // openat2 (and anything unexpected): as a kernel without it answers.
        _ => return Err(-i64::from(libc::ENOSYS)),
    })
}

/// The start of the path at `addr` relative to the program's descriptor `dirfd`: the
/// program's own descriptors under their usual spellings are opened here (as the program's,
/// not as the guard's `/proc/self`).
fn where_of(
    listener: &OwnedFd,
    call: &Call,
    (dirfd, addr, empty): (i32, u64, bool),
    shm: Option<&OwnedFd>,
) -> io::Result<Where> {
    let path = read_cstr(call.pid, addr)?.into_bytes();
    if let (Some(dir), Some(name)) = (shm, super::shm_name(&path)) {
        return Ok(Where {
            base: Some(dir.try_clone()?),
            path: name.to_vec(),
        });
    }
    if path.is_empty() && !empty {
        return Err(io::Error::from_raw_os_error(libc::ENOENT));
    }
    if let Some((fd, rest)) = own_descriptor(&path) {
        let base = open_proc(call, &format!("fd/{fd}"))?;
        let rest = rest.to_vec();
        return waiting(
            listener,
            call,
            Where {
                base: Some(base),
                path: rest,
            },
        );
    }
    if path.first() == Some(&b'/') {
        return Ok(Where { base: None, path });
    }
    let base = if dirfd == libc::AT_FDCWD {
        open_proc(call, "cwd")?
    } else {
        open_proc(call, &format!("fd/{}", dirfd))?
    };
    waiting(
        listener,
        call,
        Where {
            base: Some(base),
            path,
        },
    )
}

/// `at`, once the call still waits: the pid named it (it was not reused) when it was opened.
fn waiting(listener: &OwnedFd, call: &Call, at: Where) -> io::Result<Where> {
    if still_waiting(listener, call.id) {
        Ok(at)
    } else {
        Err(io::Error::from_raw_os_error(libc::ESRCH))
    }
}

/// `/proc/PID/<what>` of the calling thread, opened O_PATH (a magic link is followed to the
/// object itself).
fn open_proc(call: &Call, what: &str) -> io::Result<OwnedFd> {
    let path = CString::new(format!("/proc/{}/{what}", call.pid))?;
    // SAFETY: a NUL-terminated path; openat returns a new descriptor or -1.
    let fd = unsafe {
        libc::openat(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `/dev/stdin`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/N…`, `/proc/self/fd/N…`,
/// `/proc/thread-self/fd/N…`: the descriptor and what follows it.
fn own_descriptor(path: &[u8]) -> Option<(u32, &[u8])> {
    for (name, fd) in [
        (&b"/dev/stdin"[..], 0),
        (b"/dev/stdout", 1),
        (b"/dev/stderr", 2),
    ] {
        if path == name {
            return Some((fd, b""));
        }
    }
    let rest = [
        &b"/dev/fd/"[..],
        b"/proc/self/fd/",
        b"/proc/thread-self/fd/",
    ]
    .iter()
    .find_map(|prefix| path.strip_prefix(*prefix))?;
    let end = rest.iter().position(|b| *b == b'/').unwrap_or(rest.len());
    let fd = std::str::from_utf8(&rest[..end]).ok()?.parse().ok()?;
    let after = rest[end..].strip_prefix(b"/").unwrap_or(&rest[end..]);
    Some((fd, after))
}

/// What the thread is allowed: no effective capabilities, no_new_privs, and no umask
/// (the program's is applied by hand; the umask is the guard process's, and nothing else
/// in it makes files). It has no Landlock domain of its own, so that it may read the
/// program's memory and act in one thread: where it may make names and open files is
/// checked against the program's rules (`Reach`) before it acts, and under bwrap the
/// mounts it shares with the program bound it as they bound the program.
fn confine_this_thread() -> io::Result<()> {
    // SAFETY: umask only sets the process's mask.
    unsafe { libc::umask(0) };
    super::linux::drop_effective_capabilities()?;
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers; it applies to this thread.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

struct Acting<'a> {
    listener: &'a OwnedFd,
    names: &'a Names,
    reach: &'a super::Reach,
    /// The `.git` files made in this session, by `(st_dev, st_ino)`: git rewrites a new
    /// submodule's, which may be rewritten; one that existed at the start may not.
    made: &'a std::cell::RefCell<Vec<(u64, u64)>>,
    umasks: &'a std::cell::RefCell<Umasks>,
    root: BorrowedFd<'a>,
    call: &'a Call,
}

/// A directory (O_PATH) and a name in it.
struct Entry {
    dir: OwnedFd,
    name: CString,
}

/// At most this many symlinks are followed in the last component (as the kernel's 40).
const MAX_LINKS: usize = 40;

type Res<T> = Result<T, i32>;

fn last_errno() -> i32 {
    os_errno(&io::Error::last_os_error())
}

fn os_errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn done(r: Res<i64>) -> Answer {
    match r {
        Ok(v) => Answer::Done(v),
        Err(e) => Answer::Done(-i64::from(e)),
    }
}

impl Acting<'_> {
    fn run(&self, op: Op) -> Answer {
        match op {
            Op::Open { at, flags, mode } => match self.open(&at, flags, mode) {
                Ok(Opened::Now(fd)) => send_fd(
                    self.listener,
                    self.call.id,
                    &fd,
                    flags & libc::O_CLOEXEC != 0,
                ),
                Ok(Opened::Later) => Answer::Sent,
                Err(e) => Answer::Done(-i64::from(e)),
            },
            Op::Mkdir { at, mode } => done(self.mkdir(&at, mode)),
            Op::Mknod { at, mode, dev } => done(self.mknod(&at, mode, dev)),
            Op::Symlink { target, at } => done(self.symlink(&target, &at)),
            Op::Link { old, new, flags } => done(self.link(&old, &new, flags)),
            Op::Rename { old, new, flags } => done(self.rename(&old, &new, flags)),
        }
    }

    /// The directory of the path's last component, resolved by the kernel (symlinks
    /// followed, as for the program), and that component; `None` for a path that names
    /// its start itself (empty, `.`, `..`, `/`: no name is made there).
    fn entry(&self, base: BorrowedFd<'_>, path: &[u8]) -> Res<Option<Entry>> {
        let trimmed = {
            let mut p = path;
            while p.len() > 1 && p.ends_with(b"/") {
                p = &p[..p.len() - 1];
            }
            p
        };
        let (dir, name): (&[u8], &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
            Some(0) => (b"/", &trimmed[1..]),
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (b".", trimmed),
        };
        if name.is_empty() || name == b"." || name == b".." {
            return Ok(None);
        }
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

    fn base<'w>(&'w self, at: &'w Where) -> BorrowedFd<'w> {
        at.base.as_ref().map_or(self.root, |b| b.as_fd())
    }

    /// The entry a path names, which must not be its start itself (EEXIST: it exists).
    /// As the kernel answers, a name that exists is EEXIST before any question of whether
    /// it may be made there (`mkdir -p` of an existing directory in a read-only place).
    fn new_entry(&self, at: &Where) -> Res<Entry> {
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
    fn check(&self, e: &Entry, made: Made) -> Res<()> {
        let parent = fd_path(e.dir.as_fd()).map_err(|_| libc::EACCES)?;
        if !self.reach.may_make_in(&parent) {
            return Err(libc::EACCES);
        }
        let name = OsStr::from_bytes(e.name.as_bytes());
        let git = git_place(e.dir.as_fd(), &parent, name);
        if self.names.refused(&parent, name, made, git).is_some() {
            return Err(libc::EACCES);
        }
        let marker = names::GIT_MARKERS.iter().any(|m| name == *m);
        if marker
            && !is_git(e.dir.as_fd(), &parent)
            && completes_git(e.dir.as_fd(), name)
            && holds_plants(e.dir.as_fd(), self.names)
        {
            return Err(libc::EACCES);
        }
        // `HEAD` with `commondir` is a git directory too (a linked worktree's): outside
        // `worktrees/` of a git directory, neither completes the other.
        let has = |n: &CStr| fstatat(e.dir.as_fd(), n).is_ok();
        let pair = (name == "commondir" && has(c"HEAD")) || (name == "HEAD" && has(c"commondir"));
        if pair && !linked_worktree(e.dir.as_fd(), &parent) {
            return Err(libc::EACCES);
        }
        Ok(())
    }

    /// Refuse opening the existing entry `e` for writing where `names::refused_write` says.
    fn check_write(&self, e: &Entry, flags: i32) -> Res<()> {
        let name = OsStr::from_bytes(e.name.as_bytes());
        if !opens::writes(flags) {
            return Ok(());
        }
        let parent = fd_path(e.dir.as_fd()).map_err(|_| libc::EACCES)?;
        if !self.names.protected.is_empty() && self.names.guards(&parent.join(name)) {
            return Err(libc::EACCES);
        }
        if !names::write_judged(name) {
            return Ok(());
        }
        match names::refused_write(name, git_place(e.dir.as_fd(), &parent, name)) {
            // A `.git` file this session made (git writes a submodule's twice).
            Some(_) if name == ".git" && self.made_here(e) => Ok(()),
            Some(_) => Err(libc::EACCES),
            None => Ok(()),
        }
    }

    /// Refuse opening the existing entry `e` with `flags` where the program's own rules
    /// would not let it (`Reach`) — before anything is opened: an open may truncate.
    fn check_reach(&self, e: &Entry, flags: i32) -> Res<()> {
        if self.reach.rules.is_none() {
            return Ok(());
        }
        let dir = fd_path(e.dir.as_fd()).map_err(|_| libc::EACCES)?;
        match self
            .reach
            .may_open(&dir.join(OsStr::from_bytes(e.name.as_bytes())), flags)
        {
            true => Ok(()),
            false => Err(libc::EACCES),
        }
    }

    /// Whether the file `e` names was made in this session by this guard (`made`).
    fn made_here(&self, e: &Entry) -> bool {
        fstatat(e.dir.as_fd(), &e.name)
            .is_ok_and(|st| self.made.borrow().contains(&(st.st_dev, st.st_ino)))
    }

    /// The program's umask (`umasks`: read once per thread, then followed through its
    /// `umask()` calls).
    fn umask(&self) -> u32 {
        let pid = self.call.pid;
        self.umasks.borrow_mut().of(pid, || status_of(pid))
    }

    fn open(&self, at: &Where, flags: i32, mode: u32) -> Res<Opened> {
        let base = self.base(at);
        if at.path.is_empty() {
            // The program's own descriptor (`/dev/stdout`): opened again, as the kernel
            // opens such a link.
            return self.reopen(base, flags);
        }
        if at.path.ends_with(b"/") {
            return Err(libc::EISDIR);
        }
        let Some(mut e) = self.entry(base, &at.path)? else {
            let dir = open_path(
                base.as_raw_fd(),
                &CString::new(at.path.clone()).map_err(|_| libc::EINVAL)?,
            )
            .map_err(|e| os_errno(&e))?;
            return self.reopen(dir.as_fd(), flags);
        };
        // O_EXCL means something only with O_CREAT (for a file, not a block device).
        let excl = opens::existing(flags).is_err();
        let mut links = 0;
        loop {
            match fstatat(e.dir.as_fd(), &e.name) {
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                    if excl {
                        return Err(libc::EEXIST);
                    }
                    if flags & libc::O_NOFOLLOW != 0 {
                        return Err(libc::ELOOP);
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(libc::ELOOP);
                    }
                    if is_proc(e.dir.as_fd()) {
                        // A magic link (`/proc/PID/fd/N`): the kernel jumps to the object.
                        let object =
                            open_path(e.dir.as_raw_fd(), &e.name).map_err(|e| os_errno(&e))?;
                        return self.reopen(object.as_fd(), flags);
                    }
                    let target = readlink(e.dir.as_fd(), &e.name)?;
                    match self.entry(e.dir.as_fd(), &target)? {
                        Some(next) => e = next,
                        None => {
                            let start = if target.first() == Some(&b'/') {
                                self.root
                            } else {
                                e.dir.as_fd()
                            };
                            let dir = open_path(
                                start.as_raw_fd(),
                                &CString::new(target).map_err(|_| libc::EINVAL)?,
                            )
                            .map_err(|e| os_errno(&e))?;
                            return self.reopen(dir.as_fd(), flags);
                        }
                    }
                }
                Ok(_) if excl => return Err(libc::EEXIST),
                Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFIFO => {
                    let how = opens::existing(flags)?;
                    return self.open_fifo(
                        (e.dir, e.name),
                        how,
                        flags & libc::O_CLOEXEC != 0,
                        None,
                    );
                }
                Ok(st) => {
                    self.check_reach(&e, flags)?;
                    self.check_write(&e, flags)?;
                    // Before the open, which may truncate; again on what was opened.
                    self.check_identity(&st, flags)?;
                    let how = opens::existing(flags)?;
                    match openat(e.dir.as_fd(), &e.name, how, 0) {
                        // Replaced or removed since the look: look again.
                        Err(libc::ENOENT) | Err(libc::ELOOP) => continue,
                        Err(err) => return Err(err),
                        Ok(fd) => return self.check_object(fd, flags).map(Opened::Now),
                    }
                }
                Err(libc::ENOENT) => {
                    // Without O_CREAT nothing is made (ENOENT), before any look at the name.
                    let (how, mode) = match opens::missing(flags, mode, || self.umask()) {
                        Missing::Create { flags, mode } => (flags, mode),
                        Missing::Fail(e) => return Err(e),
                    };
                    self.check(&e, Made::File)?;
                    match openat(e.dir.as_fd(), &e.name, how, mode) {
                        // Made meanwhile by someone else: open it as it is now.
                        Err(libc::EEXIST) if !excl => continue,
                        Err(err) => return Err(err),
                        Ok(fd) => {
                            if e.name.as_bytes() == b".git" {
                                let st = fstat(fd.as_fd())?;
                                self.made.borrow_mut().push((st.st_dev, st.st_ino));
                            }
                            return Ok(Opened::Now(fd));
                        }
                    }
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Open an object the program reaches through a link or its own descriptor: again,
    /// through this process's `/proc/self/fd` (its checks are the program's: Landlock
    /// checks the object's path on open). O_CREAT and O_EXCL make nothing here.
    fn reopen(&self, object: BorrowedFd<'_>, flags: i32) -> Res<Opened> {
        opens::existing(flags)?;
        let how = (flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW)) | libc::O_CLOEXEC;
        let object = object.try_clone_to_owned().map_err(|e| os_errno(&e))?;
        if self.reach.rules.is_some() {
            // Before it is opened again (an open may truncate).
            let at = fd_path(object.as_fd()).map_err(|_| libc::EACCES)?;
            if !self.reach.may_open(&at, flags) {
                return Err(libc::EACCES);
            }
        }
        self.check_identity(&fstat(object.as_fd())?, flags)?;
        if opens::writes(flags) {
            // A config reached through a descriptor's link: judged by where it is.
            let at = fd_path(object.as_fd()).map_err(|_| libc::EACCES)?;
            // (A pipe's or socket's link names no directory.)
            let dir = at.parent().filter(|d| d.is_absolute());
            if let (Some(dir), Some(name)) = (dir, at.file_name()) {
                if names::write_judged(name) {
                    let dir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
                    let dir = open_path(libc::AT_FDCWD, &dir).map_err(|_| libc::EACCES)?;
                    let e = Entry {
                        dir,
                        name: CString::new(name.as_bytes()).map_err(|_| libc::EINVAL)?,
                    };
                    self.check_write(&e, flags)?;
                }
            }
        }
        let magic = CString::new(object.as_raw_fd().to_string()).map_err(|_| libc::EINVAL)?;
        let fds = open_path(libc::AT_FDCWD, c"/proc/self/fd").map_err(|e| os_errno(&e))?;
        if fstat(object.as_fd())?.st_mode & libc::S_IFMT == libc::S_IFIFO {
            let cloexec = flags & libc::O_CLOEXEC != 0;
            return self.open_fifo((fds, magic), how, cloexec, Some(object));
        }
        let fd = openat(fds.as_fd(), &magic, how, 0)?;
        self.check_object(fd, flags).map(Opened::Now)
    }

    /// An opened file, unless the open writes and reached a protected file under another
    /// of its names (`Names::objects`): judged on what was opened, not on a look before.
    fn check_object(&self, fd: OwnedFd, flags: i32) -> Res<OwnedFd> {
        self.check_identity(&fstat(fd.as_fd())?, flags)?;
        Ok(fd)
    }

    /// Refuse an open that writes the file `st` describes when it is a protected file
    /// reached under another of its names (`Names::objects`).
    fn check_identity(&self, st: &libc::stat, flags: i32) -> Res<()> {
        if opens::writes(flags)
            && st.st_nlink > 1
            && self.names.is_protected_object(st.st_dev, st.st_ino)
        {
            return Err(libc::EACCES);
        }
        Ok(())
    }

    /// A FIFO's open waits for the other end: done in a thread of its own (with this one's
    /// credentials), which answers when it returns; what it opens is judged here first.
    /// `keep`: what must stay open until then.
    fn open_fifo(
        &self,
        (dir, name): (OwnedFd, CString),
        how: i32,
        cloexec: bool,
        keep: Option<OwnedFd>,
    ) -> Res<Opened> {
        if self.reach.rules.is_some() {
            let at = fd_path(dir.as_fd()).map_err(|_| libc::EACCES)?;
            let at = match keep {
                // Reached through the program's descriptor: the object's own path.
                Some(ref object) => fd_path(object.as_fd()).map_err(|_| libc::EACCES)?,
                None => at.join(OsStr::from_bytes(name.as_bytes())),
            };
            if !self.reach.may_open(&at, how) {
                return Err(libc::EACCES);
            }
        }
        let listener = self.listener.try_clone().map_err(|e| os_errno(&e))?;
        let id = self.call.id;
        let answer = move || {
            let _keep = keep;
            let answer = match openat(dir.as_fd(), &name, how, 0) {
                Ok(fd) => send_fd(&listener, id, &fd, cloexec),
                Err(e) => Answer::Done(-i64::from(e)),
            };
            if let Ok(sizes) = notif_sizes() {
                let call = Call {
                    id,
                    pid: 0,
                    nr: 0,
                    args: [0; 6],
                };
                respond(&listener, &sizes, &call, answer);
            }
        };
        std::thread::Builder::new()
            .name("sbx-names-fifo".into())
            .spawn(answer)
            .map_err(|e| os_errno(&e))?;
        Ok(Opened::Later)
    }

    fn mkdir(&self, at: &Where, mode: u32) -> Res<i64> {
        let e = self.new_entry(at)?;
        self.check(&e, Made::Dir)?;
        // SAFETY: our directory descriptor and a NUL-terminated name.
        if unsafe {
            libc::mkdirat(
                e.dir.as_raw_fd(),
                e.name.as_ptr(),
                mode & !self.umask() & 0o7777,
            )
        } == -1
        {
            return Err(last_errno());
        }
        Ok(0)
    }

    fn mknod(&self, at: &Where, mode: u32, dev: u64) -> Res<i64> {
        let e = self.new_entry(at)?;
        self.check(&e, Made::Other)?;
        let perm = mode & 0o7777 & !self.umask();
        // SAFETY: our directory descriptor and a NUL-terminated name.
        if unsafe {
            libc::mknodat(
                e.dir.as_raw_fd(),
                e.name.as_ptr(),
                (mode & libc::S_IFMT) | perm,
                dev,
            )
        } == -1
        {
            return Err(last_errno());
        }
        Ok(0)
    }

    fn symlink(&self, target: &CStr, at: &Where) -> Res<i64> {
        let e = self.new_entry(at)?;
        self.check(&e, Made::Other)?;
        // SAFETY: a NUL-terminated target, our directory descriptor and a name.
        if unsafe { libc::symlinkat(target.as_ptr(), e.dir.as_raw_fd(), e.name.as_ptr()) } == -1 {
            return Err(last_errno());
        }
        Ok(0)
    }

    fn link(&self, old: &Where, new: &Where, flags: i32) -> Res<i64> {
        if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
            return Err(libc::EINVAL);
        }
        let to = self.new_entry(new)?;
        self.check(&to, Made::Other)?;
        let rc = if old.path.is_empty() {
            // The object itself: the program's descriptor with AT_EMPTY_PATH, or its own
            // descriptor's magic link followed (`/proc/self/fd/N`, AT_SYMLINK_FOLLOW).
            // Without either, the kernel would link the /proc symlink: another file system.
            if flags & (libc::AT_EMPTY_PATH | libc::AT_SYMLINK_FOLLOW) == 0 {
                return Err(libc::EXDEV);
            }
            // The program's descriptor itself (an O_TMPFILE file given a name): linked
            // through its magic link, as an unprivileged caller does.
            let base = self.base(old);
            self.check_link_source(base)?;
            let magic = CString::new(format!("/proc/self/fd/{}", base.as_raw_fd()))
                .map_err(|_| libc::EINVAL)?;
            // SAFETY: NUL-terminated paths and our descriptors.
            unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    magic.as_ptr(),
                    to.dir.as_raw_fd(),
                    to.name.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            }
        } else {
            let from = self.entry(self.base(old), &old.path)?.ok_or(libc::EPERM)?;
            // The object linked is opened and judged, then linked through that descriptor
            // (nothing is looked up by name again): a second name of a protected file
            // would let it be written through that name.
            let nofollow = if flags & libc::AT_SYMLINK_FOLLOW != 0 {
                0
            } else {
                libc::O_NOFOLLOW
            };
            let object = openat(
                from.dir.as_fd(),
                &from.name,
                libc::O_PATH | libc::O_CLOEXEC | nofollow,
                0,
            )?;
            self.check_link_source(object.as_fd())?;
            let magic = CString::new(format!("/proc/self/fd/{}", object.as_raw_fd()))
                .map_err(|_| libc::EINVAL)?;
            // SAFETY: NUL-terminated paths and our descriptors.
            unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    magic.as_ptr(),
                    to.dir.as_raw_fd(),
                    to.name.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            }
        };
        if rc == -1 {
            return Err(last_errno());
        }
        Ok(0)
    }

    /// Refuse a new name for `object`: a protected path, a protected file
    /// (`Names::objects`), a git directory's config, or one outside where the program may
    /// make names.
    fn check_link_source(&self, object: BorrowedFd<'_>) -> Res<()> {
        let st = fstat(object)?;
        // Where the object itself lies (reached through a symlink or the program's
        // descriptor, it may be anywhere): a new name for it needs the right to make and
        // rename names there (Landlock's refer), as for the program.
        let at = fd_path(object).map_err(|_| libc::EACCES)?;
        let Some(dir) = at.parent().filter(|d| d.is_absolute()) else {
            return Err(libc::EACCES);
        };
        if !self.reach.may_make_in(dir) {
            return Err(libc::EACCES);
        }
        let config = at.file_name().is_some_and(names::is_config)
            && CString::new(dir.as_os_str().as_bytes())
                .ok()
                .and_then(|d| open_path(libc::AT_FDCWD, &d).ok())
                .is_some_and(|d| is_git(d.as_fd(), dir));
        if config
            || self.names.is_protected_object(st.st_dev, st.st_ino)
            || self.names.protected.iter().any(|p| at.starts_with(p))
        {
            return Err(libc::EACCES);
        }
        Ok(())
    }

    fn rename(&self, old: &Where, new: &Where, flags: u32) -> Res<i64> {
        let from = self.entry(self.base(old), &old.path)?.ok_or(libc::EBUSY)?;
        let to = self.entry(self.base(new), &new.path)?.ok_or(libc::EBUSY)?;
        let made = |e: &Entry| match fstatat(e.dir.as_fd(), &e.name) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFDIR => Made::MovedDir,
            _ => Made::Other,
        };
        let moved = made(&from);
        let source = fd_path(from.dir.as_fd()).map_err(|_| libc::EACCES)?;
        if !self.reach.may_make_in(&source)
            || self
                .names
                .pinned(&source.join(OsStr::from_bytes(from.name.as_bytes())))
        {
            return Err(libc::EACCES);
        }
        // git never renames a config away (only `config.lock` over it).
        let from_name = OsStr::from_bytes(from.name.as_bytes());
        if names::is_config(from_name) {
            let parent = fd_path(from.dir.as_fd()).map_err(|_| libc::EACCES)?;
            if let GitPlace::GitDir { .. } = git_place(from.dir.as_fd(), &parent, from_name) {
                return Err(libc::EACCES);
            }
        }
        let to_name = OsStr::from_bytes(to.name.as_bytes());
        if (names::is_config(to_name) || to_name == ".gitmodules")
            && flags == 0
            && moved == Made::Other
        {
            let parent = fd_path(to.dir.as_fd()).map_err(|_| libc::EACCES)?;
            match git_place(to.dir.as_fd(), &parent, to_name) {
                GitPlace::GitDir { .. } => return self.config_rename(Kind::Config, &from, &to),
                GitPlace::WorkTree => return self.config_rename(Kind::Gitmodules, &from, &to),
                _ => {}
            }
        }
        self.check(&to, moved)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let back = made(&to);
        if exchange {
            self.check(&from, back)?;
        }
        // SAFETY: our descriptors and NUL-terminated names.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                from.dir.as_raw_fd(),
                from.name.as_ptr(),
                to.dir.as_raw_fd(),
                to.name.as_ptr(),
                flags,
            )
        };
        if rc == -1 {
            return Err(last_errno());
        }
        Ok(0)
    }
}

impl Acting<'_> {
    /// git's way of writing a config (`config.lock` renamed over `config`): the new
    /// content is read once, checked (`names::config_rename`), written into a file of the
    /// guard's own, and that file renamed into place; the program's is removed. What the
    /// program does to its file afterwards (it may still hold it open) reaches nothing.
    fn config_rename(&self, kind: Kind, from: &Entry, to: &Entry) -> Res<i64> {
        use std::hash::BuildHasher;
        use std::io::Read;
        const LIMIT: u64 = 16 << 20;
        let how = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let source = openat(from.dir.as_fd(), &from.name, how, 0)?;
        let st = fstat(source.as_fd())?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_size as u64 > LIMIT {
            return Err(libc::EACCES);
        }
        let mut text = Vec::new();
        std::fs::File::from(source)
            .take(LIMIT)
            .read_to_end(&mut text)
            .map_err(|_| libc::EACCES)?;
        if let Some(why) = self.names.config_rename(kind, &text) {
            // Said where the program's own error appears (its terminal), once per refusal.
            let at = fd_path(to.dir.as_fd()).unwrap_or_default();
            eprintln!(
                "sbx-shell: refused {why} in {}: keys that ordinary git work does not write can make the host's git run code\nHint: to allow one, run with --allow-git-config KEY (or \"git\": {{\"allow_config\": [\"KEY\"]}} in the config)",
                at.join(OsStr::from_bytes(to.name.as_bytes())).display()
            );
            return Err(libc::EACCES);
        }
        let temp = CString::new(format!(
            ".sbx-shell-config.{:016x}",
            std::collections::hash_map::RandomState::new().hash_one(self.call.id)
        ))
        .map_err(|_| libc::EINVAL)?;
        let how =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let file = openat(to.dir.as_fd(), &temp, how, st.st_mode & 0o7777)?;
        let written = std::io::Write::write_all(&mut std::fs::File::from(file), &text);
        let placed = written.is_ok()
            // SAFETY: our directory descriptor and NUL-terminated names.
            && unsafe {
                libc::renameat(to.dir.as_raw_fd(), temp.as_ptr(), to.dir.as_raw_fd(), to.name.as_ptr())
            } == 0;
        if !placed {
            let e = last_errno();
            // SAFETY: our directory descriptor and a NUL-terminated name.
            unsafe { libc::unlinkat(to.dir.as_raw_fd(), temp.as_ptr(), 0) };
            return Err(e);
        }
        // SAFETY: our directory descriptor and a NUL-terminated name.
        unsafe { libc::unlinkat(from.dir.as_raw_fd(), from.name.as_ptr(), 0) };
        Ok(0)
    }
}

/// Whether making `name` (one of `names::GIT_MARKERS`) in `dir` gives it all three.
fn completes_git(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    names::GIT_MARKERS
        .iter()
        .filter(|m| name != **m)
        .all(|m| CString::new(*m).is_ok_and(|m| fstatat(dir, &m).is_ok()))
}

/// Whether `dir` holds what a git directory may not: a config with a key git work does
/// not write (`Names::config_rename`), a `commondir`, or a hook other than a `*.sample`.
fn holds_plants(dir: BorrowedFd<'_>, names: &Names) -> bool {
    use std::io::Read;
    let read = |name: &CStr| {
        let how = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = openat(dir, name, how, 0).ok()?;
        let mut text = Vec::new();
        std::fs::File::from(fd)
            .take(16 << 20)
            .read_to_end(&mut text)
            .ok()?;
        Some(text)
    };
    let exists = |name: &CStr| fstatat(dir, name).is_ok();
    let config = [c"config", c"config.worktree"].iter().any(|n| {
        exists(n) && read(n).is_none_or(|t| names.config_rename(Kind::Config, &t).is_some())
    });
    let how = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    let hooks = openat(dir, c"hooks", how, 0)
        .ok()
        .and_then(|fd| std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok())
        .is_some_and(|mut entries| {
            entries
                .any(|e| e.is_ok_and(|e| !e.file_name().as_encoded_bytes().ends_with(b".sample")))
        });
    config || hooks || exists(c"commondir")
}

enum Opened {
    Now(OwnedFd),
    /// Answered by a thread of its own (a FIFO).
    Later,
}

fn open_path(dirfd: RawFd, path: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; openat returns a new descriptor or -1.
    let fd = unsafe { libc::openat(dirfd, path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> Res<OwnedFd> {
    // SAFETY: our directory descriptor and a NUL-terminated name; a new descriptor or -1.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: a new descriptor of ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstatat(dir: BorrowedFd<'_>, name: &CStr) -> Res<libc::stat> {
    // SAFETY: struct stat is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our descriptor, a NUL-terminated name, one struct stat written.
    if unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    } == -1
    {
        return Err(last_errno());
    }
    Ok(st)
}

fn fstat(fd: BorrowedFd<'_>) -> Res<libc::stat> {
    // SAFETY: struct stat is plain data; all zeroes is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: our descriptor (fstat works on O_PATH ones), one struct stat written.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } == -1 {
        return Err(last_errno());
    }
    Ok(st)
}

fn readlink(dir: BorrowedFd<'_>, name: &CStr) -> Res<Vec<u8>> {
    nix::fcntl::readlinkat(dir, OsStr::from_bytes(name.to_bytes()))
        .map(|t| t.into_vec())
        .map_err(|e| e as i32)
}

/// Whether the directory is on a procfs (its symlinks are magic links).
fn is_proc(dir: BorrowedFd<'_>) -> bool {
    nix::sys::statfs::fstatfs(dir)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC)
}

/// The path of a descriptor's object as the kernel names it.
fn fd_path(fd: BorrowedFd<'_>) -> io::Result<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// What the directory `dir` (at `path`) is among git's, as far as it matters for the name
/// `name` made in it (the rules look at few names: the rest costs no look).
fn git_place(dir: BorrowedFd<'_>, path: &std::path::Path, name: &OsStr) -> GitPlace {
    let file = |p: &std::path::Path| {
        p.file_name()
            .map(OsStr::as_encoded_bytes)
            .unwrap_or_default()
            .to_vec()
    };
    let up = |fd: BorrowedFd<'_>| open_path(fd.as_raw_fd(), c"..").ok();
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
    if name == ".gitmodules" {
        // Beside a `.git`: a work tree's, which git reads in every clone.
        return match fstatat(dir, c".git") {
            Ok(_) => GitPlace::WorkTree,
            Err(_) => GitPlace::Plain,
        };
    }
    match (file(path).as_slice(), name.as_encoded_bytes()) {
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
fn linked_worktree(dir: BorrowedFd<'_>, path: &std::path::Path) -> bool {
    let Some(worktrees) = path.parent() else {
        return false;
    };
    let git = worktrees.parent().unwrap_or(worktrees);
    worktrees.file_name() == Some(OsStr::new("worktrees"))
        && open_path(dir.as_raw_fd(), c"../..").is_ok_and(|g| is_git(g.as_fd(), git))
}

/// A git directory: named `.git`, or holding `HEAD` and either `objects` and `refs` or
/// `commondir` (a linked worktree's, under `worktrees/`).
fn is_git(dir: BorrowedFd<'_>, path: &std::path::Path) -> bool {
    let has = |n: &CStr| fstatat(dir, n).is_ok();
    path.file_name() == Some(OsStr::new(".git"))
        || (has(c"HEAD") && ((has(c"objects") && has(c"refs")) || has(c"commondir")))
}
