//! Root's program where it stays host root (Landlock alone; bwrap where no user namespace
//! can give it another id): what only host root may read is refused at each open, by the
//! kernel's own permission check made as another id.
//!
//! The model: every open of root's program is done by the guard (`sandbox::mediated`:
//! every `open` and `openat` but an `O_PATH` one, which reads nothing and whose descriptor
//! cannot be handed over; what is opened through it is asked then), which hands over what
//! it opened only when an
//! ordinary user — an id that owns nothing and is in no group (`RootReads::id`) — could
//! read it by the path the kernel gives for it (every directory on the way searched, the
//! object read), or when it lies in what the policy grants (its writable trees, the home,
//! the workspace, read grants, `allow_denied`, sockets, the session's own places, `/dev`,
//! whose devices Landlock picks). So a file made root-only before the session, during it
//! or in place is refused at the open after, with nothing walked or recorded. In `/proc`,
//! a process of the session is the program's own; another process only shows what any
//! user may read of it (`ANYONE`), as the kernel shows the program itself.
//!
//! What it does not see: a file opened before a change of its mode keeps its descriptor
//! (as for any user), and a program only root may run can still be run (`execve` is the
//! kernel's: its code is not read by an open).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Root's reads judged by the guard (`HelperSpec::root_reads`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootReads {
    /// The id that stands for an ordinary user (`sandbox::rootas::unused_id`).
    pub id: u32,
    /// What the policy grants, by real path: read as root reads it.
    pub grants: Vec<PathBuf>,
}

/// The entries of another process's `/proc` directory that any user may open: what `ps`
/// and `pgrep` read. Others (`environ`, `maps`, `mem`, `fd`, `cwd`) need to be allowed to
/// trace it.
pub const ANYONE: &[&str] = &[
    "stat",
    "status",
    "cmdline",
    "comm",
    "statm",
    "cgroup",
    "limits",
    "wchan",
    "sessionid",
    "loginuid",
    "oom_score",
    "oom_score_adj",
    "task",
];

/// What the guard does with an object it opened for root's program, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadVerdict {
    /// Hand it over: granted, the session's own, or in no tree (a pipe, a socket).
    Granted,
    /// Hand it over if the ordinary user could read it (`sys::at::readable_as`).
    AsAnyone,
    /// Refuse: another process's entry that only one allowed to trace it may open.
    Refused,
}

/// The verdict for the object at `path` (as the kernel names it); `of_session` says
/// whether a pid is a process of the session.
pub fn verdict(path: &Path, grants: &[PathBuf], of_session: &dyn Fn(u32) -> bool) -> ReadVerdict {
    if !path.is_absolute() || grants.iter().any(|g| path.starts_with(g)) {
        return ReadVerdict::Granted;
    }
    let Ok(rest) = path.strip_prefix("/proc") else {
        return ReadVerdict::AsAnyone;
    };
    let mut words = rest.iter().map(|w| w.to_str().unwrap_or(""));
    let Some(Ok(pid)) = words.next().map(str::parse::<u32>) else {
        return ReadVerdict::AsAnyone;
    };
    if of_session(pid) {
        return ReadVerdict::Granted;
    }
    let entry = match (words.next(), words.next(), words.next()) {
        (Some("task"), Some(_), next) => next,
        (entry, _, _) => entry,
    };
    match entry {
        None => ReadVerdict::AsAnyone,
        Some(e) if ANYONE.contains(&e) => ReadVerdict::AsAnyone,
        Some(_) => ReadVerdict::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_paths_and_the_sessions_processes_are_roots_the_rest_is_asked_as_anyone() {
        let grants = [PathBuf::from("/root/ws"), PathBuf::from("/root/.config/x")];
        let ours = |pid: u32| pid == 40;
        let v = |p: &str| verdict(Path::new(p), &grants, &ours);
        assert_eq!(v("/root/ws/a/b"), ReadVerdict::Granted);
        assert_eq!(v("/root/ws"), ReadVerdict::Granted);
        assert_eq!(v("pipe:[123]"), ReadVerdict::Granted);
        assert_eq!(v("anon_inode:[eventfd]"), ReadVerdict::Granted);
        assert_eq!(v("/root/wsx"), ReadVerdict::AsAnyone);
        assert_eq!(v("/root/.config/y"), ReadVerdict::AsAnyone);
        assert_eq!(v("/etc/shadow"), ReadVerdict::AsAnyone);
        assert_eq!(v("/proc/40/environ"), ReadVerdict::Granted);
        assert_eq!(v("/proc/40/task/41/mem"), ReadVerdict::Granted);
        assert_eq!(v("/proc/kcore"), ReadVerdict::AsAnyone);
        assert_eq!(v("/proc/sys/kernel/ostype"), ReadVerdict::AsAnyone);
        assert_eq!(v("/proc/1"), ReadVerdict::AsAnyone);
        assert_eq!(v("/proc/1/cmdline"), ReadVerdict::AsAnyone);
        assert_eq!(v("/proc/1/task/7/stat"), ReadVerdict::AsAnyone);
        assert_eq!(v("/proc/1/task"), ReadVerdict::AsAnyone);
        for no in [
            "/proc/1/environ",
            "/proc/1/maps",
            "/proc/1/mem",
            "/proc/1/fd",
            "/proc/1/task/7/environ",
            "/proc/1/root",
        ] {
            assert_eq!(v(no), ReadVerdict::Refused, "{no}");
        }
    }
}
