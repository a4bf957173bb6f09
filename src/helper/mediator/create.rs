//! The calls that make a name, done by the helper's guard on the program's behalf (Linux):
//! it makes the name unless `names::Names` refuses it (EACCES), so a protected path missing
//! at the start, a hook, a `.git` pointer file or a `commondir` never exists. With Landlock
//! alone the same listener also carries the calls Landlock cannot judge (`answer.rs`).
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

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use super::acting::{status_of, Acting, Op, Where};
use super::at::{open_path, Res};
use super::notify::{
    errno, notif_sizes, read_cstr, receive, respond, send_fd, still_waiting, sync_wake_up, Answer,
    Call,
};
use super::opening::Opened;
use super::paths::{start_of, Start};
use super::umasks::Umasks;
use super::Scope;
use crate::protect::names::Names;
use crate::sandbox::mediated::syscall_name;

/// Start the thread that answers the program's calls, in this process (the helper's
/// guard): it first receives the filter's listener on `channel` (the program's side sends
/// it as soon as it installed the filter). Every signal stays blocked in it (they are the
/// guard's main thread's).
pub fn start(
    channel: OwnedFd,
    names: Option<Names>,
    mediated: Option<Scope>,
    (reach, reports): (super::Reach, Option<OwnedFd>),
) -> io::Result<()> {
    let names = names.unwrap_or_default();
    if let Some(fd) = reports {
        super::report::to(fd);
    }
    crate::sys::process::spawn_quiet("sbx-mediator", move || {
        let run = || -> io::Result<()> {
            let raw = crate::sys::fdpass::receive_fd(&channel)?;
            // SAFETY: receive_fd returned a descriptor that now belongs to us alone.
            let listener = unsafe { OwnedFd::from_raw_fd(raw) };
            serve(&listener, &names, mediated.as_ref(), &reach)
        };
        if let Err(e) = run() {
            eprintln!("sbx-shell: the guard stopped answering the program's mediated calls: {e}");
        }
    })
}

/// Receive and answer each call, one at a time, in this one thread: a call that makes a
/// name or opens for writing is done here (`Acting`); any other (Landlock alone's metadata
/// and process calls, by `mediated`) is answered by `answer::answer`. One thread, so that
/// the program's call hands the CPU to it and back (`sync_wake_up`) with no hop between
/// threads (a hop cost 55 µs of a refused `mkdir`'s 74, measured).
fn serve(
    listener: &OwnedFd,
    names: &Names,
    mediated: Option<&Scope>,
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
                Some(rules) => super::answer::answer(listener, &call, rules, guard),
                None => Answer::Done(-i64::from(libc::EPERM)),
            };
            respond(listener, &sizes, &call, answer);
            continue;
        }
        let answer = match read_op(listener, &call, shm.as_ref()) {
            Err(e) => Answer::Done(e),
            Ok(op) => {
                let acting = Acting {
                    listener,
                    names,
                    reach,
                    made: &made,
                    umasks: &umasks,
                    root: root.as_fd(),
                    call: &call,
                };
                act_and_report(&acting, &op)
            }
        };
        respond(listener, &sizes, &call, answer);
    }
}

/// What the call asks, read from its arguments and the program's memory; a name in
/// `/dev/shm` is taken in `shm`, the session's own directory for it (`mediator::shm_name`).
fn read_op(listener: &OwnedFd, call: &Call, shm: Option<&OwnedFd>) -> Result<Op, i64> {
    let args = Args {
        listener,
        call,
        shm,
    };
    match syscall_name(call.nr) {
        Some(name @ ("open" | "openat" | "creat" | "mkdir" | "mkdirat" | "mknod" | "mknodat")) => {
            read_make(&args, name)
        }
        Some(name) => read_link(&args, name),
        // (anything unexpected): as a kernel without it answers.
        None => Err(-i64::from(libc::ENOSYS)),
    }
}

/// An open, `mkdir` or `mknod`: the name it makes, or opens.
fn read_make(args: &Args<'_>, name: &str) -> Result<Op, i64> {
    let (a, cwd) = (args.call.args, libc::AT_FDCWD);
    Ok(match name {
        "open" => Op::Open {
            at: args.at(cwd, a[0])?,
            flags: args.int(1),
            mode: a[2] as u32,
        },
        "openat" => Op::Open {
            at: args.at(args.int(0), a[1])?,
            flags: args.int(2),
            mode: a[3] as u32,
        },
        "creat" => Op::Open {
            at: args.at(cwd, a[0])?,
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            mode: a[1] as u32,
        },
        "mkdir" => Op::Mkdir {
            at: args.at(cwd, a[0])?,
            mode: a[1] as u32,
        },
        "mkdirat" => Op::Mkdir {
            at: args.at(args.int(0), a[1])?,
            mode: a[2] as u32,
        },
        "mknod" => Op::Mknod {
            at: args.at(cwd, a[0])?,
            mode: a[1] as u32,
            dev: a[2],
        },
        "mknodat" => Op::Mknod {
            at: args.at(args.int(0), a[1])?,
            mode: a[2] as u32,
            dev: a[3],
        },
        _ => return Err(-i64::from(libc::ENOSYS)),
    })
}

/// A `symlink`, `link` or `rename`: the names it makes (and takes).
fn read_link(args: &Args<'_>, name: &str) -> Result<Op, i64> {
    let (a, cwd) = (args.call.args, libc::AT_FDCWD);
    Ok(match name {
        "symlink" => Op::Symlink {
            target: args.cstr(a[0])?,
            at: args.at(cwd, a[1])?,
        },
        "symlinkat" => Op::Symlink {
            target: args.cstr(a[0])?,
            at: args.at(args.int(1), a[2])?,
        },
        "link" => Op::Link {
            old: args.at(cwd, a[0])?,
            new: args.at(cwd, a[1])?,
            flags: 0,
        },
        "linkat" => Op::Link {
            old: args.at_or_empty(args.int(0), a[1], args.int(4) & libc::AT_EMPTY_PATH != 0)?,
            new: args.at(args.int(2), a[3])?,
            flags: args.int(4),
        },
        "rename" => Op::Rename {
            old: args.at(cwd, a[0])?,
            new: args.at(cwd, a[1])?,
            flags: 0,
        },
        "renameat" => Op::Rename {
            old: args.at(args.int(0), a[1])?,
            new: args.at(args.int(2), a[3])?,
            flags: 0,
        },
        "renameat2" => Op::Rename {
            old: args.at(args.int(0), a[1])?,
            new: args.at(args.int(2), a[3])?,
            flags: a[4] as u32,
        },
        // openat2 (and anything unexpected): as a kernel without it answers.
        _ => return Err(-i64::from(libc::ENOSYS)),
    })
}

/// A call's arguments as the guard reads them: numbers, strings and paths (each read from
/// where it starts, `where_of`).
struct Args<'a> {
    listener: &'a OwnedFd,
    call: &'a Call,
    shm: Option<&'a OwnedFd>,
}

impl Args<'_> {
    fn int(&self, i: usize) -> i32 {
        self.call.args[i] as u32 as i32
    }

    fn at(&self, dirfd: i32, path: u64) -> Result<Where, i64> {
        self.at_or_empty(dirfd, path, false)
    }

    /// `empty`: an empty path names `dirfd` itself (`AT_EMPTY_PATH`).
    fn at_or_empty(&self, dirfd: i32, path: u64, empty: bool) -> Result<Where, i64> {
        where_of(self.listener, self.call, (dirfd, path, empty), self.shm).map_err(|e| errno(&e))
    }

    fn cstr(&self, addr: u64) -> Result<CString, i64> {
        read_cstr(self.call.pid, addr).map_err(|e| errno(&e))
    }
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
    let start =
        start_of(&path, dirfd, empty, shm.is_some()).map_err(io::Error::from_raw_os_error)?;
    let (base, path) = match start {
        Start::Shm(name) => {
            let dir = shm.map(OwnedFd::try_clone).transpose()?;
            return Ok(Where {
                base: dir,
                path: name.to_vec(),
            });
        }
        Start::Root => return Ok(Where { base: None, path }),
        Start::Descriptor(fd, rest) => (open_proc(call, &format!("fd/{fd}"))?, rest.to_vec()),
        Start::Dir(libc::AT_FDCWD) => (open_proc(call, "cwd")?, path),
        Start::Dir(dirfd) => (open_proc(call, &format!("fd/{dirfd}"))?, path),
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

/// What the thread is allowed: no effective capabilities, no_new_privs, and no umask
/// (the program's is applied by hand; the umask is the guard process's, and nothing else
/// in it makes files). It has no Landlock domain of its own, so that it may read the
/// program's memory and act in one thread: where it may make names and open files is
/// checked against the program's rules (`Reach`) before it acts, and under bwrap the
/// mounts it shares with the program bound it as they bound the program.
fn confine_this_thread() -> io::Result<()> {
    // SAFETY: umask only sets the process's mask.
    unsafe { libc::umask(0) };
    super::notify::drop_effective_capabilities()?;
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers; it applies to this thread.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Do what the call asks, as `acting` (its checks first), and the answer to send.
fn act(acting: &Acting<'_>, op: &Op) -> Answer {
    match op {
        Op::Open { at, flags, mode } => match acting.open(at, *flags, *mode) {
            Ok(Opened::Now(fd)) => send_fd(
                acting.listener,
                acting.call.id,
                &fd,
                flags & libc::O_CLOEXEC != 0,
            ),
            Ok(Opened::Later) => Answer::Sent,
            Err(e) => Answer::Done(-i64::from(e)),
        },
        Op::Mkdir { at, mode } => done(acting.mkdir(at, *mode)),
        Op::Mknod { at, mode, dev } => done(acting.mknod(at, *mode, *dev)),
        Op::Symlink { target, at } => done(acting.symlink(target, at)),
        Op::Link { old, new, flags } => done(acting.link(old, new, *flags)),
        Op::Rename { old, new, flags } => done(acting.rename(old, new, *flags)),
    }
}

/// `act`, and a refusal the kernel made (EROFS) reported; the guard's own refusals are
/// reported where they are decided (`acting::refuse`).
fn act_and_report(acting: &Acting<'_>, op: &Op) -> Answer {
    let answer = act(acting, op);
    if let Answer::Done(e) = answer {
        if e == -i64::from(libc::EROFS) {
            report_read_only(op);
        }
    }
    answer
}

/// The kernel refused the act with EROFS (a read-only mount, under bwrap): reported with
/// the path the call named, made absolute from where it started.
fn report_read_only(op: &Op) {
    use std::os::unix::ffi::OsStrExt as _;
    let at = match op {
        Op::Open { at, .. } | Op::Mkdir { at, .. } | Op::Mknod { at, .. } => at,
        Op::Symlink { at, .. } => at,
        Op::Link { new, .. } | Op::Rename { new, .. } => new,
    };
    let path = std::ffi::OsStr::from_bytes(&at.path);
    let path = match &at.base {
        Some(base) if !at.path.starts_with(b"/") => match super::at::fd_path(base.as_fd()) {
            Ok(dir) => dir.join(path),
            Err(_) => return,
        },
        _ => std::path::PathBuf::from(path),
    };
    super::report::refused(crate::policy::refusal::Cause::ReadOnly, &path);
}

fn done(r: Res<i64>) -> Answer {
    match r {
        Ok(v) => Answer::Done(v),
        Err(e) => Answer::Done(-i64::from(e)),
    }
}
