//! What this machine and this session's place on it are: measured once per run, here only,
//! and read by everything that decides or builds from it — `sandbox::select` (which backend),
//! `doctor` (why, and the remedy), `explain` and the run (the sandbox builders' inputs).
//!
//! Two parts: `Machine`, the facts about the kernel and the installed tools that the backend
//! decision rests on, and `Place`, where this session runs (its directory, the temporary and
//! runtime directories, the host's sockets, what each path is). Measuring is cheap by default
//! (file reads and one syscall); `Probes::Run` also starts a probe sandbox, which `doctor`
//! asks for. Nothing here decides anything.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::policy::PathResolver;

/// The machine and the session's place on it.
#[derive(Debug)]
pub struct Host {
    pub machine: Machine,
    pub place: Place,
}

impl Host {
    /// Measure both parts, without probe runs.
    pub fn measure() -> Host {
        Host {
            machine: Machine::measure(Probes::Skip),
            place: Place::measure(),
        }
    }
}

/// Whether measuring may start a probe sandbox (a few milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probes {
    Skip,
    Run,
}

/// The facts a backend decision rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub os: &'static str,
    /// The effective user is root.
    pub root: bool,
    /// The Landlock ABI version, or why there is none.
    pub landlock_abi: Result<i64, String>,
    /// The sysctls that close user namespaces, as read (absent files are `None`).
    pub userns: UserNamespaces,
    /// bwrap at a fixed system path, if any.
    pub bwrap: Option<PathBuf>,
    /// How a probe sandbox with the backend's namespaces and mounts ended (not run: `None`).
    pub bwrap_probe: Option<Result<(), String>>,
    /// The `Seccomp:` mode of this process, when the kernel has seccomp at all.
    pub seccomp_mode: Option<String>,
    /// dev.tty.legacy_tiocsti, when the sysctl exists.
    pub legacy_tiocsti: Option<String>,
    /// The open-file limit (soft, hard).
    pub nofile: Option<(u64, u64)>,
    /// macOS: how a probe run of /usr/bin/sandbox-exec ended (not run: `None`).
    pub sandbox_exec_probe: Option<Result<(), String>>,
}

/// kernel.unprivileged_userns_clone, user.max_user_namespaces and (Ubuntu)
/// kernel.apparmor_restrict_unprivileged_userns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserNamespaces {
    pub unprivileged_clone: Option<String>,
    pub max: Option<String>,
    pub apparmor_restrict: Option<String>,
}

impl UserNamespaces {
    /// Whether an unprivileged bwrap can create user namespaces (root always can).
    pub fn open(&self, root: bool) -> bool {
        let is = |v: &Option<String>, x: &str| v.as_deref().is_some_and(|v| v.trim() == x);
        root || !(is(&self.unprivileged_clone, "0")
            || is(&self.max, "0")
            || is(&self.apparmor_restrict, "1"))
    }
}

/// Fixed locations bwrap is taken from: never `$PATH`, which a workspace could shadow.
pub const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/bin/bwrap"];

impl Machine {
    /// The facts, measured now.
    pub fn measure(probes: Probes) -> Machine {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let os = std::env::consts::OS;
        let linux = os == "linux";
        let bwrap = if linux { find_bwrap() } else { None };
        Machine {
            os,
            root: nix::unistd::geteuid().is_root(),
            landlock_abi: platform::landlock_abi(),
            userns: UserNamespaces {
                unprivileged_clone: read("/proc/sys/kernel/unprivileged_userns_clone"),
                max: read("/proc/sys/user/max_user_namespaces"),
                apparmor_restrict: read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            },
            bwrap_probe: bwrap
                .as_deref()
                .filter(|_| probes == Probes::Run)
                .map(probe_bwrap),
            bwrap,
            seccomp_mode: read("/proc/self/status").and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
            }),
            legacy_tiocsti: read("/proc/sys/dev/tty/legacy_tiocsti"),
            nofile: nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok(),
            sandbox_exec_probe: (os == "macos" && probes == Probes::Run).then(|| {
                probe(
                    crate::sandbox::seatbelt::SANDBOX_EXEC,
                    &["-p", "(version 1)(allow default)", "/usr/bin/true"],
                )
            }),
        }
    }

    /// Whether bwrap can create its namespaces here: the sysctls allow it and no probe
    /// sandbox failed.
    pub fn bwrap_runs(&self) -> Result<&Path, String> {
        let Some(path) = &self.bwrap else {
            return Err(format!(
                "bwrap is not installed ({})",
                BWRAP_PATHS.join(" or ")
            ));
        };
        if !self.userns.open(self.root) {
            return Err(format!(
                "{} cannot create user namespaces here",
                path.display()
            ));
        }
        match &self.bwrap_probe {
            Some(Err(why)) => Err(format!("{}: probe failed: {why}", path.display())),
            _ => Ok(path),
        }
    }
}

/// The first bwrap at a fixed path.
pub fn find_bwrap() -> Option<PathBuf> {
    BWRAP_PATHS
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .map(Path::to_path_buf)
}

/// Run bwrap around `true` with the namespaces and base mounts the bwrap backend uses.
fn probe_bwrap(bwrap: &Path) -> Result<(), String> {
    let mut args = crate::sandbox::bwrap::NAMESPACES.to_vec();
    args.extend([
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--",
        "/bin/true",
    ]);
    probe(&bwrap.display().to_string(), &args)
}

fn probe(program: &str, args: &[&str]) -> Result<(), String> {
    match std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .trim()
                .lines()
                .next()
                .unwrap_or("")
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Where this session runs.
#[derive(Debug)]
pub struct Place {
    /// The current directory, or why it cannot be read.
    pub cwd: Result<PathBuf, String>,
    /// The per-user temporary directory (`$TMPDIR`, real path).
    pub temp_dir: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR` (real path), when it exists.
    pub runtime_dir: Option<PathBuf>,
    /// Host sockets that reach outside the sandbox and exist here: the ssh agent and
    /// container engines, each by its real path (`/var/run` is often a link to `/run`) and
    /// once. (The session bus and gpg-agent live in the runtime directory.)
    pub sockets: Vec<PathBuf>,
    kinds: PathKinds,
}

impl Place {
    /// The place, measured now.
    pub fn measure() -> Place {
        Place {
            cwd: std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}")),
            temp_dir: std::env::var_os("TMPDIR").and_then(|t| std::fs::canonicalize(t).ok()),
            runtime_dir: std::env::var_os("XDG_RUNTIME_DIR")
                .and_then(|r| std::fs::canonicalize(r).ok()),
            sockets: host_sockets(&RealFs::default()),
            kinds: PathKinds::default(),
        }
    }

    /// What `path` is on this host (following symlinks), asked once per path.
    pub fn kind(&self, path: &Path) -> PathKind {
        self.kinds.kind(path)
    }
}

/// The real filesystem, for symlink resolution. Remembers the directories it resolved: a
/// policy names a hundred paths under a few directories, and `canonicalize` would read
/// every link of every prefix again for each one (startup time).
#[derive(Default)]
pub struct RealFs {
    known: RefCell<HashMap<PathBuf, Option<PathBuf>>>,
}

impl PathResolver for RealFs {
    fn real_path(&self, path: &Path) -> Option<PathBuf> {
        if let Some(known) = self.known.borrow().get(path) {
            return known.clone();
        }
        let real = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if path.is_absolute() => {
                let joined = self.real_path(parent)?.join(name);
                match std::fs::symlink_metadata(&joined) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        std::fs::canonicalize(&joined).ok()
                    }
                    Ok(_) => Some(joined),
                    Err(_) => None,
                }
            }
            _ => std::fs::canonicalize(path).ok(),
        };
        self.known
            .borrow_mut()
            .insert(path.to_path_buf(), real.clone());
        real
    }
}

/// What a path is on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Dir,
    File,
    Missing,
}

/// What each path is, asked once per path: the builders look at every protected and denied
/// path, some more than once.
#[derive(Debug, Default)]
struct PathKinds {
    known: RefCell<HashMap<PathBuf, PathKind>>,
}

impl PathKinds {
    fn kind(&self, path: &Path) -> PathKind {
        if let Some(kind) = self.known.borrow().get(path) {
            return *kind;
        }
        let kind = match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => PathKind::Dir,
            Ok(_) => PathKind::File,
            Err(_) => PathKind::Missing,
        };
        self.known.borrow_mut().insert(path.to_path_buf(), kind);
        kind
    }
}

/// The host sockets that exist, resolved like policy paths (real path, each once).
fn host_sockets(fs: &dyn PathResolver) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("SSH_AUTH_SOCK")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.extend(
        [
            "/var/run/docker.sock",
            "/run/docker.sock",
            "/run/podman/podman.sock",
        ]
        .map(PathBuf::from),
    );
    let mut sockets: Vec<PathBuf> = Vec::new();
    for real in candidates.iter().filter_map(|p| fs.real_path(p)) {
        if !sockets.contains(&real) {
            sockets.push(real);
        }
    }
    sockets
}

#[cfg(target_os = "linux")]
mod platform {
    /// The Landlock ABI version the kernel offers (landlock_create_ruleset, VERSION flag).
    pub fn landlock_abi() -> Result<i64, String> {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: with a null attribute pointer, size 0 and the VERSION flag the kernel only
        // returns the ABI number; no memory is read or written.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if abi >= 0 {
            return Ok(abi);
        }
        let err = std::io::Error::last_os_error();
        Err(match err.raw_os_error() {
            Some(libc::ENOSYS) => "not in this kernel (ENOSYS)".to_string(),
            Some(libc::EOPNOTSUPP) => "disabled at boot (EOPNOTSUPP)".to_string(),
            _ => err.to_string(),
        })
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    pub fn landlock_abi() -> Result<i64, String> {
        Err("not Linux".to_string())
    }
}

#[cfg(test)]
pub mod test_support {
    use super::*;

    /// A Linux machine where every backend can run.
    pub fn capable_linux() -> Machine {
        Machine {
            os: "linux",
            root: false,
            landlock_abi: Ok(7),
            userns: UserNamespaces {
                unprivileged_clone: Some("1".into()),
                max: Some("15000".into()),
                apparmor_restrict: None,
            },
            bwrap: Some("/usr/bin/bwrap".into()),
            bwrap_probe: Some(Ok(())),
            seccomp_mode: Some("0".into()),
            legacy_tiocsti: Some("0".into()),
            nofile: Some((1024, 524288)),
            sandbox_exec_probe: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn userns(clone: Option<&str>, max: Option<&str>, apparmor: Option<&str>) -> UserNamespaces {
        UserNamespaces {
            unprivileged_clone: clone.map(String::from),
            max: max.map(String::from),
            apparmor_restrict: apparmor.map(String::from),
        }
    }

    #[test]
    fn user_namespaces_are_open_unless_a_sysctl_closes_them() {
        assert!(userns(None, None, None).open(false));
        assert!(userns(Some("1\n"), Some("15000\n"), Some("0\n")).open(false));
        assert!(!userns(Some("0\n"), None, None).open(false));
        assert!(!userns(None, Some("0"), None).open(false));
        assert!(!userns(None, None, Some("1")).open(false));
        assert!(userns(Some("0"), Some("0"), Some("1")).open(true));
    }

    #[test]
    fn real_paths_match_canonicalize_through_links_dots_and_missing_parts() {
        let dir = std::env::temp_dir().join(format!("sbx-realfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("real/sub")).unwrap();
        std::fs::write(dir.join("real/sub/file"), "").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/file", dir.join("real/relative")).unwrap();
        std::os::unix::fs::symlink(dir.join("nowhere"), dir.join("dangling")).unwrap();
        let fs = RealFs::default();
        for tail in [
            "real/sub/file",
            "link/sub/file",
            "link/relative",
            "link/sub/../sub/file",
            "./link/./sub",
            "dangling",
            "missing/file",
            "real/sub/file/below",
            "link",
            "",
        ] {
            let path = dir.join(tail);
            // Twice: the second answer comes from what the first one remembered.
            for _ in 0..2 {
                assert_eq!(
                    fs.real_path(&path),
                    std::fs::canonicalize(&path).ok(),
                    "{tail}"
                );
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn path_kinds_are_read_once_and_follow_links() {
        let place = Place::measure();
        assert_eq!(place.kind(Path::new("/")), PathKind::Dir);
        assert_eq!(place.kind(Path::new("/proc/self/status")), PathKind::File);
        assert_eq!(
            place.kind(Path::new("/nonexistent/sbx-shell")),
            PathKind::Missing
        );
    }
}
