//! What a call that makes a name asks (`Op`), read from its arguments and the program's
//! memory (`threads::Known`), for the guard's loop (`create`).

use std::ffi::CString;

use super::acting::{Base, Op, Where};
use super::notify::{errno, Call};
use super::paths::{start_of, Start};
use super::threads::Known;
use std::io;

/// What the call asks, read from its arguments and the program's memory; a name in
/// `/dev/shm` is taken in the session's own directory for it (`mediator::shm_name`).
pub(super) fn read_op(
    known: &Known,
    call: &Call,
    shm: bool,
    copy_fds: bool,
    name: Option<&str>,
) -> Result<Op, i64> {
    let args = CallArgs {
        known,
        call,
        shm,
        copy_fds,
    };
    match name {
        Some(name @ ("open" | "openat" | "creat" | "mkdir" | "mkdirat" | "mknod" | "mknodat")) => {
            read_make(&args, name)
        }
        Some(name) => read_link(&args, name),
        // (anything unexpected): as a kernel without it answers.
        None => Err(-i64::from(libc::ENOSYS)),
    }
}

/// An open, `mkdir` or `mknod`: the name it makes, or opens.
fn read_make(args: &CallArgs<'_>, name: &str) -> Result<Op, i64> {
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
fn read_link(args: &CallArgs<'_>, name: &str) -> Result<Op, i64> {
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
        "unlink" => Op::Remove {
            at: args.at(cwd, a[0])?,
            flags: 0,
        },
        "unlinkat" => Op::Remove {
            at: args.at(args.int(0), a[1])?,
            flags: args.int(2),
        },
        "rmdir" => Op::Remove {
            at: args.at(cwd, a[0])?,
            flags: libc::AT_REMOVEDIR,
        },
        // openat2 (and anything unexpected): as a kernel without it answers.
        _ => return Err(-i64::from(libc::ENOSYS)),
    })
}

/// A call's arguments as the guard reads them: numbers, strings and paths (each read from
/// where it starts, `where_of`).
struct CallArgs<'a> {
    known: &'a Known,
    call: &'a Call,
    /// The session has a `/dev/shm` of its own.
    shm: bool,
    copy_fds: bool,
}

impl CallArgs<'_> {
    fn int(&self, i: usize) -> i32 {
        self.call.args[i] as u32 as i32
    }

    fn at(&self, dirfd: i32, path: u64) -> Result<Where, i64> {
        self.at_or_empty(dirfd, path, false)
    }

    /// `empty`: an empty path names `dirfd` itself (`AT_EMPTY_PATH`).
    fn at_or_empty(&self, dirfd: i32, path: u64, empty: bool) -> Result<Where, i64> {
        self.where_of(dirfd, path, empty).map_err(|e| errno(&e))
    }

    fn cstr(&self, addr: u64) -> Result<CString, i64> {
        self.known.cstr(addr).map_err(|e| errno(&e))
    }

    /// The start of the path at `addr` relative to the program's descriptor `dirfd`: the
    /// program's own descriptors under their usual spellings are taken here (as the
    /// program's, not as the guard's `/proc/self`).
    fn where_of(&self, dirfd: i32, addr: u64, empty: bool) -> io::Result<Where> {
        let mut path = self.known.cstr(addr)?.into_bytes();
        if path.starts_with(b"/proc/") && super::paths::own_descriptor(&path).is_none() {
            path = super::paths::as_caller(&path, self.call.pid).into_owned();
        }
        let start =
            start_of(&path, dirfd, empty, self.shm).map_err(io::Error::from_raw_os_error)?;
        let theirs = |fd: i32| self.known.their_object(fd as u32, self.copy_fds);
        Ok(match start {
            Start::Shm(name) => Where {
                base: Base::Shm,
                path: name.to_vec(),
            },
            Start::Root => Where {
                base: Base::Root,
                path,
            },
            Start::Descriptor(fd, rest) => Where {
                base: Base::Fd(theirs(fd as i32)?),
                path: rest.to_vec(),
            },
            Start::Dir(libc::AT_FDCWD) => Where {
                base: Base::Cwd,
                path,
            },
            Start::Dir(dirfd) => Where {
                base: Base::Fd(theirs(dirfd)?),
                path,
            },
        })
    }
}
