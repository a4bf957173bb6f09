//! The mediated calls as data: each syscall the filter hands to the guard, and when
//! (`When`). Pure; `bpf.rs` compiles it.

use serde::{Deserialize, Serialize};

/// TIOCGPTPEER: open the peer (slave) of a pty master.
pub const TIOCGPTPEER: u32 = 0x5441;

/// prctl's PR_SET_DUMPABLE (Linux's value; the table is data on every platform).
pub const PR_SET_DUMPABLE: u32 = 4;

/// Linux's O_PATH (the table is data on every platform; the same on x86_64 and aarch64).
pub const O_PATH: u32 = 0o1000_0000;

/// `which` values meaning "every process of a user".
pub const PRIO_USER: u32 = 2;

pub const IOPRIO_WHO_USER: u32 = 3;

/// When a call goes to sbx-shell; otherwise it is allowed (this filter denies nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    Always,
    /// Unless the pid in argument `arg` is 0 (the caller itself).
    PidNotZero {
        arg: u8,
    },
    /// Unless `which` (argument 0) is not `user` and `who` (argument 1) is 0.
    WhoNotSelf {
        user: u32,
    },
    /// prlimit64: unless the pid is 0 or no new limit is given (argument 2 null).
    SetsLimitOfPid,
    /// ioctl: when the request (argument 1, low 32 bits) is this one.
    IoctlRequest {
        request: u32,
    },
    /// When argument `arg` (low 32 bits) is `value`: unlinkat's AT_FDCWD.
    ArgIs {
        arg: u8,
        value: u32,
    },
    /// When any of `bits` is set in argument `arg` (low 32 bits): open's O_CREAT.
    FlagSet {
        arg: u8,
        bits: u32,
    },
    /// When none of `bits` is set in argument `arg` (low 32 bits): an open without
    /// O_PATH.
    FlagClear {
        arg: u8,
        bits: u32,
    },
    /// Never asked: when arguments 0 and 1 (low 32 bits) are these, the call returns 0
    /// without running; otherwise it runs.
    Ignored {
        arg0: u32,
        arg1: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mediated {
    pub syscall: &'static str,
    pub when: When,
}

/// The metadata calls, by path and by fd (`chmod`, `chown`, `lchown`, `utime`, `utimes`
/// and `futimesat` exist on x86_64 only; `compile` leaves out what an architecture lacks).
pub const METADATA: &[&str] = &[
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "lchown",
    "fchown",
    "fchownat",
    "utime",
    "utimes",
    "futimesat",
    "utimensat",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "setxattrat",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "removexattrat",
];

/// Every mediated call with its condition.
pub fn table() -> Vec<Mediated> {
    let mut t: Vec<Mediated> = METADATA
        .iter()
        .map(|syscall| Mediated {
            syscall,
            when: When::Always,
        })
        .collect();
    t.push(Mediated {
        syscall: "setpriority",
        when: When::WhoNotSelf { user: PRIO_USER },
    });
    t.push(Mediated {
        syscall: "ioprio_set",
        when: When::WhoNotSelf {
            user: IOPRIO_WHO_USER,
        },
    });
    t.push(Mediated {
        syscall: "prlimit64",
        when: When::SetsLimitOfPid,
    });
    for syscall in [
        "sched_setaffinity",
        "sched_setscheduler",
        "sched_setparam",
        "sched_setattr",
    ] {
        t.push(Mediated {
            syscall,
            when: When::PidNotZero { arg: 0 },
        });
    }
    t.push(Mediated {
        syscall: "ioctl",
        when: When::IoctlRequest {
            request: TIOCGPTPEER,
        },
    });
    t.push(Mediated {
        syscall: "connect",
        when: When::Always,
    });
    // A TCP server binds on loopback only, through the guard (`mediator::answer`).
    t.push(Mediated {
        syscall: "bind",
        when: When::Always,
    });
    // glibc's `unlink` (how shm_unlink and sem_unlink remove a name) is the `unlink` call
    // on x86_64 and `unlinkat(AT_FDCWD, …)` elsewhere: a name in /dev/shm is removed from
    // the session's own directory for it, any other where the program's rules let it (the
    // guard removes it, `mediator::making`). A removal relative to a directory's
    // descriptor (`rm -r`, python's `rmtree`) is never a name in /dev/shm: not asked, but
    // where a writable tree is carved (`removing`).
    t.push(Mediated {
        syscall: "unlink",
        when: When::Always,
    });
    t.push(Mediated {
        syscall: "unlinkat",
        when: When::ArgIs {
            arg: 0,
            value: libc::AT_FDCWD as u32,
        },
    });
    t
}

/// Every removal, where a writable tree is carved (`sandbox::carve`): a carved directory
/// has no rule that lets the program remove its entries (the right would reach what it
/// leaves out), so the guard removes them (`rmdir` exists on x86_64 only). In place of
/// `table`'s `unlinkat` from the working directory.
pub fn removing() -> Vec<Mediated> {
    ["unlinkat", "rmdir"]
        .into_iter()
        .map(|syscall| Mediated {
            syscall,
            when: When::Always,
        })
        .collect()
}

/// A directory's removal, where the guard judges names under bwrap: done by the guard as
/// the program would (the kernel answers it), so that one the sandbox's mounts refuse — a
/// protected or hidden path, a read-only tree (`EROFS`, `EBUSY` for a mount point) — is
/// named at the end (`rm -rf` of a clone made outside stops at its `.git/hooks`). A
/// file's removal is not asked: `rm -rf` of a large tree pays a round trip per directory
/// only.
pub fn removing_dirs() -> Vec<Mediated> {
    vec![
        Mediated {
            syscall: "rmdir",
            when: When::Always,
        },
        Mediated {
            syscall: "unlinkat",
            when: When::FlagSet {
                arg: 2,
                bits: libc::AT_REMOVEDIR as u32,
            },
        },
    ]
}

/// A connection the program makes, where the sandbox has a network of its own (bwrap,
/// with an allow-list or none): looked at and let through — the namespace, which has no
/// route out, refuses one to another machine (`ENETUNREACH`), and the guard names it at
/// the end (`mediator::create`); it enforces nothing.
pub fn observed() -> Vec<Mediated> {
    vec![Mediated {
        syscall: "connect",
        when: When::Always,
    }]
}

/// The opens that `reading` asks for.
pub const READING: &[&str] = &["open", "openat"];

/// Every open but an `O_PATH` one, for root's program where it stays host root: the
/// guard opens what it reads too, and hands over only what an ordinary user could read or
/// the policy grants (`mediator::rootreads`). An `O_PATH` descriptor reads nothing, makes
/// nothing (every other flag is ignored with it) and cannot be handed over; what is opened
/// through it is asked then. (`openat2` and `creat` are asked always already.)
pub fn reading() -> Vec<Mediated> {
    [("open", 1), ("openat", 2)]
        .into_iter()
        .map(|(syscall, arg)| Mediated {
            syscall,
            when: When::FlagClear { arg, bits: O_PATH },
        })
        .collect()
}

/// The calls that make a name, and the opens that write: each is done by the helper's
/// guard, which refuses the names nothing in the session may make (`protect::names`). `open`,
/// `creat`, `mkdir`, `mknod`, `symlink`, `link` and `rename` exist on x86_64 only.
/// `openat2` is asked always (its flags are in memory, which another thread could change
/// after a look): it is answered ENOSYS, as by kernels before 5.6, and callers fall back
/// to `openat`.
pub fn creating() -> Vec<Mediated> {
    // An open that can make a name (O_CREAT), or write (a config is written by git's
    // rename only: `protect::names::refused_write`).
    let bits = (libc::O_CREAT | libc::O_WRONLY | libc::O_RDWR | libc::O_TRUNC) as u32;
    let mut t = vec![
        Mediated {
            syscall: "open",
            when: When::FlagSet { arg: 1, bits },
        },
        Mediated {
            syscall: "openat",
            when: When::FlagSet { arg: 2, bits },
        },
    ];
    // `prctl(PR_SET_DUMPABLE, 0)` (sftp-server, ssh-agent) would keep the guard from
    // reading what the process's calls name (reading another process's memory needs it
    // dumpable): it succeeds and changes nothing. Nothing in the sandbox may trace or read
    // another process anyway (`seccomp`: ptrace, process_vm_*, pidfd_getfd).
    t.push(Mediated {
        syscall: "prctl",
        when: When::Ignored {
            arg0: PR_SET_DUMPABLE,
            arg1: 0,
        },
    });
    // What the guard keeps of each thread (`mediator::threads`) and must forget or change
    // when the thread does: the umask it applies to what it makes, the working directory
    // it resolves relative paths from, the memory it reads them in. It notes each such
    // call and lets it run.
    // A process's end: what it wrote in place of git's operation state is judged and put
    // in place before it has ended (`mediator::statefiles`), so that its parent, which waits
    // for it (git for its editor), reads what was judged.
    for syscall in [
        "umask",
        "chdir",
        "fchdir",
        "execve",
        "execveat",
        "exit_group",
    ] {
        t.push(Mediated {
            syscall,
            when: When::Always,
        });
    }
    for syscall in [
        "creat",
        "openat2",
        "mkdir",
        "mkdirat",
        "mknod",
        "mknodat",
        "symlink",
        "symlinkat",
        "link",
        "linkat",
        "rename",
        "renameat",
        "renameat2",
    ] {
        t.push(Mediated {
            syscall,
            when: When::Always,
        });
    }
    t
}
