//! Which backend confines this run: the user's choice (`--backend`, or `backend` in the
//! configuration) against what this machine offers (`host::Machine`). `select` is pure and is
//! the one decision: the run and `doctor` both call it, on the same kind of facts.
//!
//! Never a silent fallback: `auto` prefers bwrap with Landlock and seccomp inside it, then
//! Landlock and seccomp alone, and otherwise refuses; a named backend that cannot run is an
//! error; `none` runs unconfined only when named, with a warning.

use thiserror::Error;

use super::landlock::MIN_ABI;
use super::Backend;
use crate::config::BackendChoice;
use crate::host::Machine;

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

/// Pick the backend for `choice` on `machine`.
pub fn select(choice: BackendChoice, machine: &Machine) -> Result<Backend, SelectError> {
    if choice == BackendChoice::None {
        return Ok(Backend::None);
    }
    match machine.os {
        "macos" => select_macos(choice, machine),
        "linux" => select_linux(choice, machine),
        os => Err(SelectError::NoneUsable {
            why: format!("sbx-shell has no sandbox for {os}"),
            hint: "run sbx-shell on Linux or macOS".into(),
        }),
    }
}

fn select_macos(choice: BackendChoice, machine: &Machine) -> Result<Backend, SelectError> {
    match choice {
        BackendChoice::Auto | BackendChoice::Seatbelt => match &machine.sandbox_exec_probe {
            Some(Err(why)) => Err(SelectError::Unusable {
                backend: "seatbelt",
                why: format!("{}: {why}", super::seatbelt::SANDBOX_EXEC),
                hint: "sandbox-exec ships with macOS; check that it exists and is not blocked by a management profile".into(),
            }),
            _ => Ok(Backend::Seatbelt),
        },
        other => Err(SelectError::Unusable {
            backend: other.name(),
            why: "it is a Linux backend".into(),
            hint: "use --backend auto (Seatbelt) on macOS".into(),
        }),
    }
}

fn select_linux(choice: BackendChoice, machine: &Machine) -> Result<Backend, SelectError> {
    if machine.seccomp_mode.is_none() {
        return Err(SelectError::NoneUsable {
            why: "this kernel has no seccomp filters, which every Linux backend installs".into(),
            hint: "use a kernel built with CONFIG_SECCOMP_FILTER".into(),
        });
    }
    let landlock = match &machine.landlock_abi {
        Ok(abi) if *abi >= i64::from(MIN_ABI) => Ok(()),
        Ok(abi) => Err(format!(
            "Landlock ABI {abi} is older than the {MIN_ABI} the rules need"
        )),
        Err(why) => Err(format!("Landlock: {why}")),
    };
    let bwrap = machine.bwrap_runs().map(std::path::Path::to_path_buf);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::test_support::capable_linux;
    use std::path::PathBuf;

    fn linux(bwrap: bool, open: bool, abi: Result<i64, String>) -> Machine {
        let mut machine = Machine {
            bwrap: bwrap.then(|| PathBuf::from("/usr/bin/bwrap")),
            bwrap_probe: None,
            landlock_abi: abi,
            ..capable_linux()
        };
        if !open {
            machine.userns.max = Some("0".into());
        }
        machine
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
            sandbox_exec_probe: None,
            ..linux(false, false, Err("not Linux".into()))
        };
        assert_eq!(select(BackendChoice::Auto, &mac), Ok(Backend::Seatbelt));
        assert!(select(BackendChoice::Bwrap, &mac).is_err());
    }

    #[test]
    fn a_failed_probe_or_no_seccomp_counts_against_a_backend() {
        let probed = Machine {
            bwrap_probe: Some(Err("exit status: 1: setting up uid map".into())),
            ..capable_linux()
        };
        assert_eq!(select(BackendChoice::Auto, &probed), Ok(Backend::Landlock));
        let err = select(BackendChoice::Bwrap, &probed)
            .unwrap_err()
            .to_string();
        assert!(err.contains("probe failed: exit status: 1"), "{err}");
        let no_seccomp = Machine {
            seccomp_mode: None,
            ..capable_linux()
        };
        let err = select(BackendChoice::Auto, &no_seccomp)
            .unwrap_err()
            .to_string();
        assert!(err.contains("seccomp") && err.contains("Hint: "), "{err}");
        assert_eq!(select(BackendChoice::None, &no_seccomp), Ok(Backend::None));
    }
}
