//! sbx-shell's answers to the calls a seccomp filter hands to the helper's guard
//! (`sandbox::mediated`): every call that makes a name (judged by `protect::names`, done
//! in `create`), and with Landlock alone the calls Landlock cannot judge (`answer`,
//! `metadata`).
//!
//! The decisions are pure functions with unit tests: what may change and what the program
//! may reach (`decide`), where a path starts, how it splits and what its words name
//! (`paths`), what an open's flags mean and its next step (`opens`), what a thread's status
//! says — its umask, a signal waiting for it (`status`) — and the answers kept for a
//! restart on older kernels (`replay`). The rest is plumbing: the listener and the
//! check before the program runs (`notify`, `handshake`), the calls received and dispatched
//! (`create`), what is kept of each calling thread (`threads`), the acts done through
//! descriptors (`acting`, `opening`, `making`, `git`, `statefiles`; the calls themselves are
//! `sys::at`'s), and the opens that wait for
//! another party (`waiting`).
//!
//! - A metadata call is done by the guard itself, on the object the program named, opened
//!   once (never re-resolved by name afterwards: a path flipped meanwhile changes nothing),
//!   with the thread's effective capabilities dropped (as the program's are), when the object
//!   lies in a writable tree and in no protected path, or is in no tree at all (a pipe, a
//!   socket, a deleted file); otherwise EPERM.
//! - A call on another process goes on (the kernel then checks it as always) when the target
//!   is a process of the session — the guard's descendant: every process of the session is
//!   (the guard is their subreaper) and nothing else is — otherwise EPERM.
//! - A pty's peer is opened by the guard from the program's own master and handed over.
//! - Root's program where it stays host root has every open but an `O_PATH` one done by
//!   the guard, which hands over only what an ordinary user could read or the policy
//!   grants (`rootreads`).
//! - A `/proc` link (`/proc/PID/fd/N`, `cwd`, `root`) is followed only for a process of the
//!   session, as the kernel scopes the program itself.

#[cfg(target_os = "linux")]
mod acting;
#[cfg(target_os = "linux")]
mod answer;
#[cfg(target_os = "linux")]
mod connecting;
#[cfg(target_os = "linux")]
pub mod create;
#[cfg(target_os = "linux")]
mod git;
#[cfg(target_os = "linux")]
pub mod handshake;
#[cfg(target_os = "linux")]
mod making;
#[cfg(target_os = "linux")]
mod metadata;
#[cfg(target_os = "linux")]
mod nameat;
#[cfg(target_os = "linux")]
mod notify;
#[cfg(target_os = "linux")]
mod opening;
pub mod opens;
pub mod paths;
#[cfg(target_os = "linux")]
mod pool;
#[cfg(target_os = "linux")]
mod reading;
#[cfg(target_os = "linux")]
pub mod replay;
#[cfg(target_os = "linux")]
mod report;
pub mod rootreads;
#[cfg(target_os = "linux")]
mod statefiles;
pub mod status;
#[cfg(target_os = "linux")]
mod threads;
#[cfg(target_os = "linux")]
mod waiting;

mod decide;
pub use decide::{
    describe_addr, elsewhere, in_session, loopback_bind, loopback_port, shm_name, NetRules, Reach,
    Scope,
};
pub use rootreads::RootReads;
