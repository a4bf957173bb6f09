//! What the guard knows of each program thread that calls it (`Threads`), and when it
//! forgets it.
//!
//! For each thread: a pidfd that tells it is still the thread the guard knew (a thread id
//! is reused once the kernel has gone round its pid space, 32,768 ids on many machines);
//! its memory (`/proc/TID/mem`, read with `pread`, which container profiles allow where
//! they refuse `process_vm_readv`); its process and umask (`/proc/TID/status`, read once);
//! and its working directory, opened once with its path.
//!
//! The working directory is kept because the guard is told of every call that changes it:
//! `chdir` and `fchdir` are mediated calls too. The change happens after the guard lets
//! the call go, so from then until that thread calls again, the directory of every thread
//! of its process is opened afresh for each call and not kept (`moving`). `execve` is told
//! as well: what the guard kept of the process's memory is forgotten. A directory renamed by
//! the program (through the guard) may carry a working directory with it: a kept one at or
//! below the renamed path is forgotten then. A process that shares its working directory with another without being
//! one of its threads (`clone` with `CLONE_FS` alone) keeps what was known of the other's
//! directory until that one calls again: it can only mislead itself, since what the guard
//! makes is judged where it is made.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use super::notify::{Call, Listener};
use super::status::{parse_status, IdMap, Masks, ThreadStatus};
use crate::sys::pidfd;

/// Threads remembered at most: each holds a few descriptors.
const LIMIT: usize = 64;

/// A working directory as the guard opened it.
pub(super) struct Cwd {
    pub(super) fd: OwnedFd,
    /// Its path as the kernel names it, when that is a path (not `… (deleted)`).
    pub(super) path: Option<PathBuf>,
}

/// What the guard knows of one thread.
pub(super) struct Known {
    tid: u32,
    /// A pidfd of this very thread; `None`: the kernel has no pidfds of threads and this
    /// one leads no process, so nothing is kept past the call.
    alive: Option<OwnedFd>,
    mem: OwnedFd,
    status: Option<ThreadStatus>,
    cwd: Option<Cwd>,
    /// `cwd` may serve later calls (else it served one, and is opened again).
    cwd_kept: bool,
    used: u64,
}

#[derive(Default)]
pub(super) struct Threads {
    known: IdMap<Known>,
    /// Each process's umask, as its own `umask()` calls set it.
    masks: Masks,
    /// Processes whose working directory is changing: (thread group id, the thread that
    /// called `chdir`).
    moving: Vec<(u32, u32)>,
    /// The kernel refused pidfds of threads (before Linux 6.9).
    no_thread_pidfds: bool,
    clock: u64,
}

impl Threads {
    /// The thread that made `call`, known from before or learned now. `Err(ESRCH)`: it no
    /// longer waits on that call (its id may name another thread by now).
    pub(super) fn caller(&mut self, listener: &Listener, call: &Call) -> io::Result<()> {
        self.clock += 1;
        let tid = call.pid;
        if !self.known.get(&tid).is_some_and(Known::is_alive) {
            let known = self.learn(listener, call)?;
            self.known.remove(&tid);
            self.make_room();
            self.known.insert(tid, known);
        }
        let clock = self.clock;
        let known = self.known.get_mut(&tid).ok_or_else(gone)?;
        known.used = clock;
        Ok(())
    }

    /// What is known of thread `tid` (after `caller` for its call).
    pub(super) fn known(&self, tid: u32) -> io::Result<&Known> {
        self.known.get(&tid).ok_or_else(gone)
    }

    /// A thread's pidfd and memory, opened now: both are the caller's if it still waits on
    /// its call afterwards (a thread waiting on a call cannot end and give its id away).
    fn learn(&mut self, listener: &Listener, call: &Call) -> io::Result<Known> {
        let tid = call.pid;
        let alive = self.pidfd(tid);
        let mem = open(&format!("/proc/{tid}/mem"), libc::O_RDONLY)?;
        if !listener.still_waiting(call.id) {
            return Err(gone());
        }
        Ok(Known {
            tid,
            alive,
            mem,
            status: None,
            cwd: None,
            cwd_kept: false,
            used: self.clock,
        })
    }

    fn pidfd(&mut self, tid: u32) -> Option<OwnedFd> {
        if !self.no_thread_pidfds {
            match pidfd::open(tid, pidfd::THREAD) {
                Ok(fd) => return Some(fd),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.no_thread_pidfds = true,
                Err(_) => return None,
            }
        }
        // A process's pidfd: of its leading thread only.
        pidfd::open(tid, 0).ok()
    }

    /// Forget the dead, then the least recently used, to stay under `LIMIT`.
    fn make_room(&mut self) {
        if self.known.len() < LIMIT {
            return;
        }
        self.known.retain(|_, k| k.is_alive());
        while self.known.len() >= LIMIT {
            let Some(oldest) = self.known.values().min_by_key(|k| k.used).map(|k| k.tid) else {
                return;
            };
            self.known.remove(&oldest);
        }
    }

    /// The process and umask of the caller's thread (read once).
    pub(super) fn status(&mut self, tid: u32) -> Option<ThreadStatus> {
        let known = self.known.get_mut(&tid)?;
        if let Some(status) = known.status {
            return Some(status);
        }
        let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        let status = parse_status(&text)?;
        known.status = Some(status);
        let others = self
            .known
            .values()
            .any(|k| k.tid != tid && k.status.is_some_and(|s| s.tgid == status.tgid));
        self.masks.learned(status, others);
        Some(status)
    }

    /// The caller's umask (022 when its status cannot be read: it is gone).
    pub(super) fn umask(&mut self, tid: u32) -> u32 {
        match self.status(tid) {
            Some(s) => self.masks.of(s),
            None => 0o022,
        }
    }

    /// The caller calls `umask(new)`: from now on its process's umask is `new`.
    pub(super) fn set_umask(&mut self, tid: u32, new: u32) {
        if let Some(s) = self.status(tid) {
            self.masks.set(s.tgid, new);
        }
    }

    /// The caller's working directory: the one kept, or opened now (and kept unless its
    /// process is changing directory). Checked against the call it waits on.
    pub(super) fn cwd(&mut self, listener: &Listener, call: &Call) -> io::Result<&Cwd> {
        let tid = call.pid;
        let moving = self.is_moving(tid);
        let known = self.known.get_mut(&tid).ok_or_else(gone)?;
        let reuse = known.cwd_kept && !moving;
        if !reuse || known.cwd.is_none() {
            let fd = open(&format!("/proc/{tid}/cwd"), libc::O_PATH)?;
            // The directory was the caller's if it still waits now.
            if !listener.still_waiting(call.id) {
                return Err(gone());
            }
            let path = crate::sys::at::fd_path(fd.as_fd())
                .ok()
                .filter(|p| is_plain_path(p));
            known.cwd = Some(Cwd { fd, path });
            known.cwd_kept = !moving && known.alive.is_some();
        }
        known.cwd.as_ref().ok_or_else(gone)
    }

    /// Whether the working directory of `tid`'s process may be changing now.
    fn is_moving(&mut self, tid: u32) -> bool {
        if self.moving.is_empty() {
            return false;
        }
        match self.status(tid) {
            Some(s) => self.moving.iter().any(|(tgid, _)| *tgid == s.tgid),
            None => true,
        }
    }

    /// `tid` made a call: a change of directory it asked for before is done.
    /// `tid` ends its process (`exit_group`): nothing kept of it is needed again.
    pub(super) fn exited(&mut self, tid: u32) {
        self.known.remove(&tid);
    }

    pub(super) fn noticed(&mut self, tid: u32) {
        self.moving.retain(|(_, by)| *by != tid);
    }

    /// `tid` calls `chdir` or `fchdir`: what is kept of its process's working directory
    /// is forgotten, and not kept again until `tid` calls again (`noticed`).
    pub(super) fn chdir(&mut self, tid: u32) {
        let tgid = self.status(tid).map(|s| s.tgid);
        for k in self.known.values_mut() {
            // A thread whose process is not known might be one of it.
            if tgid.is_none() || k.status.is_none_or(|s| Some(s.tgid) == tgid) {
                k.cwd = None;
                k.cwd_kept = false;
            }
        }
        self.moving.push((tgid.unwrap_or(tid), tid));
    }

    /// `tid` calls `execve`: what is kept of its process (its memory) is forgotten — of its
    /// leading thread too, whose id the thread that execs takes (the other threads end).
    pub(super) fn exec(&mut self, tid: u32) {
        let tgid = self.status(tid).map_or(tid, |s| s.tgid);
        self.known.retain(|_, k| {
            k.tid != tid && k.tid != tgid && k.status.is_none_or(|s| s.tgid != tgid)
        });
    }

    /// What was at `old` was renamed: a kept working directory there or below moved with
    /// it (its path is not what was kept).
    pub(super) fn renamed(&mut self, old: &std::path::Path) {
        for k in self.known.values_mut() {
            let moved = match &k.cwd {
                Some(Cwd {
                    path: Some(path), ..
                }) => crate::protect::names::under(path, old),
                Some(Cwd { path: None, .. }) => false,
                None => false,
            };
            if moved {
                k.cwd = None;
                k.cwd_kept = false;
            }
        }
    }
}

impl Known {
    /// Whether the thread the guard learned this from is still alive (so its id still
    /// names it).
    fn is_alive(&self) -> bool {
        let Some(pidfd) = &self.alive else {
            return false;
        };
        !pidfd::ended(pidfd)
    }

    /// A descriptor of the thread's process, as an object to look at or act on: the very
    /// file (`pidfd_getfd`) when `copy` (this machine allows it), else the object opened
    /// again through `/proc/TID/fd/N` (O_PATH: the same inode, never a lookup by name).
    pub(super) fn their_object(&self, n: u32, copy: bool) -> io::Result<OwnedFd> {
        if copy {
            if let Ok(file) = self.their_file(n) {
                return Ok(file);
            }
        }
        let fd = open(&format!("/proc/{}/fd/{n}", self.tid), libc::O_PATH)?;
        // Opened while the thread lived: its process's descriptor.
        if self.alive.is_some() && !self.is_alive() {
            return Err(gone());
        }
        Ok(fd)
    }

    /// The very file the thread's process has as descriptor `n` (`pidfd_getfd`): what a
    /// socket or a pty master must be, to be connected or asked for its peer.
    pub(super) fn their_file(&self, n: u32) -> io::Result<OwnedFd> {
        let own;
        let pidfd = match &self.alive {
            Some(fd) => fd.as_fd(),
            None => {
                own = pidfd::open(self.tid, 0)?;
                own.as_fd()
            }
        };
        pidfd::get_fd(pidfd, n)
    }

    /// `len` bytes of the thread's memory at `addr`; `EFAULT` where it has none.
    pub(super) fn read(&self, addr: u64, len: usize) -> io::Result<Vec<u8>> {
        const MAX: usize = 1 << 20;
        if len > MAX {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let n = self.pread(&mut buf[done..], addr, done)?;
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            done += n;
        }
        Ok(buf)
    }

    /// A NUL-terminated string of the thread's (at most PATH_MAX bytes): read a little
    /// first (most paths are short), then page by page, never past a page it does not
    /// need (the next may be unmapped).
    pub(super) fn cstr(&self, addr: u64) -> io::Result<CString> {
        const PAGE: u64 = 4096;
        const FIRST: u64 = 256;
        let mut first = [0u8; FIRST as usize];
        let want = (PAGE - addr % PAGE).min(FIRST) as usize;
        let n = self.pread(&mut first[..want], addr, 0)?;
        if let Some(end) = first[..n].iter().position(|b| *b == 0) {
            return Ok(CString::new(&first[..end])?);
        }
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        let mut bytes: Vec<u8> = first[..n].to_vec();
        let mut chunk = vec![0u8; PAGE as usize];
        let mut at = addr + n as u64;
        while bytes.len() < libc::PATH_MAX as usize {
            let want = (PAGE - at % PAGE) as usize;
            let n = self.pread(&mut chunk[..want], at, 0)?;
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::EFAULT));
            }
            let part = &chunk[..n];
            if let Some(end) = part.iter().position(|b| *b == 0) {
                bytes.extend_from_slice(&part[..end]);
                return Ok(CString::new(bytes)?);
            }
            bytes.extend_from_slice(part);
            at = at
                .checked_add(n as u64)
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        }
        Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
    }

    /// One `pread` of the memory at `addr + skip` into `buf`.
    fn pread(&self, buf: &mut [u8], addr: u64, skip: usize) -> io::Result<usize> {
        let fault = || io::Error::from_raw_os_error(libc::EFAULT);
        let at = addr.checked_add(skip as u64).ok_or_else(fault)?;
        let offset = libc::off_t::try_from(at).map_err(|_| fault())?;
        loop {
            match nix::sys::uio::pread(&self.mem, buf, offset) {
                Ok(n) => return Ok(n),
                Err(nix::errno::Errno::EINTR) => continue,
                // Nothing mapped there: as the kernel answers a bad pointer.
                Err(
                    nix::errno::Errno::EIO | nix::errno::Errno::EFAULT | nix::errno::Errno::EINVAL,
                ) => return Err(fault()),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// ESRCH: the caller no longer waits.
fn gone() -> io::Error {
    io::Error::from_raw_os_error(libc::ESRCH)
}

/// A path the kernel gave for a directory that is one (not `… (deleted)`, not outside
/// the root).
fn is_plain_path(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    bytes.starts_with(b"/") && !bytes.ends_with(b" (deleted)")
}

/// `path` opened with `flags` (and close-on-exec).
fn open(path: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = CString::new(path)?;
    crate::sys::at::openat(crate::sys::at::CWD, &path, flags | libc::O_CLOEXEC, 0)
        .map_err(io::Error::from_raw_os_error)
}
