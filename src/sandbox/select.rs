//! Which backend confines this run: the user's choice (`--backend`, or `backend` in the
//! configuration) against what this machine offers (`host::Machine`). `select` is pure and is
//! the one decision: the run and `doctor` both call it, on the same kind of facts.
//!
//! Never a silent fallback: `auto` prefers bwrap with Landlock and seccomp inside it, then
//! Landlock and seccomp alone, and otherwise refuses; a named backend that cannot run is an
//! error; `none` runs unconfined only when named, with a warning.

use thiserror::Error;

use super::backend::{Backend, Container, Engine};
use super::landlock::MIN_ABI;
use crate::host::Machine;
use crate::policy::config::{BackendChoice, SandboxLayer};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SelectError {
    #[error(
        "no sandbox backend can run on this machine: {why}\nHint: {hint}; `sbx-shell doctor` \
        shows each check, and `--backend none` runs unconfined if you really mean it"
    )]
    NoneUsable { why: String, hint: String },
    #[error("the {backend} backend cannot run on this machine: {why}\nHint: {hint}")]
    Unusable {
        backend: &'static str,
        why: String,
        hint: String,
    },
    #[error("the {layer} layer is required (--require, or `require` in the configuration), but {why}\nHint: {hint}")]
    Required {
        layer: &'static str,
        why: String,
        hint: String,
    },
}

/// The layers of the Linux sandbox, strongest set first: what `auto` wants.
const LINUX_LAYERS: [SandboxLayer; 3] = [
    SandboxLayer::Bwrap,
    SandboxLayer::Landlock,
    SandboxLayer::Seccomp,
];

/// Why each layer that the choice would use cannot run here, with the fix — one line each,
/// for the start of a run: every layer for `auto`; Landlock and seccomp inside a named
/// bwrap (a named backend itself is what the user asked for, and refuses when it cannot run).
pub fn missing_layers(
    choice: BackendChoice,
    machine: &Machine,
) -> Vec<(SandboxLayer, String, String)> {
    if machine.os != "linux" {
        return Vec::new();
    }
    let wanted: &[SandboxLayer] = match choice {
        BackendChoice::Auto => &LINUX_LAYERS,
        BackendChoice::Bwrap => &LINUX_LAYERS[1..],
        _ => &[],
    };
    wanted
        .iter()
        .filter_map(|layer| layer_unusable(*layer, machine).map(|(why, fix)| (*layer, why, fix)))
        .collect()
}

/// The start line for a layer `auto` wanted that cannot run (`missing_layers`): one line,
/// why, what runs instead and the fix; `doctor` lists what Landlock alone goes without
/// (`landlock::WITHOUT_BWRAP`).
pub fn missing_line(layer: SandboxLayer, why: &str, fix: &str, backend: &Backend) -> String {
    let less = if layer == SandboxLayer::Bwrap && *backend == Backend::Landlock {
        " alone, which protects less (`sbx-shell doctor` lists what)"
    } else {
        ""
    };
    let running = format!("{}{less}", backend.layers().join(" + "));
    super::messages::layer_missing(layer.name(), why, running, fix, backend.name())
}

/// Refuse when a required layer is not among `backend`'s.
pub fn check_required(
    required: &[SandboxLayer],
    backend: &Backend,
    machine: &Machine,
) -> Result<(), SelectError> {
    for layer in required {
        let has = match layer {
            SandboxLayer::Names => judges_names(backend, machine),
            _ => backend.layers().contains(&layer.name()),
        };
        if has {
            continue;
        }
        let (why, hint) = layer_unusable(*layer, machine).unwrap_or_else(|| {
            (
                format!("the {} backend does not use it", backend.name()),
                format!(
                    "choose a backend with it (--backend auto uses every layer that can run), or leave {} out of --require",
                    layer.name()
                ),
            )
        });
        return Err(SelectError::Required {
            layer: layer.name(),
            why,
            hint,
        });
    }
    Ok(())
}

/// Whether `backend` judges every name the program makes (`SandboxLayer::Names`):
/// Seatbelt's rules name paths whether they exist or not; Linux's guard needs 5.14.
fn judges_names(backend: &Backend, machine: &Machine) -> bool {
    match backend {
        Backend::None => false,
        Backend::Seatbelt => true,
        Backend::Bwrap { .. } | Backend::Landlock | Backend::Container(_) => {
            crate::host::judges_names(&machine.kernel)
        }
    }
}

/// The start line where the guard cannot judge names and the program has writable trees
/// (`sandbox::unjudged`): what the read-only mounts leave open, the fix, and how to refuse.
pub fn unjudged_line(kernel: &str, missing: &[std::path::PathBuf]) -> String {
    let paths = match crate::sys::say::first_and_more(missing) {
        Some(named) => format!("protected paths that do not exist yet ({named}) and "),
        None => String::new(),
    };
    super::messages::names_unjudged(kernel, &paths)
}

/// Why `layer` cannot run on `machine`, and the fix; `None` when it can.
fn layer_unusable(layer: SandboxLayer, machine: &Machine) -> Option<(String, String)> {
    match layer {
        SandboxLayer::Bwrap => machine.bwrap_runs().err().map(|u| (u.cause, u.fix)),
        SandboxLayer::Landlock => landlock_usable(machine).err().map(|why| {
            (
                why,
                "use Linux 6.12 or later with Landlock in the LSM list (lsm=…,landlock)".into(),
            )
        }),
        SandboxLayer::Seccomp => {
            if machine.seccomp_mode.is_none() {
                return Some((
                    "this kernel has no seccomp filters".into(),
                    "use a kernel built with CONFIG_SECCOMP_FILTER".into(),
                ));
            }
            let why = machine.seccomp_listener.as_ref().err()?;
            let fix = match &machine.inside_sbx_shell {
                Some(_) => "this already runs inside an sbx-shell session, sandboxed: run the program directly \
                    here, or start sbx-shell outside that session",
                None => "start sbx-shell outside the sandbox that runs it",
            };
            Some((why.clone(), fix.into()))
        }
        SandboxLayer::Names => (machine.os == "linux"
            && !crate::host::judges_names(&machine.kernel))
        .then(|| {
            (
                format!("Linux {} is older than 5.14: the guard cannot judge the names the program makes, so a \
                    protected path that does not exist at the start could be made", machine.kernel),
                "use Linux 5.14 or later, or leave names out of --require: what exists is then mounted read-only".into(),
            )
        }),
        SandboxLayer::Seatbelt => (machine.os != "macos").then(|| {
            (
                "Seatbelt exists on macOS only".into(),
                "leave seatbelt out of --require on Linux".into(),
            )
        }),
    }
}

fn landlock_usable(machine: &Machine) -> Result<(), String> {
    match &machine.landlock_abi {
        Ok(abi) if *abi >= i64::from(MIN_ABI) => Ok(()),
        Ok(abi) => Err(format!(
            "Landlock ABI {abi} is older than the {MIN_ABI} the rules need"
        )),
        Err(why) => Err(format!("Landlock: {why}")),
    }
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
                why: format!("{}: {why}", crate::host::SANDBOX_EXEC),
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
    if let Some((why, hint)) = layer_unusable(SandboxLayer::Seccomp, machine) {
        return Err(SelectError::NoneUsable { why, hint });
    }
    let landlock = landlock_usable(machine);
    let bwrap = machine.bwrap_runs().map(std::path::Path::to_path_buf);
    match choice {
        BackendChoice::Auto => match (bwrap, landlock) {
            (Ok(path), landlock) => Ok(Backend::Bwrap {
                path,
                landlock: landlock.is_ok(),
            }),
            (Err(_), Ok(())) => Ok(Backend::Landlock),
            (Err(no_bwrap), Err(no_landlock)) => Err(SelectError::NoneUsable {
                why: format!("{}, and {no_landlock}", no_bwrap.cause),
                hint: format!(
                    "for bwrap: {}; for Landlock: use Linux 6.12 or later",
                    no_bwrap.fix
                ),
            }),
        },
        BackendChoice::Bwrap => bwrap
            .map(|path| Backend::Bwrap {
                path,
                landlock: landlock.is_ok(),
            })
            .map_err(|no| SelectError::Unusable {
                backend: "bwrap",
                why: no.cause,
                hint: format!("{}; or use --backend landlock", no.fix),
            }),
        BackendChoice::Landlock => {
            landlock
                .map(|()| Backend::Landlock)
                .map_err(|why| SelectError::Unusable {
                    backend: "landlock",
                    why,
                    hint: "use Linux 6.12 or later with Landlock enabled, or --backend bwrap"
                        .into(),
                })
        }
        BackendChoice::Docker | BackendChoice::Podman => {
            select_container(choice, machine, landlock)
        }
        BackendChoice::Seatbelt => Err(SelectError::Unusable {
            backend: "seatbelt",
            why: "it is the macOS backend".into(),
            hint: "use --backend auto, bwrap or landlock on Linux".into(),
        }),
        BackendChoice::None => Ok(Backend::None),
    }
}

/// A container backend: its engine's client on `PATH`, and Landlock, which the helper
/// applies inside as under Landlock alone. Whether the engine answers, and has the image,
/// is asked of it before the session starts (`cmd::run`).
fn select_container(
    choice: BackendChoice,
    machine: &Machine,
    landlock: Result<(), String>,
) -> Result<Backend, SelectError> {
    let (engine, cli, install) = match choice {
        BackendChoice::Podman => (Engine::Podman, &machine.podman, "podman"),
        _ => (Engine::Docker, &machine.docker, "docker.io"),
    };
    let Some(cli) = cli.clone() else {
        return Err(SelectError::Unusable {
            backend: engine.name(),
            why: format!("its client, `{}`, is not on PATH", engine.name()),
            hint: format!(
                "install it (Debian and Ubuntu: apt install {install}), or use --backend bwrap or landlock"
            ),
        });
    };
    landlock.map_err(|why| SelectError::Unusable {
        backend: engine.name(),
        why: format!("the helper applies Landlock inside the container, and {why}"),
        hint: "use Linux 6.12 or later with Landlock enabled, or --backend bwrap".into(),
    })?;
    Ok(Backend::Container(Container { engine, cli }))
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
            bwrap_version: None,
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
            err.contains("bubblewrap is not installed") && err.contains("ABI 5"),
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
    fn the_probe_decides_over_the_sysctls_and_each_cause_has_its_fix() {
        // An AppArmor profile for bwrap (what `setup` installs) lets it run although the
        // sysctl restricts user namespaces: the probe's success is what counts.
        let mut m = capable_linux();
        m.userns.apparmor_restrict = Some("1".into());
        assert!(m.bwrap_runs().is_ok());
        let fails = |m: &Machine| m.bwrap_runs().unwrap_err();
        m.bwrap_probe = Some(Err(
            "exit status: 1: bwrap: setting up uid map: Permission denied".into(),
        ));
        let no = fails(&m);
        assert!(
            no.cause.contains("AppArmor") && no.fix.contains("sbx-shell setup"),
            "{no:?}"
        );
        m.userns.apparmor_restrict = None;
        m.container = Some("Docker".into());
        let no = fails(&m);
        assert!(
            no.cause.contains("a container (Docker)") && no.fix.contains("seccomp=unconfined"),
            "{no:?}"
        );
        m.seccomp_mode = Some("2".into());
        assert!(fails(&m)
            .cause
            .contains("a seccomp filter on this process (the container's"));
        m.seccomp_mode = Some("0".into());
        m.container = None;
        m.seccomp_mode = Some("2".into());
        assert!(fails(&m).cause.contains("seccomp filter on this process"));
        m.userns.max = Some("0".into());
        assert!(fails(&m).fix.contains("user.max_user_namespaces"));
        m.bwrap_probe = Some(Err("Permission denied (os error 13)".into()));
        assert!(fails(&m).cause.contains("is not executable"));
        m.bwrap = None;
        assert!(fails(&m).fix.contains("sbx-shell setup"));
        // Without a probe, the sysctls decide.
        let mut m = capable_linux();
        m.bwrap_probe = None;
        m.userns.unprivileged_clone = Some("0".into());
        assert!(fails(&m).fix.contains("kernel.unprivileged_userns_clone=1"));
    }

    #[test]
    fn names_are_required_of_the_kernel_and_never_of_no_sandbox() {
        let bwrap = Backend::Bwrap {
            path: "/usr/bin/bwrap".into(),
            landlock: false,
        };
        let old = Machine {
            kernel: "5.10.0-28-amd64".into(),
            ..capable_linux()
        };
        let names = [SandboxLayer::Names];
        assert_eq!(check_required(&names, &bwrap, &capable_linux()), Ok(()));
        let err = check_required(&names, &bwrap, &old)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the names layer is required")
                && err.contains("Linux 5.10.0-28-amd64 is older than 5.14")
                && err.contains("Hint: use Linux 5.14 or later"),
            "{err}"
        );
        // Seatbelt's rules name what does not exist yet; no sandbox judges nothing.
        assert_eq!(check_required(&names, &Backend::Seatbelt, &old), Ok(()));
        let none = check_required(&names, &Backend::None, &capable_linux());
        assert!(none
            .unwrap_err()
            .to_string()
            .contains("the none backend does not use it"));
        // The start line names what is open, its fix and how to refuse.
        let line = unjudged_line("5.10.0", &["/w/.envrc".into(), "/w/.vscode".into()]);
        assert!(
            line.contains("Linux 5.10.0 is older than 5.14")
                && line.contains("(/w/.envrc and 1 more)")
                && line.contains("--require names"),
            "{line}"
        );
        assert!(!unjudged_line("5.10.0", &[]).contains("()"));
    }

    #[test]
    fn missing_layers_are_named_for_auto_and_required_ones_refuse() {
        let probed = Machine {
            bwrap_probe: Some(Err("exit status: 1: setting up uid map".into())),
            ..capable_linux()
        };
        let missing = missing_layers(BackendChoice::Auto, &probed);
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].0, SandboxLayer::Bwrap);
        assert!(missing_layers(BackendChoice::Landlock, &probed).is_empty());
        let old_kernel = Machine {
            landlock_abi: Ok(4),
            ..capable_linux()
        };
        let named = missing_layers(BackendChoice::Bwrap, &old_kernel);
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].0, SandboxLayer::Landlock);
        assert!(missing_layers(BackendChoice::Auto, &capable_linux()).is_empty());
        let err = check_required(&[SandboxLayer::Bwrap], &Backend::Landlock, &probed)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the bwrap layer is required") && err.contains("Hint: "),
            "{err}"
        );
        assert!(check_required(
            &[SandboxLayer::Landlock, SandboxLayer::Seccomp],
            &Backend::Landlock,
            &probed
        )
        .is_ok());
        let old_kernel = Machine {
            landlock_abi: Ok(4),
            ..capable_linux()
        };
        let bwrap_only = select(BackendChoice::Auto, &old_kernel).unwrap();
        let err = check_required(&[SandboxLayer::Landlock], &bwrap_only, &old_kernel)
            .unwrap_err()
            .to_string();
        assert!(err.contains("ABI 4"), "{err}");
        let err = check_required(&[SandboxLayer::Seccomp], &Backend::None, &capable_linux())
            .unwrap_err()
            .to_string();
        assert!(err.contains("the none backend does not use it"), "{err}");
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
        assert!(err.contains("(probe: exit status: 1"), "{err}");
        let no_seccomp = Machine {
            seccomp_mode: None,
            seccomp_listener: Ok(()),
            inside_sbx_shell: None,
            ..capable_linux()
        };
        let err = select(BackendChoice::Auto, &no_seccomp)
            .unwrap_err()
            .to_string();
        assert!(err.contains("seccomp") && err.contains("Hint: "), "{err}");
        assert_eq!(select(BackendChoice::None, &no_seccomp), Ok(Backend::None));
    }

    #[test]
    fn inside_a_sandbox_that_holds_the_listener_nothing_runs_and_it_says_why() {
        let nested = Machine {
            seccomp_mode: Some("2".into()),
            seccomp_listener: Err("this process already has a seccomp listener above it".into()),
            inside_sbx_shell: Some("landlock".into()),
            ..capable_linux()
        };
        for choice in [
            BackendChoice::Auto,
            BackendChoice::Bwrap,
            BackendChoice::Landlock,
        ] {
            let err = select(choice, &nested).unwrap_err().to_string();
            assert!(
                err.contains("already has a seccomp listener")
                    && err.contains("already runs inside an sbx-shell session"),
                "{err}"
            );
        }
        assert_eq!(select(BackendChoice::None, &nested), Ok(Backend::None));
    }

    #[test]
    fn the_fallback_line_is_one_short_line_pointing_at_doctor() {
        let line = missing_line(
            SandboxLayer::Bwrap,
            "no bwrap",
            "sbx-shell setup",
            &Backend::Landlock,
        );
        assert!(line.starts_with("sbx-shell: bwrap cannot run here: no bwrap; running with landlock + seccomp alone, which protects less (`sbx-shell doctor` lists what). Fix: sbx-shell setup"), "{line}");
        assert!(line.contains("--backend landlock runs so"), "{line}");
        assert!(!line.contains('\n') && line.len() < 300, "{line}");
        // Landlock missing under bwrap: no such list.
        let bwrap = Backend::Bwrap {
            path: "/usr/bin/bwrap".into(),
            landlock: false,
        };
        let line = missing_line(SandboxLayer::Landlock, "old kernel", "upgrade", &bwrap);
        assert!(!line.contains("without bwrap"), "{line}");
    }
}
