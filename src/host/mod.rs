//! What this machine and this session's place on it are: measured once per run, here only,
//! and read by everything that decides or builds from it — `sandbox::select` (which backend),
//! `doctor` (why, and the remedy), `explain` and the run (the sandbox builders' inputs).
//!
//! Two parts: `Machine`, the facts about the kernel and the installed tools that the backend
//! decision rests on, and `Place`, where this session runs (its directory, the temporary and
//! runtime directories, the host's sockets, what each path is). Measuring is cheap by default
//! (file reads and one syscall); `Probes::Run` also starts a probe sandbox, which `doctor`
//! asks for. Nothing here decides anything.

pub mod rootsecrets;
pub mod sockets;

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
    /// Measure both parts, with `probes`.
    pub fn measure(probes: Probes<'_>) -> Host {
        Host {
            machine: Machine::measure(probes),
            place: Place::measure(),
        }
    }
}

/// Whether measuring may start a probe sandbox (about 5 ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probes<'a> {
    /// No probe: the sysctls alone say whether bwrap could run (`explain`).
    Skip,
    /// Probe now, and remember a success in the cache file, if given (`doctor`).
    Fresh(Option<&'a Path>),
    /// Take a success remembered in the cache file for this very machine state, else probe
    /// as `Fresh` (a run).
    Cached(&'a Path),
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
    /// What `bwrap --version` says (`doctor` only: `Probes::Fresh`).
    pub bwrap_version: Option<String>,
    /// The `Seccomp:` mode of this process, when the kernel has seccomp at all.
    pub seccomp_mode: Option<String>,
    /// Whether a filter with a listener (sbx-shell's guard) can be added to this process,
    /// or why not: a process may have one listener among all its filters, so inside a
    /// sandbox whose supervisor judges calls (sbx-shell inside sbx-shell) none can.
    pub seccomp_listener: Result<(), String>,
    /// `SBX_SANDBOX`, which sbx-shell sets for its program: this runs inside sbx-shell.
    pub inside_sbx_shell: Option<String>,
    /// dev.tty.legacy_tiocsti, when the sysctl exists.
    pub legacy_tiocsti: Option<String>,
    /// The open-file limit (soft, hard).
    pub nofile: Option<(u64, u64)>,
    /// macOS: how a probe run of /usr/bin/sandbox-exec ended (not run: `None`).
    pub sandbox_exec_probe: Option<Result<(), String>>,
    /// What says this process runs in a container (`/.dockerenv`, `/run/.containerenv`,
    /// `$container`), if anything does.
    pub container: Option<String>,
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
                .and_then(|path| probe_bwrap_as_asked(path, probes)),
            bwrap_version: bwrap
                .as_deref()
                .filter(|_| matches!(probes, Probes::Fresh(_)))
                .and_then(bwrap_version),
            bwrap,
            seccomp_mode: read("/proc/self/status").and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
            }),
            seccomp_listener: if linux
                && read("/proc/self/status").is_some_and(|s| {
                    s.lines()
                        .any(|l| l.starts_with("Seccomp:") && l.trim().ends_with('2'))
                }) {
                platform::listener_free()
            } else {
                Ok(())
            },
            inside_sbx_shell: std::env::var("SBX_SANDBOX").ok().filter(|v| !v.is_empty()),
            legacy_tiocsti: read("/proc/sys/dev/tty/legacy_tiocsti"),
            nofile: nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok(),
            container: container_marker(),
            sandbox_exec_probe: (os == "macos" && probes != Probes::Skip).then(|| {
                probe(
                    SANDBOX_EXEC,
                    &["-p", "(version 1)(allow default)", "/usr/bin/true"],
                )
            }),
        }
    }

    /// Whether bwrap can run its sandbox here: the probe's answer when it ran (it tries
    /// exactly what a run needs), else what the sysctls say. The error is why not, as
    /// `BwrapUnusable` (the cause and the fix).
    pub fn bwrap_runs(&self) -> Result<&Path, BwrapUnusable> {
        let Some(path) = &self.bwrap else {
            return Err(BwrapUnusable {
                cause: format!("bubblewrap is not installed ({})", BWRAP_PATHS.join(" or ")),
                fix: "`sbx-shell setup` installs it (or: sudo apt-get install bubblewrap / sudo dnf install bubblewrap / sudo pacman -S bubblewrap)".into(),
            });
        };
        match &self.bwrap_probe {
            Some(Ok(())) => Ok(path),
            Some(Err(why)) => Err(self.diagnose(path, Some(why))),
            None if self.userns.open(self.root) => Ok(path),
            None => Err(self.diagnose(path, None)),
        }
    }

    /// Why bwrap at `path` cannot run: the first cause that the facts show, most specific
    /// first; `probe` is the probe's failure, when it ran.
    fn diagnose(&self, path: &Path, probe: Option<&String>) -> BwrapUnusable {
        let is = |v: &Option<String>, x: &str| v.as_deref().is_some_and(|v| v.trim() == x);
        let failed = probe.map_or(String::new(), |why| format!(" (probe: {why})"));
        let (cause, fix) = if probe.is_some_and(|why| why.contains("os error 13")) {
            (
                format!("{} is not executable", path.display()),
                format!(
                    "sudo chmod 755 {0} (or reinstall bubblewrap)",
                    path.display()
                ),
            )
        } else if !self.root && is(&self.userns.apparmor_restrict, "1") {
            (
                "AppArmor's restriction on unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10 and later)".into(),
                "`sbx-shell setup` installs an AppArmor profile that lets /usr/bin/bwrap create user namespaces (or, for every program: sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0)".into(),
            )
        } else if !self.root && is(&self.userns.unprivileged_clone, "0") {
            (
                "unprivileged user namespaces are off (kernel.unprivileged_userns_clone=0)".into(),
                "sudo sysctl kernel.unprivileged_userns_clone=1 (persist it in /etc/sysctl.d/)"
                    .into(),
            )
        } else if is(&self.userns.max, "0") {
            (
                "user namespaces are off (user.max_user_namespaces=0)".into(),
                "sudo sysctl user.max_user_namespaces=15000 (persist it in /etc/sysctl.d/); inside a container the host decides".into(),
            )
        } else if let Some(outer) = &self.inside_sbx_shell {
            (
                format!("this runs inside an sbx-shell session (SBX_SANDBOX={outer}), whose seccomp filter refuses new namespaces"),
                "the program here is sandboxed already: run it directly, or start sbx-shell outside that session".into(),
            )
        } else if let (Some(container), filtered) =
            (&self.container, self.seccomp_mode.as_deref() == Some("2"))
        {
            (
                format!(
                    "a container ({container}) without the permissions bwrap needs: {}",
                    if filtered {
                        "a seccomp filter on this process (the container's profile) refuses new namespaces"
                    } else {
                        "it refuses new namespaces (missing capabilities, or its AppArmor profile)"
                    }
                ),
                "start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined (Docker, Podman), or use the Landlock backend inside it: --backend landlock".into(),
            )
        } else if self.seccomp_mode.as_deref() == Some("2") {
            (
                "a seccomp filter on this process (a sandbox around sbx-shell) refuses new namespaces".into(),
                "run sbx-shell outside that sandbox, or use the Landlock backend inside it: --backend landlock".into(),
            )
        } else {
            (
                format!("{} cannot create its sandbox here", path.display()),
                "`sbx-shell doctor` shows each check".into(),
            )
        };
        BwrapUnusable {
            cause: format!("{cause}{failed}"),
            fix,
        }
    }
}

/// Why bwrap cannot run here, and what fixes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BwrapUnusable {
    pub cause: String,
    pub fix: String,
}

/// What says this process runs in a container, if anything does.
fn container_marker() -> Option<String> {
    if let Some(value) = std::env::var_os("container") {
        return Some(format!("container={}", value.to_string_lossy()));
    }
    [("/.dockerenv", "Docker"), ("/run/.containerenv", "Podman")]
        .iter()
        .find(|(path, _)| Path::new(path).exists())
        .map(|(_, name)| name.to_string())
}

/// The first bwrap at a fixed path.
pub fn find_bwrap() -> Option<PathBuf> {
    BWRAP_PATHS
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .map(Path::to_path_buf)
}

/// Where a run remembers that bwrap's probe succeeded: in sbx-shell's state directory.
pub fn probe_cache(home: &Path) -> PathBuf {
    crate::sys::files::state_dir(home).join("bwrap-probe")
}

/// The bwrap probe's result as `probes` asks: not run, run now, or a remembered success.
///
/// Only successes are remembered, under a key of everything that decides whether bwrap can
/// create its namespaces here (the user, the bwrap binary, the boot, the user-namespace
/// sysctls, this process's namespaces, seccomp filters and AppArmor label, the AppArmor
/// policy revision). A failure is probed again on every run: a cache file that the program
/// could write (under a `$HOME`-wide workspace) can then never switch bwrap off, only make a
/// run try it.
/// `bwrap --version`'s answer (`bubblewrap 0.8.0`), trimmed.
fn bwrap_version(bwrap: &Path) -> Option<String> {
    let out = std::process::Command::new(bwrap)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// The version `(major, minor, patch)` in `bwrap --version`'s answer.
pub fn parse_bwrap_version(text: &str) -> Option<(u32, u32, u32)> {
    let number = text.split_whitespace().last()?;
    let mut parts = number.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// The first bubblewrap that does not follow a parent symlink while it makes a mount point
/// (GHSA-pxhw-h44j-8pfx).
pub const BWRAP_MOUNT_POINT_FIX: (u32, u32, u32) = (0, 12, 0);

fn probe_bwrap_as_asked(bwrap: &Path, probes: Probes<'_>) -> Option<Result<(), String>> {
    let cache = match probes {
        Probes::Skip => return None,
        Probes::Fresh(cache) => cache,
        Probes::Cached(cache) => {
            let key = probe_key(bwrap);
            if std::fs::read_to_string(cache).is_ok_and(|k| k == key) {
                return Some(Ok(()));
            }
            Some(cache)
        }
    };
    let result = probe_bwrap(bwrap);
    if let Some(cache) = cache {
        let _ = match &result {
            Ok(()) => crate::sys::files::write_private(cache, probe_key(bwrap).as_bytes()),
            Err(_) => std::fs::remove_file(cache),
        };
    }
    Some(result)
}

/// What the bwrap probe's result depends on, as one line of text.
fn probe_key(bwrap: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let link = |path: &str| {
        std::fs::read_link(path)
            .map(|l| l.display().to_string())
            .unwrap_or_default()
    };
    let binary = std::fs::metadata(bwrap).map_or(String::new(), |m| {
        format!(
            "{}:{}:{}:{}:{:o}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mode()
        )
    });
    let status = read("/proc/self/status");
    let seccomp: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("Seccomp") || l.starts_with("NoNewPrivs"))
        .collect();
    [
        // v2: the probe keeps the helper's capabilities too.
        format!("v2 uid={}", nix::unistd::geteuid()),
        format!("bwrap={}:{binary}", bwrap.display()),
        read("/proc/sys/kernel/random/boot_id"),
        read("/proc/sys/kernel/unprivileged_userns_clone"),
        read("/proc/sys/user/max_user_namespaces"),
        read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        read("/sys/kernel/security/apparmor/revision"),
        read("/proc/self/attr/current"),
        link("/proc/self/ns/user"),
        link("/proc/self/ns/mnt"),
        link("/proc/self/ns/pid"),
        seccomp.join(","),
    ]
    .iter()
    .map(|s| s.trim().replace('\n', " "))
    .collect::<Vec<_>>()
    .join("|")
        + "\n"
}

/// The namespaces and the base mounts of every bwrap sandbox (doctor's probe runs them too).
///
/// `--as-pid-1`: the helper (then its guard) is the pid namespace's init, not a bwrap
/// process. The helper hides paths in a mount namespace of its own; a bwrap init left in
/// bwrap's would show the unhidden tree through `/proc/1/root` wherever Landlock (whose
/// ptrace scoping refuses that) is not there to stop it.
pub const BWRAP_NAMESPACES: &[&str] = &[
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--as-pid-1",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
];

/// The only sandbox-exec sbx-shell runs.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Run bwrap around `true` with the namespaces, base mounts and kept capabilities the bwrap
/// backend uses.
fn probe_bwrap(bwrap: &Path) -> Result<(), String> {
    let mut args = BWRAP_NAMESPACES.to_vec();
    args.extend([
        "--unshare-net",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SETPCAP",
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
    /// The host's unix sockets and runtime directories (`sockets::Found`).
    pub sockets: crate::host::sockets::Found,
    /// macOS: the terminals that exist now (`/dev/ttys*`, the outer one among them), which
    /// Seatbelt denies by name. Empty elsewhere.
    pub terminals: Vec<PathBuf>,
    /// macOS: the terminal on sbx-shell's stdio, the program's own when it has no pty of
    /// its own (it inherits that terminal). `None` elsewhere.
    pub stdio_terminal: Option<PathBuf>,
    /// macOS: the user's per-user directories (`confstr`), real paths. Empty elsewhere.
    pub user_dirs: Vec<PathBuf>,
    kinds: PathKinds,
    identities: RefCell<HashMap<PathBuf, Option<crate::sys::files::Identity>>>,
}

impl Place {
    /// The place, measured now.
    pub fn measure() -> Place {
        let runtime_dir =
            std::env::var_os("XDG_RUNTIME_DIR").and_then(|r| std::fs::canonicalize(r).ok());
        Place {
            cwd: std::env::current_dir()
                .map_err(|e| format!("cannot read the current directory: {e}")),
            temp_dir: std::env::var_os("TMPDIR").and_then(|t| std::fs::canonicalize(t).ok()),
            sockets: crate::host::sockets::Found::measure(runtime_dir.as_deref()),
            runtime_dir,
            terminals: darwin::terminals(),
            stdio_terminal: darwin::stdio_terminal(),
            user_dirs: darwin::user_dirs(),
            kinds: PathKinds::default(),
            identities: RefCell::default(),
        }
    }

    /// What `path` is on this host (following symlinks), asked once per path.
    pub fn kind(&self, path: &Path) -> PathKind {
        self.kinds.kind(path)
    }

    /// What `path` names, seen without following a symlink, asked once per path.
    pub fn identity(&self, path: &Path) -> Option<crate::sys::files::Identity> {
        if let Some(id) = self.identities.borrow().get(path) {
            return *id;
        }
        let id = crate::sys::files::identity_of(path);
        self.identities.borrow_mut().insert(path.to_path_buf(), id);
        id
    }
}

/// What the Seatbelt profile needs to know of a Mac (`sandbox::seatbelt::Inputs`).
#[cfg(target_os = "macos")]
mod darwin {
    use std::path::PathBuf;

    /// Every `/dev/ttysN` that exists now, and the terminals on sbx-shell's stdio.
    pub fn terminals() -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/dev")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.strip_prefix("ttys")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(|e| e.path())
            .collect();
        found.extend([0, 1, 2].into_iter().filter_map(terminal_on));
        found.sort();
        found.dedup();
        found
    }

    /// The terminal on the first of sbx-shell's stdin, stdout, stderr that has one: what a
    /// child without a pty of its own inherits.
    pub fn stdio_terminal() -> Option<PathBuf> {
        [0, 1, 2].into_iter().find_map(terminal_on)
    }

    fn terminal_on(fd: i32) -> Option<PathBuf> {
        let mut buf = [0u8; 1024];
        // SAFETY: ttyname_r writes at most buf.len() bytes, NUL included, into buf.
        let rc = unsafe { libc::ttyname_r(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if rc != 0 {
            return None;
        }
        let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        Some(PathBuf::from(
            <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(buf[..len].to_vec()),
        ))
    }

    /// The per-user directory and its temporary and cache directories, real paths.
    pub fn user_dirs() -> Vec<PathBuf> {
        [
            libc::_CS_DARWIN_USER_DIR,
            libc::_CS_DARWIN_USER_TEMP_DIR,
            libc::_CS_DARWIN_USER_CACHE_DIR,
        ]
        .into_iter()
        .filter_map(|name| {
            let mut buf = vec![0u8; 1024];
            // SAFETY: confstr writes at most buf.len() bytes, NUL included.
            let n = unsafe { libc::confstr(name, buf.as_mut_ptr().cast(), buf.len()) };
            if n == 0 || n > buf.len() {
                return None;
            }
            buf.truncate(n - 1);
            let path = PathBuf::from(
                <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(buf),
            );
            std::fs::canonicalize(path).ok()
        })
        .collect()
    }
}

/// Elsewhere there is no Seatbelt profile to build for the session.
#[cfg(not(target_os = "macos"))]
mod darwin {
    pub fn terminals() -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    pub fn stdio_terminal() -> Option<std::path::PathBuf> {
        None
    }

    pub fn user_dirs() -> Vec<std::path::PathBuf> {
        Vec::new()
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

/// The entries of the directory `dir`, but symlinks (none when it cannot be read).
pub fn children(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
        .map(|e| e.path())
        .collect()
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

    /// Whether a filter with a listener can be added here: tried in a child process, which
    /// installs an allow-all filter with SECCOMP_FILTER_FLAG_NEW_LISTENER and exits.
    pub fn listener_free() -> Result<(), String> {
        // SAFETY: the child makes only async-signal-safe system calls, then _exit.
        match unsafe { libc::fork() } {
            -1 => Err(format!("cannot probe: {}", std::io::Error::last_os_error())),
            0 => {
                let allow = libc::sock_filter {
                    code: (libc::BPF_RET | libc::BPF_K) as u16,
                    jt: 0,
                    jf: 0,
                    k: libc::SECCOMP_RET_ALLOW,
                };
                let prog = libc::sock_fprog {
                    len: 1,
                    filter: &allow as *const _ as *mut _,
                };
                // SAFETY: prctl takes plain integers; seccomp reads `prog`, valid here.
                let code = unsafe {
                    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
                    let r = libc::syscall(
                        libc::SYS_seccomp,
                        libc::SECCOMP_SET_MODE_FILTER,
                        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                        &prog as *const libc::sock_fprog,
                    );
                    if r >= 0 {
                        0
                    } else {
                        *libc::__errno_location()
                    }
                };
                // SAFETY: leaves the child at once, running nothing of the parent's.
                unsafe { libc::_exit(code.min(255)) }
            }
            child => {
                let mut status = 0;
                // SAFETY: waits for our own child; `status` is valid.
                unsafe { libc::waitpid(child, &mut status, 0) };
                match libc::WEXITSTATUS(status) {
                    0 if libc::WIFEXITED(status) => Ok(()),
                    libc::EBUSY => Err("this process already has a seccomp listener above it (it runs inside a sandbox whose supervisor judges its calls); sbx-shell's guard needs its own".into()),
                    e => Err(format!(
                        "a seccomp filter with a listener cannot be added: {}",
                        std::io::Error::from_raw_os_error(e)
                    )),
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    pub fn landlock_abi() -> Result<i64, String> {
        Err("not Linux".to_string())
    }

    pub fn listener_free() -> Result<(), String> {
        Ok(())
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
            bwrap_version: None,
            seccomp_mode: Some("0".into()),
            seccomp_listener: Ok(()),
            inside_sbx_shell: None,
            legacy_tiocsti: Some("0".into()),
            nofile: Some((1024, 524288)),
            sandbox_exec_probe: None,
            container: None,
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
    fn only_a_probe_success_is_remembered_and_only_for_the_same_machine_state() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("sbx-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cache = dir.join("state/bwrap-probe");
        // A failing bwrap: probed, not remembered (and a stale success is dropped).
        std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
        std::fs::write(&cache, "stale\n").unwrap();
        assert!(probe_bwrap_as_asked(&fake, Probes::Cached(&cache)).is_some_and(|r| r.is_err()));
        assert!(!cache.exists());
        // A remembered success for exactly this state is taken without running anything.
        std::fs::write(&cache, probe_key(&fake)).unwrap();
        assert_eq!(
            probe_bwrap_as_asked(&fake, Probes::Cached(&cache)),
            Some(Ok(()))
        );
        // Fresh probes (doctor) always run; Skip runs nothing.
        assert!(
            probe_bwrap_as_asked(&fake, Probes::Fresh(Some(&cache))).is_some_and(|r| r.is_err())
        );
        assert_eq!(probe_bwrap_as_asked(&fake, Probes::Skip), None);
        // The key changes with the binary.
        let before = probe_key(&fake);
        std::fs::write(&fake, "#!/bin/sh\ntrue\n").unwrap();
        assert_ne!(probe_key(&fake), before);
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
