//! The session's own cgroup (Linux, cgroup v2, where this user may create one: root, or a
//! delegated subtree such as a systemd user session's). The program's whole tree lives in
//! it, and at the end `cgroup.kill` ends everything in it at once — also what escaped the
//! process tree. Optional limits for the whole session: `pids.max` and `memory.max`.
//!
//! A session's cgroup is a claim (`session::claim`): `PARENT/sbx-shell-NS-PID` (NS its pid
//! namespace: a pid names a process only there, and sessions of other homes may share the
//! parent), its lock in the state directory (a cgroup holds no files), under a directory
//! named for the parent, so that a session sweeps only what was made beside its own
//! cgroup.
//!
//! Where no cgroup v2 hierarchy is writable, there is no session cgroup and the process
//! guard and the subreaper clean up alone; a policy that asks for a session limit is then
//! refused (never run without the limit it asked for).

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

/// Limits on the whole session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionLimits {
    /// `pids.max`: processes and threads of the whole session.
    pub pids: Option<u64>,
    /// `memory.max`, bytes.
    pub memory_bytes: Option<u64>,
}

impl SessionLimits {
    pub fn any(&self) -> bool {
        self.pids.is_some() || self.memory_bytes.is_some()
    }
}

/// A cgroup made for this session; killed and removed by `end`.
#[derive(Debug)]
pub struct SessionCgroup {
    /// Its directory: killed and removed when dropped.
    claim: super::claim::Claim,
    /// The directory, for clone3's CLONE_INTO_CGROUP.
    dir_fd: OwnedFd,
    /// `cgroup.procs`, for a child to write itself into before exec where clone3 cannot.
    procs: OwnedFd,
}

/// Why the session cannot have the cgroup its limits need.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error(
        "the session limits (limits.session_processes, limits.session_memory_mib) need a cgroup \
        v2 hierarchy this user may write to, and there is none: {0}\nHint: run under systemd \
        with a delegated user session (systemd-run --user --scope -p Delegate=yes sbx-shell …), \
        as root on a cgroup v2 host, or drop the session limits"
    )]
    Unavailable(String),
    #[error(
        "the session limit {file} is not available in {dir} (its controller is not enabled for \
        this cgroup)\nHint: enable the controller for the parent cgroup \
        (cgroup.subtree_control), or drop that limit"
    )]
    NoController { file: &'static str, dir: String },
    #[error("cannot set {file} in {dir}: {error}")]
    Write {
        file: &'static str,
        dir: String,
        error: io::Error,
    },
}

impl SessionCgroup {
    /// Create the session's cgroup below this process's own, with `limits`, its lock in
    /// `state`. `Ok(None)` where none can be made and no limit needs one.
    pub fn create(
        limits: SessionLimits,
        state: &Path,
    ) -> Result<Option<SessionCgroup>, CgroupError> {
        let unavailable = |why: String| {
            if limits.any() {
                Err(CgroupError::Unavailable(why))
            } else {
                Ok(None)
            }
        };
        let Some(parent) = own_cgroup_dir() else {
            return unavailable("no cgroup v2 hierarchy is mounted for this process".into());
        };
        let writable = nix::unistd::access(&parent, nix::unistd::AccessFlags::W_OK);
        if let Err(e) = writable {
            return unavailable(format!(
                "cannot create a cgroup in {}: {e}",
                parent.display()
            ));
        }
        let locks = state.join("cgroups").join(locks_name(&parent));
        let shared = super::claim::Claims {
            dir: &parent,
            locks: &locks,
            prefix: "sbx-shell-",
            suffix: "",
            remove: kill_and_remove,
        };
        let taken = crate::sys::files::create_private_dir(&locks).and_then(|()| {
            let name = format!("sbx-shell-{}-{}", pid_namespace(), std::process::id());
            shared.take(&name, &|d| fs::create_dir(d))
        });
        let claim = match taken {
            Ok(claim) => claim,
            Err(e) => {
                return unavailable(format!(
                    "cannot create a cgroup in {}: {e}",
                    parent.display()
                ))
            }
        };
        let dir = claim.path().to_path_buf();
        let opened = fs::File::open(&dir).and_then(|d| {
            let procs = fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))?;
            Ok((d, procs))
        });
        let cgroup = match opened {
            Ok((dir_fd, procs)) => SessionCgroup {
                claim,
                dir_fd: dir_fd.into(),
                procs: procs.into(),
            },
            Err(e) => return unavailable(format!("cannot open {}: {e}", dir.display())),
        };
        match cgroup.set_limits(limits) {
            Ok(()) => Ok(Some(cgroup)),
            Err(e) => {
                cgroup.end();
                Err(e)
            }
        }
    }

    fn set_limits(&self, limits: SessionLimits) -> Result<(), CgroupError> {
        let set = [
            ("pids.max", limits.pids),
            ("memory.max", limits.memory_bytes),
        ];
        for (file, value) in set {
            let Some(value) = value else { continue };
            let path = self.dir().join(file);
            if !path.exists() {
                return Err(CgroupError::NoController {
                    file,
                    dir: self.dir().display().to_string(),
                });
            }
            fs::write(&path, value.to_string()).map_err(|error| CgroupError::Write {
                file,
                dir: self.dir().display().to_string(),
                error,
            })?;
        }
        Ok(())
    }

    /// The fds a child is started into the cgroup with.
    pub fn fds(&self) -> crate::sys::process::CgroupFds {
        crate::sys::process::CgroupFds {
            dir: self.dir_fd.as_raw_fd(),
            procs: self.procs.as_raw_fd(),
        }
    }

    pub fn dir(&self) -> &Path {
        self.claim.path()
    }

    /// Kill everything still in the cgroup and remove it (bounded: a second at most).
    pub fn end(self) {
        drop(self.claim);
    }
}

/// `cgroup.kill` (SIGKILL to every member, atomically), wait until it is empty (the kernel
/// says so in `cgroup.events`, which poll(2) reports as changed), remove it. Bounded: a
/// second at most.
fn kill_and_remove(dir: &Path) {
    match fs::remove_dir(dir) {
        Ok(()) => return,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        // Another user's (a root session's, seen by an unprivileged one): not ours to end,
        // and waiting would not make it ours.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return,
        Err(_) => {}
    }
    if fs::write(dir.join("cgroup.kill"), "1").is_err() {
        // Before Linux 5.14: kill the members one by one.
        for pid in fs::read_to_string(dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter(|pid| *pid > 0)
        {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    let events = fs::File::open(dir.join("cgroup.events")).ok();
    while fs::remove_dir(dir).is_err() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        match &events {
            Some(events) if populated(events) => {
                use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
                let mut pfd = [PollFd::new(events.as_fd(), PollFlags::POLLPRI)];
                let _ = poll(
                    &mut pfd,
                    PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
                );
            }
            _ => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Whether `cgroup.events` says the cgroup still has members.
fn populated(events: &fs::File) -> bool {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 128];
    let n = events.read_at(&mut buf, 0).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n])
        .lines()
        .any(|l| l.trim() == "populated 1")
}

/// This process's pid namespace (the inode of `/proc/self/ns/pid`).
fn pid_namespace() -> String {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/pid")
        .map(|m| m.ino().to_string())
        .unwrap_or_else(|_| "0".into())
}

/// The name of the directory that holds the locks of the session cgroups made below
/// `parent`: its path with each `%` written `%25` and each `/` written `%2F`, so that every
/// parent has its own.
fn locks_name(parent: &Path) -> String {
    parent
        .to_string_lossy()
        .replace('%', "%25")
        .replace('/', "%2F")
}

/// This process's cgroup directory in the cgroup v2 hierarchy, if one is mounted where it
/// can be found: the mount's root must lie above the process's cgroup (in a cgroup
/// namespace a mount of `/..` would put it elsewhere: no directory then).
fn own_cgroup_dir() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroup = fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let (root, mount) = cgroup2_mount(&mountinfo)?;
    cgroup_dir(&root, &mount, own)
}

/// Where cgroup `own` lies under a cgroup2 mount of `root` at `mount`.
fn cgroup_dir(root: &str, mount: &Path, own: &str) -> Option<PathBuf> {
    let below = Path::new(own).strip_prefix(root).ok()?;
    if root.split('/').any(|c| c == "..") {
        return None;
    }
    Some(mount.join(below))
}

/// The root and mount point of the cgroup v2 hierarchy in `mountinfo`, if any: the last
/// one listed that is reachable (a later mount can hide an earlier one).
fn cgroup2_mount(mountinfo: &str) -> Option<(String, PathBuf)> {
    cgroup2_mounts(mountinfo)
        .into_iter()
        .rev()
        .find(|(_, m)| m.join("cgroup.procs").exists())
}

fn cgroup2_mounts(mountinfo: &str) -> Vec<(String, PathBuf)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fstype = right.split_whitespace().next()?;
            let mut fields = left.split_whitespace();
            let root = fields.nth(3)?;
            let mount_point = fields.next()?;
            (fstype == "cgroup2").then(|| (unescape(root), PathBuf::from(unescape(mount_point))))
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_in_mountinfo() {
        let info = "22 1 0:21 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                    30 22 0:26 / /sys/fs/cgroup\\040v2 rw,nosuid - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mounts(info),
            vec![("/".to_string(), PathBuf::from("/sys/fs/cgroup v2"))]
        );
        assert!(cgroup2_mounts("22 1 0:21 / /x rw - cgroup cgroup rw\n").is_empty());
    }

    #[test]
    fn the_own_cgroup_lies_below_the_mount_only_when_its_root_is_above_it() {
        let mount = Path::new("/sys/fs/cgroup");
        assert_eq!(
            cgroup_dir("/", mount, "/user.slice/s"),
            Some(mount.join("user.slice/s"))
        );
        assert_eq!(
            cgroup_dir("/user.slice", mount, "/user.slice/s"),
            Some(mount.join("s"))
        );
        // Inside another sandbox's cgroup namespace, mounted from above its root.
        assert_eq!(cgroup_dir("/..", mount, "/"), None);
        assert_eq!(cgroup_dir("/other", mount, "/user.slice"), None);
    }

    #[test]
    fn each_parent_has_its_own_locks() {
        assert_eq!(
            locks_name(Path::new("/sys/fs/cgroup/a.slice")),
            "%2Fsys%2Ffs%2Fcgroup%2Fa.slice"
        );
        assert_ne!(
            locks_name(Path::new("/a%/b")),
            locks_name(Path::new("/a/%b"))
        );
        assert_ne!(
            locks_name(Path::new("/a/b")),
            locks_name(Path::new("/a%2Fb"))
        );
    }
}
