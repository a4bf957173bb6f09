//! Opens done for the program: a new file made at once when the name may be made; else the
//! last component followed by hand (symlinks, a magic link, the program's own descriptor),
//! each object judged before it is opened (what it may be for the program, whether it is a
//! protected file under another name), a FIFO's waiting open in a thread of its own
//! (`waiting`).

use super::acting::{refuse, refuse_open, Acting, BaseDir, Where};
use super::nameat::{NameAt, OpenedDir};
use super::opens::{self, Missing, OpenStep, There};
use super::paths::{proc_link_as_caller, ProcDir};
use crate::policy::report::Cause;
use crate::protect::names::{self, Made};
use crate::sys::at::{
    fd_path, fstat, fstatat, is_proc, open_path, openat, os_errno, readlink, Res,
};
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

/// Where following a symlink one step led.
enum Followed<'a> {
    Entry(NameAt<'a>),
    Opened(Opened),
}

pub(super) enum Opened {
    Now(OwnedFd),
    /// A FIFO, whose open waits for the other end: answered by a thread of its own.
    Waiting {
        object: OwnedFd,
        how: i32,
    },
}

impl Acting<'_> {
    pub(super) fn open(&self, at: &Where, flags: i32, mode: u32) -> Res<Opened> {
        let base = self.base(at)?;
        if at.path.is_empty() {
            // The program's own descriptor (`/dev/stdout`): opened again, as the kernel
            // opens such a link.
            return self.reopen(base.fd, flags);
        }
        let start = base.fd;
        if at.path.ends_with(b"/") {
            // A directory, or nothing: only opened to read (root's program lists them).
            if flags & libc::O_CREAT != 0 || opens::writes(flags) {
                return Err(libc::EISDIR);
            }
            return self.reopen_path(start, &at.path, flags);
        }
        let Some(mut e) = self.entry(base, &at.path)? else {
            return self.reopen_path(start, &at.path, flags);
        };
        if let Some(done) = self.state_open(&e, flags, mode) {
            return done;
        }
        if flags & libc::O_CREAT != 0 {
            if let Some(done) = self.create_first(&e, flags, mode) {
                return done;
            }
        }
        let mut links = 0;
        loop {
            let st = match fstatat(e.dir.as_fd(), &e.name) {
                Ok(st) => Some(st),
                Err(libc::ENOENT) => None,
                Err(err) => return Err(err),
            };
            let there = st
                .as_ref()
                .map_or(There::Nothing, |st| There::of(st.st_mode));
            match opens::step(there, flags, links) {
                OpenStep::Refuse(err) => return Err(err),
                OpenStep::Follow => {
                    links += 1;
                    match self.follow(e, flags)? {
                        Followed::Entry(next) => e = next,
                        Followed::Opened(opened) => return Ok(opened),
                    }
                }
                OpenStep::OpenFifo(how) => {
                    self.check_reach(&e, how, false)?;
                    let nofollow = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                    let object = openat(e.dir.as_fd(), &e.name, nofollow, 0)?;
                    return self.waiting(object, how);
                }
                OpenStep::OpenExisting(how) => {
                    // (`st` is there for every step but `Create`.)
                    let st = st.as_ref().ok_or(libc::ENOENT)?;
                    self.check_reach(&e, flags, is_dir(st))?;
                    self.check_write(&e, flags)?;
                    // Before the open, which may truncate. What is opened is what was
                    // looked at: a name in the writable trees gets another object only
                    // through this thread, which makes every name of the session (the
                    // program may only remove it meanwhile: then it is looked at again).
                    self.check_identity(st, flags)?;
                    match openat(e.dir.as_fd(), &e.name, how, 0) {
                        // Removed since the look (or replaced from outside): look again.
                        Err(libc::ENOENT) | Err(libc::ELOOP) => continue,
                        Err(err) => return Err(err),
                        Ok(fd) => return Ok(Opened::Now(fd)),
                    }
                }
                OpenStep::Create => match self.create_checked(&e, flags, mode) {
                    // Made meanwhile by someone else: open it as it is now.
                    Err(libc::EEXIST) if opens::existing(flags).is_ok() => continue,
                    other => return other,
                },
            }
        }
    }

    /// An open that writes or makes git's operation state (`statefiles`): given a file of
    /// the guard's, placed once judged. `None`: `e` is not such a file, or the open only
    /// reads.
    fn state_open(&self, e: &NameAt<'_>, flags: i32, mode: u32) -> Option<Res<Opened>> {
        if flags & libc::O_CREAT == 0 && !opens::writes(flags) {
            return None;
        }
        let kind = crate::protect::gitstate::state_file(&e.path, e.name.as_bytes())?;
        if let Some(cause) = self.refusal(e, Made::File) {
            return Some(Err(refuse(cause, &e.full())));
        }
        let mode = mode & !self.umask;
        Some(self.state.open(e, kind, flags, mode).map(Opened::Now))
    }

    /// An open that may make a file, tried first as a create, exclusively, since most
    /// such opens make one: its outcome, or `None` when something is there (opened below,
    /// as it is). Refused where nothing is there: said once, not judged again.
    fn create_first(&self, e: &NameAt<'_>, flags: i32, mode: u32) -> Option<Res<Opened>> {
        match self.refusal(e, Made::File) {
            None => match self.create(e, flags, mode) {
                Err(libc::EEXIST) => None,
                other => Some(other),
            },
            Some(cause) if fstatat(e.dir.as_fd(), &e.name) == Err(libc::ENOENT) => {
                Some(Err(refuse(cause, &e.full())))
            }
            Some(_) => None,
        }
    }

    /// The symlink `e` names, followed one step: to the entry its target names, or, for a
    /// target that names its start (or a magic link: `/proc/PID/fd/N`, where the kernel
    /// jumps to the object), to the object opened again.
    fn follow<'e>(&'e self, e: NameAt<'e>, flags: i32) -> Res<Followed<'e>> {
        let mut top = false;
        if is_proc(e.dir.as_fd()) {
            match self.proc_dir(&e)? {
                ProcDir::Top => top = true,
                _ => {
                    let object = open_path(e.dir.as_fd(), &e.name).map_err(|e| os_errno(&e))?;
                    return self.reopen(object.as_fd(), flags).map(Followed::Opened);
                }
            }
        }
        let mut target = readlink(e.dir.as_fd(), &e.name)?;
        if top {
            let (pid, tid) = self.guard;
            target = proc_link_as_caller(&target, pid, tid, self.call.pid);
        }
        let dir = match e.dir {
            OpenedDir::Own(fd) => fd,
            OpenedDir::Held(fd) => fd.try_clone_to_owned().map_err(|e| os_errno(&e))?,
        };
        let (next, path) = (dir, e.path);
        let base = BaseDir {
            fd: next.as_fd(),
            path: Some(path.clone()),
        };
        if let Some(found) = self.entry(base, &target)? {
            // The directory found is the link's own when the target has no slash.
            return Ok(Followed::Entry(own(found, &next)?));
        }
        let start = if target.first() == Some(&b'/') {
            self.root
        } else {
            next.as_fd()
        };
        let target = CString::new(target).map_err(|_| libc::EINVAL)?;
        let dir = open_path(start, &target).map_err(|e| os_errno(&e))?;
        self.reopen(dir.as_fd(), flags).map(Followed::Opened)
    }

    /// What the `/proc` directory of `e` is: a process's, which only the session's own
    /// may be (the kernel scopes the program so: Landlock's ptrace scope, bwrap's pid
    /// namespace; the guard, outside both, refuses the rest itself: another process's pipe
    /// through its `fd/N` link), or `/proc` itself.
    pub(super) fn proc_dir(&self, e: &NameAt<'_>) -> Res<ProcDir> {
        let dir = super::acting::path_of(e.dir.as_fd())?;
        let found = super::paths::proc_dir(&dir);
        match found {
            ProcDir::Process(pid) if !self.of_session(pid) => {
                Err(refuse(Cause::Outside, &dir.join(e.name_os())))
            }
            _ => Ok(found),
        }
    }

    /// Refuse handing `fd` (opened for root's program with `flags`) over where only host
    /// root may read it (`rootreads::verdict`): EACCES, reported. An `O_PATH` descriptor
    /// reads nothing: what is opened through it is judged then.
    pub(super) fn check_root_read(&self, fd: BorrowedFd<'_>, flags: i32) -> Res<()> {
        use super::rootreads::{verdict, ReadVerdict};
        let Some(reads) = self.root_reads else {
            return Ok(());
        };
        if flags & libc::O_PATH != 0 || flags & libc::O_ACCMODE == libc::O_WRONLY {
            return Ok(());
        }
        let path = super::acting::path_of(fd)?;
        let refused = match verdict(&path, &reads.grants, &|pid| self.of_session(pid)) {
            ReadVerdict::Granted => false,
            ReadVerdict::Refused => true,
            ReadVerdict::AsAnyone => crate::sys::at::readable_as(reads.id, &path).is_err(),
        };
        match refused {
            true => Err(refuse(Cause::RootOnly, &path)),
            false => Ok(()),
        }
    }

    /// A missing file made, once its name is judged (`create`).
    fn create_checked(&self, e: &NameAt<'_>, flags: i32, mode: u32) -> Res<Opened> {
        if let Missing::Fail(err) = opens::missing(flags, mode, || self.umask) {
            return Err(err);
        }
        self.check_new(e, Made::File)?;
        self.create(e, flags, mode)
    }

    /// A missing file made (exclusively), with the mode asked less the program's umask;
    /// the name is judged by the caller. A `.git` made here is remembered (`made`).
    fn create(&self, e: &NameAt<'_>, flags: i32, mode: u32) -> Res<Opened> {
        let (how, mode) = match opens::missing(flags, mode, || self.umask) {
            Missing::Create { flags, mode } => (flags, mode),
            Missing::Fail(err) => return Err(err),
        };
        let pooled = super::pool::Pooled::File;
        let fd = match self.pool.make(e.dir.as_fd(), &e.name, pooled, how, mode) {
            Some(made) => made?.ok_or(libc::EIO)?,
            None => openat(e.dir.as_fd(), &e.name, how, mode)?,
        };
        if e.name.as_bytes() == b".git" {
            let st = fstat(fd.as_fd())?;
            self.made.borrow_mut().push((st.st_dev, st.st_ino));
        }
        Ok(Opened::Now(fd))
    }

    /// Open an object the program reaches through a link or its own descriptor: again,
    /// through this process's `/proc/self/fd` (its checks are the program's: Landlock
    /// checks the object's path on open). O_CREAT and O_EXCL make nothing here.
    pub(super) fn reopen(&self, object: BorrowedFd<'_>, flags: i32) -> Res<Opened> {
        opens::existing(flags)?;
        let how = (flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW)) | libc::O_CLOEXEC;
        let object = object.try_clone_to_owned().map_err(|e| os_errno(&e))?;
        let st = fstat(object.as_fd())?;
        if self.reach.confined() {
            // Before it is opened again (an open may truncate).
            let at = fd_path(object.as_fd()).map_err(|_| libc::EACCES)?;
            if !self.reach.may_open_as(&at, flags, is_dir(&st)) {
                return Err(refuse_open(&at, flags));
            }
        }
        self.check_identity(&st, flags)?;
        if opens::writes(flags) {
            // A config reached through a descriptor's link: judged by where it is.
            let at = fd_path(object.as_fd()).map_err(|_| libc::EACCES)?;
            // (A pipe's or socket's link names no directory.)
            let dir = at.parent().filter(|d| d.is_absolute());
            if let (Some(dir), Some(name)) = (dir, at.file_name()) {
                if names::write_judged(name) {
                    let dir_c =
                        CString::new(dir.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
                    let fd = open_path(crate::sys::at::CWD, &dir_c).map_err(|_| libc::EACCES)?;
                    let e = NameAt {
                        dir: OpenedDir::Own(fd),
                        path: dir.to_path_buf(),
                        name: CString::new(name.as_bytes()).map_err(|_| libc::EINVAL)?,
                    };
                    self.check_write(&e, flags)?;
                }
            }
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFIFO {
            return self.waiting(object, how);
        }
        let magic = CString::new(object.as_raw_fd().to_string()).map_err(|_| libc::EINVAL)?;
        let fds = open_path(crate::sys::at::CWD, c"/proc/self/fd").map_err(|e| os_errno(&e))?;
        let fd = openat(fds.as_fd(), &magic, how, 0)?;
        self.check_object(fd, flags).map(Opened::Now)
    }

    /// The directory `path` names from `start`, resolved by the kernel, opened again
    /// (`reopen`): a path that names its start, or ends in a slash.
    fn reopen_path(&self, start: BorrowedFd<'_>, path: &[u8], flags: i32) -> Res<Opened> {
        let path = CString::new(path).map_err(|_| libc::EINVAL)?;
        let dir = open_path(start, &path).map_err(|e| os_errno(&e))?;
        self.reopen(dir.as_fd(), flags)
    }

    /// A FIFO the program opens (`object`, O_PATH), judged: its open waits for the other
    /// end, so it is done in a thread of its own (`waiting`).
    fn waiting(&self, object: OwnedFd, how: i32) -> Res<Opened> {
        if self.reach.confined() {
            let at = fd_path(object.as_fd()).map_err(|_| libc::EACCES)?;
            if !self.reach.may_open(&at, how) {
                return Err(refuse_open(&at, how));
            }
        }
        self.check_identity(&fstat(object.as_fd())?, how)?;
        Ok(Opened::Waiting { object, how })
    }

    /// An opened file, unless the open writes and reached a protected file under another
    /// of its names (`Names::objects`): judged on what was opened, not on a look before.
    pub(super) fn check_object(&self, fd: OwnedFd, flags: i32) -> Res<OwnedFd> {
        self.check_identity(&fstat(fd.as_fd())?, flags)?;
        Ok(fd)
    }

    /// Refuse an open that writes the file `st` describes when it is a protected file
    /// reached under another of its names (`Names::objects`).
    pub(super) fn check_identity(&self, st: &libc::stat, flags: i32) -> Res<()> {
        if opens::writes(flags)
            && st.st_nlink > 1
            && self.names.is_protected_object(st.st_dev, st.st_ino)
        {
            return Err(libc::EACCES);
        }
        Ok(())
    }
}

/// Whether `st` describes a directory.
fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// `e` with a directory of its own (not one borrowed from `link_dir`, the directory of the
/// symlink it was found through, which is dropped when the link is followed).
fn own<'a>(e: NameAt<'_>, link_dir: &OwnedFd) -> Res<NameAt<'a>> {
    let dir = match e.dir {
        OpenedDir::Own(fd) => fd,
        OpenedDir::Held(fd) if fd.as_raw_fd() == link_dir.as_raw_fd() => {
            link_dir.try_clone().map_err(|e| os_errno(&e))?
        }
        OpenedDir::Held(fd) => fd.try_clone_to_owned().map_err(|e| os_errno(&e))?,
    };
    Ok(NameAt {
        dir: OpenedDir::Own(dir),
        path: e.path,
        name: e.name,
    })
}
