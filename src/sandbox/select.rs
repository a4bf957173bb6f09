//! Which backend confines this run: the user's choice (`--backend`, or `backend` in the
//! configuration) against what this machine offers. `select` is pure; `Machine::measure`
//! takes the facts cheaply (file reads and one syscall, no probe run) on every start.
//!
//! Never a silent fallback: `auto` prefers bwrap with Landlock and seccomp inside it, then
//! Landlock and seccomp alone, and otherwise refuses; a named backend that cannot run is an
//! error; `none` runs unconfined only when named, with a warning.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::Backend;
use crate::config::BackendChoice;

/// Fixed locations bwrap is taken from: never `$PATH`, which a workspace could shadow.
pub const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/bin/bwrap"];

/// The Landlock ABI whose rights the rulesets use (see `landlock::Ruleset::min_abi`).
pub const LANDLOCK_MIN_ABI: i64 = 6;

/// What this machine offers the backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub os: &'static str,
    /// bwrap at a fixed path, if any.
    pub bwrap: Option<PathBuf>,
    /// Whether bwrap can create its namespaces here (root, or user namespaces open).
    pub namespaces_open: bool,
    /// The Landlock ABI, or why there is none.
    pub landlock_abi: Result<i64, String>,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SelectError {
    #[error("no sandbox backend can run on this machine: {why}\nHint: {hint}; `sbx-shell doctor` shows each check, and `--backend none` runs unconfined if you really mean it")]
    NoneUsable { why: String, hint: String },
    #[error("the {backend} backend cannot run on this machine: {why}\nHint: {hint}")]
    Unusable {
        backend: &'static str,
        why: String,
        hint: String,
    },
}

impl Machine {
    /// The facts, measured now.
    pub fn measure() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        Machine {
            os: std::env::consts::OS,
            bwrap: find_bwrap(),
            namespaces_open: namespaces_open(
                nix::unistd::geteuid().is_root(),
                read("/proc/sys/kernel/unprivileged_userns_clone").as_deref(),
                read("/proc/sys/user/max_user_namespaces").as_deref(),
                read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref(),
            ),
            landlock_abi: landlock_abi(),
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

/// Whether an unprivileged bwrap can create user namespaces (root always can).
pub fn namespaces_open(
    root: bool,
    userns_clone: Option<&str>,
    max_user_namespaces: Option<&str>,
    apparmor_restrict: Option<&str>,
) -> bool {
    let is = |v: Option<&str>, x: &str| v.is_some_and(|v| v.trim() == x);
    root || !(is(userns_clone, "0") || is(max_user_namespaces, "0") || is(apparmor_restrict, "1"))
}

/// Pick the backend for `choice` on `machine`.
pub fn select(choice: BackendChoice, machine: &Machine) -> Result<Backend, SelectError> {
    if choice == BackendChoice::None {
        return Ok(Backend::None);
    }
    if machine.os == "macos" {
        return match choice {
            BackendChoice::Auto | BackendChoice::Seatbelt => Ok(Backend::Seatbelt),
            other => Err(SelectError::Unusable {
                backend: other.name(),
                why: "it is a Linux backend".into(),
                hint: "use --backend auto (Seatbelt) on macOS".into(),
            }),
        };
    }
    if machine.os != "linux" {
        return Err(SelectError::NoneUsable {
            why: format!("sbx-shell has no sandbox for {}", machine.os),
            hint: "run sbx-shell on Linux or macOS".into(),
        });
    }
    let landlock = match &machine.landlock_abi {
        Ok(abi) if *abi >= LANDLOCK_MIN_ABI => Ok(()),
        Ok(abi) => Err(format!(
            "Landlock ABI {abi} is older than the {LANDLOCK_MIN_ABI} the rules need"
        )),
        Err(why) => Err(format!("Landlock: {why}")),
    };
    let bwrap = match (&machine.bwrap, machine.namespaces_open) {
        (Some(path), true) => Ok(path.clone()),
        (Some(path), false) => Err(format!(
            "{} cannot create user namespaces here",
            path.display()
        )),
        (None, _) => Err(format!(
            "bwrap is not installed ({})",
            BWRAP_PATHS.join(" or ")
        )),
    };
    match choice {
        BackendChoice::Auto => match (bwrap, landlock) {
            (Ok(path), landlock) => Ok(Backend::Bwrap {
                path,
                landlock: landlock.is_ok(),
            }),
            (Err(_), Ok(())) => Ok(Backend::Landlock),
            (Err(no_bwrap), Err(no_landlock)) => Err(SelectError::NoneUsable {
                why: format!("{no_bwrap}, and {no_landlock}"),
                hint: "install bubblewrap (apt-get install bubblewrap) and allow user namespaces, or use Linux 6.12 or later for Landlock".into(),
            }),
        },
        BackendChoice::Bwrap => bwrap
            .map(|path| Backend::Bwrap {
                path,
                landlock: landlock.is_ok(),
            })
            .map_err(|why| SelectError::Unusable {
                backend: "bwrap",
                why,
                hint: "install bubblewrap (apt-get install bubblewrap) and allow user namespaces (`sbx-shell doctor` says how), or use --backend landlock".into(),
            }),
        BackendChoice::Landlock => landlock
            .map(|()| Backend::Landlock)
            .map_err(|why| SelectError::Unusable {
                backend: "landlock",
                why,
                hint: "use Linux 6.12 or later with Landlock enabled, or --backend bwrap".into(),
            }),
        BackendChoice::Seatbelt => Err(SelectError::Unusable {
            backend: "seatbelt",
            why: "it is the macOS backend".into(),
            hint: "use --backend auto, bwrap or landlock on Linux".into(),
        }),
        BackendChoice::None => Ok(Backend::None),
    }
}

/// The Landlock ABI version the kernel offers (landlock_create_ruleset with the VERSION flag).
pub fn landlock_abi() -> Result<i64, String> {
    #[cfg(target_os = "linux")]
    {
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
    #[cfg(not(target_os = "linux"))]
    {
        Err("not Linux".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(bwrap: bool, open: bool, abi: Result<i64, String>) -> Machine {
        Machine {
            os: "linux",
            bwrap: bwrap.then(|| PathBuf::from("/usr/bin/bwrap")),
            namespaces_open: open,
            landlock_abi: abi,
        }
    }

    #[test]
    fn auto_prefers_bwrap_then_landlock_then_refuses() {
        let bwrap = Backend::Bwrap {
            path: "/usr/bin/bwrap".into(),
            landlock: true,
        };
        assert_eq!(
            select(BackendChoice::Auto, &linux(true, true, Ok(7))),
            Ok(bwrap)
        );
        assert_eq!(
            select(BackendChoice::Auto, &linux(true, true, Ok(5))),
            Ok(Backend::Bwrap {
                path: "/usr/bin/bwrap".into(),
                landlock: false
            })
        );
        assert_eq!(
            select(BackendChoice::Auto, &linux(true, false, Ok(6))),
            Ok(Backend::Landlock)
        );
        assert_eq!(
            select(BackendChoice::Auto, &linux(false, true, Ok(6))),
            Ok(Backend::Landlock)
        );
        let err = select(BackendChoice::Auto, &linux(false, true, Ok(5)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bwrap is not installed") && err.contains("ABI 5"),
            "{err}"
        );
        assert!(err.contains("Hint: ") && err.contains("doctor"), "{err}");
    }

    #[test]
    fn a_named_backend_that_cannot_run_is_an_error_not_a_fallback() {
        let err = select(BackendChoice::Bwrap, &linux(false, true, Ok(7))).unwrap_err();
        assert!(
            err.to_string().contains("the bwrap backend cannot run"),
            "{err}"
        );
        let err = select(
            BackendChoice::Landlock,
            &linux(true, true, Err("disabled at boot (EOPNOTSUPP)".into())),
        )
        .unwrap_err();
        assert!(err.to_string().contains("EOPNOTSUPP"), "{err}");
        assert_eq!(
            select(BackendChoice::None, &linux(false, false, Ok(0))),
            Ok(Backend::None)
        );
        let mac = Machine {
            os: "macos",
            ..linux(false, false, Err("not Linux".into()))
        };
        assert_eq!(select(BackendChoice::Auto, &mac), Ok(Backend::Seatbelt));
        assert!(select(BackendChoice::Bwrap, &mac).is_err());
    }

    #[test]
    fn user_namespaces_are_open_unless_a_sysctl_closes_them() {
        assert!(namespaces_open(false, None, None, None));
        assert!(namespaces_open(
            false,
            Some("1\n"),
            Some("15000\n"),
            Some("0\n")
        ));
        assert!(!namespaces_open(false, Some("0\n"), None, None));
        assert!(!namespaces_open(false, None, Some("0"), None));
        assert!(!namespaces_open(false, None, None, Some("1")));
        assert!(namespaces_open(true, Some("0"), Some("0"), Some("1")));
    }
}
