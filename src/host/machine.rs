//! The machine's facts (`Machine`): the kernel, Landlock's ABI, user namespaces, bwrap and
//! why it cannot run, root or not, the open-file limit.

use super::bwrap::{
    bwrap_version, find_bwrap, probe, probe_bwrap_as_asked, Probes, BWRAP_PATHS, SANDBOX_EXEC,
};
use std::path::{Path, PathBuf};

/// The facts a backend decision rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub os: &'static str,
    /// The kernel's release, as `uname` gives it (`kernel_release`).
    pub kernel: String,
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
    /// What sbx-shell's guard can do here (Linux; `doctor` only: `Probes::Fresh`).
    pub guard: Option<super::guardreach::GuardReach>,
    /// The container engines' clients on `PATH` (`docker`, `podman`).
    pub docker: Option<PathBuf>,
    pub podman: Option<PathBuf>,
    /// What each client found says of its engine: its version, or why none answered
    /// (`doctor` only: `Probes::Fresh`).
    pub engines: Vec<(&'static str, Result<String, String>)>,
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
            kernel: kernel_release(),
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
            guard: (linux && matches!(probes, Probes::Fresh(_))).then(super::guardreach::measure),
            engines: if matches!(probes, Probes::Fresh(_)) {
                engine_versions()
            } else {
                Vec::new()
            },
            docker: linux.then(|| on_path("docker")).flatten(),
            podman: linux.then(|| on_path("podman")).flatten(),
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
                fix: "`sbx-shell setup` installs it (or: sudo apt-get install bubblewrap / sudo dnf install \
                    bubblewrap / sudo pacman -S bubblewrap)".into(),
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
    pub(super) fn diagnose(&self, path: &Path, probe: Option<&String>) -> BwrapUnusable {
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
                "AppArmor's restriction on unprivileged user namespaces \
                    (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 23.10 and later)".into(),
                "`sbx-shell setup` installs an AppArmor profile that lets /usr/bin/bwrap create user \
                    namespaces (or, for every program: sudo sysctl \
                    kernel.apparmor_restrict_unprivileged_userns=0)".into(),
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
                "start the container with --security-opt seccomp=unconfined --security-opt \
                    apparmor=unconfined (Docker, Podman), or use the Landlock backend inside it: --backend \
                    landlock".into(),
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
/// The kernel's release (`6.1.0-18-amd64`), as `uname` gives it to this process: what
/// the kernel is, or older under a personality that asks so (`setarch --uname-2.6`); empty
/// when it cannot be read.
pub fn kernel_release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The Linux release from which sbx-shell's guard judges names: handing the program the
/// file it opened with the answer (SECCOMP_ADDFD_FLAG_SEND) is 5.14's.
pub const NAMES_FROM: (u32, u32) = (5, 14);

/// Whether the guard can judge names on a kernel of this release (`NAMES_FROM`).
pub fn judges_names(release: &str) -> bool {
    let (major, minor) = NAMES_FROM;
    kernel_at_least(release, major, minor)
}

/// Whether a kernel release string (`6.1.0-18-amd64`) is at least `major.minor`; an
/// unreadable one is not.
fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

pub(super) fn container_marker() -> Option<String> {
    if let Some(value) = std::env::var_os("container") {
        return Some(format!("container={}", value.to_string_lossy()));
    }
    [("/.dockerenv", "Docker"), ("/run/.containerenv", "Podman")]
        .iter()
        .find(|(path, _)| Path::new(path).exists())
        .map(|(_, name)| name.to_string())
}

#[cfg(target_os = "linux")]
mod platform {
    /// The Landlock ABI version the kernel offers (`sys::kernel::landlock_abi`).
    pub fn landlock_abi() -> Result<i64, String> {
        crate::sys::kernel::landlock_abi().map_err(|err| match err.raw_os_error() {
            Some(libc::ENOSYS) => "not in this kernel (ENOSYS)".to_string(),
            Some(libc::EOPNOTSUPP) => "disabled at boot (EOPNOTSUPP)".to_string(),
            _ => err.to_string(),
        })
    }

    /// Why sbx-shell's guard cannot have a listener inside another supervisor's sandbox.
    const LISTENER_ABOVE: &str = "this process already has a seccomp listener above it (it runs \
        inside a sandbox whose supervisor judges its calls); sbx-shell's guard needs its own";

    /// Whether a filter with a listener can be added here (`sys::kernel::listener_free`).
    pub fn listener_free() -> Result<(), String> {
        match crate::sys::kernel::listener_free() {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(LISTENER_ABOVE.into()),
            Err(e) => Err(format!(
                "a seccomp filter with a listener cannot be added: {e}"
            )),
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

/// Each container engine's version as its client finds the engine, or what the client said.
fn engine_versions() -> Vec<(&'static str, Result<String, String>)> {
    [
        ("docker", "{{.Server.Version}}"),
        ("podman", "{{.Server.Version}}"),
    ]
    .into_iter()
    .filter_map(|(name, format)| {
        let cli = on_path(name)?;
        let said = std::process::Command::new(cli)
            .args(["version", "--format", format])
            .stdin(std::process::Stdio::null())
            .output();
        Some((
            name,
            match said {
                Ok(out) if out.status.success() => {
                    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
                }
                Ok(out) => Err(String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no answer")
                    .trim()
                    .to_string()),
                Err(e) => Err(e.to_string()),
            },
        ))
    })
    .collect()
}

impl Machine {
    /// This machine with the container engine's client the policy names (`"container":
    /// {"engine": …}`) in place of the one on `PATH`; `Err` when it names none that runs.
    pub fn with_engine(&self, engine: Option<&Path>) -> Result<Machine, String> {
        let Some(engine) = engine else {
            return Ok(self.clone());
        };
        let client = match engine.components().count() > 1 || engine.is_absolute() {
            true => Some(engine.to_path_buf()).filter(|f| is_executable(f)),
            false => engine.to_str().and_then(on_path),
        };
        let Some(client) = client else {
            return Err(no_engine_client(engine));
        };
        Ok(Machine {
            docker: Some(client.clone()),
            podman: Some(client),
            ..self.clone()
        })
    }
}

/// `container.engine` names no executable.
fn no_engine_client(engine: &Path) -> String {
    crate::sys::say::hinted(
        format_args!("container.engine {}: no such executable", engine.display()),
        "name the engine's client by its path or by a name on PATH (docker, podman), or leave \
         out \"engine\"",
    )
}

fn is_executable(file: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    file.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The executable `name` in a directory of this process's `PATH`, the first one there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|file| is_executable(file))
}

#[cfg(test)]
mod tests {
    use super::{judges_names, kernel_at_least};

    #[test]
    fn kernel_releases_compare_by_major_and_minor() {
        assert!(kernel_at_least("6.18.44-fc-v470\n", 5, 14));
        assert!(kernel_at_least("5.14.0-362.el9.x86_64", 5, 14));
        assert!(!kernel_at_least("5.10.0-28-amd64", 5, 14));
        assert!(!kernel_at_least("4.19.0", 5, 14));
        assert!(!kernel_at_least("", 5, 14));
        assert!(!kernel_at_least("garbage", 5, 14));
        // What `setarch --uname-2.6` makes uname answer on any kernel.
        assert!(!judges_names("2.6.78-fc-v657"));
        assert!(judges_names("5.14.0"));
    }
}
