//! The system calls that Landlock alone cannot judge and sbx-shell judges instead
//! (`mediator`): a second seccomp filter, installed by the helper with a listener that it
//! hands to sbx-shell, turns each into a question to sbx-shell (SECCOMP_RET_USER_NOTIF),
//! which answers it. As data here; compiled to classic BPF by `compile` (Linux).
//!
//! - **Metadata** (chmod, chown, utimes, extended attributes; by path and by fd): Landlock
//!   has no right for them, so a program could make `~/.ssh` world-readable or, as root, a
//!   file in `/etc` writable by all. sbx-shell does the call itself, on the object the
//!   program named (resolved once, then acted on through its descriptor), when that object
//!   lies in a writable tree and not in a protected path; elsewhere the answer is EPERM.
//! - **Other processes** (setpriority, ioprio_set, prlimit64 with new limits,
//!   sched_setaffinity/setscheduler/setparam/setattr): Landlock scopes signals and ptrace,
//!   not these. A call on the caller itself (pid 0) never leaves the kernel; any other
//!   target is allowed only when it is a process of the session. `PRIO_USER` and
//!   `IOPRIO_WHO_USER` (every process of the user) are refused.
//! - **A new pty's peer** (`ioctl(master, TIOCGPTPEER)`, how glibc's `openpty` opens the
//!   slave): the host's `/dev/pts` gets no Landlock rule alone (it holds the user's other
//!   terminals), so sbx-shell opens the peer of the program's own master and hands it over.
//! - **Connecting a socket** (`connect`): Landlock has no right for unix sockets before
//!   ABI 9. sbx-shell connects the program's socket itself, never letting the call go on as
//!   asked (the kernel would take the descriptor and the address again, after another
//!   thread could have swapped in a unix socket and a host socket's path): a unix socket to
//!   the socket file it resolved once (through its descriptor), when that file lies where
//!   the program may make names — its own sockets, never the host's; abstract addresses
//!   are refused; a socket of another family from a thread that took on the program's TCP
//!   rules, so that Landlock judges it as it would the program.
//! - **Binding a TCP socket** (`bind`), where the program's TCP is restricted: done by
//!   sbx-shell on the program's socket at a loopback address (the any-address becomes
//!   loopback's), so a server the program starts listens for this machine only, and the
//!   program's connects to loopback may reach its port; another address is refused.
//! - **Removing a name** (`unlink`, `unlinkat` from the working directory; every removal
//!   where a writable tree is carved, `removing`): a name in `/dev/shm` is removed from
//!   the session's own directory for it (`mediator::shm_name`), where the guard made it;
//!   any other by the guard, where the program's rules let it remove it (`Reach`). Under
//!   bwrap a directory's removal (`removing_dirs`), so that one the mounts refuse is named.

#[cfg(target_os = "linux")]
mod bpf;
#[cfg(target_os = "linux")]
pub use bpf::{compile, syscall_name};

pub(crate) mod table;
pub use table::{
    creating, observed, reading, removing, removing_dirs, table, Mediated, IOPRIO_WHO_USER,
    PRIO_USER, READING,
};
