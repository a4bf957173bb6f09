//! The session's own cgroup (Linux, cgroup v2, where this user may create one: root, or a
//! delegated subtree such as a systemd user session's). The program's whole tree lives in
//! it, and at the end `cgroup.kill` ends everything in it at once — also what escaped the
//! process tree. Optional limits for the whole session: `pids.max` and `memory.max`.
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
    dir: PathBuf,
    /// The directory, for clone3's CLONE_INTO_CGROUP.
    dir_fd: OwnedFd,
    /// `cgroup.procs`, for a child to write itself into before exec where clone3 cannot.
    procs: OwnedFd,
}

/// Why the session cannot have the cgroup its limits need.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("the session limits (limits.session_processes, limits.session_memory_mib) need a cgroup v2 hierarchy this user may write to, and there is none: {0}\nHint: run under systemd with a delegated user session (systemd-run --user --scope -p Delegate=yes sbx-shell …), as root on a cgroup v2 host, or drop the session limits")]
    Unavailable(String),
    #[error("the session limit {file} is not available in {dir} (its controller is not enabled for this cgroup)\nHint: enable the controller for the parent cgroup (cgroup.subtree_control), or drop that limit")]
    NoController { file: &'static str, dir: String },
    #[error("cannot set {file} in {dir}: {error}")]
    Write {
        file: &'static str,
        dir: String,
        error: io::Error,
    },
}

impl SessionCgroup {
    /// Create the session's cgroup below this process's own, with `limits`. `Ok(None)` where
    /// none can be made and no limit needs one.
    pub fn create(limits: SessionLimits) -> Result<Option<SessionCgroup>, CgroupError> {
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
        let namespace = pid_namespace();
        remove_stale(&parent, &namespace);
        let dir = parent.join(format!("sbx-shell-{namespace}-{}", std::process::id()));
        if let Err(e) = fs::create_dir(&dir) {
            return unavailable(format!("cannot create {}: {e}", dir.display()));
        }
        let opened = fs::File::open(&dir).and_then(|d| {
            let procs = fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))?;
            Ok((d, procs))
        });
        let cgroup = match opened {
            Ok((dir_fd, procs)) => SessionCgroup {
                dir,
                dir_fd: dir_fd.into(),
                procs: procs.into(),
            },
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                return unavailable(format!("cannot open {}: {e}", dir.display()));
            }
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
            let path = self.dir.join(file);
            if !path.exists() {
                return Err(CgroupError::NoController {
                    file,
                    dir: self.dir.display().to_string(),
                });
            }
            fs::write(&path, value.to_string()).map_err(|error| CgroupError::Write {
                file,
                dir: self.dir.display().to_string(),
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
        &self.dir
    }

    /// Kill everything still in the cgroup and remove it (bounded: a second at most).
    pub fn end(self) {
        kill_and_remove(&self.dir);
    }
}

/// `cgroup.kill` (SIGKILL to every member, atomically), wait until it is empty (the kernel
/// says so in `cgroup.events`, which poll(2) reports as changed), remove it. Bounded: a
/// second at most.
fn kill_and_remove(dir: &Path) {
    match fs::remove_dir(dir) {
        Ok(()) => return,
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

/// This process's pid namespace (the inode of `/proc/self/ns/pid`): a session cgroup is
/// named by it and the pid, since a pid means something only in its namespace (an
/// sbx-shell inside another's sandbox sees none of the outer one's pids).
fn pid_namespace() -> String {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/pid")
        .map(|m| m.ino().to_string())
        .unwrap_or_else(|_| "0".into())
}

/// Session cgroups of earlier sbx-shells of this pid namespace that were killed before
/// they could remove theirs.
fn remove_stale(parent: &Path, namespace: &str) {
    for entry in fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if stale_pid(name.to_str().unwrap_or_default(), namespace)
            .is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists())
        {
            kill_and_remove(&entry.path());
        }
    }
}

/// The initial pid namespace's inode (`PROC_PID_INIT_INO`): the host's, where the names
/// of earlier versions (`sbx-shell-PID`, no namespace) were made.
const INIT_PID_NAMESPACE: &str = "4026531836";

/// The pid in a session cgroup's name when it was made in `namespace`.
fn stale_pid(name: &str, namespace: &str) -> Option<i32> {
    let rest = name.strip_prefix("sbx-shell-")?;
    match rest
        .strip_prefix(namespace)
        .and_then(|r| r.strip_prefix('-'))
    {
        Some(pid) => pid.parse().ok(),
        None if namespace == INIT_PID_NAMESPACE && !rest.contains('-') => rest.parse().ok(),
        None => None,
    }
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
    fn only_this_pid_namespaces_session_cgroups_can_be_stale() {
        assert_eq!(stale_pid("sbx-shell-4026531836-42", "4026531836"), Some(42));
        assert_eq!(stale_pid("sbx-shell-4026532999-42", "4026531836"), None);
        // Earlier versions' names, from the host's namespace only.
        assert_eq!(stale_pid("sbx-shell-42", "4026531836"), Some(42));
        assert_eq!(stale_pid("sbx-shell-42", "4026532999"), None);
        assert_eq!(stale_pid("other", "4026531836"), None);
    }
}
