//! The launchers on this host: where bwrap is, its version, and whether it runs here —
//! probed once with the namespaces and mounts the bwrap backend uses, a success
//! remembered (`Probes::Cached`) for the same machine state.

use std::path::{Path, PathBuf};

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
pub(super) fn bwrap_version(bwrap: &Path) -> Option<String> {
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

pub(super) fn probe_bwrap_as_asked(bwrap: &Path, probes: Probes<'_>) -> Option<Result<(), String>> {
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
pub(super) fn probe_key(bwrap: &Path) -> String {
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
pub(super) fn probe_bwrap(bwrap: &Path) -> Result<(), String> {
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

pub(super) fn probe(program: &str, args: &[&str]) -> Result<(), String> {
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

/// Fixed locations bwrap is taken from: never `$PATH`, which a workspace could shadow.
pub const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/bin/bwrap"];
