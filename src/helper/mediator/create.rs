//! The calls that make a name, done by the helper's guard on the program's behalf (Linux):
//! it makes the name unless `names::Names` refuses it (EACCES), so a protected path missing
//! at the start, a hook, a `.git` pointer file or a `commondir` never exists. With Landlock
//! alone the same listener also carries the calls Landlock cannot judge (`answer.rs`).
//!
//! One thread of the guard process, which is the program's ancestor (so it may read the
//! program's memory where Yama's `ptrace_scope` 1 allows ancestors only) and shares its
//! mount namespace and root (inside bwrap: the pid namespace's init), receives each call
//! the moment it is made (`notify`), reads what it names from the program's memory, takes
//! the program's working directory or descriptor (`threads`: kept per thread, opened
//! through `/proc/TID` when not), resolves the directory of the new name once (the kernel
//! follows symlinks there as for the program; its path is known without asking when no
//! symlink is on the way, `paths::join_plain`) and the last component by hand (a symlink
//! there is followed to its target, whose name is checked in turn), checks the name — and
//! that the program's own rules let it make a name there or open that object (`Reach`: the
//! thread has no effective capabilities, no_new_privs, but no Landlock domain, which would
//! keep it from the program's memory) — and makes it through the directory's descriptor,
//! never by a path read again; the umask is 0 and the program's is applied by hand. An
//! opened file is handed to the program (`SECCOMP_IOCTL_NOTIF_ADDFD`); a FIFO's open,
//! which waits for the other end, in a thread of its own (`waiting`).
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

use std::cell::RefCell;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::acting::{Acting, Op};
use super::handshake::Learned;
use super::notify::{errno, Answer, Call, Caller, Delivered, Listener, Reply};
use super::opening::Opened;
use super::replay::{Given, Replay};
use super::threads::Threads;
use super::{RootReads, Scope};
use crate::protect::names::Names;
use crate::sandbox::mediated::syscall_name;
use crate::sys::at::{open_path, Res, CWD};

/// Start the thread that answers the program's calls, in this process (the helper's
/// guard): it first takes the filter's listener from `channel` and checks, with the
/// program's side, that it can do its work (`handshake`). Every signal stays blocked in
/// it (they are the guard's main thread's).
pub fn start(
    channel: OwnedFd,
    names: Option<Names>,
    mediated: Option<Scope>,
    root_reads: Option<RootReads>,
    reach: super::Reach,
    net: super::NetRules,
    reports: Option<OwnedFd>,
) -> io::Result<()> {
    let names = names.unwrap_or_default();
    if let Some(fd) = reports {
        super::report::to(fd);
    }
    crate::sys::process::spawn_quiet("sbx-mediator", move || {
        let run = || -> io::Result<()> {
            // The program's side is told what went wrong, and stops: nothing runs.
            let (listener, learned) = super::handshake::accept(channel)?;
            let listener = Listener::new(listener)?;
            let guard = Guard::new(names, mediated, root_reads, reach, net, learned)?;
            serve(&listener, &guard)
        };
        if let Err(e) = run() {
            eprintln!("sbx-shell: the guard stopped answering the program's mediated calls: {e}");
        }
    })
}

/// What the guard's thread holds for the whole session.
struct Guard {
    names: Names,
    /// Landlock alone: the calls it cannot judge, and the session's own places.
    mediated: Option<Scope>,
    reach: super::Reach,
    /// The program's TCP rules (Landlock alone's connects, `connecting`).
    net: super::NetRules,
    learned: Learned,
    root: OwnedFd,
    /// The session's `/dev/shm` (Landlock alone), and its path.
    shm: Option<(OwnedFd, PathBuf)>,
    /// The carved directories' pools (Landlock alone).
    pool: super::pool::HeldPools,
    /// The guard's pid (the session's processes are its descendants).
    pid: u32,
    /// git's operation state that can run a program (`statefiles`).
    state: super::statefiles::StateFiles,
    /// Root's program where it stays host root: every read judged (`rootreads`).
    root_reads: Option<RootReads>,
}

impl Guard {
    fn new(
        names: Names,
        mediated: Option<Scope>,
        root_reads: Option<RootReads>,
        reach: super::Reach,
        net: super::NetRules,
        learned: Learned,
    ) -> io::Result<Guard> {
        confine_this_thread(root_reads.is_some())?;
        let root = open_path(CWD, c"/")?;
        let shm = match mediated.as_ref().and_then(|r| r.shm.clone()) {
            Some(dir) => Some((
                open_path(CWD, &CString::new(dir.as_os_str().as_bytes())?)?,
                dir,
            )),
            None => None,
        };
        let pool =
            super::pool::HeldPools::open(mediated.as_ref().map_or(&[][..], |m| &m.pools[..]));
        Ok(Guard {
            pool,
            names,
            mediated,
            reach,
            net,
            learned,
            root,
            shm,
            pid: std::process::id(),
            state: super::statefiles::StateFiles::new(
                std::env::var(crate::protect::gitstate::SESSION_VARIABLE).ok(),
            ),
            root_reads,
        })
    }
}

/// What a call is, for the guard.
enum CallKind {
    /// It makes a name, or opens for writing: done here (`Acting`).
    Making,
    /// It changes what the guard keeps of the thread (`threads`): noted, then let run.
    Umask,
    Chdir,
    Exec,
    /// A process ends: what it wrote in place of git's state is placed first (`statefiles`).
    Exit,
    /// Landlock alone's metadata and process calls (`answer`).
    Other,
}

fn kind(name: Option<&str>) -> CallKind {
    match name {
        Some("umask") => CallKind::Umask,
        Some("chdir" | "fchdir") => CallKind::Chdir,
        Some("execve" | "execveat") => CallKind::Exec,
        Some("exit_group") => CallKind::Exit,
        Some(
            "open" | "openat" | "creat" | "openat2" | "mkdir" | "mkdirat" | "mknod" | "mknodat"
            | "symlink" | "symlinkat" | "link" | "linkat" | "rename" | "renameat" | "renameat2"
            | "unlink" | "unlinkat" | "rmdir",
        ) => CallKind::Making,
        _ => CallKind::Other,
    }
}

/// Receive and answer each call, one at a time, in this one thread: a call that makes a
/// name or opens for writing is done here (`Acting`); any other (Landlock alone's metadata
/// and process calls, by `mediated`) is answered by `answer::answer`. One thread, so that
/// the program's call hands the CPU to it and back (`SYNC_WAKE_UP`) with no hop between
/// threads (a hop cost 55 µs of a refused `mkdir`'s 74, measured).
fn serve(listener: &Listener, guard: &Guard) -> io::Result<()> {
    let made = RefCell::new(Vec::new());
    let mut threads = Threads::default();
    let mut replay = Replay::new(guard.learned.killable);
    loop {
        let call = match listener.receive() {
            Ok(Some(call)) => call,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                guard.state.place_all();
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // Before anything the session does next (`statefiles`).
        if guard.state.waiting() {
            guard.state.place_all();
        }
        threads.noticed(call.pid);
        let reply = match replay.take(&call) {
            Some(Given::Value(v)) => Reply::Acted(v),
            Some(Given::Fd(fd, cloexec)) => Reply::Fd(fd, cloexec),
            // Nothing of the caller is read: what it wrote was placed above.
            None if matches!(kind(syscall_name(call.nr)), CallKind::Exit) => {
                threads.exited(call.pid);
                Reply::Answer(Answer::Continue)
            }
            None => match threads.caller(listener, &call) {
                Ok(()) => answer(listener, guard, &call, &mut threads, &made),
                // A call noted only goes on all the same (nothing of the caller is read).
                Err(_) if noted(&call) => Reply::Answer(Answer::Continue),
                Err(e) => {
                    super::report::unreadable(&call, &e);
                    Reply::Answer(Answer::Done(errno(&e)))
                }
            },
        };
        deliver(listener, &call, reply, &mut replay);
    }
}

/// Whether `call` is one the guard only notes and lets run (`CallKind::Umask`, `Chdir`, `Exec`).
fn noted(call: &Call) -> bool {
    matches!(
        kind(syscall_name(call.nr)),
        CallKind::Umask | CallKind::Chdir | CallKind::Exec | CallKind::Exit
    )
}

/// The reply to `call`, from a thread the guard knows (`Threads::caller`).
fn answer(
    listener: &Listener,
    guard: &Guard,
    call: &Call,
    threads: &mut Threads,
    made: &RefCell<Vec<(u64, u64)>>,
) -> Reply {
    let tid = call.pid;
    let name = syscall_name(call.nr);
    match kind(name) {
        CallKind::Umask => {
            threads.set_umask(tid, call.args[0] as u32);
            Reply::Answer(Answer::Continue)
        }
        CallKind::Chdir => {
            threads.chdir(tid);
            Reply::Answer(Answer::Continue)
        }
        CallKind::Exec => {
            threads.exec(tid);
            Reply::Answer(Answer::Continue)
        }
        CallKind::Exit => Reply::Answer(Answer::Continue),
        CallKind::Other => match &guard.mediated {
            Some(rules) => {
                let caller = Caller {
                    listener,
                    call,
                    copy_fds: guard.learned.copy_fds,
                    killable: guard.learned.killable,
                    net: guard.net,
                };
                super::answer::answer(&caller, threads, rules, guard.pid)
            }
            None if name == Some("connect") => {
                super::connecting::observe(threads, call);
                Reply::Answer(Answer::Continue)
            }
            None => Reply::Answer(Answer::Done(-i64::from(libc::EPERM))),
        },
        CallKind::Making => {
            let op = match threads.known(tid).map_err(|e| errno(&e)).and_then(|known| {
                let shm = guard.shm.is_some();
                super::reading::read_op(known, call, shm, guard.learned.copy_fds, name)
            }) {
                Ok(op) => op,
                Err(e) => return Reply::Answer(Answer::Done(e)),
            };
            act_for(listener, guard, call, threads, made, &op)
        }
    }
}

/// Do `op` for the caller, with its umask and working directory as it needs them.
fn act_for(
    listener: &Listener,
    guard: &Guard,
    call: &Call,
    threads: &mut Threads,
    made: &RefCell<Vec<(u64, u64)>>,
    op: &Op,
) -> Reply {
    let umask = if op.takes_umask() {
        threads.umask(call.pid)
    } else {
        0
    };
    let renamed;
    let reply = {
        let cwd = match op.uses_cwd() {
            true => match threads.cwd(listener, call) {
                Ok(cwd) => Some(cwd),
                Err(e) => return Reply::Answer(Answer::Done(errno(&e))),
            },
            false => None,
        };
        let acting = Acting {
            listener,
            names: &guard.names,
            reach: &guard.reach,
            pool: &guard.pool,
            made,
            state: &guard.state,
            umask,
            root: guard.root.as_fd(),
            shm: guard
                .shm
                .as_ref()
                .map(|(fd, path)| (fd.as_fd(), path.as_path())),
            cwd,
            call,
            guard: (guard.pid, nix::unistd::gettid().as_raw() as u32),
            renamed: RefCell::new(Vec::new()),
            root_reads: guard.root_reads.as_ref(),
        };
        let reply = act_and_report(&acting, op, guard.learned.killable);
        renamed = acting.renamed.take();
        reply
    };
    for old in &renamed {
        threads.renamed(old);
    }
    reply
}

/// Send `reply`; an act's outcome that reached nobody is kept for the call's restart
/// (`replay`: kernels before 5.19 only).
fn deliver(listener: &Listener, call: &Call, reply: Reply, replay: &mut Replay) {
    match reply {
        Reply::Answer(answer) => {
            listener.respond(call, answer);
        }
        Reply::Acted(value) => {
            if listener.respond(call, Answer::Done(value)) == Delivered::Gone {
                replay.keep(call, Given::Value(value));
            }
        }
        Reply::Fd(fd, cloexec) => match listener.send_fd(call.id, &fd, cloexec) {
            Ok(Delivered::Yes) => {}
            Ok(Delivered::Gone) => replay.keep(call, Given::Fd(fd, cloexec)),
            Err(e) => {
                listener.respond(call, Answer::Done(e));
            }
        },
    }
}

/// What the thread is allowed: no effective capabilities, no_new_privs, and no umask
/// (the program's is applied by hand; the umask is the guard process's, and nothing else
/// in it makes files). It has no Landlock domain of its own, so that it may read the
/// program's memory and act in one thread: where it may make names and open files is
/// checked against the program's rules (`Reach`) before it acts, and under bwrap the
/// mounts it shares with the program bound it as they bound the program.
fn confine_this_thread(root_reads: bool) -> io::Result<()> {
    nix::sys::stat::umask(nix::sys::stat::Mode::empty());
    match root_reads {
        // What it looks at as an ordinary user it looks at in no group, and it can switch
        // to that user and back and nothing more (`rootreads`).
        true => {
            crate::sys::at::clear_groups()?;
            super::notify::keep_only_id_switching()?;
        }
        false => super::notify::drop_effective_capabilities()?,
    }
    nix::sys::prctl::set_no_new_privs().map_err(io::Error::from)
}

/// Do what the call asks, as `acting` (its checks first), and the reply to send.
fn act(acting: &Acting<'_>, op: &Op, killable: bool) -> Reply {
    match op {
        Op::Open { at, flags, mode } => {
            let cloexec = flags & libc::O_CLOEXEC != 0;
            let judged = |opened: Opened| {
                let fd = match &opened {
                    Opened::Now(fd) | Opened::Waiting { object: fd, .. } => fd.as_fd(),
                };
                acting.check_root_read(fd, *flags).map(|()| opened)
            };
            match acting.open(at, *flags, *mode).and_then(judged) {
                Ok(Opened::Now(fd)) => Reply::Fd(fd, cloexec),
                Ok(Opened::Waiting { object, how }) => Reply::Answer(super::waiting::start(
                    acting.listener,
                    acting.call,
                    object,
                    how,
                    cloexec,
                    killable,
                )),
                Err(e) => Reply::Answer(Answer::Done(-i64::from(e))),
            }
        }
        Op::Mkdir { at, mode } => done(acting.mkdir(at, *mode)),
        Op::Mknod { at, mode, dev } => done(acting.mknod(at, *mode, *dev)),
        Op::Symlink { target, at } => done(acting.symlink(target, at)),
        Op::Link { old, new, flags } => done(acting.link(old, new, *flags)),
        Op::Rename { old, new, flags } => done(acting.rename(old, new, *flags)),
        Op::Remove { at, flags } => done(acting.remove(at, *flags)),
    }
}

/// `act`, and a refusal the kernel made reported: EROFS (a read-only mount), and EBUSY for
/// a directory removed or renamed (a mount point: what the sandbox holds in place under
/// bwrap); the guard's own refusals are reported where they are decided
/// (`acting::refuse`).
fn act_and_report(acting: &Acting<'_>, op: &Op, killable: bool) -> Reply {
    use crate::policy::report::Cause;
    let reply = act(acting, op, killable);
    if let Reply::Answer(Answer::Done(e)) = reply {
        let held = match op {
            Op::Remove { at, .. } | Op::Rename { old: at, .. } => Some(at),
            _ => None,
        };
        match held {
            Some(at) if e == -i64::from(libc::EBUSY) => report_at(acting, at, Cause::Held),
            _ if e == -i64::from(libc::EROFS) => report_read_only(acting, op),
            _ => {}
        }
    }
    reply
}

/// The kernel refused the act with EROFS (a read-only mount, under bwrap): reported with
/// the path the call named.
fn report_read_only(acting: &Acting<'_>, op: &Op) {
    let at = match op {
        Op::Open { at, .. } | Op::Mkdir { at, .. } | Op::Mknod { at, .. } => at,
        Op::Symlink { at, .. } => at,
        Op::Link { new, .. } | Op::Rename { new, .. } => new,
        Op::Remove { at, .. } => at,
    };
    report_at(acting, at, crate::policy::report::Cause::ReadOnly);
}

/// Report `cause` at the path `at` names, made absolute from where it started.
fn report_at(acting: &Acting<'_>, at: &super::acting::Where, cause: crate::policy::report::Cause) {
    let path = std::ffi::OsStr::from_bytes(&at.path);
    let path = if at.path.starts_with(b"/") {
        PathBuf::from(path)
    } else {
        let Ok(base) = acting.base(at) else {
            return;
        };
        let dir = match base.path {
            Some(dir) => dir,
            None => match crate::sys::at::fd_path(base.fd) {
                Ok(dir) => dir,
                Err(_) => return,
            },
        };
        dir.join(path)
    };
    super::report::refused(cause, &path);
}

/// The reply for an act's result: a value it gave, or the errno.
fn done(r: Res<i64>) -> Reply {
    match r {
        Ok(v) => Reply::Acted(v),
        Err(e) => Reply::Answer(Answer::Done(-i64::from(e))),
    }
}
